//! The replicas this broker hosts: their logs (through the storage engine) and
//! the leadership state the controller assigned them.

pub mod partition;
pub mod replica_manager;

/// The storage engine, under the name the replica code uses for it.
pub use crate::storage as store;
