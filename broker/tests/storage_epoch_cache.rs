//! The leader epoch cache against Kafka's `LeaderEpochFileCacheTest`, case by case
//! with the same epochs and offsets (apache/kafka's
//! `core/src/test/scala/unit/kafka/server/epoch/LeaderEpochFileCacheTest.scala`), and the three
//! OffsetsForLeaderEpoch answer rules (KIP-101, KIP-279; broker/README.md, "Truncation settings").

use epochal_broker::storage::checkpoint::read_epoch_checkpoint;
use epochal_broker::storage::{
    EpochAnswerRule, EpochEndOffset, EpochEntry, LeaderEpochCache, StorageError,
};
use tempfile::TempDir;

const CURRENT: EpochAnswerRule = EpochAnswerRule::Current;

fn e(epoch: i32, start_offset: i64) -> EpochEntry {
    EpochEntry {
        epoch,
        start_offset,
    }
}

fn eo(leader_epoch: i32, end_offset: i64) -> EpochEndOffset {
    EpochEndOffset {
        leader_epoch,
        end_offset,
    }
}

const UNDEFINED: EpochEndOffset = EpochEndOffset {
    leader_epoch: -1,
    end_offset: -1,
};

struct Fixture {
    dir: TempDir,
    cache: LeaderEpochCache,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cache = LeaderEpochCache::open(&dir.path().join("leader-epoch-checkpoint")).unwrap();
        Fixture { dir, cache }
    }

    fn with(assigns: &[(i32, i64)]) -> Self {
        let mut f = Fixture::new();
        for &(epoch, offset) in assigns {
            f.cache.assign(epoch, offset).unwrap();
        }
        f
    }

    fn entries(&self) -> Vec<EpochEntry> {
        self.cache.entries().to_vec()
    }

    /// What the checkpoint file on disk says, read back strictly.
    fn on_disk(&self) -> Vec<EpochEntry> {
        read_epoch_checkpoint(&self.dir.path().join("leader-epoch-checkpoint")).unwrap()
    }

    fn end(&self, epoch: i32, leo: i64) -> EpochEndOffset {
        self.cache.end_offset_for(CURRENT, epoch, leo)
    }
}

#[test]
fn latest_epoch_answers_the_log_end_offset() {
    let f = Fixture::with(&[(2, 10)]);
    assert_eq!(f.end(2, 11), eo(2, 11));
}

#[test]
fn an_offset_assigned_to_an_epoch_is_never_overwritten() {
    let f = Fixture::with(&[(2, 9), (2, 10)]);
    assert_eq!(f.entries(), vec![e(2, 9)]);
    assert_eq!(f.on_disk(), vec![e(2, 9)]);
}

#[test]
fn an_entry_with_the_same_start_offset_is_replaced() {
    let f = Fixture::with(&[(2, 9), (3, 9)]);
    assert_eq!(f.entries(), vec![e(3, 9)]);
    assert_eq!(f.on_disk(), vec![e(3, 9)]);
}

#[test]
fn a_conflicting_earlier_entry_is_removed() {
    let f = Fixture::with(&[(2, 6), (3, 5)]);
    assert_eq!(f.entries(), vec![e(3, 5)]);
    assert_eq!(f.on_disk(), vec![e(3, 5)]);
}

#[test]
fn assigning_a_lower_epoch_at_a_later_offset_removes_the_higher_epochs() {
    let f = Fixture::with(&[(1, 5), (2, 6), (1, 7)]);
    assert_eq!(f.entries(), vec![e(1, 7)]);
    assert_eq!(f.cache.latest_epoch(), Some(1));
    assert_eq!(f.end(2, 8), UNDEFINED);
    assert_eq!(f.end(1, 8), eo(1, 8));
    assert_eq!(f.on_disk(), vec![e(1, 7)]);
}

#[test]
fn undefined_epoch_answers_undefined_whether_or_not_the_cache_is_empty() {
    let empty = Fixture::new();
    assert_eq!(empty.end(-1, 0), UNDEFINED);
    let full = Fixture::with(&[(2, 6)]);
    assert_eq!(full.end(-1, 10), UNDEFINED);
}

#[test]
fn an_empty_cache_answers_undefined() {
    let f = Fixture::new();
    assert_eq!(f.end(0, 0), UNDEFINED);
    assert_eq!(f.end(5, 100), UNDEFINED);
}

#[test]
fn an_epoch_above_the_latest_answers_undefined() {
    let f = Fixture::with(&[(2, 100)]);
    assert_eq!(f.end(3, 100), UNDEFINED);
}

#[test]
fn an_epoch_below_the_first_answers_the_first_start_offset_kafka_7415() {
    let f = Fixture::with(&[(5, 11), (6, 12), (7, 13)]);
    assert_eq!(f.end(4, 14), eo(4, 11));
}

#[test]
fn floor_epoch_is_paired_with_the_next_epochs_start() {
    let f = Fixture::with(&[(0, 10), (2, 13), (4, 17)]);
    assert_eq!(f.end(1, 20), eo(0, 13));
    assert_eq!(f.end(2, 20), eo(2, 17));
    assert_eq!(f.end(3, 20), eo(2, 17));
}

#[test]
fn reassigning_the_latest_epoch_earlier_moves_the_previous_epochs_end() {
    let mut f = Fixture::with(&[(5, 11), (6, 12), (7, 13)]);
    f.cache.assign(7, 12).unwrap();
    assert_eq!(f.entries(), vec![e(5, 11), e(7, 12)]);
    assert_eq!(f.end(5, 14), eo(5, 12));
    assert_eq!(f.end(6, 14), eo(5, 12));
}

#[test]
fn truncate_from_end_removes_entries_starting_at_or_after_the_offset() {
    let mut f = Fixture::with(&[(2, 6), (3, 8), (4, 11)]);
    f.cache.truncate_from_end(8).unwrap();
    assert_eq!(f.entries(), vec![e(2, 6)]);
    assert_eq!(f.on_disk(), vec![e(2, 6)]);

    let mut f = Fixture::with(&[(2, 6), (3, 8), (4, 11)]);
    f.cache.truncate_from_end(9).unwrap();
    assert_eq!(f.entries(), vec![e(2, 6), e(3, 8)]);
    assert_eq!(f.on_disk(), vec![e(2, 6), e(3, 8)]);
}

#[test]
fn truncate_from_start_keeps_and_moves_the_covering_entry() {
    let cases: &[(i64, &[EpochEntry])] = &[
        (8, &[e(3, 8), e(4, 11)]),
        (9, &[e(3, 9), e(4, 11)]),
        (11, &[e(4, 11)]),
        (15, &[e(4, 15)]),
        (1, &[e(2, 6), e(3, 8), e(4, 11)]),
        (6, &[e(2, 6), e(3, 8), e(4, 11)]),
    ];
    for &(offset, expected) in cases {
        let mut f = Fixture::with(&[(2, 6), (3, 8), (4, 11)]);
        f.cache.truncate_from_start(offset).unwrap();
        assert_eq!(f.entries(), expected, "truncate_from_start({offset})");
        assert_eq!(
            f.on_disk(),
            expected,
            "file after truncate_from_start({offset})"
        );
    }

    let mut f = Fixture::with(&[(0, 0), (1, 7), (2, 10)]);
    f.cache.truncate_from_start(5).unwrap();
    assert_eq!(f.entries(), vec![e(0, 5), e(1, 7), e(2, 10)]);
}

#[test]
fn undefined_offset_is_a_no_op_for_both_truncations() {
    let mut f = Fixture::with(&[(2, 6), (3, 8), (4, 11)]);
    f.cache.truncate_from_end(-1).unwrap();
    f.cache.truncate_from_start(-1).unwrap();
    assert_eq!(f.entries(), vec![e(2, 6), e(3, 8), e(4, 11)]);
}

#[test]
fn epoch_for_offset_finds_the_epoch_that_wrote_it() {
    let f = Fixture::with(&[(0, 10), (1, 20), (5, 30)]);
    assert_eq!(f.cache.epoch_for_offset(25), Some(1));
    assert_eq!(f.cache.epoch_for_offset(20), Some(1));
    assert_eq!(f.cache.epoch_for_offset(30), Some(5));
    assert_eq!(f.cache.epoch_for_offset(50), Some(5));
    assert_eq!(f.cache.epoch_for_offset(5), None);
}

#[test]
fn epochs_persist_between_instances() {
    let f = Fixture::with(&[(2, 6)]);
    let reopened = LeaderEpochCache::open(f.cache.path()).unwrap();
    assert_eq!(reopened.entries(), &[e(2, 6)]);
}

#[test]
fn truncation_writes_the_checkpoint() {
    let mut f = Fixture::with(&[(2, 6), (3, 8), (4, 11)]);
    f.cache.truncate_from_end(11).unwrap();
    f.cache.truncate_from_start(8).unwrap();
    assert_eq!(f.on_disk(), vec![e(3, 8)]);
    let reopened = LeaderEpochCache::open(f.cache.path()).unwrap();
    assert_eq!(reopened.entries(), &[e(3, 8)]);
}

#[test]
fn negative_epochs_and_offsets_are_rejected() {
    let mut f = Fixture::new();
    assert!(matches!(
        f.cache.assign(-1, 0),
        Err(StorageError::InvalidEpochEntry {
            epoch: -1,
            start_offset: 0
        })
    ));
    assert!(matches!(
        f.cache.assign(0, -5),
        Err(StorageError::InvalidEpochEntry { .. })
    ));
    assert!(f.entries().is_empty());
}

// The three answer rules over one leader history: epochs 1, 3 and 5 (the leader
// never had 2 or 4), LEO 40.
fn leader() -> Fixture {
    Fixture::with(&[(1, 10), (3, 20), (5, 30)])
}
const LEO: i64 = 40;

#[test]
fn kip_101_answers_one_offset() {
    let f = leader();
    let ask = |epoch| f.cache.end_offset_for(EpochAnswerRule::Kip101, epoch, LEO);
    // An epoch the leader never had: silently the next epoch's start — the flaw
    // KIP-279 fixed.
    assert_eq!(ask(2), eo(-1, 20));
    assert_eq!(ask(4), eo(-1, 30));
    // Below the first epoch: -1, which sends a follower back to its HW.
    assert_eq!(ask(0), eo(-1, -1));
    assert_eq!(ask(5), eo(-1, LEO));
    assert_eq!(ask(-1), eo(-1, -1));
    assert_eq!(ask(1), eo(-1, 20));
    assert_eq!(ask(6), eo(-1, -1));
}

#[test]
fn kip_279_answers_the_floor_epoch_and_its_end() {
    let f = leader();
    let ask = |epoch| f.cache.end_offset_for(EpochAnswerRule::Kip279, epoch, LEO);
    assert_eq!(ask(2), eo(1, 20));
    assert_eq!(ask(4), eo(3, 30));
    // 2.0 still answered undefined below the first epoch.
    assert_eq!(ask(0), UNDEFINED);
    assert_eq!(ask(5), eo(5, LEO));
    assert_eq!(ask(-1), UNDEFINED);
    assert_eq!(ask(6), UNDEFINED);
}

#[test]
fn current_answers_the_first_start_offset_below_the_first_epoch() {
    let f = leader();
    let ask = |epoch| f.cache.end_offset_for(EpochAnswerRule::Current, epoch, LEO);
    assert_eq!(ask(2), eo(1, 20));
    assert_eq!(ask(4), eo(3, 30));
    assert_eq!(ask(0), eo(0, 10));
    assert_eq!(ask(5), eo(5, LEO));
    assert_eq!(ask(-1), UNDEFINED);
    assert_eq!(ask(6), UNDEFINED);
}

#[test]
fn kafka_6361_fast_failover_answers_differ_by_rule() {
    // A led epoch 1 for [0, 20], then epoch 3 from 21; B wrote in epoch 2, which A
    // never had, and asks about it.
    let f = Fixture::with(&[(1, 0), (3, 21)]);
    let leo = 31;
    assert_eq!(
        f.cache.end_offset_for(EpochAnswerRule::Kip101, 2, leo),
        eo(-1, 21)
    );
    assert_eq!(
        f.cache.end_offset_for(EpochAnswerRule::Kip279, 2, leo),
        eo(1, 21)
    );
}
