//! The etcd timeline: from etcd's revision history of the partition-state and
//! controller keys, the authoritative sequence of (leader, leader epoch, ISR,
//! controller epoch) per partition, with revisions — evidence no broker can
//! rewrite. Test clusters run etcd with compaction off, so every revision is
//! still there when the run ends. (Being filled in: reading it from etcd.)

use serde::{Deserialize, Serialize};

/// Everything the checkers need from etcd's history, in revision order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// Every write of a partition's state key.
    pub partition_states: Vec<PartitionStateChange>,
    /// Every write or deletion of the controller key.
    pub controllers: Vec<ControllerChange>,
}

/// One write of `/epochal/brokers/topics/<t>/partitions/<p>/state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStateChange {
    pub revision: i64,
    pub topic: String,
    pub partition: u32,
    /// -1: no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub controller_epoch: i32,
}

/// One change of `/epochal/controller`: `broker_id` `None` when deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerChange {
    pub revision: i64,
    pub broker_id: Option<i32>,
    /// The controller epoch it claimed, when the value says.
    pub epoch: Option<i32>,
}
