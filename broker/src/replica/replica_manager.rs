//! The replica manager: every hosted partition's log and leadership state behind
//! one lock, and everything the request handlers, the fetcher and the ISR task
//! need — append as leader or follower, read (tracking followers' positions),
//! the high watermark, acks=all status, OffsetsForLeaderEpoch answers, follower
//! truncation, ISR changes — plus applying LeaderAndIsr.
//!
//! The high watermark follows Kafka ≤ 2.x: a leader reads the log and its high
//! watermark for a follower's fetch *before* applying that fetch's position, so a
//! follower learns a new HW one fetch later. A leader acts only while its etcd
//! session is live and still the one it became leader under; past that it
//! answers as a non-leader and acknowledges nothing.
//!
//! Storage calls are synchronous file I/O (an fsync per append under
//! `--flush-messages 1`); they run under a std mutex held only for the call, never
//! across an await. Appends, HW moves and role changes wake waiters (long-poll
//! fetches, acks=all produces) through one `Notify`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;

use super::partition::{FollowerState, LeaderAndIsrState, Partition};
use super::store::record_batch::Batches;
use super::store::{
    EpochEndOffset, LogAppendInfo, LogManager, PartitionLog, StorageError, TopicPartition,
};
use super::truncation::{self, Start, Step};
use crate::config::Truncation;
use crate::controller::session::Session;
use crate::failpoints::{self, Failpoint};

/// A replica id of -1 or below is a client (Kafka's consumer replica id).
pub fn is_client(replica_id: i32) -> bool {
    replica_id < 0
}

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

/// What a read returned for one partition.
#[derive(Debug, Clone)]
pub struct ReadResult {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub records: Bytes,
}

struct Inner {
    logs: LogManager,
    partitions: HashMap<TopicPartition, Partition>,
    /// The newest controller epoch seen in any control request (KAFKA-532).
    controller_epoch: i32,
}

pub struct ReplicaManager {
    node_id: i32,
    min_insync_replicas: i32,
    truncation: Truncation,
    /// The etcd session leadership depends on; None (unit tests) is always live.
    session: Option<Arc<Session>>,
    inner: Mutex<Inner>,
    appended: Notify,
    /// Numbers each transition of a partition to leader on this broker, so an
    /// acks=all wait can tell its own leadership from a later one.
    leaderships: AtomicU64,
}

/// What this broker does for a partition after a LeaderAndIsr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Fetch from `leader`; first truncate if `truncate`.
    Follower {
        leader: i32,
        leader_epoch: i32,
        truncate: bool,
    },
}

/// The per-partition outcome of one LeaderAndIsr.
#[derive(Debug, Clone)]
pub struct Decision {
    pub tp: TopicPartition,
    pub state: LeaderAndIsrState,
    pub result: Result<Role, ResponseError>,
    pub reason: Option<String>,
}

/// Where an acks=all produce stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    Pending,
    Committed,
    /// Committed, but the ISR shrank below min.insync.replicas after the append.
    NotEnoughReplicasAfterAppend,
    /// Leadership moved (or was lost and regained) since the append.
    NotLeader,
    /// The session is not live: a fenced leader acknowledges nothing.
    Fenced,
}

/// An acks=all append to wait on.
#[derive(Debug, Clone, Copy)]
pub struct AppendTicket {
    pub first_offset: i64,
    pub last_offset: i64,
    leadership: u64,
}

/// An ISR change a leader wants written to etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub tp: TopicPartition,
    pub leader_epoch: i32,
    pub controller_epoch: i32,
    /// The partition-state key's version the write must find (zkVersion + 1).
    pub expected_version: i64,
    pub isr: Vec<i32>,
}

/// What a follower does after applying one OffsetsForLeaderEpoch answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncationProgress {
    Done,
    Ask(i32),
}

/// The prefix of `buf` holding only whole batches whose last offset is below `end`.
fn batches_below(buf: Bytes, end: i64) -> Bytes {
    let mut keep = 0usize;
    for batch in Batches::new(&buf) {
        let Ok(batch) = batch else { break };
        if batch.header.last_offset() >= end {
            break;
        }
        keep = batch.position + batch.header.size_bytes();
    }
    buf.slice(..keep)
}

fn storage_error_code(e: &StorageError) -> ResponseError {
    match e {
        StorageError::CorruptRecords { .. } => ResponseError::CorruptMessage,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        _ => ResponseError::KafkaStorageError,
    }
}

/// Move the leader's HW to the minimum LEO of the ISR if that is higher. A
/// follower that has not fetched in this epoch (-1) holds it back.
fn maybe_advance_hw(node_id: i32, partition: &Partition, log: &mut PartitionLog) -> bool {
    let Some(state) = &partition.state else {
        return false;
    };
    let mut min = log.log_end_offset();
    for id in state.isr.iter().filter(|id| **id != node_id) {
        let leo = partition.followers.get(id).map_or(-1, |f| f.log_end_offset);
        min = min.min(leo);
    }
    if min > log.high_watermark() {
        log.set_high_watermark(min);
        true
    } else {
        false
    }
}

/// Whether a control request addressed to registration `requested` (its
/// create revision) names a newer registration than `ours`, the one this
/// broker's session has switched to. -1 (unknown) is never ahead.
fn registration_ahead(ours: i64, requested: i64) -> bool {
    requested > ours
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
            min_insync_replicas,
            truncation,
            session,
            inner: Mutex::new(Inner {
                logs,
                partitions: HashMap::new(),
                controller_epoch: 0,
            }),
            appended: Notify::new(),
            leaderships: AtomicU64::new(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
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

    /// Wait (at most one lease TTL) until this broker's session has caught up
    /// with the registration a LeaderAndIsr was addressed to. A broker that
    /// registers again under a new lease puts its key, and the controller may
    /// see the put and send it its state before the put's answer reaches the
    /// broker: applied then, the decision would be bound to the old lease and
    /// the role it grants would be dead on arrival, with nothing ever resending
    /// it. `broker_epoch` is the request's (the registration's create revision
    /// as the controller saw it; -1 when unknown).
    pub async fn await_registration(&self, broker_epoch: i64) {
        let Some(session) = &self.session else {
            return;
        };
        if !registration_ahead(session.lease().broker_epoch, broker_epoch) {
            return;
        }
        tracing::info!(
            broker_epoch,
            ours = session.lease().broker_epoch,
            "LeaderAndIsr for a registration the session has not switched to yet; waiting"
        );
        let mut leases = session.subscribe();
        let caught_up = leases.wait_for(|l| !registration_ahead(l.broker_epoch, broker_epoch));
        if tokio::time::timeout(session.ttl, caught_up).await.is_err() {
            tracing::warn!(
                broker_epoch,
                ours = session.lease().broker_epoch,
                "LeaderAndIsr for a registration this broker has not seen; applying under the current lease"
            );
        }
    }

    fn current_lease(&self) -> i64 {
        self.session.as_ref().map_or(0, |s| s.lease().id)
    }

    /// Is the session this leadership was granted under still live?
    fn lease_valid(&self, partition: &Partition) -> bool {
        match &self.session {
            None => true,
            Some(s) => s.is_live() && s.lease().id == partition.lease,
        }
    }

    /// The partition, if this broker leads it and may act as its leader.
    fn led<'a>(
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
    fn readable<'a>(
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

    /// Append a producer's batches as leader, stamping the leader epoch.
    pub fn append_as_leader(
        &self,
        tp: &TopicPartition,
        records: Bytes,
        acks: i16,
    ) -> Result<AppendTicket, ResponseError> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let partition = self.led(&inner.partitions, &inner.logs, tp)?;
        let state = partition.state.clone().expect("a led partition has state");
        // Kafka checks min.insync.replicas before the append for acks=all only.
        if acks == -1 && (state.isr.len() as i32) < self.min_insync_replicas {
            return Err(ResponseError::NotEnoughReplicas);
        }
        let log = inner
            .logs
            .get_or_create(tp)
            .map_err(|e| storage_error_code(&e))?;
        let info: LogAppendInfo = log.append_as_leader(records, state.leader_epoch).map_err(
            |e| {
                tracing::warn!(%e, topic = %tp.topic, partition = tp.partition, "append rejected");
                storage_error_code(&e)
            },
        )?;
        maybe_advance_hw(self.node_id, partition, log);
        let ticket = AppendTicket {
            first_offset: info.first_offset,
            last_offset: info.last_offset,
            leadership: partition.leadership,
        };
        drop(guard);
        self.appended.notify_waiters();
        Ok(ticket)
    }

    /// Where an acks=all append stands (Kafka's DelayedProduce check).
    pub fn ack_status(&self, tp: &TopicPartition, ticket: &AppendTicket) -> AckStatus {
        let inner = self.lock();
        let Some(partition) = inner.partitions.get(tp) else {
            return AckStatus::NotLeader;
        };
        if !partition.is_leader(self.node_id) || partition.leadership != ticket.leadership {
            return AckStatus::NotLeader;
        }
        if !self.lease_valid(partition) {
            return AckStatus::Fenced;
        }
        let hw = inner.logs.get(tp).map_or(-1, |l| l.high_watermark());
        if hw <= ticket.last_offset {
            return AckStatus::Pending;
        }
        let isr = partition.state.as_ref().map_or(0, |s| s.isr.len()) as i32;
        if isr < self.min_insync_replicas {
            AckStatus::NotEnoughReplicasAfterAppend
        } else {
            AckStatus::Committed
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

    /// Read from `offset` as leader; a client sees only batches below the high
    /// watermark, a follower reads to the log end and its fetch offset becomes
    /// its known LEO — after the HW for the answer was taken (Kafka ≤ 2.x).
    /// The debugging replica id reads any replica, leader or follower, as a
    /// client: below this replica's own HW, which the answer carries.
    pub fn read(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
        replica_id: i32,
        current_leader_epoch: i32,
    ) -> Result<ReadResult, ResponseError> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let partition = self.readable(&inner.partitions, &inner.logs, tp, replica_id)?;
        // -1 (no epoch given) is not checked; on a follower the epoch it
        // follows in is the one compared, as Kafka does for any replica.
        partition.check_current_leader_epoch(current_leader_epoch)?;
        let log = inner
            .logs
            .get(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let hw = log.high_watermark();
        let leo = log.log_end_offset();
        let bound = if is_client(replica_id) { hw } else { leo };
        let records = if offset >= bound && offset <= leo {
            Bytes::new()
        } else {
            let raw = log
                .read(offset, max_bytes)
                .map_err(|e| storage_error_code(&e))?;
            batches_below(raw, bound)
        };
        let result = ReadResult {
            high_watermark: hw,
            log_start_offset: log.log_start_offset(),
            log_end_offset: leo,
            records,
        };
        let mut advanced = false;
        if !is_client(replica_id) {
            let partition = inner.partitions.get_mut(tp).expect("checked above");
            if let Some(follower) = partition.followers.get_mut(&replica_id) {
                follower.on_fetch(offset, leo, Instant::now());
                let log = inner.logs.get_mut(tp).expect("checked above");
                advanced = maybe_advance_hw(self.node_id, partition, log);
            }
        }
        drop(guard);
        if advanced {
            self.appended.notify_waiters();
        }
        Ok(result)
    }

    /// ListOffsets: -2 earliest, -1 latest (the HW for clients, as Kafka answers
    /// read_uncommitted consumers). Returns (offset, leader epoch). The
    /// debugging replica id asks any replica, leader or follower, and latest
    /// is that replica's log end offset (Kafka applies no isolation level to it).
    pub fn list_offset(
        &self,
        tp: &TopicPartition,
        timestamp: i64,
        replica_id: i32,
    ) -> Result<(i64, i32), ResponseError> {
        let inner = self.lock();
        let partition = self.readable(&inner.partitions, &inner.logs, tp, replica_id)?;
        let log = inner
            .logs
            .get(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let epoch = partition.leader_epoch();
        match timestamp {
            -2 => Ok((log.log_start_offset(), epoch)),
            -1 if is_client(replica_id) && replica_id != DEBUGGING_REPLICA_ID => {
                Ok((log.high_watermark(), epoch))
            }
            -1 => Ok((log.log_end_offset(), epoch)),
            // Lookup by timestamp needs a time index, which this broker does not keep.
            _ => Err(ResponseError::InvalidRequest),
        }
    }

    /// OffsetsForLeaderEpoch as leader: the end offset of `epoch` by the
    /// configured release's rule.
    pub fn end_offset_for_epoch(
        &self,
        tp: &TopicPartition,
        current_leader_epoch: i32,
        epoch: i32,
    ) -> Result<EpochEndOffset, ResponseError> {
        let inner = self.lock();
        let partition = self.led(&inner.partitions, &inner.logs, tp)?;
        partition.check_current_leader_epoch(current_leader_epoch)?;
        let log = inner
            .logs
            .get(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        // Kafka ≤ 0.10 had no such request; a broker on that setting refuses it.
        let rule = truncation::answer_rule(self.truncation).ok_or(ResponseError::InvalidRequest)?;
        Ok(log
            .leader_epoch_cache()
            .end_offset_for(rule, epoch, log.log_end_offset()))
    }

    /// The follower's log, if this broker follows `tp` in `leader_epoch`.
    fn followed<'a>(
        &self,
        inner: &'a mut Inner,
        tp: &TopicPartition,
        leader_epoch: i32,
    ) -> Result<&'a mut PartitionLog, ResponseError> {
        let following = inner.partitions.get(tp).is_some_and(|p| {
            p.state
                .as_ref()
                .is_some_and(|s| s.leader != self.node_id && s.leader_epoch == leader_epoch)
        });
        if !following {
            return Err(ResponseError::FencedLeaderEpoch);
        }
        inner
            .logs
            .get_or_create(tp)
            .map_err(|e| storage_error_code(&e))
    }

    /// Append fetched batches as a follower in `leader_epoch` and take the
    /// leader's HW (capped at our own log end). Returns the new log end offset.
    pub fn append_as_follower(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
        records: Bytes,
        leader_high_watermark: i64,
    ) -> Result<i64, StorageOrRole> {
        let mut inner = self.lock();
        let log = self
            .followed(&mut inner, tp, leader_epoch)
            .map_err(StorageOrRole::Role)?;
        log.append_as_follower(records)
            .map_err(StorageOrRole::Storage)?;
        log.set_high_watermark(leader_high_watermark);
        Ok(log.log_end_offset())
    }

    /// The log end offset a follower fetches from.
    pub fn follower_fetch_offset(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
    ) -> Result<i64, ResponseError> {
        let mut inner = self.lock();
        Ok(self
            .followed(&mut inner, tp, leader_epoch)?
            .log_end_offset())
    }

    /// Begin a follower's truncation: either cut at once (to the HW) or ask.
    pub fn truncation_start(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
    ) -> Result<TruncationProgress, StorageOrRole> {
        // Evaluated before the lock is taken: the failpoint's `stop` or `sleep`
        // must not hold every other partition up.
        let rule = self.follower_truncation_rule(tp);
        let mut inner = self.lock();
        let log = self
            .followed(&mut inner, tp, leader_epoch)
            .map_err(StorageOrRole::Role)?;
        begin_truncation(rule, tp, log)
    }

    /// The rule this truncation starts by: the configured one, unless the
    /// `follower-truncate-to-hw` failpoint removes the KIP-101 fix on purpose
    /// (how the gate's own test shows that a lost fix fails the gate).
    fn follower_truncation_rule(&self, tp: &TopicPartition) -> Truncation {
        if failpoints::hit_or_return(Failpoint::FollowerTruncateToHw) {
            tracing::warn!(
                topic = %tp.topic,
                partition = tp.partition,
                truncation = ?self.truncation,
                "failpoint follower-truncate-to-hw: truncating to the high watermark \
                 (the KIP-101 fix removed on purpose)"
            );
            Truncation::HighWatermark
        } else {
            self.truncation
        }
    }

    /// Apply the leader's answer for one round of truncation.
    pub fn apply_truncation_answer(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
        answer: EpochEndOffset,
    ) -> Result<TruncationProgress, StorageOrRole> {
        let mut inner = self.lock();
        let log = self
            .followed(&mut inner, tp, leader_epoch)
            .map_err(StorageOrRole::Role)?;
        let step = truncation::step(
            self.truncation,
            log.leader_epoch_cache().entries(),
            log.log_end_offset(),
            log.high_watermark(),
            answer,
        );
        match step {
            Step::Done(offset) => {
                truncate_logged(tp, log, offset).map_err(StorageOrRole::Storage)?;
                Ok(TruncationProgress::Done)
            }
            Step::Continue(offset) => {
                truncate_logged(tp, log, offset).map_err(StorageOrRole::Storage)?;
                begin_truncation(self.truncation, tp, log)
            }
        }
    }

    /// ISR changes the leader should write: followers that caught up join
    /// (their LEO reached the HW and this epoch's start offset, Kafka 2.x), ISR
    /// members that have not caught up within `lag` leave. A fenced leader
    /// proposes nothing.
    pub fn pending_isr_changes(&self, lag: Duration) -> Vec<IsrChange> {
        let inner = self.lock();
        let now = Instant::now();
        let mut changes = Vec::new();
        for (tp, partition) in &inner.partitions {
            let Some(state) = &partition.state else {
                continue;
            };
            if state.leader != self.node_id || !self.lease_valid(partition) {
                continue;
            }
            let Some(log) = inner.logs.get(tp) else {
                continue;
            };
            let hw = log.high_watermark();
            let isr: Vec<i32> = state
                .replicas
                .iter()
                .copied()
                .filter(|id| {
                    if *id == self.node_id {
                        return true;
                    }
                    let Some(f) = partition.followers.get(id) else {
                        return false;
                    };
                    // Kafka decides both on the follower's fetches; checking
                    // periodically, "caught up within the lag" stands in for
                    // "is fetching", so a paused follower whose last position
                    // equals the HW is not taken straight back in.
                    let recent = f
                        .last_caught_up
                        .is_some_and(|t| now.saturating_duration_since(t) <= lag);
                    if state.isr.contains(id) {
                        recent
                    } else {
                        recent
                            && f.log_end_offset >= hw
                            && f.log_end_offset >= partition.leader_epoch_start_offset
                    }
                })
                .collect();
            let mut current = state.isr.clone();
            current.sort_unstable();
            let mut proposed = isr.clone();
            proposed.sort_unstable();
            if proposed != current {
                changes.push(IsrChange {
                    tp: tp.clone(),
                    leader_epoch: state.leader_epoch,
                    controller_epoch: state.controller_epoch,
                    expected_version: state.partition_epoch as i64 + 1,
                    isr,
                });
            }
        }
        changes
    }

    /// The leader's ISR write succeeded at `version`: adopt it if we still lead
    /// in the same epoch (a shrink may let the HW advance).
    pub fn isr_written(&self, change: &IsrChange, version: i64) {
        self.adopt_isr(&change.tp, change.leader_epoch, &change.isr, version);
    }

    /// The leader's ISR write lost its compare-and-swap. Kafka's rule: do not
    /// retry blindly; re-read, and only if the stored state still names us leader
    /// in the same epoch take its ISR and version and carry on. Otherwise wait
    /// for the controller's LeaderAndIsr. Returns whether we carried on.
    pub fn isr_conflict(
        &self,
        change: &IsrChange,
        stored_leader: i32,
        stored_leader_epoch: i32,
        stored_isr: &[i32],
        stored_version: i64,
    ) -> bool {
        if stored_leader != self.node_id || stored_leader_epoch != change.leader_epoch {
            tracing::info!(
                topic = %change.tp.topic,
                partition = change.tp.partition,
                stored_leader,
                stored_leader_epoch,
                "ISR write lost to a newer decision; waiting for LeaderAndIsr"
            );
            return false;
        }
        self.adopt_isr(&change.tp, change.leader_epoch, stored_isr, stored_version)
    }

    fn adopt_isr(&self, tp: &TopicPartition, leader_epoch: i32, isr: &[i32], version: i64) -> bool {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(partition) = inner.partitions.get_mut(tp) else {
            return false;
        };
        let Some(state) = partition.state.as_mut() else {
            return false;
        };
        if state.leader != self.node_id || state.leader_epoch != leader_epoch {
            return false;
        }
        state.isr = isr.to_vec();
        state.partition_epoch = (version - 1) as i32;
        if let Some(log) = inner.logs.get_mut(tp) {
            maybe_advance_hw(self.node_id, partition, log);
        }
        drop(guard);
        self.appended.notify_waiters();
        true
    }

    /// The controller-epoch check every control request passes first (KAFKA-532):
    /// older than the newest seen is stale. With fencing off it always passes.
    pub fn observe_controller_epoch(
        &self,
        controller_epoch: i32,
        fencing: bool,
    ) -> Result<(), ResponseError> {
        let mut inner = self.lock();
        if fencing && controller_epoch < inner.controller_epoch {
            return Err(ResponseError::StaleControllerEpoch);
        }
        inner.controller_epoch = inner.controller_epoch.max(controller_epoch);
        Ok(())
    }

    /// Apply the partition states of one LeaderAndIsr (after the request-level
    /// controller-epoch check). Each partition is applied or rejected on its own;
    /// an applied one says what this broker now does for it.
    pub fn apply_leader_and_isr(
        &self,
        states: Vec<(TopicPartition, LeaderAndIsrState)>,
    ) -> Vec<Decision> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let mut decisions = Vec::with_capacity(states.len());
        let lease = self.current_lease();
        for (tp, state) in states {
            let current = inner.partitions.get(&tp).cloned().unwrap_or_default();
            // A broker whose session expired and was re-registered lost its role
            // with the old lease. If no other controller decision intervened,
            // the next controller resends the same epoch (it cannot know the
            // session moved); that must reinstate the role, not be ignored.
            let reinstated = current.state.is_some()
                && current.lease != lease
                && state.leader_epoch == current.leader_epoch();
            if let Err(code) = current
                .check_leader_and_isr(&state)
                .or_else(|e| if reinstated { Ok(()) } else { Err(e) })
            {
                let reason = format!(
                    "leader epoch {} is not newer than the current {}",
                    state.leader_epoch,
                    current.leader_epoch()
                );
                decisions.push(Decision {
                    tp,
                    state,
                    result: Err(code),
                    reason: Some(reason),
                });
                continue;
            }
            if !state.replicas.contains(&self.node_id) {
                decisions.push(Decision {
                    tp,
                    state,
                    result: Err(ResponseError::UnknownTopicOrPartition),
                    reason: Some("this broker is not a replica".into()),
                });
                continue;
            }
            let node_id = self.node_id;
            let log = match inner.logs.get_or_create(&tp) {
                Ok(log) => log,
                Err(e) => {
                    decisions.push(Decision {
                        tp,
                        state,
                        result: Err(storage_error_code(&e)),
                        reason: Some(e.to_string()),
                    });
                    continue;
                }
            };
            let was_leader = current.is_leader(node_id) && current.lease == lease;
            let mut next = Partition {
                state: Some(state.clone()),
                lease,
                ..Default::default()
            };
            let role = if state.leader == node_id {
                let leo = log.log_end_offset();
                if truncation::records_epoch_at_election(self.truncation)
                    && let Err(e) = log.leader_epoch_cache_mut().assign(state.leader_epoch, leo)
                {
                    decisions.push(Decision {
                        tp,
                        state,
                        result: Err(storage_error_code(&e)),
                        reason: Some(e.to_string()),
                    });
                    continue;
                }
                let now = Instant::now();
                if was_leader {
                    // Same leadership, new epoch (e.g. the controller dropped a
                    // lost follower): keep what we know of the followers, but
                    // not that one caught up before this epoch (Kafka 2.x
                    // makeLeader): a follower the controller dropped because
                    // it is gone must not be taken straight back into the ISR
                    // on the strength of a fetch it made before it died.
                    next.followers = current.followers.clone();
                    for (id, follower) in &mut next.followers {
                        follower.reset_caught_up(state.isr.contains(id), leo, now);
                    }
                    next.leadership = current.leadership;
                } else {
                    next.leadership = self.leaderships.fetch_add(1, Ordering::Relaxed);
                }
                for id in state.replicas.iter().filter(|id| **id != node_id) {
                    next.followers
                        .entry(*id)
                        .or_insert_with(|| FollowerState::new(state.isr.contains(id), now));
                }
                next.followers.retain(|id, _| state.replicas.contains(id));
                next.leader_epoch_start_offset = leo;
                maybe_advance_hw(node_id, &next, log);
                Role::Leader
            } else {
                let previous_leader = current.state.as_ref().map(|s| s.leader);
                let leader_changed = previous_leader != Some(state.leader);
                Role::Follower {
                    leader: state.leader,
                    leader_epoch: state.leader_epoch,
                    truncate: leader_changed
                        || truncation::truncates_when_leader_unchanged(self.truncation),
                }
            };
            inner.partitions.insert(tp.clone(), next);
            decisions.push(Decision {
                tp,
                state,
                result: Ok(role),
                reason: None,
            });
        }
        drop(guard);
        self.appended.notify_waiters();
        decisions
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

/// A follower-side failure: the role changed under us, or storage refused.
#[derive(Debug, thiserror::Error)]
pub enum StorageOrRole {
    #[error("no longer following in this leader epoch ({0:?})")]
    Role(ResponseError),
    #[error(transparent)]
    Storage(StorageError),
}

/// One round's opening move for a follower: cut at once (to the HW) or ask the
/// leader about its latest epoch. Shared by the first round and every round
/// after a KIP-279 `Continue`.
fn begin_truncation(
    setting: Truncation,
    tp: &TopicPartition,
    log: &mut PartitionLog,
) -> Result<TruncationProgress, StorageOrRole> {
    match truncation::start(
        setting,
        log.leader_epoch_cache().entries(),
        log.high_watermark(),
    ) {
        Start::Ask(epoch) => Ok(TruncationProgress::Ask(epoch)),
        Start::TruncateTo(offset) => {
            truncate_logged(tp, log, offset).map_err(StorageOrRole::Storage)?;
            Ok(TruncationProgress::Done)
        }
    }
}

fn truncate_logged(
    tp: &TopicPartition,
    log: &mut PartitionLog,
    offset: i64,
) -> Result<(), StorageError> {
    let before = log.log_end_offset();
    log.truncate_to(offset)?;
    let after = log.log_end_offset();
    if after < before {
        tracing::info!(
            topic = %tp.topic,
            partition = tp.partition,
            from = before,
            to = after,
            "follower truncated its log"
        );
    } else {
        tracing::debug!(topic = %tp.topic, partition = tp.partition, offset, "nothing to truncate");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    use super::*;
    use crate::replica::store::LogConfig;

    /// The race `await_registration` closes: the controller answers a
    /// re-registration (create revision 17) before the broker's session has
    /// switched from its old one (5). Requests for the registration the broker
    /// already has, for an older one (a stale controller's), or with no broker
    /// epoch (-1, old request versions) are applied at once.
    #[test]
    fn a_request_for_a_registration_the_session_has_not_reached_waits() {
        assert!(registration_ahead(5, 17));
        assert!(!registration_ahead(17, 17));
        assert!(!registration_ahead(17, 5));
        assert!(!registration_ahead(17, -1));
    }

    #[tokio::test]
    async fn without_a_session_nothing_waits() {
        let dir = tempfile::tempdir().unwrap();
        let logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let rm = ReplicaManager::new(1, 1, Truncation::Current, logs, None);
        rm.await_registration(i64::MAX).await;
    }

    fn batch(n: usize) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from(format!("v{i}"))),
                headers: IndexMap::new(),
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
        buf.freeze()
    }

    fn manager(dir: &std::path::Path, min_isr: i32) -> ReplicaManager {
        let logs = LogManager::open(dir, LogConfig::default()).unwrap();
        ReplicaManager::new(1, min_isr, Truncation::Current, logs, None)
    }

    fn state(leader: i32, leader_epoch: i32, isr: Vec<i32>) -> LeaderAndIsrState {
        LeaderAndIsrState {
            controller_epoch: 1,
            leader,
            leader_epoch,
            isr,
            partition_epoch: 0,
            replicas: vec![1, 2],
        }
    }

    fn tp() -> TopicPartition {
        TopicPartition {
            topic: "t".into(),
            partition: 0,
        }
    }

    #[test]
    fn a_leader_appends_and_its_lone_isr_moves_the_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        assert_eq!(
            rm.append_as_leader(&tp(), batch(1), 1).unwrap_err(),
            ResponseError::UnknownTopicOrPartition
        );
        let d = rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1]))]);
        assert!(d[0].result.is_ok());
        let info = rm.append_as_leader(&tp(), batch(3), 1).unwrap();
        assert_eq!((info.first_offset, info.last_offset), (0, 2));
        assert_eq!(rm.high_watermark(&tp()), Some(3));
        let read = rm.read(&tp(), 0, 1 << 20, -1, -1).unwrap();
        assert_eq!(read.high_watermark, 3);
        assert!(!read.records.is_empty());
        assert_eq!(rm.list_offset(&tp(), -1, -1).unwrap(), (3, 0));
        assert_eq!(rm.list_offset(&tp(), -2, -1).unwrap(), (0, 0));
    }

    /// The controller drops follower 2 (its registration went) in a new epoch
    /// with the same leader. 2 had caught up before, but until it fetches in
    /// the new epoch the leader must not put it back (Kafka 2.x makeLeader
    /// resets lastCaughtUpTime; the ISR expands only on a fetch).
    #[test]
    fn a_follower_dropped_by_the_controller_rejoins_only_by_fetching_again() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        let lag = Duration::from_secs(60);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        rm.append_as_leader(&tp(), batch(1), 1).unwrap();
        // 2 fetches at the leader's end: caught up, HW 1.
        rm.read(&tp(), 1, 1 << 20, 2, 0).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(1));
        assert!(rm.pending_isr_changes(lag).is_empty());

        let mut shrunk = state(1, 1, vec![1]);
        shrunk.partition_epoch = 1;
        let d = rm.apply_leader_and_isr(vec![(tp(), shrunk)]);
        assert!(d[0].result.is_ok());
        assert!(
            rm.pending_isr_changes(lag).is_empty(),
            "a follower that has not fetched in epoch 1 is not proposed back"
        );

        // 2 fetches in epoch 1 at the leader's end: now it rejoins.
        rm.read(&tp(), 1, 1 << 20, 2, 1).unwrap();
        let changes = rm.pending_isr_changes(lag);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].isr, vec![1, 2]);
        assert_eq!(changes[0].leader_epoch, 1);
    }

    #[test]
    fn a_client_reads_only_below_the_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        // ISR {1, 2}: with no follower fetching, the HW stays at 0.
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        rm.append_as_leader(&tp(), batch(2), 1).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(0));
        assert!(
            rm.read(&tp(), 0, 1 << 20, -1, -1)
                .unwrap()
                .records
                .is_empty()
        );
        assert!(
            !rm.read(&tp(), 0, 1 << 20, 2, -1)
                .unwrap()
                .records
                .is_empty(),
            "a replica reads to the LEO"
        );
    }

    #[test]
    fn followers_refuse_produce_and_acks_all_needs_the_minimum_isr() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 2);
        rm.apply_leader_and_isr(vec![(tp(), state(2, 0, vec![1, 2]))]);
        assert_eq!(
            rm.append_as_leader(&tp(), batch(1), 1).unwrap_err(),
            ResponseError::NotLeaderOrFollower
        );
        rm.apply_leader_and_isr(vec![(tp(), state(1, 1, vec![1]))]);
        assert_eq!(
            rm.append_as_leader(&tp(), batch(1), -1).unwrap_err(),
            ResponseError::NotEnoughReplicas
        );
        assert!(
            rm.append_as_leader(&tp(), batch(1), 1).is_ok(),
            "acks=1 ignores min.insync.replicas"
        );
    }

    #[test]
    fn a_leader_and_isr_not_newer_than_the_current_epoch_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 3, vec![1]))]);
        for epoch in [2, 3] {
            let d = rm.apply_leader_and_isr(vec![(tp(), state(2, epoch, vec![2]))]);
            assert_eq!(
                d[0].result,
                Err(ResponseError::StaleControllerEpoch),
                "leader epoch {epoch}"
            );
        }
        let d = rm.apply_leader_and_isr(vec![(tp(), state(2, 4, vec![2]))]);
        assert!(d[0].result.is_ok());
    }

    #[test]
    fn controller_epochs_below_the_newest_seen_are_stale_only_with_fencing() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.observe_controller_epoch(5, true).unwrap();
        assert_eq!(
            rm.observe_controller_epoch(4, true),
            Err(ResponseError::StaleControllerEpoch)
        );
        assert!(
            rm.observe_controller_epoch(5, true).is_ok(),
            "the same epoch is not stale"
        );
        assert!(
            rm.observe_controller_epoch(4, false).is_ok(),
            "before KAFKA-532 nothing is checked"
        );
        assert_eq!(rm.controller_epoch(), 5);
    }

    #[test]
    fn only_current_records_the_leader_epoch_at_election() {
        for (truncation, expected) in [
            (Truncation::Current, vec![(0, 0)]),
            (Truncation::Kip279, vec![]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
            let rm = ReplicaManager::new(1, 1, truncation, logs, None);
            rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1]))]);
            let inner = rm.lock();
            let entries: Vec<(i32, i64)> = inner
                .logs
                .get(&tp())
                .unwrap()
                .leader_epoch_cache()
                .entries()
                .iter()
                .map(|e| (e.epoch, e.start_offset))
                .collect();
            assert_eq!(entries, expected, "{truncation:?}");
        }
    }

    #[test]
    fn a_follower_learns_the_high_watermark_one_fetch_late() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        rm.append_as_leader(&tp(), batch(3), -1).unwrap();
        // Follower 2 fetches from 0: the answer carries HW 0, and only then does
        // its position (0) count; the HW stays 0.
        assert_eq!(rm.read(&tp(), 0, 1 << 20, 2, 0).unwrap().high_watermark, 0);
        // It fetches again from 3: answered with HW 0 still — the HW moves to 3
        // only after this fetch's position is applied.
        assert_eq!(rm.read(&tp(), 3, 1 << 20, 2, 0).unwrap().high_watermark, 0);
        assert_eq!(rm.high_watermark(&tp()), Some(3));
        // The next fetch brings the follower the new HW.
        assert_eq!(rm.read(&tp(), 3, 1 << 20, 2, 0).unwrap().high_watermark, 3);
    }

    #[test]
    fn acks_all_completes_as_committed_or_not_enough_replicas_after_append() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 2);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        let first = rm.append_as_leader(&tp(), batch(2), -1).unwrap();
        assert_eq!(rm.ack_status(&tp(), &first), AckStatus::Pending);
        rm.read(&tp(), 2, 1 << 20, 2, 0).unwrap();
        assert_eq!(rm.ack_status(&tp(), &first), AckStatus::Committed);
        // The ISR shrinks to the leader after the next append: the HW passes it,
        // but with fewer in sync than min.insync.replicas.
        let second = rm.append_as_leader(&tp(), batch(1), -1).unwrap();
        let change = IsrChange {
            tp: tp(),
            leader_epoch: 0,
            controller_epoch: 1,
            expected_version: 1,
            isr: vec![1],
        };
        rm.isr_written(&change, 2);
        assert_eq!(
            rm.ack_status(&tp(), &second),
            AckStatus::NotEnoughReplicasAfterAppend
        );
        // Leadership moving away answers the waiter NOT_LEADER_OR_FOLLOWER.
        rm.apply_leader_and_isr(vec![(tp(), state(2, 1, vec![2]))]);
        assert_eq!(rm.ack_status(&tp(), &second), AckStatus::NotLeader);
    }

    #[test]
    fn a_follower_the_controller_dropped_rejoins_only_after_fetching_in_the_new_epoch() {
        // KIP-101's unclean-election case starts so: follower 2 is caught up
        // (both logs empty) and stops; the controller keeps leader 1 in epoch
        // 1 with ISR [1]. 2's last position (0) equals the HW, but it has not
        // fetched since: the leader must not take it back (Kafka's makeLeader
        // resets a non-ISR replica's caught-up time; expansion needs a fetch).
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        rm.read(&tp(), 0, 1 << 20, 2, 0).unwrap();
        let lag = Duration::from_secs(60);
        assert!(rm.pending_isr_changes(lag).is_empty(), "2 is in sync");
        rm.apply_leader_and_isr(vec![(tp(), state(1, 1, vec![1]))]);
        assert!(
            rm.pending_isr_changes(lag).is_empty(),
            "2 has not fetched in epoch 1"
        );
        // Its fetch in epoch 1 at the leader's end brings it back.
        rm.read(&tp(), 0, 1 << 20, 2, 1).unwrap();
        let changes = rm.pending_isr_changes(lag);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!((changes[0].leader_epoch, &changes[0].isr), (1, &vec![1, 2]));
    }

    #[test]
    fn a_lost_isr_compare_and_swap_carries_on_only_in_the_same_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 3, vec![1, 2]))]);
        let change = IsrChange {
            tp: tp(),
            leader_epoch: 3,
            controller_epoch: 1,
            expected_version: 1,
            isr: vec![1],
        };
        assert!(
            !rm.isr_conflict(&change, 2, 4, &[2], 5),
            "a newer epoch: wait"
        );
        assert!(rm.isr_conflict(&change, 1, 3, &[1], 5), "same epoch: adopt");
        let inner = rm.lock();
        let s = inner.partitions[&tp()].state.clone().unwrap();
        assert_eq!((s.isr, s.partition_epoch), (vec![1], 4));
    }

    #[test]
    fn the_debugging_replica_id_reads_a_follower_up_to_its_hw_and_lists_its_leo() {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = manager(da.path(), 1);
        let b = ReplicaManager::new(
            2,
            1,
            Truncation::Current,
            LogManager::open(db.path(), LogConfig::default()).unwrap(),
            None,
        );
        let debug = DEBUGGING_REPLICA_ID;
        // Follower B with a log but no role yet, then no log at all.
        b.apply_leader_and_isr(vec![(tp(), state(2, 0, vec![2]))]);
        b.append_as_leader(&tp(), batch(1), 1).unwrap();
        let b = {
            drop(b);
            ReplicaManager::new(
                2,
                1,
                Truncation::Current,
                LogManager::open(db.path(), LogConfig::default()).unwrap(),
                None,
            )
        };
        assert_eq!(
            b.read(&tp(), 0, 1 << 20, debug, -1).unwrap_err(),
            ResponseError::NotLeaderOrFollower,
            "a log without a role since the restart"
        );
        let other = TopicPartition {
            topic: "other".into(),
            partition: 0,
        };
        assert_eq!(
            b.read(&other, 0, 1 << 20, debug, -1).unwrap_err(),
            ResponseError::UnknownTopicOrPartition
        );
        assert_eq!(
            b.list_offset(&other, -1, debug).unwrap_err(),
            ResponseError::UnknownTopicOrPartition
        );

        // Leader A (lone ISR) holds [0, 5) in epoch 1, HW 5.
        a.apply_leader_and_isr(vec![(tp(), state(1, 1, vec![1]))]);
        a.append_as_leader(&tp(), batch(2), 1).unwrap();
        a.append_as_leader(&tp(), batch(3), 1).unwrap();
        // B follows A in epoch 1: truncates its stray record, fetches [0, 5),
        // and is told HW 2 (as if the leader's HW were still there).
        b.apply_leader_and_isr(vec![(tp(), state(1, 1, vec![1, 2]))]);
        let mut progress = b.truncation_start(&tp(), 1).unwrap();
        while let TruncationProgress::Ask(epoch) = progress {
            let answer = a.end_offset_for_epoch(&tp(), 1, epoch).unwrap();
            progress = b.apply_truncation_answer(&tp(), 1, answer).unwrap();
        }
        let offset = b.follower_fetch_offset(&tp(), 1).unwrap();
        assert_eq!(offset, 0);
        let read = a.read(&tp(), offset, 1 << 20, 2, 1).unwrap();
        b.append_as_follower(&tp(), 1, read.records, 2).unwrap();
        assert_eq!(b.offsets(&tp()), Some((5, 2)));

        // A client is refused by the follower, the debugging id is served:
        // records below B's HW only, with B's HW.
        assert_eq!(
            b.read(&tp(), 0, 1 << 20, -1, -1).unwrap_err(),
            ResponseError::NotLeaderOrFollower
        );
        assert_eq!(
            b.list_offset(&tp(), -1, -1).unwrap_err(),
            ResponseError::NotLeaderOrFollower
        );
        let r = b.read(&tp(), 0, 1 << 20, debug, -1).unwrap();
        assert_eq!((r.high_watermark, r.log_end_offset), (2, 5));
        let offsets: Vec<i64> = Batches::new(&r.records)
            .map(|batch| batch.unwrap().header.last_offset())
            .collect();
        // (`batch` encodes every record as a batch of its own.)
        assert_eq!(offsets, vec![0, 1], "only the batches below the HW");
        assert!(
            b.read(&tp(), 5, 1, debug, -1).unwrap().records.is_empty(),
            "at the LEO: nothing, and no error"
        );
        assert_eq!(b.list_offset(&tp(), -1, debug).unwrap(), (5, 1), "the LEO");
        assert_eq!(b.list_offset(&tp(), -2, debug).unwrap(), (0, 1));
        // The current leader epoch is still checked when given.
        assert!(b.read(&tp(), 0, 1 << 20, debug, 1).is_ok());
        assert_eq!(
            b.read(&tp(), 0, 1 << 20, debug, 0).unwrap_err(),
            ResponseError::FencedLeaderEpoch
        );
        assert_eq!(
            b.read(&tp(), 0, 1 << 20, debug, 2).unwrap_err(),
            ResponseError::UnknownLeaderEpoch
        );

        // On the leader the debugging id is a client whose latest is the LEO,
        // and it is not taken for a follower's position.
        a.apply_leader_and_isr(vec![(tp(), state(1, 2, vec![1, 2]))]);
        a.append_as_leader(&tp(), batch(1), 1).unwrap();
        assert_eq!(a.offsets(&tp()), Some((6, 5)));
        assert_eq!(a.list_offset(&tp(), -1, debug).unwrap(), (6, 2));
        assert_eq!(a.list_offset(&tp(), -1, -1).unwrap(), (5, 2));
        let r = a.read(&tp(), 5, 1 << 20, debug, -1).unwrap();
        assert!(r.records.is_empty(), "nothing at or above the HW");
        assert_eq!(r.high_watermark, 5);
        assert_eq!(a.offsets(&tp()), Some((6, 5)), "the HW did not move");
    }

    fn epochs(rm: &ReplicaManager) -> Vec<(i32, i64)> {
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

    #[test]
    fn kafka_6361_a_follower_drops_the_epoch_the_leader_never_had_and_then_replicates() {
        // A (node 1) led epoch 1 for [0, 21), then epoch 3 from 21. B (node 2)
        // had only [0, 11) of epoch 1, then led epoch 2 and wrote [11, 16).
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = manager(da.path(), 1);
        let b = ReplicaManager::new(
            2,
            1,
            Truncation::Current,
            LogManager::open(db.path(), LogConfig::default()).unwrap(),
            None,
        );
        a.apply_leader_and_isr(vec![(tp(), state(1, 1, vec![1]))]);
        a.append_as_leader(&tp(), batch(11), 1).unwrap();
        a.append_as_leader(&tp(), batch(10), 1).unwrap();
        a.apply_leader_and_isr(vec![(tp(), state(1, 3, vec![1]))]);
        a.append_as_leader(&tp(), batch(10), 1).unwrap();
        b.apply_leader_and_isr(vec![(tp(), state(2, 1, vec![2]))]);
        b.append_as_leader(&tp(), batch(11), 1).unwrap();
        b.apply_leader_and_isr(vec![(tp(), state(2, 2, vec![2]))]);
        b.append_as_leader(&tp(), batch(5), 1).unwrap();
        assert_eq!(epochs(&a), vec![(1, 0), (3, 21)]);
        assert_eq!(epochs(&b), vec![(1, 0), (2, 11)]);

        // B becomes A's follower in epoch 3 and truncates first (KIP-279).
        let d = b.apply_leader_and_isr(vec![(tp(), state(1, 3, vec![1, 2]))]);
        assert!(matches!(
            d[0].result,
            Ok(Role::Follower {
                leader: 1,
                leader_epoch: 3,
                truncate: true
            })
        ));
        let TruncationProgress::Ask(asked) = b.truncation_start(&tp(), 3).unwrap() else {
            panic!("B has epochs: it asks");
        };
        assert_eq!(asked, 2);
        let answer = a.end_offset_for_epoch(&tp(), 3, asked).unwrap();
        assert_eq!((answer.leader_epoch, answer.end_offset), (1, 21));
        assert_eq!(
            b.apply_truncation_answer(&tp(), 3, answer).unwrap(),
            TruncationProgress::Done
        );
        assert_eq!(b.offsets(&tp()).unwrap().0, 11, "B keeps [0, 11) only");

        // Then it fetches the rest from A and holds A's log and epochs.
        let offset = b.follower_fetch_offset(&tp(), 3).unwrap();
        let read = a.read(&tp(), offset, 1 << 20, 2, 3).unwrap();
        b.append_as_follower(&tp(), 3, read.records, read.high_watermark)
            .unwrap();
        assert_eq!(b.offsets(&tp()).unwrap().0, 31);
        assert_eq!(epochs(&b), epochs(&a));
        // A follower in an older epoch is fenced at the leader (KIP-320).
        assert_eq!(
            a.read(&tp(), 0, 1 << 20, 2, 2).unwrap_err(),
            ResponseError::FencedLeaderEpoch
        );
    }
}
