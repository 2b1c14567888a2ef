//! The transaction coordinator's memory (KIP-98's `TransactionStateManager`):
//! for each partition of the transaction-state topic this broker leads, the
//! state of every transactional id there, as last written to that partition.
//!
//! A transactional id belongs to partition [`partition_for`] of
//! [`TXN_STATE_TOPIC`]; the leader of that partition is its coordinator.
//! When this broker becomes that leader it reads the partition from its start
//! (`load.rs`) and answers COORDINATOR_LOAD_IN_PROGRESS until it has; when it
//! stops leading it forgets the partition (NOT_COORDINATOR). The memory only
//! ever holds what the partition's replicas acknowledged (`transition.rs`
//! writes first and applies after), so a new coordinator that reads the log
//! knows at least what the old one answered.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use kafka_protocol::ResponseError;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::state::TxnMetadata;
use crate::replica::store::TopicPartition;

/// The internal topic transactional ids' states are written to.
pub const TXN_STATE_TOPIC: &str = "__transaction_state";

/// The transaction-state partition of `transactional_id` among `partitions`:
/// Kafka's `Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`
/// (`TransactionStateManager.partitionFor`), the group rule's twin.
pub fn partition_for(transactional_id: &str, partitions: u32) -> i32 {
    crate::group::partition_for(transactional_id, partitions.max(1)) as i32
}

/// One transaction-state partition this broker leads.
#[derive(Debug)]
enum Coordinated {
    /// Its log is being read, in this leader epoch.
    Loading { leader_epoch: i32 },
    /// Read: every transactional id's state, as of this leader epoch.
    Loaded {
        leader_epoch: i32,
        ids: BTreeMap<String, TxnMetadata>,
    },
}

/// A transactional id this broker coordinates, as it stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinating {
    /// Its transaction-state partition.
    pub partition: TopicPartition,
    /// The leader epoch of that partition: the coordinator epoch its markers
    /// carry.
    pub leader_epoch: i32,
    pub current: Option<TxnMetadata>,
}

/// The markers a prepared transaction needs, for the marker task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub coordinator_epoch: i32,
    /// The PrepareCommit or PrepareAbort state written.
    pub prepared: TxnMetadata,
}

pub struct TxnCoordinator {
    partitions: u32,
    coordinated: Mutex<BTreeMap<i32, Coordinated>>,
    /// Held across one transition's read, write and apply, so transitions of
    /// this coordinator never interleave (Kafka locks per id; one lock is
    /// simpler and the load is a test cluster's).
    pub(super) writing: tokio::sync::Mutex<()>,
    markers: UnboundedSender<MarkerJob>,
    marker_jobs: Mutex<Option<UnboundedReceiver<MarkerJob>>>,
}

impl TxnCoordinator {
    pub fn new(partitions: u32) -> Self {
        let (markers, jobs) = unbounded_channel();
        TxnCoordinator {
            partitions: partitions.max(1),
            coordinated: Mutex::new(BTreeMap::new()),
            writing: tokio::sync::Mutex::new(()),
            markers,
            marker_jobs: Mutex::new(Some(jobs)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<i32, Coordinated>> {
        self.coordinated.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many partitions the transaction-state topic has.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    pub fn partition_of(&self, transactional_id: &str) -> TopicPartition {
        TopicPartition {
            topic: TXN_STATE_TOPIC.into(),
            partition: partition_for(transactional_id, self.partitions),
        }
    }

    /// `transactional_id` as this broker coordinates it, or the error a
    /// request about it is answered.
    pub fn lookup(&self, transactional_id: &str) -> Result<Coordinating, ResponseError> {
        let partition = self.partition_of(transactional_id);
        match self.lock().get(&partition.partition) {
            Some(Coordinated::Loaded { leader_epoch, ids }) => Ok(Coordinating {
                leader_epoch: *leader_epoch,
                current: ids.get(transactional_id).cloned(),
                partition,
            }),
            Some(Coordinated::Loading { .. }) => Err(ResponseError::CoordinatorLoadInProgress),
            None => Err(ResponseError::NotCoordinator),
        }
    }

    /// This broker became the leader of transaction-state partition
    /// `partition` in `leader_epoch`; `load::load` reads it next.
    pub fn elected(&self, partition: i32, leader_epoch: i32) {
        self.lock()
            .insert(partition, Coordinated::Loading { leader_epoch });
    }

    /// This broker no longer leads transaction-state partition `partition`.
    pub fn resigned(&self, partition: i32) {
        self.lock().remove(&partition);
    }

    /// The read of `partition` in `leader_epoch` is done: serve `ids`, if
    /// this broker still leads it in that epoch. Says whether it does.
    pub(crate) fn finish(
        &self,
        partition: i32,
        leader_epoch: i32,
        ids: BTreeMap<String, TxnMetadata>,
    ) -> bool {
        let mut coordinated = self.lock();
        let Some(state) = coordinated.get_mut(&partition) else {
            return false;
        };
        if !matches!(state, Coordinated::Loading { leader_epoch: e } if *e == leader_epoch) {
            return false;
        }
        *state = Coordinated::Loaded { leader_epoch, ids };
        true
    }

    /// Takes `m` as `transactional_id`'s state once its record is
    /// acknowledged, if this broker still coordinates the id in the epoch it
    /// was written in. Says whether it did.
    pub(super) fn apply(&self, transactional_id: &str, leader_epoch: i32, m: TxnMetadata) -> bool {
        let partition = partition_for(transactional_id, self.partitions);
        match self.lock().get_mut(&partition) {
            Some(Coordinated::Loaded {
                leader_epoch: epoch,
                ids,
            }) if *epoch == leader_epoch => {
                ids.insert(transactional_id.to_owned(), m);
                true
            }
            _ => false,
        }
    }

    /// Every loaded transactional id with its coordinator epoch and state
    /// (the timeout task looks them over).
    pub fn loaded(&self) -> Vec<(String, i32, TxnMetadata)> {
        self.lock()
            .values()
            .filter_map(|c| match c {
                Coordinated::Loaded { leader_epoch, ids } => Some(
                    ids.iter()
                        .map(|(id, m)| (id.clone(), *leader_epoch, m.clone()))
                        .collect::<Vec<_>>(),
                ),
                Coordinated::Loading { .. } => None,
            })
            .flatten()
            .collect()
    }

    /// Hands a prepared transaction to the marker task.
    pub fn send_markers(&self, job: MarkerJob) {
        if self.markers.send(job).is_err() {
            tracing::warn!("the marker task has stopped; markers not sent");
        }
    }

    /// The marker task's queue, once (at start).
    pub fn take_marker_jobs(&self) -> Option<UnboundedReceiver<MarkerJob>> {
        self.marker_jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transactions::state::{Init, init_producer_id};

    #[test]
    fn an_id_is_loading_then_served_then_forgotten_and_late_writes_are_dropped() {
        let c = TxnCoordinator::new(3);
        let p = c.partition_of("tx").partition;
        assert_eq!(c.lookup("tx"), Err(ResponseError::NotCoordinator));
        c.elected(p, 4);
        assert_eq!(
            c.lookup("tx"),
            Err(ResponseError::CoordinatorLoadInProgress)
        );
        assert!(!c.finish(p, 3, BTreeMap::new()), "an older epoch's load");
        assert!(c.finish(p, 4, BTreeMap::new()));
        assert_eq!(c.lookup("tx").unwrap().current, None);
        let Ok(Init::Ready(m)) = init_producer_id(None, 1000, 0, || 9) else {
            panic!()
        };
        assert!(!c.apply("tx", 3, m.clone()), "written in an older epoch");
        assert!(c.apply("tx", 4, m.clone()));
        let now = c.lookup("tx").unwrap();
        assert_eq!((now.leader_epoch, now.current), (4, Some(m)));
        assert_eq!(c.loaded().len(), 1);
        c.resigned(p);
        assert_eq!(c.lookup("tx"), Err(ResponseError::NotCoordinator));
    }
}
