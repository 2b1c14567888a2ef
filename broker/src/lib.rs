//! epochal-broker: the reference system under test.
//!
//! A Kafka-style broker that keeps Kafka's on-disk format and speaks Kafka's wire
//! protocol, with etcd playing ZooKeeper's role. Its replication behaviour is
//! chosen by configuration so that the documented historical bugs (KIP-101,
//! KIP-279, KAFKA-532) reproduce on the settings that had them.
//!
//! This crate owns the broker only. The harness never links it: it sees a broker
//! as a process, a Kafka port and a data directory.

pub mod broker;
pub mod client;
pub mod config;
pub mod controller;
pub mod failpoints;
pub mod group;
pub mod huge_alloc;
pub mod offsets;
pub mod replica;
pub mod server;
pub mod state_change_log;
pub mod storage;
pub mod topic_config;
pub mod transactions;
