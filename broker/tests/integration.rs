//! The broker's integration tests, one module per file beside this one, in
//! one test binary: one link and one copy of the shared helpers (`common`,
//! `support`) instead of one per file. nextest still runs each test in its
//! own process, so no test sees another's state. Two files whose tests need a
//! process to themselves under `cargo test` too (a process-wide failpoint
//! registry, tracing's per-call-site cache) stay binaries of their own.

mod common;
#[path = "support/storage.rs"]
mod support;

mod cluster_acls;
mod cluster_client_apis;
mod cluster_controller_fencing;
mod cluster_controller_watch;
mod cluster_debug_replica;
mod cluster_delete_records;
mod cluster_delete_topics;
mod cluster_failover;
mod cluster_failpoints;
mod cluster_fencing;
mod cluster_group_deletion;
mod cluster_idempotence;
mod cluster_isr_join_fencing;
mod cluster_kcat;
mod cluster_malformed;
mod cluster_min_isr;
mod cluster_partition_state_fence;
mod cluster_rejoin;
mod cluster_replication;
mod cluster_restart;
mod cluster_session;
mod cluster_session_thread;
mod cluster_startup;
mod cluster_state_change;
mod cluster_takeover_restart;
mod cluster_topic_configs;
mod cluster_topic_ids;
mod cluster_transactions;
mod cluster_two_brokers;
mod cluster_txn_markers;
mod cluster_unclean;
mod storage_epoch_cache;
mod storage_format;
mod storage_log;
mod storage_producer_state;
mod storage_recovery;
mod storage_transactions;
mod truncation_settings;
