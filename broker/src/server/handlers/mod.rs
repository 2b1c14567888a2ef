//! One handler per API. Handlers answer per-partition errors inside the
//! response; only dispatch closes connections.

pub mod acls;
pub mod api_versions;
pub mod broker_configs;
pub mod configs;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod fencing;
pub mod fetch;
pub mod find_coordinator;
pub mod group_deletion;
pub mod groups;
pub mod init_producer_id;
pub mod leader_and_isr;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_fetch;
pub mod offsets_for_leader_epoch;
pub mod produce;
pub mod stop_replica;
pub mod transactions;
pub mod txn_offset_commit;
pub mod update_metadata;
pub mod write_txn_markers;

pub(crate) use crate::client::topic_name;
