//! Producer-state snapshots (`<offset>.snapshot`, KIP-98) read from a data
//! directory built on disk: segments written by kafka-protocol's encoder,
//! snapshots written field by field here in Kafka's layout (never by the
//! broker crate, never by the reader's own code). Intact snapshots come back
//! in offset order with their entries; damaged ones come back as findings
//! beside an unharmed log; replicas without snapshots serialize as before.

use std::fs;
use std::path::{Path, PathBuf};

use epochal::reader::{
    CompactDataDir, DataDirState, Finding, FindingKind, Location, ProducerEntry, read_data_dir,
};
use serde_json::Value;

use crate::common;
use common::segments::{
    SpecBatch, SpecCodec, SpecDataDir, SpecReplica, SpecSegment, records, write_fixture,
};

const PRODUCER_A: i64 = 1000;
const PRODUCER_B: i64 = 1001;

fn snapshot_name(offset: i64) -> String {
    format!("t-0/{offset:020}.snapshot")
}

/// `t-0`: offsets 0-4 from producer A (epoch 0), 5-9 from producer B (epoch
/// 2), in two segments; `u-0`: offsets 0-1 without a producer and no
/// snapshots.
fn data_dir() -> tempfile::TempDir {
    let producer_batch = |producer, offsets| SpecBatch {
        epoch: 0,
        codec: SpecCodec::None,
        producer: Some(producer),
        records: records(offsets),
    };
    let spec = SpecDataDir {
        name: "producer-snapshots",
        replicas: vec![
            SpecReplica {
                topic: "t",
                partition: 0,
                segments: vec![
                    SpecSegment {
                        base_offset: 0,
                        batches: vec![producer_batch((PRODUCER_A, 0), 0..=4)],
                    },
                    SpecSegment {
                        base_offset: 5,
                        batches: vec![producer_batch((PRODUCER_B, 2), 5..=9)],
                    },
                ],
                epochs: vec![(0, 0)],
            },
            SpecReplica {
                topic: "u",
                partition: 0,
                segments: vec![SpecSegment {
                    base_offset: 0,
                    batches: vec![common::segments::batch(0, SpecCodec::None, records(0..=1))],
                }],
                epochs: vec![(0, 0)],
            },
        ],
        high_watermarks: vec![("t", 0, 10), ("u", 0, 2)],
        recovery_points: vec![("t", 0, 10), ("u", 0, 2)],
        clean_shutdown: true,
    };
    let dir = tempfile::tempdir().unwrap();
    write_fixture(&spec, dir.path());
    dir
}

/// Producer A after its batch 0-4 (sequences 0-4).
fn producer_a() -> ProducerEntry {
    ProducerEntry {
        producer_id: PRODUCER_A,
        producer_epoch: 0,
        last_sequence: 4,
        last_offset: 4,
        offset_delta: 4,
        timestamp: 1_700_000_000_004,
        coordinator_epoch: -1,
        current_txn_first_offset: -1,
    }
}

/// Producer B after its batch 5-9 (sequences 0-4).
fn producer_b() -> ProducerEntry {
    ProducerEntry {
        producer_id: PRODUCER_B,
        producer_epoch: 2,
        last_sequence: 4,
        last_offset: 9,
        offset_delta: 4,
        timestamp: 1_700_000_000_009,
        coordinator_epoch: -1,
        current_txn_first_offset: -1,
    }
}

/// Kafka's snapshot layout (`PidSnapshot`): version, CRC-32C of everything
/// after the crc field, an int32-counted array of 46-byte entries.
fn encode(version: i16, count: i32, entries: &[ProducerEntry]) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend(version.to_be_bytes());
    bytes.extend([0; 4]);
    bytes.extend(count.to_be_bytes());
    for e in entries {
        bytes.extend(e.producer_id.to_be_bytes());
        bytes.extend(e.producer_epoch.to_be_bytes());
        bytes.extend(e.last_sequence.to_be_bytes());
        bytes.extend(e.last_offset.to_be_bytes());
        bytes.extend(e.offset_delta.to_be_bytes());
        bytes.extend(e.timestamp.to_be_bytes());
        bytes.extend(e.coordinator_epoch.to_be_bytes());
        bytes.extend(e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&bytes[6..]);
    bytes[2..6].copy_from_slice(&crc.to_be_bytes());
    bytes
}

fn valid(entries: &[ProducerEntry]) -> Vec<u8> {
    encode(1, entries.len() as i32, entries)
}

fn write(root: &Path, file: &str, bytes: &[u8]) {
    fs::write(root.join(file), bytes).unwrap();
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

#[test]
fn snapshots_beside_the_segments_are_read_in_offset_order() {
    let dir = data_dir();
    // Written out of order: the segment roll at 5, then the clean shutdown
    // at the log end, 10.
    write(
        dir.path(),
        &snapshot_name(10),
        &valid(&[producer_b(), producer_a()]),
    );
    write(dir.path(), &snapshot_name(5), &valid(&[producer_a()]));

    let state = read_data_dir(dir.path()).unwrap();
    assert!(findings(&state).is_empty(), "{:?}", findings(&state));
    let replica = state.replica("t", 0).unwrap();
    assert_eq!(replica.records().count(), 10, "the log reads as before");
    let read: Vec<_> = replica
        .producer_snapshots
        .iter()
        .map(|s| {
            (
                s.file.clone(),
                s.offset,
                s.version,
                s.intact,
                s.entries.clone(),
            )
        })
        .collect();
    assert_eq!(
        read,
        [
            (
                PathBuf::from(snapshot_name(5)),
                5,
                Some(1),
                true,
                vec![producer_a()]
            ),
            (
                PathBuf::from(snapshot_name(10)),
                10,
                Some(1),
                true,
                vec![producer_b(), producer_a()]
            ),
        ]
    );

    let compact = serde_json::to_value(state.compact()).unwrap();
    assert_eq!(
        compact["replicas"][0]["producer_snapshots"],
        serde_json::json!([
            {"offset": 5, "intact": true, "producers": [[PRODUCER_A, 0, 4, 4]]},
            {"offset": 10, "intact": true, "producers": [[PRODUCER_B, 2, 4, 9], [PRODUCER_A, 0, 4, 4]]},
        ])
    );
    let back: CompactDataDir = serde_json::from_value(compact).unwrap();
    assert_eq!(back, state.compact());

    let mut dump = Vec::new();
    epochal::reader::dump::write_dump(&state, &mut dump).unwrap();
    let dump = String::from_utf8(dump).unwrap();
    for line in [
        "Dumping t-0/00000000000000000010.snapshot".to_owned(),
        "Snapshot offset: 10 version: 1 entries: 2 size: 102 isvalid: true".to_owned(),
        format!(
            "producerId: {PRODUCER_B} producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: -1 \
             firstSequence: 0 lastSequence: 4 lastOffset: 9 offsetDelta: 4 timestamp: 1700000000009"
        ),
    ] {
        assert!(dump.lines().any(|l| l == line), "{line:?} not in\n{dump}");
    }
}

#[test]
fn replicas_without_snapshots_serialize_as_before() {
    let dir = data_dir();
    write(dir.path(), &snapshot_name(10), &valid(&[producer_a()]));
    let state = read_data_dir(dir.path()).unwrap();

    let full = serde_json::to_value(&state).unwrap();
    let compact = serde_json::to_value(state.compact()).unwrap();
    let has_key = |replica: &Value| replica.get("producer_snapshots").is_some();
    // `t-0` has a snapshot, `u-0` none: only `t-0` grows the key.
    assert!(has_key(&full["replicas"][0]) && has_key(&compact["replicas"][0]));
    assert!(!has_key(&full["replicas"][1]) && !has_key(&compact["replicas"][1]));
    let back: DataDirState = serde_json::from_value(full).unwrap();
    assert_eq!(back, state);
}

#[test]
fn damaged_snapshots_are_findings_and_the_log_still_reads() {
    let dir = data_dir();
    let root = dir.path();
    // Created and never written, as a crash between the two leaves it.
    write(root, &snapshot_name(3), &[]);
    let mut flipped = valid(&[producer_a()]);
    flipped[20] ^= 0x01;
    let stored = u32::from_be_bytes(flipped[2..6].try_into().unwrap());
    let computed = crc32c::crc32c(&flipped[6..]);
    write(root, &snapshot_name(5), &flipped);
    write(root, &snapshot_name(7), &encode(2, 1, &[producer_a()]));
    // A count of two billion over a valid CRC: a finding, not an allocation.
    write(root, &snapshot_name(8), &encode(1, i32::MAX, &[]));
    write(
        root,
        &snapshot_name(10),
        &valid(&[producer_b(), producer_a()]),
    );
    // Past the log end (10): Kafka would have deleted it on truncation.
    write(root, &snapshot_name(12), &valid(&[producer_b()]));
    write(root, "t-0/7.snapshot", &valid(&[]));
    // Kafka's asynchronous delete renames; such files are not snapshots.
    write(
        root,
        "t-0/00000000000000000004.snapshot.deleted",
        &[0xff; 3],
    );

    let state = read_data_dir(root).unwrap();
    assert_eq!(
        findings(&state),
        [
            finding(
                "t-0/7.snapshot",
                Location::File,
                FindingKind::BadSnapshotName
            ),
            finding(
                &snapshot_name(3),
                Location::Byte(0),
                FindingKind::SnapshotTruncated {
                    bytes_remaining: 0,
                    bytes_needed: 10,
                },
            ),
            finding(
                &snapshot_name(5),
                Location::Byte(2),
                FindingKind::SnapshotCrcMismatch { stored, computed },
            ),
            finding(
                &snapshot_name(7),
                Location::Byte(0),
                FindingKind::UnknownSnapshotVersion { version: 2 },
            ),
            finding(
                &snapshot_name(8),
                Location::Byte(10),
                FindingKind::SnapshotTruncated {
                    bytes_remaining: 0,
                    bytes_needed: i32::MAX as u64 * 46,
                },
            ),
            finding(
                &snapshot_name(12),
                Location::File,
                FindingKind::SnapshotPastLogEnd {
                    snapshot_offset: 12,
                    log_end_offset: 10,
                },
            ),
        ]
    );

    let replica = state.replica("t", 0).unwrap();
    assert_eq!(replica.records().count(), 10, "the log reads as before");
    assert_eq!(replica.log_end_offset, 10);
    let read: Vec<_> = replica
        .producer_snapshots
        .iter()
        .map(|s| (s.offset, s.intact, s.entries.len()))
        .collect();
    assert_eq!(
        read,
        [
            (3, false, 0),
            (5, false, 0),
            (7, false, 0),
            (8, false, 0),
            (10, true, 2),
            (12, true, 1),
        ]
    );

    let mut dump = Vec::new();
    epochal::reader::dump::write_dump(&state, &mut dump).unwrap();
    let dump = String::from_utf8(dump).unwrap();
    assert!(
        dump.lines()
            .any(|l| l == "Snapshot offset: 3 version: none entries: 0 size: 0 isvalid: false"),
        "{dump}"
    );
    assert!(dump.contains("Findings: 6"), "{dump}");
}
