//! Producer-state snapshot files, `<partition dir>/<20-digit offset>.snapshot`.
//!
//! An idempotent producer's state on a partition — per producer id its epoch
//! and its last batch's sequence and offset (KIP-98) — lives in memory and is
//! written at segment roll and clean shutdown as a snapshot, so a restarted
//! broker need not rebuild it from the whole log. This module reads one such
//! file into a [`ProducerSnapshot`] and reports damage as [`Finding`]s; it
//! never writes one, and like the rest of the reader never uses the broker
//! crate's code.
//!
//! The format is Kafka's, unchanged since 0.11 (`ProducerStateManager`'s
//! `readSnapshot`; since 2.8 the generated, non-flexible `PidSnapshot`, later
//! `ProducerSnapshot`, message), all big-endian, 10 + 46·N bytes:
//!
//! ```text
//! version int16 (1) · crc uint32 · entry count int32 · entries:
//!   producer_id int64 · producer_epoch int16 · last_sequence int32 ·
//!   last_offset int64 · offset_delta int32 · timestamp int64 ·
//!   coordinator_epoch int32 · current_txn_first_offset int64
//! ```
//!
//! The CRC is CRC-32C of every byte after the crc field, to the end of the
//! file. The offset in the name is exclusive: the state covers every batch
//! below it (`lastMapOffset` when the snapshot was taken).
//!
//! Kafka treats a snapshot it cannot read (a short buffer, an unknown version,
//! a CRC mismatch) as corrupt: `loadFromSnapshot` logs it, deletes the file and
//! falls back to the next older snapshot or to the log itself. So a damaged
//! snapshot is damage worth reporting — the broker wrote or kept something
//! wrong — but not data loss by itself.

use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::finding::{Finding, FindingKind, Location};
use super::segment::{be_i16, be_i32, be_i64, be_u32};

/// The only version Kafka loads (`PidSnapshot.HIGHEST_SUPPORTED_VERSION`, and
/// `ProducerSnapshotVersion` before 2.8); anything else is corrupt to it.
pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;
/// version (2) + crc (4) + entry count (4).
pub const SNAPSHOT_HEADER_BYTES: usize = 10;
/// 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8.
pub const SNAPSHOT_ENTRY_BYTES: usize = 46;
/// Kafka's `CrcOffset`: the crc follows the version.
const CRC_AT: usize = 2;
/// Kafka's `ProducerEntriesOffset`: the CRC covers everything from here.
const CRC_COVERED_FROM: usize = 6;
const COUNT_AT: usize = 6;
/// Larger files are reported, not read: 64 MiB holds ~1.4 million producer
/// ids, far past any run this harness makes, and bounds what a damaged or
/// runaway file can make the reader allocate.
pub const SNAPSHOT_SIZE_BYTES_MAX: u64 = 64 << 20;

/// One `.snapshot` file as found on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerSnapshot {
    /// Relative to the data directory.
    pub file: PathBuf,
    /// From the file name: the state covers offsets below it.
    pub offset: i64,
    pub size_bytes: u64,
    /// `None` when the file is too short to hold it or too large to read.
    pub version: Option<i16>,
    /// Kafka would load it: version 1, every declared entry present, CRC
    /// valid. Only then are `entries` returned; findings about an intact
    /// snapshot's contents (trailing bytes, entries past its offset) do not
    /// clear it, since Kafka loads such a file without complaint.
    pub intact: bool,
    /// In file order (Kafka writes them in its map's order, not sorted).
    pub entries: Vec<ProducerEntry>,
}

/// One producer id's state, field for field as `PidSnapshot.ProducerEntry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The last sequence of the producer's last data batch.
    pub last_sequence: i32,
    /// The last offset of that batch; -1 when the producer has no data batch
    /// in the state (only transaction markers), and then Kafka restores no
    /// batch metadata for it.
    pub last_offset: i64,
    /// `last_offset - first offset` of that batch.
    pub offset_delta: i32,
    /// Max timestamp of that batch; Kafka expires a producer by it.
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    /// First offset of an open transaction, -1 when none.
    pub current_txn_first_offset: i64,
}

impl ProducerEntry {
    /// Whether the entry records a data batch (Kafka: `offset >= 0`).
    pub fn has_batch(&self) -> bool {
        self.last_offset >= 0
    }

    /// The first sequence of the last batch, wrapping past `i32::MAX` to 0 as
    /// Kafka's `DefaultRecordBatch.decrementSequence` does. An i64 so damaged
    /// values cannot overflow.
    pub fn first_sequence(&self) -> i64 {
        let (sequence, delta) = (i64::from(self.last_sequence), i64::from(self.offset_delta));
        if sequence < delta {
            i64::from(i32::MAX) - (delta - sequence) + 1
        } else {
            sequence - delta
        }
    }
}

/// What parsing one snapshot's bytes produced.
#[derive(Debug)]
pub struct SnapshotParse {
    pub snapshot: ProducerSnapshot,
    pub findings: Vec<Finding>,
}

/// `<20-digit offset>.snapshot`, the name Kafka's `producerSnapshotFile`
/// writes. (Kafka itself parses any digits before the first dot, but never
/// writes another form.)
pub fn snapshot_offset(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".snapshot")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses the bytes of one snapshot file. `file` is the path to report
/// (relative to the data directory) and `offset` the one in its name.
///
/// Checks run in the order that makes each finding the first reason Kafka
/// would reject the file: the version (without it the layout is unknown),
/// the length against the declared entries (Kafka's parse underflows before
/// it looks at the CRC), then the CRC. One of those ends the parse; the
/// checks on an intact file's contents all run.
pub fn parse_snapshot(file: &Path, offset: i64, bytes: &[u8]) -> SnapshotParse {
    let mut parse = SnapshotParse {
        snapshot: ProducerSnapshot {
            file: file.to_owned(),
            offset,
            size_bytes: bytes.len() as u64,
            version: None,
            intact: false,
            entries: Vec::new(),
        },
        findings: Vec::new(),
    };
    let finding = |at: usize, kind| Finding {
        file: file.to_owned(),
        at: Location::Byte(at as u64),
        kind,
    };
    let truncated = |at: usize, bytes_needed: u64| {
        finding(
            at,
            FindingKind::SnapshotTruncated {
                bytes_remaining: (bytes.len() - at) as u64,
                bytes_needed,
            },
        )
    };

    if bytes.len() >= CRC_AT {
        let version = be_i16(bytes, 0);
        parse.snapshot.version = Some(version);
        if version != PRODUCER_SNAPSHOT_VERSION {
            parse
                .findings
                .push(finding(0, FindingKind::UnknownSnapshotVersion { version }));
            return parse;
        }
    }
    if bytes.len() < SNAPSHOT_HEADER_BYTES {
        // An empty file is what a crash between create and write leaves.
        parse
            .findings
            .push(truncated(0, SNAPSHOT_HEADER_BYTES as u64));
        return parse;
    }

    let entry_count = be_i32(bytes, COUNT_AT);
    let Ok(count) = usize::try_from(entry_count) else {
        parse.findings.push(finding(
            COUNT_AT,
            FindingKind::SnapshotNegativeEntryCount { entry_count },
        ));
        return parse;
    };
    // Compared in u64 before anything is allocated: a damaged count of two
    // billion must cost nothing.
    let available = (bytes.len() - SNAPSHOT_HEADER_BYTES) as u64;
    let declared = count as u64 * SNAPSHOT_ENTRY_BYTES as u64;
    if declared > available {
        let complete = (available / SNAPSHOT_ENTRY_BYTES as u64) as usize;
        let at = SNAPSHOT_HEADER_BYTES + complete * SNAPSHOT_ENTRY_BYTES;
        let missing = (count - complete) as u64 * SNAPSHOT_ENTRY_BYTES as u64;
        parse.findings.push(truncated(at, missing));
        return parse;
    }

    let stored = be_u32(bytes, CRC_AT);
    let computed = crc32c::crc32c(&bytes[CRC_COVERED_FROM..]);
    if stored != computed {
        parse.findings.push(finding(
            CRC_AT,
            FindingKind::SnapshotCrcMismatch { stored, computed },
        ));
        return parse;
    }

    parse.snapshot.intact = true;
    parse.snapshot.entries = bytes[SNAPSHOT_HEADER_BYTES..]
        .chunks_exact(SNAPSHOT_ENTRY_BYTES)
        .take(count)
        .map(read_entry)
        .collect();
    let end = SNAPSHOT_HEADER_BYTES + count * SNAPSHOT_ENTRY_BYTES;
    if bytes.len() > end {
        // The writer never leaves these; Kafka's parser ignores them and the
        // CRC covers them, so it would load this file.
        parse.findings.push(finding(
            end,
            FindingKind::SnapshotTrailingBytes {
                trailing_bytes: (bytes.len() - end) as u64,
            },
        ));
    }

    let mut seen = BTreeSet::new();
    for (index, entry) in parse.snapshot.entries.iter().enumerate() {
        let at = SNAPSHOT_HEADER_BYTES + index * SNAPSHOT_ENTRY_BYTES;
        if !seen.insert(entry.producer_id) {
            parse.findings.push(finding(
                at,
                FindingKind::SnapshotDuplicateProducer {
                    producer_id: entry.producer_id,
                },
            ));
        }
        if entry.last_offset >= offset {
            parse.findings.push(finding(
                at,
                FindingKind::SnapshotEntryPastSnapshot {
                    producer_id: entry.producer_id,
                    last_offset: entry.last_offset,
                    snapshot_offset: offset,
                },
            ));
        }
    }
    parse
}

/// Reads and parses the snapshot files of one replica (`(offset, path)`,
/// paths relative to `root`), in the order given. An unreadable file is a
/// finding and left out; a file over [`SNAPSHOT_SIZE_BYTES_MAX`] is a finding
/// and kept without entries.
pub(super) fn read_snapshots(
    root: &Path,
    files: Vec<(i64, PathBuf)>,
    findings: &mut Vec<Finding>,
) -> Vec<ProducerSnapshot> {
    let mut snapshots = Vec::with_capacity(files.len());
    for (offset, file) in files {
        match read_bounded(&root.join(&file)) {
            Ok(Bounded::Bytes(bytes)) => {
                let parse = parse_snapshot(&file, offset, &bytes);
                findings.extend(parse.findings);
                snapshots.push(parse.snapshot);
            }
            Ok(Bounded::TooLarge(size_bytes)) => {
                findings.push(Finding {
                    file: file.clone(),
                    at: Location::File,
                    kind: FindingKind::SnapshotTooLarge {
                        size_bytes,
                        size_bytes_max: SNAPSHOT_SIZE_BYTES_MAX,
                    },
                });
                snapshots.push(ProducerSnapshot {
                    file,
                    offset,
                    size_bytes,
                    version: None,
                    intact: false,
                    entries: Vec::new(),
                });
            }
            Err(error) => findings.push(Finding {
                file,
                at: Location::File,
                kind: FindingKind::Unreadable {
                    error: error.to_string(),
                },
            }),
        }
    }
    snapshots
}

/// A finding for every snapshot past the log end offset. Kafka deletes such
/// snapshots when it truncates or recovers the log (`truncateAndReload`
/// removes every snapshot above the log end offset); one at exactly the log
/// end is the normal clean-shutdown snapshot.
pub(super) fn check_against_log_end(
    snapshots: &[ProducerSnapshot],
    log_end_offset: i64,
    findings: &mut Vec<Finding>,
) {
    for snapshot in snapshots {
        if snapshot.offset > log_end_offset {
            findings.push(Finding {
                file: snapshot.file.clone(),
                at: Location::File,
                kind: FindingKind::SnapshotPastLogEnd {
                    snapshot_offset: snapshot.offset,
                    log_end_offset,
                },
            });
        }
    }
}

enum Bounded {
    Bytes(Vec<u8>),
    TooLarge(u64),
}

/// The file's bytes, unless it holds more than the bound. Read through
/// `take`, so a file that grows after its length was looked at still cannot
/// exceed it.
fn read_bounded(path: &Path) -> std::io::Result<Bounded> {
    let file = fs::File::open(path)?;
    let size_bytes = file.metadata()?.len();
    if size_bytes > SNAPSHOT_SIZE_BYTES_MAX {
        return Ok(Bounded::TooLarge(size_bytes));
    }
    let mut bytes = Vec::with_capacity(size_bytes as usize);
    file.take(SNAPSHOT_SIZE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > SNAPSHOT_SIZE_BYTES_MAX {
        return Ok(Bounded::TooLarge(bytes.len() as u64));
    }
    Ok(Bounded::Bytes(bytes))
}

/// `bytes` is exactly one entry.
fn read_entry(bytes: &[u8]) -> ProducerEntry {
    ProducerEntry {
        producer_id: be_i64(bytes, 0),
        producer_epoch: be_i16(bytes, 8),
        last_sequence: be_i32(bytes, 10),
        last_offset: be_i64(bytes, 14),
        offset_delta: be_i32(bytes, 22),
        timestamp: be_i64(bytes, 26),
        coordinator_epoch: be_i32(bytes, 34),
        current_txn_first_offset: be_i64(bytes, 38),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "t-0/00000000000000000010.snapshot";

    fn entry(producer_id: i64, last_offset: i64) -> ProducerEntry {
        ProducerEntry {
            producer_id,
            producer_epoch: 3,
            last_sequence: 41,
            last_offset,
            offset_delta: 2,
            timestamp: 1_700_000_000_000 + last_offset,
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        }
    }

    /// Kafka's layout, written field by field here rather than through the
    /// parser's own helpers, with `count` declared and the CRC filled in.
    fn encode_with_count(version: i16, count: i32, entries: &[ProducerEntry]) -> Vec<u8> {
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
        refill_crc(&mut bytes);
        bytes
    }

    fn encode(entries: &[ProducerEntry]) -> Vec<u8> {
        encode_with_count(1, entries.len() as i32, entries)
    }

    fn refill_crc(bytes: &mut [u8]) {
        let crc = crc32c::crc32c(&bytes[6..]);
        bytes[2..6].copy_from_slice(&crc.to_be_bytes());
    }

    fn parse(bytes: &[u8]) -> SnapshotParse {
        parse_snapshot(Path::new(FILE), 10, bytes)
    }

    fn kinds(parse: &SnapshotParse) -> Vec<(Location, FindingKind)> {
        parse
            .findings
            .iter()
            .map(|f| {
                assert_eq!(f.file, Path::new(FILE));
                (f.at, f.kind.clone())
            })
            .collect()
    }

    #[test]
    fn several_entries_read_back_field_for_field() {
        let entries = [
            entry(1000, 4),
            ProducerEntry {
                producer_id: i64::MAX,
                producer_epoch: i16::MIN,
                last_sequence: i32::MAX,
                last_offset: 9,
                offset_delta: 0,
                timestamp: -1,
                coordinator_epoch: 7,
                current_txn_first_offset: 8,
            },
            entry(-5, -1),
        ];
        let bytes = encode(&entries);
        assert_eq!(
            bytes.len(),
            SNAPSHOT_HEADER_BYTES + 3 * SNAPSHOT_ENTRY_BYTES
        );
        let parse = parse(&bytes);
        assert!(parse.findings.is_empty(), "{:?}", parse.findings);
        assert_eq!(
            parse.snapshot,
            ProducerSnapshot {
                file: FILE.into(),
                offset: 10,
                size_bytes: bytes.len() as u64,
                version: Some(1),
                intact: true,
                entries: entries.to_vec(),
            }
        );
    }

    #[test]
    fn zero_entries_is_an_intact_empty_state() {
        let parse = parse(&encode(&[]));
        assert!(parse.findings.is_empty(), "{:?}", parse.findings);
        assert!(parse.snapshot.intact);
        assert!(parse.snapshot.entries.is_empty());
    }

    #[test]
    fn a_flipped_bit_is_a_crc_mismatch_and_no_entries() {
        let mut bytes = encode(&[entry(1, 4), entry(2, 5)]);
        let stored = crc32c::crc32c(&bytes[6..]);
        bytes[40] ^= 0x10;
        let parse = parse(&bytes);
        assert_eq!(
            kinds(&parse),
            [(
                Location::Byte(2),
                FindingKind::SnapshotCrcMismatch {
                    stored,
                    computed: crc32c::crc32c(&bytes[6..]),
                }
            )]
        );
        assert!(!parse.snapshot.intact);
        assert!(parse.snapshot.entries.is_empty());
    }

    #[test]
    fn an_unknown_version_is_reported_before_anything_else() {
        for version in [0, 2, -1] {
            let parse = parse(&encode_with_count(version, 1, &[entry(1, 4)]));
            assert_eq!(
                kinds(&parse),
                [(
                    Location::Byte(0),
                    FindingKind::UnknownSnapshotVersion { version }
                )]
            );
            assert_eq!(parse.snapshot.version, Some(version));
            assert!(!parse.snapshot.intact);
        }
        // A zero-filled file, as a crash can leave one.
        let parse = parse(&[0; 64]);
        assert_eq!(
            kinds(&parse),
            [(
                Location::Byte(0),
                FindingKind::UnknownSnapshotVersion { version: 0 }
            )]
        );
    }

    #[test]
    fn a_file_shorter_than_the_header_is_truncated() {
        let full = encode(&[]);
        for length in [0, 1, 2, 5, 9] {
            let parse = parse(&full[..length]);
            assert_eq!(
                kinds(&parse),
                [(
                    Location::Byte(0),
                    FindingKind::SnapshotTruncated {
                        bytes_remaining: length as u64,
                        bytes_needed: 10,
                    }
                )],
                "length {length}"
            );
            assert_eq!(parse.snapshot.version, (length >= 2).then_some(1));
        }
    }

    #[test]
    fn a_torn_entry_is_truncated_at_that_entry() {
        let full = encode(&[entry(1, 4), entry(2, 5), entry(3, 6)]);
        // Two whole entries and 20 bytes of the third remain.
        let torn = &full[..10 + 2 * 46 + 20];
        let parse = parse(torn);
        assert_eq!(
            kinds(&parse),
            [(
                Location::Byte(102),
                FindingKind::SnapshotTruncated {
                    bytes_remaining: 20,
                    bytes_needed: 46,
                }
            )]
        );
        assert!(parse.snapshot.entries.is_empty());
    }

    #[test]
    fn a_huge_count_is_truncated_without_allocating_for_it() {
        // A valid CRC, so only the count can be the problem: the parser must
        // compare it with the file, not reserve two billion entries.
        let bytes = encode_with_count(1, i32::MAX, &[entry(1, 4)]);
        let parse = parse(&bytes);
        assert_eq!(
            kinds(&parse),
            [(
                Location::Byte(56),
                FindingKind::SnapshotTruncated {
                    bytes_remaining: 0,
                    bytes_needed: (i32::MAX as u64 - 1) * 46,
                }
            )]
        );
    }

    #[test]
    fn a_negative_count_is_reported_at_the_count() {
        let parse = parse(&encode_with_count(1, -1, &[]));
        assert_eq!(
            kinds(&parse),
            [(
                Location::Byte(6),
                FindingKind::SnapshotNegativeEntryCount { entry_count: -1 }
            )]
        );
    }

    #[test]
    fn trailing_bytes_are_reported_but_the_snapshot_stays_intact() {
        // A count one short of the entries written, CRC over all of them:
        // Kafka would load the first entry and ignore the rest.
        let bytes = encode_with_count(1, 1, &[entry(1, 4), entry(2, 5)]);
        let parse = parse(&bytes);
        assert_eq!(
            kinds(&parse),
            [(
                Location::Byte(56),
                FindingKind::SnapshotTrailingBytes { trailing_bytes: 46 }
            )]
        );
        assert!(parse.snapshot.intact);
        assert_eq!(parse.snapshot.entries, [entry(1, 4)]);
    }

    #[test]
    fn entries_at_or_past_the_snapshot_offset_and_duplicates_are_reported() {
        let bytes = encode(&[entry(1, 9), entry(2, 10), entry(1, 3), entry(3, -1)]);
        let parse = parse(&bytes);
        assert_eq!(
            kinds(&parse),
            [
                (
                    Location::Byte(56),
                    FindingKind::SnapshotEntryPastSnapshot {
                        producer_id: 2,
                        last_offset: 10,
                        snapshot_offset: 10,
                    }
                ),
                (
                    Location::Byte(102),
                    FindingKind::SnapshotDuplicateProducer { producer_id: 1 }
                ),
            ]
        );
        assert!(parse.snapshot.intact);
        assert_eq!(parse.snapshot.entries.len(), 4);
    }

    #[test]
    fn every_prefix_and_every_flipped_byte_gives_findings_not_panics() {
        let full = encode(&[entry(1, 4), entry(2, 5)]);
        for length in 0..full.len() {
            let parse = parse(&full[..length]);
            assert!(!parse.findings.is_empty(), "prefix of {length} bytes");
            assert!(!parse.snapshot.intact);
        }
        for at in 0..full.len() {
            let mut bytes = full.clone();
            bytes[at] ^= 0xff;
            let parse = parse(&bytes);
            assert!(!parse.findings.is_empty(), "byte {at} flipped");
        }
    }

    #[test]
    fn first_sequence_wraps_as_kafka_decrements() {
        let at = |last_sequence, offset_delta| {
            ProducerEntry {
                last_sequence,
                offset_delta,
                ..entry(1, 4)
            }
            .first_sequence()
        };
        assert_eq!(at(41, 2), 39);
        assert_eq!(at(1, 2), i64::from(i32::MAX));
        // Damaged values stay in range of an i64 rather than overflowing.
        assert_eq!(at(i32::MIN, i32::MAX), i64::from(i32::MIN) + 1);
        assert_eq!(at(i32::MAX, i32::MIN), i64::from(u32::MAX));
    }

    #[test]
    fn names_are_twenty_digits_and_the_suffix() {
        assert_eq!(snapshot_offset("00000000000000000042.snapshot"), Some(42));
        assert_eq!(snapshot_offset("42.snapshot"), None);
        assert_eq!(
            snapshot_offset("00000000000000000042.snapshot.deleted"),
            None
        );
        assert_eq!(snapshot_offset("99999999999999999999.snapshot"), None);
    }
}
