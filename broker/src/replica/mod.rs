//! The replicas this broker hosts: their logs (through the storage engine) and
//! the leadership state the controller assigned them.

pub mod batch_header;
pub mod partition;
pub mod replica_manager;

// TEMPORARY: the storage engine is being written on main; until it is merged the
// wire path runs on this in-memory stand-in with the same signatures. Swap the
// alias to `crate::storage` and delete the shim when it lands.
pub mod storage_shim;
pub use storage_shim as store;
