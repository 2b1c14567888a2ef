//! The leader's side of a partition: appending a producer's batches, where an
//! acks=all append stands, reads for clients and followers (which is how the
//! leader learns each follower's position), ListOffsets, OffsetsForLeaderEpoch
//! answers, and moving the high watermark.
//!
//! The high watermark follows Kafka ≤ 2.x: a leader reads the log and its high
//! watermark for a follower's fetch *before* applying that fetch's position, so a
//! follower learns a new HW one fetch later. A leader acts only while its etcd
//! session is live and still the one it became leader under; past that it
//! answers as a non-leader and acknowledges nothing.

use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::manager::{DEBUGGING_REPLICA_ID, ReplicaManager, storage_error_code};
use super::partition::Partition;
use super::store::partition_log::AppendOrigin;
use super::store::partition_log::TimestampAndOffset;
use super::store::record_batch::{Batches, RecordRules};
use super::store::{EpochEndOffset, LogAppendInfo, PartitionLog, TopicPartition};
use super::truncation;

/// A replica id of -1 or below is a client (Kafka's consumer replica id).
pub fn is_client(replica_id: i32) -> bool {
    replica_id < 0
}

/// What a read returned for one partition.
#[derive(Debug, Clone)]
pub struct ReadResult {
    pub high_watermark: i64,
    /// The last stable offset (KIP-98): what read_committed reads up to.
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub records: Bytes,
    /// For a read_committed read, the aborted transactions overlapping it:
    /// (producer id, first offset), for the consumer to drop.
    pub aborted: Vec<(i64, i64)>,
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

impl AckStatus {
    /// The error code an acks=all append that settled so is answered with
    /// (0 committed); `None` while pending. A fenced leader may not say
    /// "committed" and cannot say "not written" (the followers may have it):
    /// the outcome is unknown to the client, as after a timeout.
    pub fn code(self) -> Option<i16> {
        match self {
            AckStatus::Pending => None,
            AckStatus::Committed => Some(0),
            AckStatus::NotEnoughReplicasAfterAppend => {
                Some(ResponseError::NotEnoughReplicasAfterAppend.code())
            }
            AckStatus::NotLeader => Some(ResponseError::NotLeaderOrFollower.code()),
            AckStatus::Fenced => Some(ResponseError::RequestTimedOut.code()),
        }
    }
}

/// An acks=all append to wait on.
#[derive(Debug, Clone, Copy)]
pub struct AppendTicket {
    pub first_offset: i64,
    pub last_offset: i64,
    leadership: u64,
}

impl AppendTicket {
    /// An append of `first_offset..=last_offset` by the leadership
    /// `partition` is in now.
    pub(super) fn of(partition: &Partition, first_offset: i64, last_offset: i64) -> Self {
        AppendTicket {
            first_offset,
            last_offset,
            leadership: partition.leadership,
        }
    }
}

/// ListOffsets' timestamp for the record with the largest timestamp (KIP-734).
pub const MAX_TIMESTAMP: i64 = -3;

/// How much one partition's read may return: at most `max_bytes` of whole
/// batches, except that with `min_one_batch` the first batch comes whole
/// whatever its size (Kafka's `minOneMessage`, KIP-74).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadBudget {
    pub max_bytes: usize,
    pub min_one_batch: bool,
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

/// Move the leader's HW to the minimum LEO of the ISR if that is higher. A
/// follower that has not fetched in this epoch (-1) holds it back.
pub(super) fn maybe_advance_hw(
    node_id: i32,
    partition: &Partition,
    log: &mut PartitionLog,
) -> bool {
    let Some(state) = &partition.state else {
        return false;
    };
    let mut min = log.log_end_offset();
    // The maximal ISR: the ISR, plus any replica an expansion in flight adds.
    let joining = partition
        .pending_expansion
        .iter()
        .filter(|(epoch, _)| *epoch == state.leader_epoch)
        .flat_map(|(_, isr)| isr.iter())
        .filter(|id| !state.isr.contains(id));
    for id in state.isr.iter().chain(joining).filter(|id| **id != node_id) {
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

impl ReplicaManager {
    /// Append a producer's batches as leader, stamping the leader epoch.
    pub fn append_as_leader(
        &self,
        tp: &TopicPartition,
        records: Bytes,
        acks: i16,
    ) -> Result<AppendTicket, ResponseError> {
        self.append_from(tp, records, acks, AppendOrigin::Client)
    }

    /// [`Self::append_as_leader`] of a coordinator's own batches to its
    /// internal topic (epochs checked, not sequences: `AppendOrigin`).
    pub fn append_as_coordinator(
        &self,
        tp: &TopicPartition,
        records: Bytes,
        acks: i16,
    ) -> Result<AppendTicket, ResponseError> {
        self.append_from(tp, records, acks, AppendOrigin::Coordinator)
    }

    fn append_from(
        &self,
        tp: &TopicPartition,
        records: Bytes,
        acks: i16,
        origin: AppendOrigin,
    ) -> Result<AppendTicket, ResponseError> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let partition = self.led(&inner.partitions, &inner.logs, tp)?;
        let state = partition.state.clone().expect("a led partition has state");
        // Kafka checks min.insync.replicas before the append for acks=all only.
        let min_insync_replicas = self.configs.min_insync_replicas(&tp.topic);
        if acks == -1 && (state.isr.len() as i32) < min_insync_replicas {
            return Err(ResponseError::NotEnoughReplicas);
        }
        let log = inner
            .logs
            .get_or_create(tp)
            .map_err(|e| storage_error_code(&e))?;
        log.set_segment_bytes(self.configs.segment_bytes(&tp.topic));
        let rules = RecordRules {
            key_required: self.configs.compacted(&tp.topic),
            max_batch_bytes: self.configs.max_message_bytes(&tp.topic),
        };
        let info: LogAppendInfo = log
            .append_as_leader_from(records, state.leader_epoch, origin, &rules)
            .map_err(|e| {
                tracing::warn!(%e, topic = %tp.topic, partition = tp.partition, "append rejected");
                storage_error_code(&e)
            })?;
        if info.duplicate {
            // KIP-98: the producer retried a batch this log already holds (its
            // first answer was lost); it gets the original offsets, and an
            // acks=all wait is on the original batch.
            tracing::info!(
                topic = %tp.topic,
                partition = tp.partition,
                first_offset = info.first_offset,
                last_offset = info.last_offset,
                "duplicate batch from an idempotent producer; answered with its original offsets"
            );
        }
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
        // The slip a test arms on purpose: the append alone settles it.
        let appended =
            crate::failpoints::hit_or_return(crate::failpoints::Failpoint::LeaderAcksOnAppend);
        if hw <= ticket.last_offset && !appended {
            return AckStatus::Pending;
        }
        let isr = partition.state.as_ref().map_or(0, |s| s.isr.len()) as i32;
        if isr < self.configs.min_insync_replicas(&tp.topic) {
            AckStatus::NotEnoughReplicasAfterAppend
        } else {
            AckStatus::Committed
        }
    }

    /// Awaits one append's acknowledgement (an acks=all produce's wait, for
    /// one batch): `None` when `deadline` passes first. A fenced leader is
    /// looked at again every `recheck`, since fencing is a matter of time.
    pub async fn await_ack(
        &self,
        tp: &TopicPartition,
        ticket: &AppendTicket,
        deadline: tokio::time::Instant,
        recheck: std::time::Duration,
    ) -> Option<AckStatus> {
        loop {
            let notified = self.appended().notified();
            match self.ack_status(tp, ticket) {
                AckStatus::Pending => {}
                settled => return Some(settled),
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(recheck) => {}
                _ = tokio::time::sleep_until(deadline) => return None,
            }
        }
    }

    /// Read this leader's own log from `offset` to its log end, with no
    /// follower's fetch recorded: a group coordinator loading its offsets
    /// partition after its election, as Kafka's GroupMetadataManager reads
    /// the log to its end. The answer carries the leader epoch it was read
    /// in, so a load can tell it was overtaken by another election.
    pub fn read_own_log(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
    ) -> Result<(ReadResult, i32), ResponseError> {
        let guard = self.lock();
        let partition = self.led(&guard.partitions, &guard.logs, tp)?;
        let leader_epoch = partition.leader_epoch();
        let log = guard
            .logs
            .get(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let records = log
            .read(offset, max_bytes)
            .map_err(|e| storage_error_code(&e))?;
        Ok((
            ReadResult {
                high_watermark: log.high_watermark(),
                last_stable_offset: log.last_stable_offset(),
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
                records,
                aborted: vec![],
            },
            leader_epoch,
        ))
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
        self.read_isolated(
            tp,
            offset,
            max_bytes,
            replica_id,
            current_leader_epoch,
            false,
        )
    }

    /// [`Self::read`] at an isolation level: a read_committed client
    /// (`committed`, Fetch's isolation_level 1) reads up to the last stable
    /// offset instead of the high watermark and is told the aborted
    /// transactions there (KIP-98).
    pub fn read_isolated(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
        replica_id: i32,
        current_leader_epoch: i32,
        committed: bool,
    ) -> Result<ReadResult, ResponseError> {
        let budget = ReadBudget {
            max_bytes,
            min_one_batch: true,
        };
        self.read_within(
            tp,
            offset,
            budget,
            replica_id,
            current_leader_epoch,
            committed,
        )
    }

    /// [`Self::read_isolated`] within `budget`: Fetch reads its first
    /// non-empty partition with `min_one_batch` and the rest without
    /// (KIP-74, Kafka's `ReplicaManager.readFromLocalLog`).
    pub fn read_within(
        &self,
        tp: &TopicPartition,
        offset: i64,
        budget: ReadBudget,
        replica_id: i32,
        current_leader_epoch: i32,
        committed: bool,
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
        let lso = log.last_stable_offset();
        let leo = log.log_end_offset();
        let committed = committed && is_client(replica_id);
        let bound = match (is_client(replica_id), committed) {
            (false, _) => leo,
            // The slip the failpoint puts in: a client read to the log end.
            (true, false)
                if crate::failpoints::hit_or_return(
                    crate::failpoints::Failpoint::LeaderReadsPastHighWatermark,
                ) =>
            {
                leo
            }
            (true, false) => hw,
            (true, true) => lso,
        };
        let records = if offset >= bound && offset <= leo {
            Bytes::new()
        } else {
            let raw = log
                .read_batches(offset, budget.max_bytes, budget.min_one_batch)
                .map_err(|e| storage_error_code(&e))?;
            batches_below(raw, bound)
        };
        // The slip the failpoint puts in: the aborted transactions unlisted.
        let aborted = if committed
            && !records.is_empty()
            && !crate::failpoints::hit_or_return(
                crate::failpoints::Failpoint::LeaderOmitsAbortedTransactions,
            ) {
            log.aborted_txns(offset, bound)
                .map_err(|e| storage_error_code(&e))?
                .into_iter()
                .map(|t| (t.producer_id, t.first_offset))
                .collect()
        } else {
            vec![]
        };
        let result = ReadResult {
            high_watermark: hw,
            last_stable_offset: lso,
            log_start_offset: log.log_start_offset(),
            log_end_offset: leo,
            records,
            aborted,
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

    /// ListOffsets: -2 earliest, -1 latest (for clients the HW, or the last
    /// stable offset for read_committed ones, `committed`, as Kafka answers
    /// each isolation level). Returns (offset, leader epoch). The debugging
    /// replica id asks any replica, leader or follower, and latest is that
    /// replica's log end offset (Kafka applies no isolation level to it).
    pub fn list_offset(
        &self,
        tp: &TopicPartition,
        timestamp: i64,
        replica_id: i32,
        committed: bool,
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
                let latest = if committed {
                    log.last_stable_offset()
                } else {
                    log.high_watermark()
                };
                Ok((latest, epoch))
            }
            -1 => Ok((log.log_end_offset(), epoch)),
            // By timestamp: `offset_for_timestamp`.
            _ => Err(ResponseError::InvalidRequest),
        }
    }

    /// ListOffsets by timestamp: for `timestamp` ≥ 0 the first record whose
    /// timestamp is at or after it, for -3 (KIP-734) the record with the
    /// largest timestamp; other negatives are INVALID_REQUEST. As Kafka's
    /// `Partition.fetchOffsetForTimestamp`, a record at or past what the
    /// asker may read (the HW for a client, the last stable offset for a
    /// read_committed one, the log end for a replica or the debugging id)
    /// is no answer: `None`, which ListOffsets sends as offset and
    /// timestamp -1.
    pub fn offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        timestamp: i64,
        replica_id: i32,
        committed: bool,
    ) -> Result<Option<TimestampAndOffset>, ResponseError> {
        let inner = self.lock();
        self.readable(&inner.partitions, &inner.logs, tp, replica_id)?;
        let log = inner
            .logs
            .get(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let found = match timestamp {
            MAX_TIMESTAMP => log.max_timestamp_record(),
            t if t >= 0 => log.offset_for_timestamp(t),
            _ => return Err(ResponseError::InvalidRequest),
        }
        .map_err(|e| storage_error_code(&e))?;
        let fetchable = match (
            is_client(replica_id) && replica_id != DEBUGGING_REPLICA_ID,
            committed,
        ) {
            (false, _) => log.log_end_offset(),
            (true, false) => log.high_watermark(),
            (true, true) => log.last_stable_offset(),
        };
        Ok(found.filter(|f| f.offset < fetchable))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::test_support::{batch, manager, state, tp};

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
        assert_eq!(rm.list_offset(&tp(), -1, -1, false).unwrap(), (3, 0));
        assert_eq!(rm.list_offset(&tp(), -2, -1, false).unwrap(), (0, 0));
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
}
