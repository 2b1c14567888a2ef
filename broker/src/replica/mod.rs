//! The replicas this broker hosts: their logs (through the storage engine), the
//! leadership state the controller assigned them, and the replication protocol
//! around them — followers fetching and truncating, leaders tracking followers,
//! the high watermark and the ISR. What `--truncation` changes lives in
//! `truncation.rs` alone.

pub mod delete_records;
pub mod fetcher;
pub mod follower;
pub mod isr;
pub mod leader;
pub mod leader_and_isr;
pub mod manager;
pub mod own_log;
pub mod partition;
#[cfg(test)]
pub(crate) mod test_support;
pub mod truncation;
pub mod txn;

/// The storage engine, under the name the replica code uses for it.
pub use crate::storage as store;
