//! Producer-state snapshot files: `<20-digit offset>.snapshot` in a partition
//! directory, in Kafka's format (`ProducerStateManager`, snapshot version 1).
//!
//! A snapshot is the producer state of the log below its offset: for each
//! producer id, its epoch and the metadata of its *last* batch only (Kafka keeps
//! five batches in memory but writes one). This module owns the bytes and the
//! file names; it does not decide when a snapshot is taken or which one is
//! loaded (that is `producer_state.rs`). A file that does not decode is a
//! [`SnapshotError`], never a panic: the caller deletes it and rebuilds the
//! state from the log, as Kafka does with a `CorruptSnapshotException`.
//!
//! Layout (big-endian), from Kafka's `ProducerSnapshot` schema:
//!
//! ```text
//! Version int16 (= 1)
//! Crc uint32            CRC-32C of every byte after this field
//! ProducerEntries: count int32, then per entry (46 bytes):
//!   ProducerId int64  ProducerEpoch int16  LastSequence int32  LastOffset int64
//!   OffsetDelta int32  Timestamp int64  CoordinatorEpoch int32
//!   CurrentTxnFirstOffset int64
//! ```

use std::path::{Path, PathBuf};

use super::StorageError;
use super::checkpoint;

/// The only snapshot version Kafka writes (0.11 onwards).
pub const SNAPSHOT_VERSION: i16 = 1;
/// The file name suffix (Kafka's `LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX`).
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// Version and CRC: the bytes the CRC does not cover.
const CRC_COVERS_FROM: usize = 6;
const ENTRY_SIZE: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// One producer's line in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The last sequence of the producer's last batch; -1 when it has no batch.
    pub last_sequence: i32,
    /// The offset of the last record of that batch.
    pub last_offset: i64,
    /// lastOffset - firstOffset of that batch (and lastSequence - firstSequence).
    pub offset_delta: i32,
    /// The batch's max timestamp.
    pub timestamp: i64,
    /// Transaction coordinator epoch; -1 (this broker has no transactions).
    pub coordinator_epoch: i32,
    /// First offset of an open transaction; -1 when none (always, here).
    pub current_txn_first_offset: i64,
}

/// Why a snapshot file cannot be loaded. Precise enough to assert on in tests;
/// the broker logs it with the file name and rebuilds from the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("{len} bytes is too short for a snapshot header ({} bytes)", CRC_COVERS_FROM + 4)]
    TooShort { len: usize },
    #[error("unsupported snapshot version {version} (expected {SNAPSHOT_VERSION})")]
    UnsupportedVersion { version: i16 },
    #[error("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("entry count {count} does not fit the {available} bytes that follow it")]
    BadCount { count: i32, available: usize },
    #[error("entry {index} cannot come from a log: {reason}")]
    InvalidEntry {
        index: usize,
        #[source]
        reason: ImpossibleEntry,
    },
}

/// Which value of a snapshot entry no log could have produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ImpossibleEntry {
    #[error("producer id {0}")]
    NegativeProducerId(i64),
    /// Below -1, the "no batch yet" sequence.
    #[error("last sequence {0}")]
    LastSequence(i32),
    /// A batch that would start before offset 0, or end before it starts.
    #[error("last offset {last_offset} with offset delta {offset_delta}")]
    OffsetDelta { last_offset: i64, offset_delta: i32 },
}

/// Kafka's snapshot file name: the offset zero-padded to 20 digits.
pub fn file_name(offset: i64) -> String {
    format!("{offset:020}{SNAPSHOT_SUFFIX}")
}

/// The offset a snapshot file name carries, if it is one.
pub fn parse_file_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The snapshot files in `dir`, by offset. Other files are not ours to judge.
pub fn list(dir: &Path) -> Result<Vec<(i64, PathBuf)>, StorageError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(StorageError::io("list", dir))? {
        let entry = entry.map_err(StorageError::io("list", dir))?;
        if let Some(offset) = entry.file_name().to_str().and_then(parse_file_name) {
            found.push((offset, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// The file's bytes for `entries`.
pub fn encode(entries: &[SnapshotEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CRC_COVERS_FROM + 4 + entries.len() * ENTRY_SIZE);
    out.extend(SNAPSHOT_VERSION.to_be_bytes());
    out.extend([0u8; 4]);
    out.extend((entries.len() as i32).to_be_bytes());
    for e in entries {
        out.extend(e.producer_id.to_be_bytes());
        out.extend(e.producer_epoch.to_be_bytes());
        out.extend(e.last_sequence.to_be_bytes());
        out.extend(e.last_offset.to_be_bytes());
        out.extend(e.offset_delta.to_be_bytes());
        out.extend(e.timestamp.to_be_bytes());
        out.extend(e.coordinator_epoch.to_be_bytes());
        out.extend(e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[CRC_COVERS_FROM..]);
    out[2..CRC_COVERS_FROM].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes a snapshot file's bytes: version, CRC over the rest, count, entries.
/// Bytes after the last entry are refused too (the CRC covers them, so only a
/// forged file could carry them).
pub fn decode(bytes: &[u8]) -> Result<Vec<SnapshotEntry>, SnapshotError> {
    if bytes.len() < CRC_COVERS_FROM + 4 {
        return Err(SnapshotError::TooShort { len: bytes.len() });
    }
    let mut r = Reader(bytes);
    let version = r.i16();
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotError::UnsupportedVersion { version });
    }
    let stored = r.i32() as u32;
    let computed = crc32c::crc32c(&bytes[CRC_COVERS_FROM..]);
    if stored != computed {
        return Err(SnapshotError::CrcMismatch { stored, computed });
    }
    let count = r.i32();
    let available = r.0.len();
    // Checked before anything is allocated, so a forged count costs nothing.
    if count < 0 || count as usize * ENTRY_SIZE != available {
        return Err(SnapshotError::BadCount { count, available });
    }
    let mut entries = Vec::with_capacity(count as usize);
    for index in 0..count as usize {
        let entry = SnapshotEntry {
            producer_id: r.i64(),
            producer_epoch: r.i16(),
            last_sequence: r.i32(),
            last_offset: r.i64(),
            offset_delta: r.i32(),
            timestamp: r.i64(),
            coordinator_epoch: r.i32(),
            current_txn_first_offset: r.i64(),
        };
        check_entry(&entry).map_err(|reason| SnapshotError::InvalidEntry { index, reason })?;
        entries.push(entry);
    }
    Ok(entries)
}

/// Values no log could have produced; loading them would poison the sequence
/// arithmetic, so the file is treated as corrupt.
fn check_entry(e: &SnapshotEntry) -> Result<(), ImpossibleEntry> {
    if e.producer_id < 0 {
        return Err(ImpossibleEntry::NegativeProducerId(e.producer_id));
    }
    if e.last_sequence < -1 {
        return Err(ImpossibleEntry::LastSequence(e.last_sequence));
    }
    if e.last_sequence >= 0 && (e.offset_delta < 0 || e.last_offset < i64::from(e.offset_delta)) {
        return Err(ImpossibleEntry::OffsetDelta {
            last_offset: e.last_offset,
            offset_delta: e.offset_delta,
        });
    }
    Ok(())
}

/// Big-endian reads from a slice whose length the caller has checked.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        head.try_into().expect("split_at gave N bytes")
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take())
    }
}

/// Writes the snapshot for `offset` atomically (temp file, fsync, rename), so a
/// crash leaves the old set of snapshots or the new one, never a torn file.
pub fn write(dir: &Path, offset: i64, entries: &[SnapshotEntry]) -> Result<PathBuf, StorageError> {
    let path = dir.join(file_name(offset));
    checkpoint::write_atomically(&path, &encode(entries))?;
    Ok(path)
}

/// Reads one snapshot file. The outer error is I/O; the inner one a file that
/// is there but cannot be trusted.
pub fn read(path: &Path) -> Result<Result<Vec<SnapshotEntry>, SnapshotError>, StorageError> {
    let bytes = std::fs::read(path).map_err(StorageError::io("read snapshot", path))?;
    Ok(decode(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(producer_id: i64, last_sequence: i32) -> SnapshotEntry {
        SnapshotEntry {
            producer_id,
            producer_epoch: 3,
            last_sequence,
            last_offset: 41,
            offset_delta: 4,
            timestamp: 1_700_000_000_000,
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        }
    }

    #[test]
    fn file_names_are_twenty_digits() {
        assert_eq!(file_name(42), "00000000000000000042.snapshot");
        assert_eq!(parse_file_name("00000000000000000042.snapshot"), Some(42));
        for bad in [
            "42.snapshot",
            "00000000000000000042.log",
            "0000000000000000004x.snapshot",
            "00000000000000000042.snapshot.tmp",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_layout_is_kafkas_version_1() {
        let bytes = encode(&[entry(7, 9)]);
        assert_eq!(bytes.len(), 2 + 4 + 4 + 46);
        assert_eq!(&bytes[..2], &[0, 1], "version 1");
        assert_eq!(&bytes[6..10], &[0, 0, 0, 1], "one entry");
        assert_eq!(&bytes[10..18], &7i64.to_be_bytes(), "producer id first");
        assert_eq!(&bytes[18..20], &3i16.to_be_bytes(), "then its epoch");
        let crc = u32::from_be_bytes(bytes[2..6].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&bytes[6..]));
        // An empty snapshot is the header and a zero count.
        assert_eq!(decode(&encode(&[])).unwrap(), []);
        assert_eq!(encode(&[]).len(), 10);
    }

    #[test]
    fn a_snapshot_round_trips() {
        let entries = [entry(1, 4), entry(2, i32::MAX), entry(3, -1)];
        assert_eq!(decode(&encode(&entries)).unwrap(), entries);
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), 17, &entries).unwrap();
        assert!(path.ends_with("00000000000000000017.snapshot"));
        assert_eq!(read(&path).unwrap().unwrap(), entries);
        assert_eq!(list(dir.path()).unwrap(), vec![(17, path)]);
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let good = encode(&[entry(1, 4), entry(2, 5)]);
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            assert!(decode(&bad).is_err(), "flipped byte {at}");
        }
        let mut v2 = good.clone();
        v2[1] = 2;
        assert_eq!(
            decode(&v2),
            Err(SnapshotError::UnsupportedVersion { version: 2 })
        );
        // A forged count with a matching CRC is refused before allocating.
        let mut forged = encode(&[]);
        forged[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&forged[6..]);
        forged[2..6].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            decode(&forged),
            Err(SnapshotError::BadCount { .. })
        ));
        // So is an entry no log could have written.
        let impossible = encode(&[SnapshotEntry {
            offset_delta: -3,
            ..entry(1, 4)
        }]);
        assert!(matches!(
            decode(&impossible),
            Err(SnapshotError::InvalidEntry { index: 0, .. })
        ));
    }
}
