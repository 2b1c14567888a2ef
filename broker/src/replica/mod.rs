//! The replicas this broker hosts: their logs (through the storage engine), the
//! leadership state the controller assigned them, and the replication protocol
//! around them — followers fetching and truncating, leaders tracking followers,
//! the high watermark and the ISR. What `--truncation` changes lives in
//! `truncation.rs` alone.

pub mod fetcher;
pub mod isr;
pub mod partition;
pub mod replica_manager;
pub mod truncation;

/// The storage engine, under the name the replica code uses for it.
pub use crate::storage as store;
