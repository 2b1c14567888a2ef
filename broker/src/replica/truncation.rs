//! What `--truncation` decides, in one place: when a new leader records its
//! epoch, how the leader answers OffsetsForLeaderEpoch, and how a new follower
//! cuts its log before it fetches (broker/README.md, "Truncation settings").
//!
//! Everything here is a pure function of the setting and a replica's epoch cache,
//! log end and high watermark, so each release's rule can be pinned by unit tests
//! without a cluster. The replica manager and the fetcher call these and never
//! branch on the setting themselves.

use crate::config::Truncation;
use crate::storage::{EpochAnswerRule, EpochEndOffset, EpochEntry};

/// A follower's truncation is an iteration (KIP-279); this bounds it. Each round
/// drops at least one epoch from the follower's cache, so any real log finishes
/// far below it.
pub const MAX_TRUNCATION_ROUNDS: usize = 1000;

/// KAFKA-7415 (2.1): a new leader records `(epoch, LEO)` the moment it is
/// elected; earlier releases recorded it with the epoch's first append.
pub fn records_epoch_at_election(setting: Truncation) -> bool {
    setting == Truncation::Current
}

/// How this broker, as leader, answers OffsetsForLeaderEpoch. None under
/// `high-watermark`: Kafka ≤ 0.10 had no such request.
pub fn answer_rule(setting: Truncation) -> Option<EpochAnswerRule> {
    match setting {
        Truncation::HighWatermark => None,
        Truncation::Kip101 => Some(EpochAnswerRule::Kip101),
        Truncation::Kip279 => Some(EpochAnswerRule::Kip279),
        Truncation::Current => Some(EpochAnswerRule::Current),
    }
}

/// The OffsetsForLeaderEpoch version a follower sends: v0 answers one offset
/// (KIP-101); v1 added the epoch of the answer (KIP-279); v2 the current leader
/// epoch for fencing; v3 the replica id.
pub fn offsets_for_leader_epoch_version(setting: Truncation) -> i16 {
    match setting {
        Truncation::HighWatermark | Truncation::Kip101 => 0,
        Truncation::Kip279 | Truncation::Current => 3,
    }
}

/// Does a follower truncate on a LeaderAndIsr that keeps the same leader?
/// KAFKA-7164: before 2.1 it did not, so a follower that missed an epoch kept a
/// divergent tail.
pub fn truncates_when_leader_unchanged(setting: Truncation) -> bool {
    setting == Truncation::Current
}

/// Does a follower take fetched batches by Kafka 0.10's rule (the first batch
/// need only end at or past its log end, `PartitionLog::append_as_follower_unaligned`)
/// rather than requiring them to start exactly there? Only `high-watermark`:
/// with leader epochs a follower first cuts its log to a point the leader
/// shares, so its log end is a batch boundary on the leader too.
pub fn appends_unaligned(setting: Truncation) -> bool {
    setting == Truncation::HighWatermark
}

/// Does a follower answer OFFSET_OUT_OF_RANGE as Kafka ≤ 0.10 did
/// (`ReplicaFetcherThread.handleOffsetOutOfRange`, 0.10.x): reset its log to
/// the leader's log end, or to the leader's start, and fetch on, instead of
/// truncating again by its own rule? Only `high-watermark`.
pub fn resets_on_out_of_range(setting: Truncation) -> bool {
    setting == Truncation::HighWatermark
}

/// Kafka 0.10's reset after OFFSET_OUT_OF_RANGE, given the follower's log end
/// and the leader's: a leader whose log ends below ours (it was elected
/// uncleanly, or lost its tail) makes us cut to its end; otherwise our fetch
/// offset fell below the leader's start and the log restarts there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfRangeReset {
    TruncateTo(i64),
    StartAtLeaderStart,
}

pub fn out_of_range_reset(log_end_offset: i64, leader_log_end_offset: i64) -> OutOfRangeReset {
    if leader_log_end_offset < log_end_offset {
        OutOfRangeReset::TruncateTo(leader_log_end_offset)
    } else {
        OutOfRangeReset::StartAtLeaderStart
    }
}

/// Where a follower's truncation begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Cut the log to this offset and start fetching (no request).
    TruncateTo(i64),
    /// Ask the leader for the end offset of this epoch.
    Ask(i32),
}

/// The first step for a follower with this epoch cache and high watermark.
/// A follower with no epoch at all can only fall back to its high watermark, as
/// Kafka did for logs written before epochs existed.
pub fn start(setting: Truncation, follower_epochs: &[EpochEntry], high_watermark: i64) -> Start {
    match (setting, follower_epochs.last()) {
        (Truncation::HighWatermark, _) | (_, None) => Start::TruncateTo(high_watermark),
        (_, Some(latest)) => Start::Ask(latest.epoch),
    }
}

/// The follower's next move after the leader answered `answer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Cut to this offset; truncation is complete.
    Done(i64),
    /// Cut to this offset, then ask again about the follower's new latest epoch
    /// (KIP-279: the leader answered an epoch the follower does not have).
    Continue(i64),
}

/// One round of follower truncation under `setting`.
pub fn step(
    setting: Truncation,
    follower_epochs: &[EpochEntry],
    log_end_offset: i64,
    high_watermark: i64,
    answer: EpochEndOffset,
) -> Step {
    if answer.end_offset < 0 {
        // The leader knows nothing of our epoch: only the high watermark is safe.
        return Step::Done(high_watermark.min(log_end_offset));
    }
    if setting == Truncation::Kip101 || answer.leader_epoch < 0 {
        // KIP-101's follower (and any v0 answer): one offset, no iteration.
        return Step::Done(answer.end_offset.min(log_end_offset));
    }
    // KIP-279's follower: compare the leader's epoch with our own view of it.
    match own_end_offset(follower_epochs, answer.leader_epoch, log_end_offset) {
        // We track no epoch that low: keep what the leader also has.
        None => Step::Done(answer.end_offset.min(log_end_offset)),
        Some((epoch, end)) if epoch != answer.leader_epoch => {
            Step::Continue(end.min(log_end_offset))
        }
        Some((_, end)) => Step::Done(answer.end_offset.min(end).min(log_end_offset)),
    }
}

/// The follower's `(largest epoch ≤ asked, that epoch's end offset)`, or None
/// when its first epoch is above the one asked.
fn own_end_offset(entries: &[EpochEntry], epoch: i32, log_end_offset: i64) -> Option<(i32, i64)> {
    let index = entries.iter().rposition(|e| e.epoch <= epoch)?;
    let end = entries
        .get(index + 1)
        .map_or(log_end_offset, |next| next.start_offset);
    Some((entries[index].epoch, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[(i32, i64)]) -> Vec<EpochEntry> {
        list.iter()
            .map(|&(epoch, start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect()
    }

    fn answer(leader_epoch: i32, end_offset: i64) -> EpochEndOffset {
        EpochEndOffset {
            leader_epoch,
            end_offset,
        }
    }

    #[test]
    fn only_current_records_at_election_and_truncates_under_an_unchanged_leader() {
        for s in [
            Truncation::HighWatermark,
            Truncation::Kip101,
            Truncation::Kip279,
        ] {
            assert!(!records_epoch_at_election(s), "{s:?}");
            assert!(!truncates_when_leader_unchanged(s), "{s:?}");
        }
        assert!(records_epoch_at_election(Truncation::Current));
        assert!(truncates_when_leader_unchanged(Truncation::Current));
        assert_eq!(
            answer_rule(Truncation::Current),
            Some(EpochAnswerRule::Current)
        );
    }

    #[test]
    fn only_high_watermark_appends_unaligned_and_resets_on_out_of_range() {
        assert!(appends_unaligned(Truncation::HighWatermark));
        assert!(resets_on_out_of_range(Truncation::HighWatermark));
        for s in [Truncation::Kip101, Truncation::Kip279, Truncation::Current] {
            assert!(!appends_unaligned(s), "{s:?}");
            assert!(!resets_on_out_of_range(s), "{s:?}");
        }
    }

    #[test]
    fn out_of_range_cuts_to_a_shorter_leader_else_restarts_at_its_start() {
        // Our log ends at 6, the leader's at 4: cut to 4.
        assert_eq!(out_of_range_reset(6, 4), OutOfRangeReset::TruncateTo(4));
        // The leader's log reaches as far as ours or further: our fetch offset
        // must be below its start.
        assert_eq!(
            out_of_range_reset(6, 6),
            OutOfRangeReset::StartAtLeaderStart
        );
        assert_eq!(
            out_of_range_reset(3, 90),
            OutOfRangeReset::StartAtLeaderStart
        );
    }

    #[test]
    fn a_follower_asks_about_its_latest_epoch_or_falls_back_to_its_high_watermark() {
        let cache = entries(&[(0, 0), (2, 10)]);
        assert_eq!(start(Truncation::Current, &cache, 7), Start::Ask(2));
        assert_eq!(start(Truncation::Current, &[], 7), Start::TruncateTo(7));
        assert_eq!(
            start(Truncation::HighWatermark, &cache, 7),
            Start::TruncateTo(7)
        );
    }

    #[test]
    fn matching_epochs_cut_to_the_smaller_end() {
        // Leader and follower both had epoch 1; the leader's ended at 15, ours runs to 20.
        let cache = entries(&[(0, 0), (1, 10)]);
        assert_eq!(
            step(Truncation::Current, &cache, 20, 5, answer(1, 15)),
            Step::Done(15)
        );
        // Our epoch 1 is the shorter: nothing to cut.
        assert_eq!(
            step(Truncation::Current, &cache, 12, 5, answer(1, 15)),
            Step::Done(12)
        );
    }

    #[test]
    fn kip_279_answers_an_epoch_the_leader_never_had_with_its_floor() {
        // KAFKA-6361: we (B) led epoch 2 from offset 11; the leader (A) never had
        // epoch 2 and answers (1, 21), where its epoch 1 ended. Our epoch 1 ended
        // at 11: keep [0, 11), drop our epoch-2 tail.
        let cache = entries(&[(1, 0), (2, 11)]);
        assert_eq!(
            step(Truncation::Current, &cache, 30, 0, answer(1, 21)),
            Step::Done(11)
        );
    }

    #[test]
    fn kip_279_iterates_when_we_lack_the_epoch_the_leader_answered() {
        // We have epochs 0 and 2; the leader answers epoch 1, which we never had:
        // cut to where our epoch 0 ended and ask again.
        let cache = entries(&[(0, 0), (2, 5)]);
        assert_eq!(
            step(Truncation::Current, &cache, 9, 0, answer(1, 7)),
            Step::Continue(5)
        );
        let after = entries(&[(0, 0)]);
        assert_eq!(
            step(Truncation::Current, &after, 5, 0, answer(0, 3)),
            Step::Done(3)
        );
    }

    #[test]
    fn below_our_first_epoch_keeps_what_the_leader_has_and_undefined_falls_back_to_the_hw() {
        let cache = entries(&[(5, 10)]);
        assert_eq!(
            step(Truncation::Current, &cache, 30, 12, answer(4, 10)),
            Step::Done(10)
        );
        assert_eq!(
            step(
                Truncation::Current,
                &cache,
                30,
                12,
                EpochEndOffset::UNDEFINED
            ),
            Step::Done(12)
        );
        // KIP-101: one offset, whatever epoch.
        assert_eq!(
            step(Truncation::Kip101, &cache, 30, 12, answer(-1, 20)),
            Step::Done(20)
        );
    }
}
