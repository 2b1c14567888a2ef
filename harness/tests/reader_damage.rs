//! Damage is data: each kind of damage to a copy of the `reader-basic`
//! fixture comes back as the named finding, with its file and position, and
//! the reader reads on where it can. Positions are taken from the reader's
//! own output on the undamaged fixture, so the tests follow the fixture.

use std::fs;
use std::path::{Path, PathBuf};

use epochal::reader::{DataDirState, Finding, FindingKind, Location, ReadError, read_data_dir};

use crate::common;
use common::fixture_copy as damaged_copy;

const SEGMENT_0: &str = "t-0/00000000000000000000.log";
const SEGMENT_5: &str = "t-0/00000000000000000005.log";
const SEGMENT_10: &str = "t-0/00000000000000000010.log";

/// Byte positions of the batches in `file`, from the undamaged read.
fn positions(state: &DataDirState, file: &str) -> Vec<u64> {
    state
        .replica("t", 0)
        .unwrap()
        .batches()
        .filter(|batch| *batch.file == *Path::new(file))
        .map(|batch| batch.position)
        .collect()
}

fn findings(state: &DataDirState) -> Vec<Finding> {
    state.all_findings().cloned().collect()
}

fn finding(file: &str, at: Location, kind: FindingKind) -> Finding {
    Finding {
        file: PathBuf::from(file),
        at,
        kind,
    }
}

fn offsets(state: &DataDirState) -> Vec<i64> {
    state
        .replica("t", 0)
        .unwrap()
        .compact()
        .records
        .iter()
        .map(|record| record.offset)
        .collect()
}

fn truncate(path: &Path, length: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(length)
        .unwrap();
}

fn patch(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = fs::read(path).unwrap();
    edit(&mut bytes);
    fs::write(path, bytes).unwrap();
}

#[test]
fn torn_tail_is_reported_at_the_torn_batch_and_earlier_batches_survive() {
    let (dir, clean) = damaged_copy();
    let last = *positions(&clean, SEGMENT_10).last().unwrap();
    let last_size = clean
        .replica("t", 0)
        .unwrap()
        .batches()
        .last()
        .unwrap()
        .size_bytes;
    truncate(&dir.path().join(SEGMENT_10), last + 30);

    let state = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        findings(&state),
        vec![finding(
            SEGMENT_10,
            Location::Byte(last),
            FindingKind::TornTail {
                bytes_remaining: 30,
                bytes_needed: last_size,
            }
        )]
    );
    assert_eq!(offsets(&state), (0..=17).collect::<Vec<_>>());
    assert_eq!(state.replica("t", 0).unwrap().log_end_offset, 18);
}

#[test]
fn tail_torn_inside_the_header_is_a_torn_tail_too() {
    let (dir, clean) = damaged_copy();
    let last = *positions(&clean, SEGMENT_10).last().unwrap();
    truncate(&dir.path().join(SEGMENT_10), last + 10);

    let state = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        findings(&state),
        vec![finding(
            SEGMENT_10,
            Location::Byte(last),
            FindingKind::TornTail {
                bytes_remaining: 10,
                bytes_needed: 17,
            }
        )]
    );
}

#[test]
fn flipped_byte_is_a_crc_mismatch_and_the_next_batch_is_still_read() {
    let (dir, clean) = damaged_copy();
    let second = positions(&clean, SEGMENT_5)[1];
    // A byte in the first batch's records, well inside the CRC-covered part.
    patch(&dir.path().join(SEGMENT_5), |bytes| bytes[70] ^= 0x01);

    let state = read_data_dir(dir.path()).unwrap();
    let found = findings(&state);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(found[0].file, Path::new(SEGMENT_5));
    assert_eq!(found[0].at, Location::Byte(0));
    assert!(
        matches!(found[0].kind, FindingKind::CrcMismatch { base_offset: 5, stored, computed } if stored != computed),
        "{found:#?}"
    );
    // Offsets 5..=7 are untrustworthy, so the intact batch at 8 follows a gap.
    assert_eq!(
        found[1],
        finding(
            SEGMENT_5,
            Location::Byte(second),
            FindingKind::OffsetGap {
                expected: 5,
                found: 8
            }
        )
    );
    let expected: Vec<i64> = (0..=4).chain(8..=18).collect();
    assert_eq!(offsets(&state), expected);
    let corrupt = state
        .replica("t", 0)
        .unwrap()
        .batches()
        .find(|b| b.base_offset == 5)
        .unwrap();
    assert!(!corrupt.crc_valid && !corrupt.intact && corrupt.records.is_empty());
}

#[test]
fn missing_segment_is_reported_at_the_segment_after_the_hole() {
    let (dir, _) = damaged_copy();
    fs::remove_file(dir.path().join(SEGMENT_5)).unwrap();

    let state = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        findings(&state),
        vec![finding(
            SEGMENT_10,
            Location::Byte(0),
            FindingKind::MissingSegment {
                expected_base_offset: 5,
                found_base_offset: 10,
            }
        )]
    );
    let expected: Vec<i64> = (0..=4).chain(10..=18).collect();
    assert_eq!(offsets(&state), expected);
}

#[test]
fn malformed_offset_checkpoint_names_file_and_line_and_is_ignored() {
    let (dir, _) = damaged_copy();
    fs::write(
        dir.path().join("replication-offset-checkpoint"),
        "0\n2\nt 0 15\na-b zero 2\n",
    )
    .unwrap();

    let state = read_data_dir(dir.path()).unwrap();
    let found = findings(&state);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].file, Path::new("replication-offset-checkpoint"));
    assert_eq!(found[0].at, Location::Line(4));
    assert!(
        matches!(&found[0].kind, FindingKind::MalformedCheckpoint { problem } if problem.contains("a-b zero 2")),
        "{found:#?}"
    );
    assert_eq!(state.high_watermarks, None);
    assert_eq!(state.replica("t", 0).unwrap().high_watermark, None);
    // The other checkpoint is unaffected.
    assert_eq!(state.replica("t", 0).unwrap().recovery_point, Some(10));
}

#[test]
fn epoch_checkpoint_with_a_wrong_count_or_version_is_malformed() {
    for (text, line) in [("0\n3\n0 0\n1 5\n", 2), ("1\n1\n0 0\n", 1)] {
        let (dir, _) = damaged_copy();
        fs::write(dir.path().join("t-0/leader-epoch-checkpoint"), text).unwrap();

        let state = read_data_dir(dir.path()).unwrap();
        let found = findings(&state);
        assert_eq!(found.len(), 1, "{text:?}: {found:#?}");
        assert_eq!(found[0].file, Path::new("t-0/leader-epoch-checkpoint"));
        assert_eq!(found[0].at, Location::Line(line), "{text:?}");
        assert!(matches!(
            found[0].kind,
            FindingKind::MalformedCheckpoint { .. }
        ));
        assert_eq!(state.replica("t", 0).unwrap().leader_epochs, None);
    }
}

#[test]
fn epoch_entry_past_the_log_end_is_reported_but_one_at_the_log_end_is_not() {
    let (dir, _) = damaged_copy();
    // The log ends at 19. A new leader may record (epoch, LEO) before its
    // first append (KAFKA-7415), so (4, 19) is normal; (5, 25) is not.
    fs::write(
        dir.path().join("t-0/leader-epoch-checkpoint"),
        "0\n6\n0 0\n1 5\n2 8\n3 13\n4 19\n5 25\n",
    )
    .unwrap();

    let state = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        findings(&state),
        vec![finding(
            "t-0/leader-epoch-checkpoint",
            Location::Line(8),
            FindingKind::EpochEntryPastLogEnd {
                epoch: 5,
                start_offset: 25,
                log_end_offset: 19,
            }
        )]
    );
}

#[test]
fn high_watermark_past_a_log_cut_at_a_batch_boundary_is_reported() {
    let (dir, clean) = damaged_copy();
    // Cut before the zstd batch (offsets 13..=16): a clean boundary, so no
    // torn tail, and the log now ends at 13 while the HW says 15.
    let zstd = positions(&clean, SEGMENT_10)[1];
    truncate(&dir.path().join(SEGMENT_10), zstd);

    let state = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        findings(&state),
        vec![finding(
            "replication-offset-checkpoint",
            Location::Line(3),
            FindingKind::CheckpointPastLogEnd {
                topic: "t".into(),
                partition: 0,
                offset: 15,
                log_end_offset: 13,
            }
        )]
    );
}

#[test]
fn a_batch_written_twice_is_an_overlap() {
    let (dir, clean) = damaged_copy();
    let segment = dir.path().join(SEGMENT_10);
    let end = fs::metadata(&segment).unwrap().len();
    let first_size = clean.replica("t", 0).unwrap().segments[2].batches[0].size_bytes as usize;
    patch(&segment, |bytes| {
        let first = bytes[..first_size].to_vec();
        bytes.extend(first);
    });

    let state = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        findings(&state),
        vec![finding(
            SEGMENT_10,
            Location::Byte(end),
            FindingKind::OffsetOverlap {
                expected: 19,
                found: 10
            }
        )]
    );
}

#[test]
fn a_base_offset_moved_forward_is_a_gap() {
    // baseOffset lies outside the CRC, so patching it keeps the batch valid.
    let (dir, clean) = damaged_copy();
    let second = positions(&clean, SEGMENT_0)[1] as usize;
    patch(&dir.path().join(SEGMENT_0), |bytes| {
        bytes[second..second + 8].copy_from_slice(&4i64.to_be_bytes());
    });

    let state = read_data_dir(dir.path()).unwrap();
    let found = findings(&state);
    assert_eq!(
        found[0],
        finding(
            SEGMENT_0,
            Location::Byte(second as u64),
            FindingKind::OffsetGap {
                expected: 3,
                found: 4
            }
        )
    );
}

#[test]
fn records_that_do_not_decode_under_a_valid_crc_are_malformed_records() {
    let (dir, clean) = damaged_copy();
    let gzip = positions(&clean, SEGMENT_0)[1] as usize;
    patch(&dir.path().join(SEGMENT_0), |bytes| {
        // Break the gzip stream's magic, then reseal the CRC over attributes..end.
        bytes[gzip + 61] ^= 0xff;
        let crc = crc32c::crc32c(&bytes[gzip + 21..]);
        bytes[gzip + 17..gzip + 21].copy_from_slice(&crc.to_be_bytes());
    });

    let state = read_data_dir(dir.path()).unwrap();
    let found = findings(&state);
    assert_eq!(found[0].file, Path::new(SEGMENT_0));
    assert_eq!(found[0].at, Location::Byte(gzip as u64));
    assert!(
        matches!(&found[0].kind, FindingKind::MalformedRecords { base_offset: 3, reason } if reason.contains("gzip")),
        "{found:#?}"
    );
}

#[test]
fn a_segment_named_above_its_first_batch_is_reported() {
    let (dir, _) = damaged_copy();
    let renamed = "t-0/00000000000000000006.log";
    fs::rename(dir.path().join(SEGMENT_5), dir.path().join(renamed)).unwrap();

    let state = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        findings(&state),
        vec![finding(
            renamed,
            Location::Byte(0),
            FindingKind::BatchBeforeSegmentBase {
                segment_base_offset: 6,
                batch_base_offset: 5,
            }
        )]
    );
}

#[test]
fn a_misnamed_segment_is_reported_and_skipped() {
    let (dir, _) = damaged_copy();
    fs::write(dir.path().join("t-0/42.log"), b"junk").unwrap();

    let state = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        findings(&state),
        vec![finding(
            "t-0/42.log",
            Location::File,
            FindingKind::BadSegmentName
        )]
    );
}

/// Every cut of a segment and every single flipped byte: never a panic, a
/// cut that is not at a batch boundary is always a torn tail, and a flip is
/// always noticed unless it hits partitionLeaderEpoch, the one header field
/// that neither the CRC nor offset continuity covers (the epoch checkers
/// compare it with the epoch file).
#[test]
fn no_cut_or_flip_panics_and_only_epoch_flips_go_unnoticed() {
    let (dir, clean) = damaged_copy();
    let boundaries: Vec<u64> = positions(&clean, SEGMENT_10);
    let segment = dir.path().join(SEGMENT_10);
    let original = fs::read(&segment).unwrap();
    for length in 0..original.len() {
        fs::write(&segment, &original[..length]).unwrap();
        let state = read_data_dir(dir.path()).unwrap();
        let torn = state
            .all_findings()
            .any(|f| matches!(f.kind, FindingKind::TornTail { .. }));
        assert_eq!(
            torn,
            !boundaries.contains(&(length as u64)),
            "cut at {length}"
        );
    }
    fs::write(&segment, &original).unwrap();

    let segment = dir.path().join(SEGMENT_5);
    let original = fs::read(&segment).unwrap();
    let epoch_fields: Vec<u64> = positions(&clean, SEGMENT_5)
        .iter()
        .flat_map(|&position| position + 12..position + 16)
        .collect();
    for at in 0..original.len() {
        let mut flipped = original.clone();
        flipped[at] ^= 0xff;
        fs::write(&segment, &flipped).unwrap();
        let state = read_data_dir(dir.path()).unwrap();
        let noticed = state.all_findings().count() > 0;
        assert_eq!(
            noticed,
            !epoch_fields.contains(&(at as u64)),
            "flip at {at}"
        );
    }
}

#[test]
fn an_unreadable_data_dir_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let error = read_data_dir(&missing).unwrap_err();
    assert!(matches!(&error, ReadError::DataDir { path, .. } if *path == missing));
    assert!(error.to_string().contains("nope"), "{error}");

    let file = dir.path().join("file");
    fs::write(&file, b"").unwrap();
    assert!(matches!(
        read_data_dir(&file).unwrap_err(),
        ReadError::NotADirectory { .. }
    ));
}

#[test]
fn an_empty_data_dir_reads_as_no_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let state = read_data_dir(dir.path()).unwrap();
    assert!(state.replicas.is_empty());
    assert!(!state.clean_shutdown);
    assert_eq!(state.high_watermarks, None);
    assert_eq!(state.all_findings().count(), 0);
}
