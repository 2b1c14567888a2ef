//! Golden data directories for the reader, written through kafka-protocol's
//! record batch encoder (never the broker crate), and the reader's output on
//! them compared with what the generator put in.
//!
//! `fixtures_are_what_the_encoder_writes` regenerates every fixture into a
//! tempdir and demands the committed files be equal byte for byte, so the
//! fixtures cannot drift from the spec below. After changing the spec, or when
//! a codec library's version or backend (flate2's feature set) changes the
//! compressed bytes, rewrite them with
//! `EPOCHAL_REGENERATE_FIXTURES=1 cargo nextest run -p epochal fixtures_are_what_the_encoder_writes`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use epochal::reader::{self, Batch, Codec, Payload, Record, ReplicaState, Segment, read_data_dir};

use crate::common;
use common::files_under;
use common::segments::{
    BASE_TIMESTAMP_MS, SpecBatch, SpecCodec, SpecDataDir, SpecRecord, SpecReplica, SpecSegment,
    batch, encode_batch, records, text, write_fixture,
};

/// `t-0`: three segments, four epochs, every codec, multi-record batches, a
/// null key, headers, a tombstone, a binary key and value, an idempotent
/// producer's batch. `a-b-0`: a dashed topic with one small segment.
fn basic() -> SpecDataDir {
    let mut first = records(0..=2);
    first[1].key = None;
    first[2].headers = vec![("trace", text("abc")), ("empty", None)];
    // Values long enough that the codecs actually compress something.
    let mut zstd = records(13..=16);
    for record in &mut zstd {
        record.value = text(format!("v{}-{}", record.offset, "payload ".repeat(20)));
    }
    let last = vec![SpecRecord {
        offset: 17,
        key: Some(vec![0x00, 0xff, 0xfe]),
        value: None,
        headers: Vec::new(),
    }];
    let mut binary = records(18..=18);
    binary[0].value = Some(vec![0xde, 0xad, 0xbe, 0xef]);

    let mut snappy = batch(1, SpecCodec::SnappyRaw, records(5..=7));
    snappy.producer = Some((7, 0));

    SpecDataDir {
        name: "reader-basic",
        replicas: vec![
            SpecReplica {
                topic: "t",
                partition: 0,
                segments: vec![
                    SpecSegment {
                        base_offset: 0,
                        batches: vec![
                            batch(0, SpecCodec::None, first),
                            batch(0, SpecCodec::Gzip, records(3..=4)),
                        ],
                    },
                    SpecSegment {
                        base_offset: 5,
                        batches: vec![snappy, batch(2, SpecCodec::SnappyXerial, records(8..=9))],
                    },
                    SpecSegment {
                        base_offset: 10,
                        batches: vec![
                            batch(2, SpecCodec::Lz4, records(10..=12)),
                            batch(3, SpecCodec::Zstd, zstd),
                            batch(3, SpecCodec::None, last),
                            batch(3, SpecCodec::None, binary),
                        ],
                    },
                ],
                epochs: vec![(0, 0), (1, 5), (2, 8), (3, 13)],
            },
            SpecReplica {
                topic: "a-b",
                partition: 0,
                segments: vec![SpecSegment {
                    base_offset: 0,
                    batches: vec![batch(0, SpecCodec::None, records(0..=1))],
                }],
                epochs: vec![(0, 0)],
            },
        ],
        high_watermarks: vec![("t", 0, 15), ("a-b", 0, 2)],
        recovery_points: vec![("t", 0, 10), ("a-b", 0, 2)],
        clean_shutdown: true,
    }
}

fn all_fixtures() -> Vec<SpecDataDir> {
    vec![basic()]
}

fn committed(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn fixtures_are_what_the_encoder_writes() {
    let regenerate = std::env::var("EPOCHAL_REGENERATE_FIXTURES").is_ok_and(|v| v == "1");
    for spec in all_fixtures() {
        let scratch = tempfile::tempdir().unwrap();
        write_fixture(&spec, scratch.path());
        let target = committed(spec.name);
        if regenerate {
            let _ = fs::remove_dir_all(&target);
            write_fixture(&spec, &target);
        }
        let expected = files_under(scratch.path());
        let actual = if target.exists() {
            files_under(&target)
        } else {
            BTreeMap::new()
        };
        assert_eq!(
            actual.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "fixture {} has other files than the generator writes; \
             rerun with EPOCHAL_REGENERATE_FIXTURES=1",
            spec.name
        );
        for (file, bytes) in &expected {
            assert!(
                actual[file] == *bytes,
                "fixture {}/{} differs from what the encoder writes; \
                 rerun with EPOCHAL_REGENERATE_FIXTURES=1",
                spec.name,
                file.display()
            );
        }
    }
}

// ---- reading ----------------------------------------------------------------

fn codec_of(spec: SpecCodec) -> Codec {
    match spec {
        SpecCodec::None => Codec::None,
        SpecCodec::Gzip => Codec::Gzip,
        SpecCodec::SnappyRaw | SpecCodec::SnappyXerial => Codec::Snappy,
        SpecCodec::Lz4 => Codec::Lz4,
        SpecCodec::Zstd => Codec::Zstd,
    }
}

fn payload(bytes: &Option<Vec<u8>>) -> Option<Payload> {
    bytes.clone().map(Payload::from)
}

/// Everything the spec says about one data directory, compared field by
/// field with what the reader returns from `root`.
fn assert_reads_as_written(spec: &SpecDataDir, root: &Path) {
    let state = read_data_dir(root).expect("read fixture");
    assert_eq!(
        state.all_findings().collect::<Vec<_>>(),
        Vec::<&reader::Finding>::new()
    );
    assert_eq!(state.clean_shutdown, spec.clean_shutdown);

    let mut specs: Vec<&SpecReplica> = spec.replicas.iter().collect();
    specs.sort_by_key(|replica| (replica.topic, replica.partition));
    assert_eq!(
        state
            .replicas
            .iter()
            .map(|r| (r.topic.as_str(), r.partition))
            .collect::<Vec<_>>(),
        specs
            .iter()
            .map(|r| (r.topic, r.partition))
            .collect::<Vec<_>>()
    );

    for (replica, spec_replica) in state.replicas.iter().zip(specs) {
        assert_replica_reads_as_written(spec, replica, spec_replica);
    }
}

/// One replica: its directory, epochs, checkpointed offsets, log end, every
/// segment, and its compact form.
fn assert_replica_reads_as_written(
    spec: &SpecDataDir,
    replica: &ReplicaState,
    spec_replica: &SpecReplica,
) {
    let dir = PathBuf::from(format!("{}-{}", spec_replica.topic, spec_replica.partition));
    assert_eq!(replica.dir, dir);
    assert_eq!(
        replica
            .leader_epochs
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect::<Vec<_>>(),
        spec_replica.epochs
    );
    let find = |entries: &[(&str, i32, i64)]| {
        entries
            .iter()
            .find(|(t, p, _)| *t == spec_replica.topic && *p == spec_replica.partition)
            .map(|(_, _, offset)| *offset)
    };
    assert_eq!(replica.high_watermark, find(&spec.high_watermarks));
    assert_eq!(replica.recovery_point, find(&spec.recovery_points));
    let last_offset = spec_replica
        .segments
        .iter()
        .flat_map(|s| &s.batches)
        .flat_map(|b| &b.records)
        .map(|r| r.offset)
        .max()
        .unwrap();
    assert_eq!(replica.log_end_offset, last_offset + 1);

    assert_eq!(replica.segments.len(), spec_replica.segments.len());
    for (segment, spec_segment) in replica.segments.iter().zip(&spec_replica.segments) {
        assert_segment_reads_as_written(&dir, segment, spec_segment);
    }
    assert_compact_form_is_the_records(replica, spec_replica);
}

/// One segment: its file, base offset, and its batches back to back.
fn assert_segment_reads_as_written(dir: &Path, segment: &Segment, spec_segment: &SpecSegment) {
    let file = dir.join(format!("{:020}.log", spec_segment.base_offset));
    assert_eq!(segment.file, file);
    assert_eq!(segment.base_offset, spec_segment.base_offset);
    assert_eq!(segment.batches.len(), spec_segment.batches.len());
    let mut position = 0;
    for (batch, spec_batch) in segment.batches.iter().zip(&spec_segment.batches) {
        assert_batch_reads_as_written(&file, position, batch, spec_batch);
        position += batch.size_bytes;
    }
    assert_eq!(segment.size_bytes, position);
}

/// One batch, which the spec puts at `position` of `file`: its header and
/// every record.
fn assert_batch_reads_as_written(
    file: &Path,
    position: u64,
    batch: &Batch,
    spec_batch: &SpecBatch,
) {
    let what = format!("{} batch at {}", file.display(), batch.position);
    assert_eq!(*batch.file, *file, "{what}");
    assert_eq!(batch.position, position, "{what}");
    assert_eq!(
        batch.size_bytes,
        encode_batch(spec_batch).len() as u64,
        "{what}"
    );
    assert!(batch.crc_valid && batch.intact, "{what}");
    assert_eq!(batch.magic, 2, "{what}");
    assert_eq!(batch.codec, codec_of(spec_batch.codec), "{what}");
    assert_eq!(batch.partition_leader_epoch, spec_batch.epoch, "{what}");
    assert_eq!(batch.base_offset, spec_batch.records[0].offset, "{what}");
    assert_eq!(
        batch.last_offset,
        spec_batch.records.last().unwrap().offset,
        "{what}"
    );
    assert_eq!(
        batch.records_count as usize,
        spec_batch.records.len(),
        "{what}"
    );
    let (producer_id, producer_epoch, base_sequence) = match spec_batch.producer {
        Some((id, epoch)) => (id, epoch, 0),
        None => (-1, -1, -1),
    };
    assert_eq!(
        (batch.producer_id, batch.producer_epoch, batch.base_sequence),
        (producer_id, producer_epoch, base_sequence),
        "{what}"
    );
    assert_eq!(
        batch.max_timestamp,
        BASE_TIMESTAMP_MS + batch.last_offset,
        "{what}"
    );
    assert!(!batch.is_control() && !batch.is_transactional(), "{what}");
    for (record, spec_record) in batch.records.iter().zip(&spec_batch.records) {
        assert_record_reads_as_written(record, spec_record, &what);
    }
}

/// One record: offset, timestamp, key, value and headers.
fn assert_record_reads_as_written(record: &Record, spec_record: &SpecRecord, what: &str) {
    assert_eq!(record.offset, spec_record.offset, "{what}");
    assert_eq!(record.timestamp, BASE_TIMESTAMP_MS + spec_record.offset);
    assert_eq!(record.key, payload(&spec_record.key), "{what}");
    assert_eq!(record.value, payload(&spec_record.value), "{what}");
    let headers: Vec<_> = record
        .headers
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    let spec_headers: Vec<_> = spec_record
        .headers
        .iter()
        .map(|(k, v)| (Payload::from(*k), payload(v)))
        .collect();
    assert_eq!(headers, spec_headers, "{what}");
}

/// The compact form is the same records as (offset, epoch, value).
fn assert_compact_form_is_the_records(replica: &ReplicaState, spec_replica: &SpecReplica) {
    let compact = replica.compact();
    let expected: Vec<(i64, i32, Option<Payload>)> = spec_replica
        .segments
        .iter()
        .flat_map(|s| &s.batches)
        .flat_map(|b| {
            b.records
                .iter()
                .map(move |r| (r.offset, b.epoch, payload(&r.value)))
        })
        .collect();
    assert_eq!(
        compact
            .records
            .iter()
            .cloned()
            .map(Into::into)
            .collect::<Vec<(i64, i32, Option<Payload>)>>(),
        expected
    );
}

#[test]
fn reader_returns_what_the_committed_fixtures_hold() {
    for spec in all_fixtures() {
        assert_reads_as_written(&spec, &committed(spec.name));
    }
}

/// The same check on freshly encoded bytes, so the reader is proven against
/// the encoder even if a codec's output were to change between versions.
#[test]
fn reader_returns_what_the_encoder_writes_now() {
    for spec in all_fixtures() {
        let scratch = tempfile::tempdir().unwrap();
        write_fixture(&spec, scratch.path());
        assert_reads_as_written(&spec, scratch.path());
    }
}

#[test]
fn compact_form_round_trips_through_json() {
    let state = read_data_dir(&committed("reader-basic")).unwrap();
    let compact = state.compact();
    let json = serde_json::to_string(&compact).unwrap();
    assert!(json.contains(r#"[0,0,"v0"]"#), "{json}");
    assert!(json.contains(r#"[17,3,null]"#), "{json}");
    assert!(json.contains(r#"[18,3,{"base16":"deadbeef"}]"#), "{json}");
    let back: reader::CompactDataDir = serde_json::from_str(&json).unwrap();
    assert_eq!(back, compact);

    let full = serde_json::to_string(&state).unwrap();
    let back: reader::DataDirState = serde_json::from_str(&full).unwrap();
    assert_eq!(back, state);
}
