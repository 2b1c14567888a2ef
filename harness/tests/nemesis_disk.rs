//! Disk faults on a copy of the `reader-basic` fixture, checked by reading the
//! data directory back with the harness's reader.
//!
//! The fixture's `t-0` holds segments 0 (batches 0..=2, 3..=4), 5 (5..=7,
//! 8..=9) and 10 (10..=12, 13..=16, 17, 18); `a-b-0` one segment with batch
//! 0..=1. Byte positions and sizes come from the reader's view of the clean
//! copy; offsets are asserted exactly.

use std::fs;
use std::path::{Path, PathBuf};

use epochal::nemesis::disk::{Cut, DiskError, Truncate, power_loss, truncate_log};
use epochal::reader::{
    Batch, DataDirState, Finding, FindingKind, Location, ReadError, ReplicaState, read_data_dir,
};

use crate::common;
use common::{files_under, fixture_copy};

const SEGMENT_0: &str = "t-0/00000000000000000000.log";
const SEGMENT_5: &str = "t-0/00000000000000000005.log";
const SEGMENT_10: &str = "t-0/00000000000000000010.log";
const A_B_SEGMENT: &str = "a-b-0/00000000000000000000.log";
const RECOVERY_POINTS: &str = "recovery-point-offset-checkpoint";

fn replica<'a>(state: &'a DataDirState, topic: &str) -> &'a ReplicaState {
    state.replica(topic, 0).unwrap()
}

/// `(base offset, last offset)` of every batch, intact or not.
fn batch_offsets(state: &DataDirState, topic: &str) -> Vec<(i64, i64)> {
    replica(state, topic)
        .batches()
        .map(|batch| (batch.base_offset, batch.last_offset))
        .collect()
}

/// The clean batch starting at `base_offset`.
fn batch_at(clean: &DataDirState, topic: &str, base_offset: i64) -> Batch {
    replica(clean, topic)
        .batches()
        .find(|batch| batch.base_offset == base_offset)
        .unwrap()
        .clone()
}

/// The size of `file` in the clean copy, as the reader saw it.
fn clean_size(clean: &DataDirState, file: &str) -> u64 {
    clean
        .replicas
        .iter()
        .flat_map(|replica| &replica.segments)
        .find(|segment| segment.file == Path::new(file))
        .unwrap()
        .size_bytes
}

fn size(root: &Path, file: &str) -> u64 {
    fs::metadata(root.join(file)).unwrap().len()
}

/// File names in a replica directory, sorted.
fn files_in(root: &Path, replica: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join(replica))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn touch(root: &Path, files: &[&str]) {
    for file in files {
        fs::write(root.join(file), b"derived").unwrap();
    }
}

fn cut(replica: &str, before: i64, after: i64, bytes_removed: u64, deleted: &[&str]) -> Cut {
    Cut {
        replica: replica.to_owned(),
        log_end_offset_before: before,
        log_end_offset_after: after,
        bytes_removed,
        segments_deleted: deleted.iter().map(PathBuf::from).collect(),
    }
}

/// The bytes of every checkpoint file of the fixture's `t-0`.
fn checkpoints(root: &Path) -> Vec<Vec<u8>> {
    [
        "t-0/leader-epoch-checkpoint",
        "replication-offset-checkpoint",
        RECOVERY_POINTS,
    ]
    .iter()
    .map(|file| fs::read(root.join(file)).unwrap())
    .collect()
}

#[test]
fn disk_power_loss_keeps_exactly_the_batches_below_the_recovery_point() {
    let (dir, clean) = fixture_copy();
    let root = dir.path();
    // t-0's recovery point falls inside segment 5's second batch (8..=9);
    // a-b-0's inside its only batch (0..=1).
    fs::write(root.join(RECOVERY_POINTS), "0\n2\nt 0 8\na-b 0 1\n").unwrap();
    touch(
        root,
        &[
            "t-0/00000000000000000000.index",
            "t-0/00000000000000000005.index",
            "t-0/00000000000000000005.timeindex",
            "t-0/00000000000000000010.index",
            "t-0/00000000000000000010.timeindex",
            "t-0/00000000000000000010.txnindex",
        ],
    );
    let checkpoints_before = checkpoints(root);
    let cut_at = batch_at(&clean, "t", 8).position;

    let cuts = power_loss(root).unwrap();

    assert_eq!(
        cuts,
        vec![
            cut("a-b-0", 2, 0, clean_size(&clean, A_B_SEGMENT), &[]),
            cut(
                "t-0",
                19,
                8,
                (clean_size(&clean, SEGMENT_5) - cut_at) + clean_size(&clean, SEGMENT_10),
                &[SEGMENT_10],
            ),
        ]
    );
    let state = read_data_dir(root).unwrap();
    assert_eq!(batch_offsets(&state, "t"), vec![(0, 2), (3, 4), (5, 7)]);
    assert_eq!(batch_offsets(&state, "a-b"), vec![]);
    assert_eq!(replica(&state, "t").log_end_offset, 8);
    assert_eq!(replica(&state, "a-b").log_end_offset, 0);
    assert_eq!(size(root, SEGMENT_5), cut_at);
    assert_eq!(size(root, SEGMENT_0), clean_size(&clean, SEGMENT_0));
    assert_eq!(size(root, A_B_SEGMENT), 0, "the first segment stays, empty");
    // Segment 10 went with its indexes; the cut segment lost its index, the
    // untouched one kept it.
    assert_eq!(
        files_in(root, "t-0"),
        vec![
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000005.log",
            "leader-epoch-checkpoint",
        ]
    );
    assert!(!state.clean_shutdown, "a power loss is never clean");
    let checkpoints_after = checkpoints(root);
    assert_eq!(checkpoints_after, checkpoints_before);
    // The checkpoints left as they were now run past the cut logs, and the
    // reader says so; nothing is torn.
    let kinds: Vec<FindingKind> = state.all_findings().map(|f| f.kind.clone()).collect();
    assert_eq!(
        kinds,
        vec![
            FindingKind::CheckpointPastLogEnd {
                topic: "a-b".into(),
                partition: 0,
                offset: 2,
                log_end_offset: 0
            },
            FindingKind::CheckpointPastLogEnd {
                topic: "a-b".into(),
                partition: 0,
                offset: 1,
                log_end_offset: 0
            },
            FindingKind::EpochEntryPastLogEnd {
                epoch: 3,
                start_offset: 13,
                log_end_offset: 8
            },
            FindingKind::CheckpointPastLogEnd {
                topic: "t".into(),
                partition: 0,
                offset: 15,
                log_end_offset: 8
            },
        ]
    );
}

#[test]
fn disk_power_loss_without_a_recovery_point_loses_the_whole_log() {
    // No entry for a-b-0; t-0's recovery point is segment 10's base offset,
    // so segment 10 is cut to nothing but kept, as `Log.truncateTo` keeps it.
    let (dir, clean) = fixture_copy();
    let root = dir.path();
    fs::write(root.join(RECOVERY_POINTS), "0\n1\nt 0 10\n").unwrap();
    let cuts = power_loss(root).unwrap();
    assert_eq!(
        cuts,
        vec![
            cut("a-b-0", 2, 0, clean_size(&clean, A_B_SEGMENT), &[]),
            cut("t-0", 19, 10, clean_size(&clean, SEGMENT_10), &[]),
        ]
    );
    let state = read_data_dir(root).unwrap();
    assert_eq!(
        batch_offsets(&state, "t"),
        vec![(0, 2), (3, 4), (5, 7), (8, 9)]
    );
    assert_eq!(size(root, SEGMENT_10), 0);

    // No checkpoint file at all: every replica's recovery point is 0.
    let (dir, clean) = fixture_copy();
    let root = dir.path();
    fs::remove_file(root.join(RECOVERY_POINTS)).unwrap();
    let t_bytes: u64 = replica(&clean, "t")
        .segments
        .iter()
        .map(|s| s.size_bytes)
        .sum();
    let cuts = power_loss(root).unwrap();
    assert_eq!(
        cuts[1],
        cut("t-0", 19, 0, t_bytes, &[SEGMENT_5, SEGMENT_10])
    );
    let state = read_data_dir(root).unwrap();
    assert_eq!(batch_offsets(&state, "t"), vec![]);
    assert_eq!(replica(&state, "t").log_end_offset, 0);
    assert_eq!(
        files_in(root, "t-0"),
        vec!["00000000000000000000.log", "leader-epoch-checkpoint"]
    );
    assert_eq!(size(root, SEGMENT_0), 0);
}

#[test]
fn disk_truncate_to_an_offset_inside_a_batch_removes_the_whole_batch() {
    // 13 starts batch 13..=16, 14 is inside it, 16 is its last offset: each
    // takes the whole batch, so the log ends at 13.
    for offset in [13, 14, 16] {
        let (dir, clean) = fixture_copy();
        let root = dir.path();
        let a_b_before = fs::read(root.join(A_B_SEGMENT)).unwrap();
        let zstd = batch_at(&clean, "t", 13);
        let cut_inside = truncate_log(root, "t", 0, Truncate::ToOffset(offset)).unwrap();
        assert_eq!(
            cut_inside,
            cut(
                "t-0",
                19,
                13,
                clean_size(&clean, SEGMENT_10) - zstd.position,
                &[]
            ),
            "offset {offset}"
        );
        let state = read_data_dir(root).unwrap();
        assert_eq!(
            batch_offsets(&state, "t"),
            vec![(0, 2), (3, 4), (5, 7), (8, 9), (10, 12)]
        );
        assert_eq!(size(root, SEGMENT_10), zstd.position);
        assert_eq!(fs::read(root.join(A_B_SEGMENT)).unwrap(), a_b_before);
        assert!(state.clean_shutdown, "truncate_log leaves the marker alone");
    }

    // Offset 6 is inside segment 5's first batch: segment 5 stays, empty, and
    // segment 10 (base above 6) is deleted.
    let (dir, clean) = fixture_copy();
    let root = dir.path();
    let cut_6 = truncate_log(root, "t", 0, Truncate::ToOffset(6)).unwrap();
    assert_eq!(
        cut_6,
        cut(
            "t-0",
            19,
            5,
            clean_size(&clean, SEGMENT_5) + clean_size(&clean, SEGMENT_10),
            &[SEGMENT_10]
        )
    );
    let state = read_data_dir(root).unwrap();
    assert_eq!(batch_offsets(&state, "t"), vec![(0, 2), (3, 4)]);
    assert_eq!(size(root, SEGMENT_5), 0);

    // At or past the log end there is nothing to cut.
    for offset in [19, u64::MAX] {
        let cut_end = truncate_log(root, "t", 0, Truncate::ToOffset(offset)).unwrap();
        assert_eq!(cut_end, cut("t-0", 5, 5, 0, &[]));
    }
}

#[test]
fn disk_truncate_by_bytes_leaves_a_torn_tail_the_reader_reports() {
    let (dir, clean) = fixture_copy();
    let root = dir.path();
    touch(root, &["t-0/00000000000000000010.index"]);
    let last = batch_at(&clean, "t", 18);
    let cut_10 = truncate_log(root, "t", 0, Truncate::ByBytes(10)).unwrap();
    assert_eq!(cut_10, cut("t-0", 19, 18, 10, &[]));
    let state = read_data_dir(root).unwrap();
    let t = replica(&state, "t");
    assert_eq!(t.records().last().unwrap().1.offset, 17);
    // The only finding: the checkpoints (HW 15, recovery point 10, epoch 3
    // from 13) all stay below the new log end.
    assert_eq!(
        t.findings,
        vec![Finding {
            file: PathBuf::from(SEGMENT_10),
            at: Location::Byte(last.position),
            kind: FindingKind::TornTail {
                bytes_remaining: last.size_bytes - 10,
                bytes_needed: last.size_bytes,
            },
        }]
    );
    assert!(!root.join("t-0/00000000000000000010.index").exists());

    // Past the last segment: segment 10 goes, segment 5 is torn in 8..=9.
    let (dir, clean) = fixture_copy();
    let root = dir.path();
    let segment_10 = clean_size(&clean, SEGMENT_10);
    let eight = batch_at(&clean, "t", 8);
    let cut_span = truncate_log(root, "t", 0, Truncate::ByBytes(segment_10 + 5)).unwrap();
    assert_eq!(cut_span, cut("t-0", 19, 8, segment_10 + 5, &[SEGMENT_10]));
    let state = read_data_dir(root).unwrap();
    assert_eq!(
        batch_offsets(&state, "t"),
        vec![(0, 2), (3, 4), (5, 7)],
        "the torn batch has no readable frame"
    );
    let torn: Vec<_> = replica(&state, "t")
        .findings
        .iter()
        .filter(|f| matches!(f.kind, FindingKind::TornTail { .. }))
        .collect();
    assert_eq!(torn.len(), 1);
    assert_eq!(torn[0].file, Path::new(SEGMENT_5));
    assert_eq!(torn[0].at, Location::Byte(eight.position));

    // More than the whole log: only the first segment is left, empty.
    let cut_all = truncate_log(root, "t", 0, Truncate::ByBytes(u64::MAX)).unwrap();
    assert_eq!(
        cut_all,
        cut(
            "t-0",
            8,
            0,
            clean_size(&clean, SEGMENT_0) + eight.position + eight.size_bytes - 5,
            &[SEGMENT_5]
        )
    );
    assert_eq!(
        files_in(root, "t-0"),
        vec!["00000000000000000000.log", "leader-epoch-checkpoint"]
    );
}

#[test]
fn disk_a_missing_replica_or_data_dir_is_an_error_naming_the_path() {
    let (dir, _) = fixture_copy();
    let root = dir.path();
    let error = truncate_log(root, "t", 7, Truncate::ByBytes(1)).unwrap_err();
    let expected = root.join("t-7");
    assert!(matches!(&error, DiskError::MissingReplica { path } if *path == expected));
    assert!(error.to_string().contains(&expected.display().to_string()));

    let missing = root.join("no-such-dir");
    for error in [
        power_loss(&missing).unwrap_err(),
        truncate_log(&missing, "t", 0, Truncate::ToOffset(0)).unwrap_err(),
    ] {
        assert!(
            matches!(&error, DiskError::DataDir(ReadError::DataDir { path, .. }) if *path == missing)
        );
        assert!(error.to_string().contains(&missing.display().to_string()));
    }
}

#[test]
fn disk_an_unreadable_segment_or_recovery_checkpoint_stops_the_fault_before_any_cut() {
    // A directory where a-b-0's segment should be: the reader cannot read it.
    let (dir, _) = fixture_copy();
    let root = dir.path();
    fs::remove_file(root.join(A_B_SEGMENT)).unwrap();
    fs::create_dir(root.join(A_B_SEGMENT)).unwrap();
    let before = files_under(root);
    let error = power_loss(root).unwrap_err();
    let expected = root.join(A_B_SEGMENT);
    assert!(matches!(&error, DiskError::Unreadable { path, .. } if *path == expected));
    assert!(error.to_string().contains(&expected.display().to_string()));
    assert_eq!(
        files_under(root),
        before,
        "t-0 and the marker are untouched"
    );

    let (dir, _) = fixture_copy();
    let root = dir.path();
    fs::write(root.join(RECOVERY_POINTS), "0\n5\nt 0 8\n").unwrap();
    let before = files_under(root);
    let error = power_loss(root).unwrap_err();
    let expected = root.join(RECOVERY_POINTS);
    assert!(matches!(&error, DiskError::RecoveryPoints { path, .. } if *path == expected));
    assert!(error.to_string().contains(&expected.display().to_string()));
    assert_eq!(files_under(root), before);
}

#[test]
fn disk_truncate_by_records_and_by_fraction_are_offset_and_byte_cuts() {
    // The last 3 offsets are 16, 17, 18: the cut is at 16, inside batch
    // 13..=16, which goes whole (as to_offset 16 does); the log ends at 13.
    let (dir, _) = fixture_copy();
    let by_records = truncate_log(dir.path(), "t", 0, Truncate::ByRecords(3)).unwrap();
    let (dir, _) = fixture_copy();
    let to_offset = truncate_log(dir.path(), "t", 0, Truncate::ToOffset(16)).unwrap();
    assert_eq!(by_records, to_offset);
    assert_eq!(by_records.log_end_offset_after, 13);
    // More records than the log holds empties it.
    let (dir, _) = fixture_copy();
    let all = truncate_log(dir.path(), "t", 0, Truncate::ByRecords(1000)).unwrap();
    assert_eq!(all.log_end_offset_after, 0);

    // Half the log's bytes (every segment's), rounded down, as by_bytes.
    let (dir, clean) = fixture_copy();
    let total = clean_size(&clean, SEGMENT_0)
        + clean_size(&clean, SEGMENT_5)
        + clean_size(&clean, SEGMENT_10);
    let half = truncate_log(dir.path(), "t", 0, Truncate::Fraction(0.5)).unwrap();
    let (dir, _) = fixture_copy();
    let by_bytes = truncate_log(dir.path(), "t", 0, Truncate::ByBytes(total / 2)).unwrap();
    assert_eq!(half, by_bytes);
    assert_eq!(half.bytes_removed, total / 2);
    // The whole of it leaves the first segment, empty.
    let (dir, _) = fixture_copy();
    let whole = truncate_log(dir.path(), "t", 0, Truncate::Fraction(1.0)).unwrap();
    assert_eq!(whole.log_end_offset_after, 0);
    assert_eq!(size(dir.path(), SEGMENT_0), 0);
}
