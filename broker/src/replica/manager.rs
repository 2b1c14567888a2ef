//! The replica manager: every hosted partition's log and leadership state behind
//! one lock. This file holds that shared state and what every role needs from it
//! — the lock, the session check a leader acts under, lookups of a partition by
//! role, and the periodic and final storage work (flushes, checkpoints,
//! shutdown). The roles add their own `impl ReplicaManager` blocks beside it:
//! `leader.rs` (appends, acks, reads, offsets), `follower.rs` (appends and
//! truncation), `isr.rs` (the leader's ISR changes) and `leader_and_isr.rs`
//! (applying the controller's decisions).
//!
//! Storage calls are synchronous file I/O (an fsync per append under
//! `--flush-messages 1`); they run under a std mutex held only for the call, never
//! across an await. Appends, HW moves and role changes wake waiters (long-poll
//! fetches, acks=all produces) through one `Notify`.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use kafka_protocol::ResponseError;
use tokio::sync::Notify;

use super::partition::Partition;
use super::store::record_batch::RuleViolation;
use super::store::{LogManager, ProducerStateError, StorageError, TopicPartition};
use crate::config::Truncation;
use crate::controller::session::Session;
use crate::topic_config::{BrokerDefaults, TopicConfigs};

/// Kafka's debugging consumer (`Request.DebuggingConsumerId`,
/// `ListOffsetsRequest.DEBUGGING_REPLICA_ID`). Kafka's ReplicaManager
/// (core/src/main/scala/kafka/server/ReplicaManager.scala) lets only this id
/// read from a replica that is not the leader: it sets `fetchOnlyFromLeader`
/// to false exactly when the replica id is the debugging one. Otherwise it is
/// a client: a Fetch reads up to the high watermark of the replica asked and
/// answers with that replica's own HW; a ListOffsets latest carries no
/// isolation level (Kafka passes one only for replica id -1) and so answers
/// that replica's log end offset.
pub const DEBUGGING_REPLICA_ID: i32 = -2;

/// What the lock guards: the logs and the leadership state must change together.
pub(super) struct Inner {
    pub(super) logs: LogManager,
    pub(super) partitions: HashMap<TopicPartition, Partition>,
    /// The newest controller epoch seen in any control request (KAFKA-532).
    pub(super) controller_epoch: i32,
}

pub struct ReplicaManager {
    pub(super) node_id: i32,
    /// Per-topic configs over the broker's defaults: min.insync.replicas,
    /// segment.bytes.
    pub(super) configs: Arc<TopicConfigs>,
    pub(super) truncation: Truncation,
    /// The etcd session leadership depends on; None (unit tests) is always live.
    pub(super) session: Option<Arc<Session>>,
    inner: Mutex<Inner>,
    pub(super) appended: Notify,
    /// Numbers each transition of a partition to leader on this broker, so an
    /// acks=all wait can tell its own leadership from a later one.
    pub(super) leaderships: AtomicU64,
    /// This run's registration incarnation, sent with its fetches as a
    /// follower (0 in unit tests), and whether a leader checks its
    /// followers' against etcd before they join an ISR (KIP-903).
    pub(super) incarnation: u64,
    pub(super) isr_join_fencing: bool,
}

impl ReplicaManager {
    pub fn new(
        node_id: i32,
        min_insync_replicas: i32,
        truncation: Truncation,
        logs: LogManager,
        session: Option<Arc<Session>>,
    ) -> Self {
        Self {
            node_id,
            configs: Arc::new(TopicConfigs::new(BrokerDefaults {
                min_insync_replicas,
                unclean_leader_election: false,
                segment_bytes: logs.config().segment_bytes,
                flush_messages: logs.config().flush_messages,
                flush_interval_ms: logs.config().flush_interval_ms,
            })),
            truncation,
            session,
            inner: Mutex::new(Inner {
                logs,
                partitions: HashMap::new(),
                controller_epoch: 0,
            }),
            appended: Notify::new(),
            leaderships: AtomicU64::new(1),
            incarnation: 0,
            isr_join_fencing: true,
        }
    }

    /// This run's registration incarnation, and whether joins to an ISR
    /// are checked against followers' registrations (KIP-903).
    pub fn with_incarnation(mut self, incarnation: u64, isr_join_fencing: bool) -> Self {
        self.incarnation = incarnation;
        self.isr_join_fencing = isr_join_fencing;
        self
    }

    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Takes the broker's topic configs, which its watch keeps current, in
    /// place of the defaults `new` made.
    pub fn with_topic_configs(mut self, configs: Arc<TopicConfigs>) -> Self {
        self.configs = configs;
        self
    }

    pub fn topic_configs(&self) -> &Arc<TopicConfigs> {
        &self.configs
    }

    /// StopReplica with delete (its topic was deleted): this broker stops
    /// replicating `tp` and removes its log from disk. Waiters on an append
    /// are woken to find the partition gone.
    pub fn delete_replica(&self, tp: &TopicPartition) -> Result<(), StorageError> {
        let mut inner = self.lock();
        inner.partitions.remove(tp);
        let deleted = inner.logs.delete(tp);
        drop(inner);
        self.appended.notify_waiters();
        deleted
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn truncation(&self) -> Truncation {
        self.truncation
    }

    pub fn controller_epoch(&self) -> i32 {
        self.lock().controller_epoch
    }

    /// Register for the next append notification (before checking a condition,
    /// so an append between the check and the await is not missed).
    pub fn appended(&self) -> &Notify {
        &self.appended
    }

    /// The broker epoch of the registration the session holds now (`None`
    /// without a session).
    pub fn session_broker_epoch(&self) -> Option<i64> {
        self.session.as_ref().map(|s| s.lease().broker_epoch)
    }

    pub(super) fn current_lease(&self) -> i64 {
        self.session.as_ref().map_or(0, |s| s.lease().id)
    }

    /// Is the session this leadership was granted under still live?
    pub(super) fn lease_valid(&self, partition: &Partition) -> bool {
        match &self.session {
            None => true,
            Some(s) => s.is_live() && s.lease().id == partition.lease,
        }
    }

    /// The partition, if this broker leads it and may act as its leader.
    pub(super) fn led<'a>(
        &self,
        partitions: &'a HashMap<TopicPartition, Partition>,
        logs: &LogManager,
        tp: &TopicPartition,
    ) -> Result<&'a Partition, ResponseError> {
        let Some(partition) = partitions.get(tp) else {
            return Err(if logs.get(tp).is_some() {
                ResponseError::NotLeaderOrFollower
            } else {
                ResponseError::UnknownTopicOrPartition
            });
        };
        if !partition.is_leader(self.node_id) || !self.lease_valid(partition) {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        Ok(partition)
    }

    /// The partition, if this broker is one of its replicas — leader or
    /// follower, whatever its session — and holds its log: what the debugging
    /// replica id may read (see [`DEBUGGING_REPLICA_ID`]). No log is
    /// UNKNOWN_TOPIC_OR_PARTITION; a log without a role yet (restarted, no
    /// LeaderAndIsr since) is NOT_LEADER_OR_FOLLOWER, as in Kafka, which
    /// has no Partition before its first LeaderAndIsr.
    fn hosted<'a>(
        &self,
        partitions: &'a HashMap<TopicPartition, Partition>,
        logs: &LogManager,
        tp: &TopicPartition,
    ) -> Result<&'a Partition, ResponseError> {
        if logs.get(tp).is_none() {
            return Err(ResponseError::UnknownTopicOrPartition);
        }
        partitions
            .get(tp)
            .filter(|p| p.state.is_some())
            .ok_or(ResponseError::NotLeaderOrFollower)
    }

    /// [`Self::led`], or [`Self::hosted`] for the debugging replica id.
    pub(super) fn readable<'a>(
        &self,
        partitions: &'a HashMap<TopicPartition, Partition>,
        logs: &LogManager,
        tp: &TopicPartition,
        replica_id: i32,
    ) -> Result<&'a Partition, ResponseError> {
        if replica_id == DEBUGGING_REPLICA_ID {
            self.hosted(partitions, logs, tp)
        } else {
            self.led(partitions, logs, tp)
        }
    }

    /// The high watermark of a hosted partition.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.lock().logs.get(tp).map(|l| l.high_watermark())
    }

    /// (log end offset, high watermark) of a hosted partition.
    pub fn offsets(&self, tp: &TopicPartition) -> Option<(i64, i64)> {
        self.lock()
            .logs
            .get(tp)
            .map(|l| (l.log_end_offset(), l.high_watermark()))
    }

    /// Periodic work: time-based flushes.
    pub fn flush_if_due(&self) -> Result<(), StorageError> {
        self.lock().logs.flush_if_due(Instant::now())
    }

    pub fn checkpoint_high_watermarks(&self) -> Result<(), StorageError> {
        self.lock().logs.checkpoint_high_watermarks()
    }

    pub fn checkpoint_recovery_points(&self) -> Result<(), StorageError> {
        self.lock().logs.checkpoint_recovery_points()
    }

    /// Clean shutdown: flush, checkpoints, clean-shutdown marker.
    pub fn shutdown(&self) -> Result<(), StorageError> {
        self.lock().logs.shutdown()
    }
}

/// The Kafka error code a storage failure is answered with.
pub(super) fn storage_error_code(e: &StorageError) -> ResponseError {
    match e {
        StorageError::CorruptRecords { .. } => ResponseError::CorruptMessage,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::InvalidTopicPartition { .. } => ResponseError::InvalidTopicException,
        StorageError::ControlBatchProduced { .. } => ResponseError::InvalidRecord,
        StorageError::RecordsRefused { source, .. } => match source {
            RuleViolation::TooLarge { .. } => ResponseError::MessageTooLarge,
            RuleViolation::KeyMissing { .. } => ResponseError::InvalidRecord,
        },
        StorageError::ProducerState { source, .. } => match source {
            ProducerStateError::InvalidSequence { .. } => ResponseError::InvalidRecord,
            ProducerStateError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
            ProducerStateError::OutOfOrderSequence { .. } => {
                ResponseError::OutOfOrderSequenceNumber
            }
            ProducerStateError::CoordinatorFenced { .. } => {
                ResponseError::TransactionCoordinatorFenced
            }
        },
        _ => ResponseError::KafkaStorageError,
    }
}
