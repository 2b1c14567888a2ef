//! The transaction coordinator (KIP-98): the state of a transactional id
//! and the transitions the client requests make (`state.rs`, pure), its
//! records in the transaction-state topic (`log_record.rs`, Kafka's format),
//! the coordinator's memory of the partitions it leads (`coordinator.rs`)
//! and their load (`load.rs`), each transition written before it is applied
//! (`transition.rs`), and the markers that end a prepared transaction and
//! the timeouts that abort one (`markers.rs`). The partition side — markers
//! in the log, the last stable offset, read_committed — is in
//! `storage::txn` and `replica::txn`.

pub mod coordinator;
pub mod host;
pub mod load;
pub mod log_record;
pub mod markers;
pub mod state;
pub mod transition;
pub mod verify;

pub use coordinator::{TXN_STATE_TOPIC, TxnCoordinator};
pub use host::TxnHost;
