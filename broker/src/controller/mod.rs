//! Coordination through etcd (ZooKeeper's role in classic Kafka) and the
//! controller that takes the cluster's leadership decisions.

pub mod channel;
mod context;
#[allow(clippy::module_inception)]
pub mod controller;
pub mod election;
pub mod metadata_store;
pub mod partition_election;
pub mod session;
mod topics;
