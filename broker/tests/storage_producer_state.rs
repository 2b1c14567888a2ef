//! The partition log's producer state (KIP-98) as a leader, a follower and a
//! restarted broker see it: a retried batch is written once and answered with
//! its original offsets, fenced epochs and sequence gaps refuse the append,
//! followers and truncation leave the state the log implies, and snapshots are
//! written at roll and clean shutdown, loaded at start, cut with the log, and
//! deleted and rebuilt from the log when corrupt.

use crate::support;

use epochal_broker::storage::producer_snapshot;
use epochal_broker::storage::producer_state::ProducerStateError;
use epochal_broker::storage::{LogManager, PartitionLog, StorageError};
use support::*;

const PID: i64 = 4000;

/// `(producer epoch, last sequence, last offset)` of a producer in the log's state.
fn last_of(log: &PartitionLog, pid: i64) -> Option<(i16, i32, i64)> {
    let entry = log.producer_state().entry(pid)?;
    let last = entry.batches().last()?;
    Some((entry.producer_epoch, last.last_sequence, last.last_offset))
}

/// Every record value in the partition's segments, in offset order.
fn values(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir.join(tp().dir_name()))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|p| flatten(&decode_file(p)))
        .map(|(_, _, v)| v)
        .collect()
}

fn snapshots(dir: &std::path::Path) -> Vec<i64> {
    producer_snapshot::list(&dir.join(tp().dir_name()))
        .unwrap()
        .into_iter()
        .map(|(offset, _)| offset)
        .collect()
}

/// Five batches of two records from producer `PID`, sequences 0..10, offsets 0..10.
fn five_batches(log: &mut PartitionLog) {
    for b in 0..5 {
        let (x, y) = (format!("b{b}x"), format!("b{b}y"));
        let info = log
            .append_as_leader(idempotent_batch(PID, 0, 2 * b, &[&x, &y]), 0)
            .unwrap();
        assert_eq!(info.first_offset, i64::from(2 * b));
        assert!(!info.duplicate);
    }
}

#[test]
fn a_retried_batch_is_written_once_and_answered_with_its_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    log.append_as_leader(producer_batch(&["plain"]), 0).unwrap();
    let first = log
        .append_as_leader(idempotent_batch(PID, 0, 0, &["a", "b"]), 0)
        .unwrap();
    log.append_as_leader(idempotent_batch(PID, 0, 2, &["c"]), 0)
        .unwrap();
    let retry = log
        .append_as_leader(idempotent_batch(PID, 0, 0, &["a", "b"]), 0)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(
        (retry.first_offset, retry.last_offset),
        (first.first_offset, first.last_offset)
    );
    assert_eq!((retry.first_offset, retry.last_offset), (1, 2));
    assert_eq!(log.log_end_offset(), 4, "nothing was written");
    // A non-idempotent batch is appended as often as it is sent.
    log.append_as_leader(producer_batch(&["plain"]), 0).unwrap();
    assert_eq!(values(dir.path()), ["plain", "a", "b", "c", "plain"]);
    assert_eq!(last_of(log, PID), Some((0, 2, 3)));
}

#[test]
fn a_fenced_epoch_or_a_sequence_gap_refuses_the_append() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    log.append_as_leader(idempotent_batch(PID, 1, 0, &["a"]), 0)
        .unwrap();
    let refused = |log: &mut PartitionLog, batch| match log.append_as_leader(batch, 0) {
        Err(StorageError::ProducerState { source, .. }) => source,
        other => panic!("expected a producer-state refusal, got {other:?}"),
    };
    assert_eq!(
        refused(log, idempotent_batch(PID, 1, 2, &["gap"])),
        ProducerStateError::OutOfOrderSequence {
            producer_id: PID,
            epoch: 1,
            current_epoch: 1,
            first_sequence: 2,
            last_sequence: 0,
        }
    );
    assert!(matches!(
        refused(log, idempotent_batch(PID, 0, 1, &["old"])),
        ProducerStateError::InvalidProducerEpoch {
            epoch: 0,
            current_epoch: 1,
            ..
        }
    ));
    assert!(matches!(
        refused(log, idempotent_batch(PID, 2, 5, &["new epoch, not from 0"])),
        ProducerStateError::OutOfOrderSequence { epoch: 2, .. }
    ));
    assert_eq!(
        log.log_end_offset(),
        1,
        "nothing of a refused append is written"
    );
    log.append_as_leader(idempotent_batch(PID, 2, 0, &["bumped"]), 0)
        .unwrap();
    assert_eq!(values(dir.path()), ["a", "bumped"]);
}

#[test]
fn a_follower_builds_the_leaders_state_and_dedupes_once_it_leads() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut leader_logs = LogManager::open(da.path(), config(1 << 20)).unwrap();
    let mut follower_logs = LogManager::open(db.path(), config(1 << 20)).unwrap();
    let leader = leader_logs.get_or_create(&tp()).unwrap();
    five_batches(leader);
    let follower = follower_logs.get_or_create(&tp()).unwrap();
    follower
        .append_as_follower(leader.read(0, 1 << 20).unwrap())
        .unwrap();
    let state = |log: &PartitionLog| {
        log.producer_state()
            .producers()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(state(follower), state(leader));
    // The follower becomes leader (epoch 1) and the producer retries its
    // second-to-last batch, whose first answer was lost with the old leader.
    let retry = follower
        .append_as_leader(idempotent_batch(PID, 0, 6, &["b3x", "b3y"]), 1)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (6, 7));
    follower
        .append_as_leader(idempotent_batch(PID, 0, 10, &["next"]), 1)
        .unwrap();
    assert_eq!(follower.log_end_offset(), 11);
}

#[test]
fn truncation_leaves_the_state_the_remaining_log_implies() {
    let dir = tempfile::tempdir().unwrap();
    // Two batches a segment, so a roll snapshot sits inside the cut range.
    let two_batches = 2 * idempotent_batch(PID, 0, 0, &["b0x", "b0y"]).len() as u64;
    let mut logs = LogManager::open(dir.path(), config(two_batches)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    five_batches(log);
    assert_eq!(log.segment_base_offsets(), [0, 4, 8]);
    assert_eq!(snapshots(dir.path()), [4, 8], "one at each roll");

    log.truncate_to(6).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(
        snapshots(dir.path()),
        [4, 6],
        "8 described cut records; 6 is new"
    );
    assert_eq!(last_of(log, PID), Some((0, 5, 5)));
    // The batch cut away is no duplicate any more: its retry is appended.
    let again = log
        .append_as_leader(idempotent_batch(PID, 0, 6, &["b3x", "b3y"]), 1)
        .unwrap();
    assert!(!again.duplicate);
    assert_eq!(again.first_offset, 6);
    // One still in the log is: kept batches came from the snapshot at 4 and
    // the replay after it.
    assert!(
        log.append_as_leader(idempotent_batch(PID, 0, 4, &["b2x", "b2y"]), 1)
            .unwrap()
            .duplicate
    );

    log.truncate_fully_and_start_at(20).unwrap();
    assert_eq!(log.producer_state().producers().count(), 0);
    assert!(snapshots(dir.path()).is_empty());
}

#[test]
fn a_clean_shutdown_snapshots_at_the_log_end_and_the_next_start_loads_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
        five_batches(logs.get_or_create(&tp()).unwrap());
        logs.shutdown().unwrap();
    }
    assert_eq!(snapshots(dir.path()), [10]);
    let path = dir
        .path()
        .join(tp().dir_name())
        .join("00000000000000000010.snapshot");
    let entries = producer_snapshot::read(&path).unwrap().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (
            entries[0].producer_id,
            entries[0].last_sequence,
            entries[0].last_offset
        ),
        (PID, 9, 9)
    );
    assert_eq!(entries[0].offset_delta, 1);

    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_mut(&tp()).unwrap();
    assert_eq!(last_of(log, PID), Some((0, 9, 9)));
    assert!(
        log.append_as_leader(idempotent_batch(PID, 0, 8, &["b4x", "b4y"]), 0)
            .unwrap()
            .duplicate,
        "the last batch survives the restart"
    );
}

#[test]
fn after_a_crash_the_log_past_the_latest_snapshot_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let two_batches = 2 * idempotent_batch(PID, 0, 0, &["b0x", "b0y"]).len() as u64;
    {
        let mut logs = LogManager::open(dir.path(), config(two_batches)).unwrap();
        five_batches(logs.get_or_create(&tp()).unwrap());
        // Dropped without shutdown: a crash. Snapshots at 4 and 8 only.
    }
    let mut logs = LogManager::open(dir.path(), config(two_batches)).unwrap();
    let log = logs.get_mut(&tp()).unwrap();
    assert_eq!(last_of(log, PID), Some((0, 9, 9)));
    // The snapshot at 8 gave the batch before the last, the replay the last.
    for (sequence, values) in [(6, ["b3x", "b3y"]), (8, ["b4x", "b4y"])] {
        let retry = log
            .append_as_leader(idempotent_batch(PID, 0, sequence, &values), 0)
            .unwrap();
        assert!(retry.duplicate, "sequence {sequence}");
    }
    assert_eq!(
        snapshots(dir.path()),
        [8, 10],
        "a snapshot at the end after replay"
    );
}

#[test]
fn a_corrupt_snapshot_at_start_is_deleted_and_the_state_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
        five_batches(logs.get_or_create(&tp()).unwrap());
        logs.shutdown().unwrap();
    }
    let path = dir
        .path()
        .join(tp().dir_name())
        .join("00000000000000000010.snapshot");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[12] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();

    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_mut(&tp()).unwrap();
    assert_eq!(last_of(log, PID), Some((0, 9, 9)), "rebuilt from the log");
    assert_eq!(
        log.producer_state().entry(PID).unwrap().batches().count(),
        5,
        "a full replay knows all five batches"
    );
    let rewritten = producer_snapshot::read(&path).unwrap();
    assert!(
        rewritten.is_ok(),
        "a sound snapshot replaced it: {rewritten:?}"
    );
}

#[test]
fn snapshots_past_the_recovered_log_end_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
        five_batches(logs.get_or_create(&tp()).unwrap());
        logs.shutdown().unwrap();
    }
    // A torn tail: the last batch loses its final byte.
    let segment = segment_path(dir.path(), &tp(), 0);
    let len = std::fs::metadata(&segment).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(len - 1)
        .unwrap();

    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_mut(&tp()).unwrap();
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(
        snapshots(dir.path()),
        [8],
        "10 described a record that is gone"
    );
    assert_eq!(last_of(log, PID), Some((0, 7, 7)));
    let retry = log
        .append_as_leader(idempotent_batch(PID, 0, 8, &["b4x", "b4y"]), 0)
        .unwrap();
    assert!(!retry.duplicate, "the torn batch is appended again");
}

#[test]
fn kafka_5435_a_log_without_a_snapshot_comes_back_with_no_producer_state() {
    use epochal_broker::storage::{LogConfig, ProducerStateRecovery};
    let flawed = LogConfig {
        producer_state_recovery: ProducerStateRecovery::Kafka5435,
        ..config(1 << 20)
    };
    let dir = tempfile::tempdir().unwrap();
    {
        let mut logs = LogManager::open(dir.path(), flawed).unwrap();
        five_batches(logs.get_or_create(&tp()).unwrap());
        // A crash before any roll or clean shutdown: no snapshot on disk.
    }
    assert!(snapshots(dir.path()).is_empty());
    let mut logs = LogManager::open(dir.path(), flawed).unwrap();
    let log = logs.get_mut(&tp()).unwrap();
    assert_eq!(
        log.producer_state().producers().count(),
        0,
        "the log was not read"
    );
    assert_eq!(
        snapshots(dir.path()),
        [10],
        "an empty snapshot keeps it that way"
    );
    let retry = log
        .append_as_leader(idempotent_batch(PID, 0, 8, &["b4x", "b4y"]), 1)
        .unwrap();
    assert!(!retry.duplicate, "an unknown producer's retry is new to it");
    assert_eq!(values(dir.path()).iter().filter(|v| *v == "b4x").count(), 2);
    drop(logs);

    // The same log on the corrected setting finds the snapshot the flawed run
    // wrote and trusts it: the lost state stays lost, as in Kafka.
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_mut(&tp()).unwrap();
    assert_eq!(last_of(log, PID), Some((0, 9, 11)));
    assert_eq!(
        log.producer_state().entry(PID).unwrap().batches().count(),
        1,
        "only the batch after the empty snapshot is known"
    );
}
