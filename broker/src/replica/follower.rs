//! The follower's side of a partition: the log end it fetches from, appending
//! what the leader sent (taking the leader's high watermark, capped at its own
//! log end), and cutting its log before it fetches, round by round, as
//! `--truncation` says (the rules themselves are in `truncation.rs`; the fetcher
//! drives the rounds and carries the questions to the leader).
//!
//! Every call names the leader epoch the caller follows in, so a fetcher left
//! over from an earlier LeaderAndIsr can change nothing.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::manager::{Inner, ReplicaManager, storage_error_code};
use super::store::{EpochEndOffset, PartitionLog, StorageError, TopicPartition};
use super::truncation::{self, OutOfRangeReset, Start, Step};
use crate::config::Truncation;
use crate::failpoints::{self, Failpoint};

/// What a follower does after applying one OffsetsForLeaderEpoch answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncationProgress {
    Done,
    Ask(i32),
}

/// A follower-side failure: the role changed under us, or storage refused.
#[derive(Debug, thiserror::Error)]
pub enum StorageOrRole {
    #[error("no longer following in this leader epoch ({0:?})")]
    Role(ResponseError),
    #[error(transparent)]
    Storage(StorageError),
}

impl ReplicaManager {
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
        self.append_as_follower_from(tp, leader_epoch, records, leader_high_watermark, -1)
    }

    /// [`Self::append_as_follower`], then the leader's log start offset
    /// taken, up to our own high watermark (DeleteRecords, KIP-107: Kafka's
    /// `ReplicaFetcherThread.processPartitionData` moves the follower's log
    /// start to the leader's; a follower's start never passes its HW, as a
    /// leader's never does).
    pub fn append_as_follower_from(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
        records: Bytes,
        leader_high_watermark: i64,
        leader_log_start_offset: i64,
    ) -> Result<i64, StorageOrRole> {
        let mut inner = self.lock();
        let log = self
            .followed(&mut inner, tp, leader_epoch)
            .map_err(StorageOrRole::Role)?;
        log.set_segment_bytes(self.configs.segment_bytes(&tp.topic));
        if truncation::appends_unaligned(self.truncation) {
            log.append_as_follower_unaligned(records)
        } else {
            log.append_as_follower(records)
        }
        .map_err(StorageOrRole::Storage)?;
        log.set_high_watermark(leader_high_watermark);
        let start = leader_log_start_offset.min(log.high_watermark());
        log.increment_log_start_offset(start)
            .map_err(StorageOrRole::Storage)?;
        Ok(log.log_end_offset())
    }

    /// A follower's log start offset, which its fetches report (KIP-107).
    pub fn follower_log_start_offset(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
    ) -> Result<i64, ResponseError> {
        let mut inner = self.lock();
        Ok(self
            .followed(&mut inner, tp, leader_epoch)?
            .log_start_offset())
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

    /// Kafka 0.10's answer to OFFSET_OUT_OF_RANGE once the leader's log end (and,
    /// when needed, its start) are known: cut to a shorter leader's end, or
    /// restart the log empty at the leader's start
    /// (`ReplicaFetcherThread.handleOffsetOutOfRange`, 0.10.x, which calls
    /// `LogManager.truncateTo` or `truncateFullyAndStartAt`).
    pub fn reset_after_out_of_range(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
        reset: OutOfRangeReset,
        leader_log_start_offset: i64,
    ) -> Result<(), StorageOrRole> {
        let mut inner = self.lock();
        let log = self
            .followed(&mut inner, tp, leader_epoch)
            .map_err(StorageOrRole::Role)?;
        match reset {
            OutOfRangeReset::TruncateTo(offset) => truncate_logged(tp, log, offset),
            OutOfRangeReset::StartAtLeaderStart => {
                let before = log.log_end_offset();
                log.truncate_fully_and_start_at(leader_log_start_offset)
                    .inspect(|()| {
                        tracing::info!(
                            topic = %tp.topic,
                            partition = tp.partition,
                            from = before,
                            to = leader_log_start_offset,
                            "follower restarted its log at the leader's start offset"
                        )
                    })
            }
        }
        .map_err(StorageOrRole::Storage)
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
    use super::*;
    use crate::replica::leader_and_isr::Role;
    use crate::replica::manager::DEBUGGING_REPLICA_ID;
    use crate::replica::store::record_batch::Batches;
    use crate::replica::test_support::{batch, epochs, manager, manager_on, state, tp};

    #[test]
    fn kafka_6361_a_follower_drops_the_epoch_the_leader_never_had_and_then_replicates() {
        // A (node 1) led epoch 1 for [0, 21), then epoch 3 from 21. B (node 2)
        // had only [0, 11) of epoch 1, then led epoch 2 and wrote [11, 16).
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = manager(da.path(), 1);
        let b = manager_on(2, db.path(), Truncation::Current);
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

    #[test]
    fn the_debugging_replica_id_reads_a_follower_up_to_its_hw_and_lists_its_leo() {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = manager(da.path(), 1);
        let b = manager_on(2, db.path(), Truncation::Current);
        let debug = DEBUGGING_REPLICA_ID;
        // Follower B with a log but no role yet, then no log at all.
        b.apply_leader_and_isr(vec![(tp(), state(2, 0, vec![2]))]);
        b.append_as_leader(&tp(), batch(1), 1).unwrap();
        let b = {
            drop(b);
            manager_on(2, db.path(), Truncation::Current)
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
            b.list_offset(&other, -1, debug, false).unwrap_err(),
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
            b.list_offset(&tp(), -1, -1, false).unwrap_err(),
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
        assert_eq!(
            b.list_offset(&tp(), -1, debug, false).unwrap(),
            (5, 1),
            "the LEO"
        );
        assert_eq!(b.list_offset(&tp(), -2, debug, false).unwrap(), (0, 1));
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
        assert_eq!(a.list_offset(&tp(), -1, debug, false).unwrap(), (6, 2));
        assert_eq!(a.list_offset(&tp(), -1, -1, false).unwrap(), (5, 2));
        let r = a.read(&tp(), 5, 1 << 20, debug, -1).unwrap();
        assert!(r.records.is_empty(), "nothing at or above the HW");
        assert_eq!(r.high_watermark, 5);
        assert_eq!(a.offsets(&tp()), Some((6, 5)), "the HW did not move");
    }
}
