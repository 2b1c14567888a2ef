//! Fixtures the replica module's unit tests share: a replica manager on a fresh
//! data directory without an etcd session (so always live), record batches, and
//! LeaderAndIsr states for partition `t-0` with replicas 1 and 2.

use bytes::Bytes;

use super::manager::ReplicaManager;
use super::partition::LeaderAndIsrState;
use super::store::{LogConfig, LogManager, TopicPartition};
use crate::config::Truncation;

/// `n` records, each value `v<i>`, encoded as one batch.
pub fn batch(n: usize) -> Bytes {
    let values = (0..n)
        .map(|i| (None, Some(Bytes::from(format!("v{i}")))))
        .collect();
    crate::storage::record_batch::plain_batch(values, 0)
}

/// Broker `node_id` on `current`, its logs in `dir`.
pub fn manager_on(node_id: i32, dir: &std::path::Path, truncation: Truncation) -> ReplicaManager {
    let logs = LogManager::open(dir, LogConfig::default()).unwrap();
    ReplicaManager::new(node_id, 1, truncation, logs, None)
}

/// Broker 1 on `current` with this min.insync.replicas.
pub fn manager(dir: &std::path::Path, min_isr: i32) -> ReplicaManager {
    let logs = LogManager::open(dir, LogConfig::default()).unwrap();
    ReplicaManager::new(1, min_isr, Truncation::Current, logs, None)
}

pub fn state(leader: i32, leader_epoch: i32, isr: Vec<i32>) -> LeaderAndIsrState {
    LeaderAndIsrState {
        controller_epoch: 1,
        leader,
        leader_epoch,
        isr,
        partition_epoch: 0,
        replicas: vec![1, 2],
    }
}

pub fn tp() -> TopicPartition {
    TopicPartition {
        topic: "t".into(),
        partition: 0,
    }
}

/// The partition's leader-epoch cache as (epoch, start offset) pairs.
pub fn epochs(rm: &ReplicaManager) -> Vec<(i32, i64)> {
    rm.lock()
        .logs
        .get(&tp())
        .unwrap()
        .leader_epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}
