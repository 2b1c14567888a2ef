//! Recovery on open after a crash: torn tails and flipped bytes are cut, earlier
//! batches survive, and neither the epoch file nor the HW checkpoint points past
//! the recovered end. Corrupt input of any kind gives an error or a shorter log,
//! never a panic.

use crate::support;

use std::fs::{self, OpenOptions};
use std::path::Path;

use epochal_broker::storage::checkpoint::read_offset_checkpoint;
use epochal_broker::storage::record_batch::BatchError;
use epochal_broker::storage::{
    CheckpointError, EpochEntry, LogConfig, LogManager, StorageError, TopicPartition,
};
use support::*;

/// Writes one batch per entry of `epochs` (two records each), sets the HW to the
/// LEO, checkpoints it, and "crashes" (drops the manager without shutdown).
/// Returns each batch's (base offset, byte position).
fn write_and_crash(data: &Path, cfg: LogConfig, epochs: &[i32]) -> Vec<(i64, u64)> {
    let mut logs = LogManager::open(data, cfg).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    for (i, &epoch) in epochs.iter().enumerate() {
        log.append_as_leader(
            producer_batch(&[&format!("r{i}a"), &format!("r{i}b")]),
            epoch,
        )
        .unwrap();
    }
    let leo = log.log_end_offset();
    log.set_high_watermark(leo);
    let positions = log
        .batch_positions()
        .map(|(_, b)| (b.base_offset, b.position))
        .collect();
    logs.checkpoint_high_watermarks().unwrap();
    positions
}

fn epoch_file(data: &Path) -> Vec<EpochEntry> {
    epochal_broker::storage::checkpoint::read_epoch_checkpoint(
        &data.join(tp().dir_name()).join("leader-epoch-checkpoint"),
    )
    .unwrap()
}

fn hw_file(data: &Path) -> i64 {
    read_offset_checkpoint(&data.join("replication-offset-checkpoint")).unwrap()[&tp()]
}

fn e(epoch: i32, start_offset: i64) -> EpochEntry {
    EpochEntry {
        epoch,
        start_offset,
    }
}

#[test]
fn a_segment_cut_inside_its_last_batch_loses_only_that_batch() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let batches = write_and_crash(data, config(1 << 20), &[0, 1, 2]);
    assert_eq!(epoch_file(data), vec![e(0, 0), e(1, 2), e(2, 4)]);
    assert_eq!(hw_file(data), 6);

    let segment = segment_path(data, &tp(), 0);
    let len = fs::metadata(&segment).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(len - 10)
        .unwrap();

    let logs = LogManager::open(data, LogConfig::default()).unwrap();
    let log = logs.get(&tp()).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.high_watermark(), 4);
    let cut = log.recovery_truncation().expect("recovery reports the cut");
    assert_eq!(cut.file, segment);
    assert_eq!(cut.position, batches[2].1);
    assert!(matches!(cut.reason, BatchError::Incomplete { .. }));
    drop(logs);

    assert_eq!(fs::metadata(&segment).unwrap().len(), batches[2].1);
    let survivors = flatten(&decode_file(&segment));
    assert_eq!(
        survivors,
        vec![
            (0, 0, "r0a".into()),
            (1, 0, "r0b".into()),
            (2, 1, "r1a".into()),
            (3, 1, "r1b".into())
        ]
    );
    assert_eq!(epoch_file(data), vec![e(0, 0), e(1, 2)]);
    assert_eq!(hw_file(data), 4);
}

#[test]
fn a_flipped_byte_in_a_middle_batch_drops_it_and_everything_after() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let batches = write_and_crash(data, config(1 << 20), &[0, 0, 1, 2]);
    let segment = segment_path(data, &tp(), 0);
    let mut bytes = fs::read(&segment).unwrap();
    // A byte inside the second batch's records, covered by its CRC.
    let target = batches[2].1 as usize - 5;
    bytes[target] ^= 0x01;
    fs::write(&segment, &bytes).unwrap();

    let logs = LogManager::open(data, LogConfig::default()).unwrap();
    let log = logs.get(&tp()).unwrap();
    assert_eq!(log.log_end_offset(), 2);
    let cut = log.recovery_truncation().unwrap();
    assert_eq!(cut.position, batches[1].1);
    assert!(matches!(cut.reason, BatchError::CrcMismatch { .. }));
    drop(logs);

    let survivors = flatten(&decode_file(&segment));
    assert_eq!(survivors, vec![(0, 0, "r0a".into()), (1, 0, "r0b".into())]);
    assert_eq!(epoch_file(data), vec![e(0, 0)]);
    assert_eq!(hw_file(data), 2);
    let recovery_points =
        read_offset_checkpoint(&data.join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(recovery_points[&tp()], 2);
}

#[test]
fn a_torn_middle_segment_deletes_the_segments_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    // Two batches a segment.
    let one = producer_batch(&["r0a", "r0b"]).len() as u64;
    let batches = write_and_crash(data, config(2 * one), &[0, 0, 1, 1, 2, 2]);
    let bases: Vec<i64> = batches.iter().map(|b| b.0).collect();
    assert_eq!(bases, vec![0, 2, 4, 6, 8, 10]);
    let middle = segment_path(data, &tp(), 4);
    let last = segment_path(data, &tp(), 8);
    assert!(last.exists());
    // The middle segment loses its last 3 bytes. Its bytes are below the recovery
    // point (rolled segments are flushed), yet framing is still checked there.
    let len = fs::metadata(&middle).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&middle)
        .unwrap()
        .set_len(len - 3)
        .unwrap();

    let logs = LogManager::open(data, LogConfig::default()).unwrap();
    let log = logs.get(&tp()).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(log.segment_base_offsets(), vec![0, 4]);
    assert_eq!(
        log.recovery_truncation().unwrap().deleted_segments,
        vec![last.clone()]
    );
    drop(logs);
    assert!(!last.exists());
    assert_eq!(epoch_file(data), vec![e(0, 0), e(1, 4)]);
    assert_eq!(hw_file(data), 6);
}

#[test]
fn every_cut_position_recovers_to_a_batch_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let batches = write_and_crash(data, config(1 << 20), &[3, 4]);
    let segment = segment_path(data, &tp(), 0);
    let original = fs::read(&segment).unwrap();
    for cut in 0..=original.len() {
        fs::write(&segment, &original[..cut]).unwrap();
        let logs = LogManager::open(data, LogConfig::default()).unwrap();
        let log = logs.get(&tp()).unwrap();
        let expected = if cut == original.len() {
            4
        } else if cut >= batches[1].1 as usize {
            2
        } else {
            0
        };
        assert_eq!(log.log_end_offset(), expected, "cut at {cut}");
        assert!(log.high_watermark() <= expected);
        assert!(
            log.leader_epoch_cache()
                .entries()
                .iter()
                .all(|en| en.start_offset < expected),
            "cut at {cut}"
        );
    }
}

#[test]
fn every_flipped_byte_gives_a_shorter_log_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let batches = write_and_crash(data, config(1 << 20), &[0, 1]);
    let segment = segment_path(data, &tp(), 0);
    let original = fs::read(&segment).unwrap();
    for at in 0..original.len() {
        let mut bytes = original.clone();
        bytes[at] ^= 0x80;
        fs::write(&segment, &bytes).unwrap();
        let logs = LogManager::open(data, LogConfig::default()).unwrap();
        let leo = logs.get(&tp()).unwrap().log_end_offset();
        // partitionLeaderEpoch lies outside the CRC, as in Kafka: a flip there
        // survives recovery. Anywhere else in a batch costs that batch.
        let in_epoch_field = batches
            .iter()
            .any(|&(_, pos)| (pos as usize + 12..pos as usize + 16).contains(&at));
        let expected = if in_epoch_field {
            4
        } else if at >= batches[1].1 as usize {
            2
        } else {
            0
        };
        assert_eq!(leo, expected, "flip at {at}");
        drop(logs);
        // Put the original back for the next round (recovery cut the file).
        fs::write(&segment, &original).unwrap();
        fs::write(
            data.join(tp().dir_name()).join("leader-epoch-checkpoint"),
            "0\n2\n0 0\n1 2\n",
        )
        .unwrap();
        fs::write(
            data.join("recovery-point-offset-checkpoint"),
            "0\n1\nt 0 0\n",
        )
        .unwrap();
    }
}

#[test]
fn garbage_and_short_segment_files_recover_to_an_empty_log() {
    for contents in [
        (0..4000u32)
            .map(|i| (i * 7919 % 256) as u8)
            .collect::<Vec<u8>>(),
        vec![0u8; 100],
        vec![0xff; 5],
        vec![],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("garbage-topic-3");
        fs::create_dir(&part).unwrap();
        fs::write(part.join("00000000000000000000.log"), &contents).unwrap();
        fs::write(part.join("leader-epoch-checkpoint"), "0\n1\n4 0\n").unwrap();
        let logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let log = logs
            .get(&TopicPartition::new("garbage-topic", 3))
            .expect("topic names may contain '-'");
        assert_eq!(log.log_end_offset(), 0);
        assert!(log.leader_epoch_cache().entries().is_empty());
        assert_eq!(
            fs::metadata(part.join("00000000000000000000.log"))
                .unwrap()
                .len(),
            0
        );
    }
}

#[test]
fn bad_checkpoints_are_errors_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    write_and_crash(data, config(1 << 20), &[0]);

    let hw = data.join("replication-offset-checkpoint");
    fs::write(&hw, "0\n1\nt 0 not-a-number\n").unwrap();
    match LogManager::open(data, LogConfig::default()) {
        Err(StorageError::Checkpoint(CheckpointError::MalformedLine { path, line, text })) => {
            assert_eq!(path, hw);
            assert_eq!(line, 3);
            assert_eq!(text, "t 0 not-a-number");
        }
        other => panic!("expected a malformed line error, got {other:?}"),
    }
    fs::write(&hw, "0\n2\nt 0 1\n").unwrap();
    assert!(matches!(
        LogManager::open(data, LogConfig::default()),
        Err(StorageError::Checkpoint(CheckpointError::CountMismatch {
            expected: 2,
            found: 1,
            ..
        }))
    ));
    fs::write(&hw, "").unwrap();

    let epochs = data.join("t-0/leader-epoch-checkpoint");
    fs::write(&epochs, "1\n0\n").unwrap();
    assert!(matches!(
        LogManager::open(data, LogConfig::default()),
        Err(StorageError::Checkpoint(
            CheckpointError::UnsupportedVersion { version: 1, .. }
        ))
    ));
    fs::write(&epochs, "0\n1\n-3 0\n").unwrap();
    assert!(matches!(
        LogManager::open(data, LogConfig::default()),
        Err(StorageError::InvalidEpochEntry { epoch: -3, .. })
    ));
    fs::write(&epochs, b"0\n1\n\xff\xfe\n").unwrap();
    assert!(matches!(
        LogManager::open(data, LogConfig::default()),
        Err(StorageError::Checkpoint(CheckpointError::MalformedLine {
            line: 3,
            ..
        }))
    ));
}

#[test]
fn a_directory_that_is_not_a_partition_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("not_a_partition")).unwrap();
    assert!(matches!(
        LogManager::open(dir.path(), LogConfig::default()),
        Err(StorageError::InvalidPartitionDir { .. })
    ));
    // Files beside the partitions (the state-change log, say) are ignored.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("state-change.log"), "{}\n").unwrap();
    LogManager::open(dir.path(), LogConfig::default()).unwrap();
}

#[test]
fn a_recovered_unflushed_tail_is_flushed_and_claimed_by_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    write_and_crash(data, config(1 << 20), &[0, 0]);
    let logs = LogManager::open(data, LogConfig::default()).unwrap();
    assert!(!logs.had_clean_shutdown());
    assert_eq!(logs.get(&tp()).unwrap().recovery_point(), 4);
    assert_eq!(
        read_text(&data.join("recovery-point-offset-checkpoint")),
        "0\n1\nt 0 4\n"
    );
}

/// Killed twice with a leader change between: the second recovery replays from
/// a recovery point inside epoch 0 and must keep the cache's entries from
/// before it. Kafka's file for this log (epoch 0 from offset 0, epoch 1 from
/// offset 4) is `0\n2\n0 0\n1 4\n`; replaying epoch 0 at offset 2 used to
/// restart it there and drop `(0, 0)`.
#[test]
fn a_second_crash_across_an_epoch_change_keeps_the_earlier_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    write_and_crash(data, config(1 << 20), &[0]);
    {
        // The first recovery claims offsets 0..2: the recovery point is 2.
        let mut logs = LogManager::open(data, LogConfig::default()).unwrap();
        assert_eq!(logs.get(&tp()).unwrap().recovery_point(), 2);
        let log = logs.get_or_create(&tp()).unwrap();
        log.append_as_leader(producer_batch(&["r1a", "r1b"]), 0)
            .unwrap();
        log.append_as_leader(producer_batch(&["r2a", "r2b"]), 1)
            .unwrap();
        assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0), e(1, 4)]);
        // Killed: no shutdown, no checkpoint past the recovery point.
    }
    let logs = LogManager::open(data, LogConfig::default()).unwrap();
    assert!(!logs.had_clean_shutdown());
    assert_eq!(logs.get(&tp()).unwrap().log_end_offset(), 6);
    assert_eq!(
        logs.get(&tp()).unwrap().leader_epoch_cache().entries(),
        &[e(0, 0), e(1, 4)]
    );
    assert_eq!(
        read_text(&data.join(tp().dir_name()).join("leader-epoch-checkpoint")),
        "0\n2\n0 0\n1 4\n"
    );
}

#[test]
fn a_missing_middle_segment_ends_the_log_before_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let one = producer_batch(&["r0a", "r0b"]).len() as u64;
    write_and_crash(data, config(2 * one), &[0, 0, 1, 1, 2, 2]);
    fs::remove_file(segment_path(data, &tp(), 4)).unwrap();
    let after_gap = segment_path(data, &tp(), 8);

    let logs = LogManager::open(data, LogConfig::default()).unwrap();
    let log = logs.get(&tp()).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.segment_base_offsets(), vec![0]);
    let cut = log.recovery_truncation().unwrap();
    assert_eq!(
        cut.reason,
        BatchError::UnexpectedBaseOffset {
            expected: 4,
            actual: 8
        }
    );
    assert_eq!(cut.deleted_segments, vec![after_gap.clone()]);
    assert!(!after_gap.exists());
    drop(logs);
    assert_eq!(epoch_file(data), vec![e(0, 0)]);
    assert_eq!(hw_file(data), 4);
}
