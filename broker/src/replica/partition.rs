//! One hosted partition's leadership state as the controller last decided it:
//! leader, leader epoch, ISR, replicas, and the controller epoch of the decision.
//!
//! The state changes only through a LeaderAndIsr that passes the checks in
//! [`Partition::check_leader_and_isr`]; the log itself belongs to storage.

use kafka_protocol::ResponseError;

/// The controller's decision for one partition, as carried by LeaderAndIsr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrState {
    pub controller_epoch: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    /// The partition-state key's version in etcd (Kafka's zkVersion).
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
}

/// Local view of one partition.
#[derive(Clone, Debug, Default)]
pub struct Partition {
    /// None until the first LeaderAndIsr since this broker started.
    pub state: Option<LeaderAndIsrState>,
}

impl Partition {
    pub fn is_leader(&self, node_id: i32) -> bool {
        self.state.as_ref().is_some_and(|s| s.leader == node_id)
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state.as_ref().map_or(-1, |s| s.leader_epoch)
    }

    /// Kafka's per-partition rule (ReplicaManager.becomeLeaderOrFollower): a
    /// request whose leader epoch is not newer than the one we hold is stale and
    /// ignored, answered STALE_CONTROLLER_EPOCH. It applies whatever the fencing
    /// setting, because it protects the log, not the controller.
    pub fn check_leader_and_isr(&self, incoming: &LeaderAndIsrState) -> Result<(), ResponseError> {
        match &self.state {
            Some(current) if incoming.leader_epoch <= current.leader_epoch => {
                Err(ResponseError::StaleControllerEpoch)
            }
            _ => Ok(()),
        }
    }
}
