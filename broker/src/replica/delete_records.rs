//! DeleteRecords (KIP-107) on a partition's leader: the log start offset
//! moved up, and the wait until the replicas hold it too.
//!
//! The leader moves its own log start at once (to the request's offset, or
//! the high watermark for -1; past the high watermark is
//! OFFSET_OUT_OF_RANGE, KIP-107). Followers learn it from the
//! `log_start_offset` of the leader's fetch answers and move theirs
//! (`follower.rs`), and report theirs back in their next fetch's
//! `log_start_offset` (Fetch v5+). The answer waits until the low watermark
//! reaches the requested offset, or the request's timeout passes
//! (REQUEST_TIMED_OUT), as Kafka's `DelayedDeleteRecords` does.
//!
//! The low watermark here is the minimum log start of the leader and its
//! ISR members. Kafka's (`Partition.lowWatermarkIfLeader`) is that of every
//! assigned replica on a live broker, ISR or not; this broker has no view of
//! broker liveness in the replica layer, and a replica outside the ISR that
//! fetches below the new start is answered OFFSET_OUT_OF_RANGE and restarts
//! its log at the leader's start (`fetcher.rs`), so what the ISR holds is
//! what every replica will hold.

use std::time::Duration;

use kafka_protocol::ResponseError;

use super::manager::{ReplicaManager, storage_error_code};
use super::store::TopicPartition;

/// How often a waiting DeleteRecords looks again without being woken (a
/// leadership lost by time, a lease, wakes nobody).
const RECHECK: Duration = Duration::from_millis(100);

impl ReplicaManager {
    /// Moves the log start of a partition this broker leads to `offset`, or
    /// to the high watermark for -1, and returns the offset it moved to
    /// (what the low watermark must reach before the request is answered).
    /// An offset at or below the current start changes nothing and is no
    /// error (Kafka's `maybeIncrementLogStartOffset`).
    pub fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64, ResponseError> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        self.led(&inner.partitions, &inner.logs, tp)?;
        let log = inner
            .logs
            .get_mut(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let high_watermark = log.high_watermark();
        // KIP-107: -1 means the high watermark; any other negative offset,
        // or one past the high watermark, is OFFSET_OUT_OF_RANGE.
        let target = if offset == -1 { high_watermark } else { offset };
        if target < 0 || target > high_watermark {
            return Err(ResponseError::OffsetOutOfRange);
        }
        log.increment_log_start_offset(target)
            .map_err(|e| storage_error_code(&e))?;
        drop(guard);
        // Followers' fetches waiting at this leader carry the new start.
        self.appended.notify_waiters();
        Ok(target)
    }

    /// The low watermark of a partition this broker leads: the smallest log
    /// start offset of the leader and its ISR members; -1 while an ISR
    /// member has not reported one in this leadership.
    pub fn low_watermark(&self, tp: &TopicPartition) -> Result<i64, ResponseError> {
        let inner = self.lock();
        let partition = self.led(&inner.partitions, &inner.logs, tp)?;
        let log = inner
            .logs
            .get(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let isr = partition.state.as_ref().map_or(&[][..], |s| &s.isr[..]);
        Ok(isr
            .iter()
            .filter(|id| **id != self.node_id)
            .map(|id| {
                partition
                    .followers
                    .get(id)
                    .map_or(-1, |f| f.log_start_offset)
            })
            .fold(log.log_start_offset(), i64::min))
    }

    /// Waits until the low watermark reaches `target` and returns it;
    /// REQUEST_TIMED_OUT when `deadline` passes first, and the leader's
    /// error when it stops leading.
    pub async fn await_low_watermark(
        &self,
        tp: &TopicPartition,
        target: i64,
        deadline: tokio::time::Instant,
    ) -> Result<i64, ResponseError> {
        loop {
            let notified = self.appended().notified();
            let low_watermark = self.low_watermark(tp)?;
            if low_watermark >= target {
                return Ok(low_watermark);
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(RECHECK) => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(ResponseError::RequestTimedOut);
                }
            }
        }
    }

    /// A fetch from `replica` reported these log start offsets
    /// (FetchPartition's `log_start_offset`, Fetch v5+): recorded under one
    /// hold of the lock; a move wakes the DeleteRecords waiting on it.
    pub fn note_follower_log_starts(
        &self,
        partitions: impl Iterator<Item = (TopicPartition, i64)>,
        replica: i32,
    ) {
        let mut inner = self.lock();
        let mut moved = false;
        for (tp, log_start_offset) in partitions {
            if let Some(f) = inner
                .partitions
                .get_mut(&tp)
                .and_then(|p| p.followers.get_mut(&replica))
                && f.log_start_offset != log_start_offset
            {
                f.log_start_offset = log_start_offset;
                moved = true;
            }
        }
        drop(inner);
        if moved {
            self.appended.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::replica::test_support::{batch, manager, manager_on, state, tp};

    #[tokio::test]
    async fn the_answer_waits_for_the_isr_members_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        rm.append_as_leader(&tp(), batch(5), -1).unwrap();
        // Nothing below the HW yet (follower 2 has not fetched).
        assert_eq!(
            rm.delete_records(&tp(), 1),
            Err(ResponseError::OffsetOutOfRange)
        );
        rm.read(&tp(), 5, 1 << 20, 2, 0).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(5));
        assert_eq!(
            rm.delete_records(&tp(), 6),
            Err(ResponseError::OffsetOutOfRange)
        );
        assert_eq!(
            rm.delete_records(&tp(), -2),
            Err(ResponseError::OffsetOutOfRange)
        );
        assert_eq!(rm.delete_records(&tp(), 3), Ok(3));
        assert_eq!(rm.list_offset(&tp(), -2, -1, false).unwrap(), (3, 0));
        assert_eq!(
            rm.read(&tp(), 2, 1 << 20, -1, -1).unwrap_err(),
            ResponseError::OffsetOutOfRange
        );
        // The follower has reported no start: the answer times out.
        let soon = tokio::time::Instant::now() + Duration::from_millis(50);
        assert_eq!(
            rm.await_low_watermark(&tp(), 3, soon).await,
            Err(ResponseError::RequestTimedOut)
        );
        rm.note_follower_log_starts([(tp(), 3)].into_iter(), 2);
        let later = tokio::time::Instant::now() + Duration::from_secs(5);
        assert_eq!(rm.await_low_watermark(&tp(), 3, later).await, Ok(3));
        // -1 is the high watermark.
        assert_eq!(rm.delete_records(&tp(), -1), Ok(5));
        assert_eq!(rm.low_watermark(&tp()), Ok(3));
    }

    #[test]
    fn a_follower_takes_the_leaders_start_up_to_its_own_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let follower = manager_on(2, dir.path(), crate::config::Truncation::Current);
        follower.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        follower
            .append_as_follower_from(&tp(), 0, batch(4), 2, 3)
            .unwrap();
        assert_eq!(follower.follower_log_start_offset(&tp(), 0), Ok(2));
        follower
            .append_as_follower_from(&tp(), 0, Bytes::new(), 4, 3)
            .unwrap();
        assert_eq!(follower.follower_log_start_offset(&tp(), 0), Ok(3));
        // Not a leader: DeleteRecords is refused.
        assert_eq!(
            follower.delete_records(&tp(), 1),
            Err(ResponseError::NotLeaderOrFollower)
        );
    }
}
