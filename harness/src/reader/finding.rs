//! Damage the reader found on disk, as data.
//!
//! A finding names the file (relative to the data directory, so reports and
//! snapshots do not depend on where a run was stored), where in it (a byte
//! position in a segment or producer-state snapshot, a line in a checkpoint)
//! and what is wrong. The reader
//! never panics or gives up on damage: it records a finding and reads on where
//! the format still lets it find the next boundary.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One piece of damage: where it is and what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Relative to the data directory, e.g. `t-0/00000000000000000000.log`.
    pub file: PathBuf,
    pub at: Location,
    #[serde(flatten)]
    pub kind: FindingKind,
}

/// Where in `file` a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// A byte position: in a segment the start of the batch concerned, in a
    /// producer-state snapshot the field or entry concerned.
    Byte(u64),
    /// A 1-based line of a checkpoint file.
    Line(usize),
    /// The file as a whole (it is missing, unreadable or misnamed).
    File,
}

/// What is wrong. Segment kinds come from walking batches; checkpoint kinds
/// from Kafka's strict checkpoint parsing; `Snapshot…` kinds from reading
/// producer-state snapshots (KIP-98); the `…PastLogEnd` kinds from comparing
/// a checkpoint or snapshot with the log the reader recovered.
///
/// Kafka deletes a producer-state snapshot it cannot load and rebuilds the
/// state from an older snapshot or the log (`ProducerStateManager`'s
/// `loadFromSnapshot`), so snapshot kinds are damage, never data loss by
/// themselves; they show the broker wrote or kept a file Kafka would not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FindingKind {
    /// The segment ends inside a batch: fewer bytes remain than the batch
    /// header needs or than its length field declares. Reading of this
    /// segment stops here, as Kafka's recovery would truncate here.
    TornTail {
        bytes_remaining: u64,
        bytes_needed: u64,
    },
    /// The batch length field is impossible (smaller than a v2 header), so
    /// the next batch boundary is unknown and the rest of the segment is
    /// unreadable.
    CorruptBatchHeader { batch_length: i32 },
    /// A batch in the message format v0/v1; the reader only reads v2 and
    /// skips it by its length field, which all formats share.
    UnsupportedMagic { magic: i8 },
    /// The stored CRC-32C does not match the bytes from attributes to the
    /// batch end. The batch's records are not returned; the walk resumes
    /// after it, trusting its length field.
    CrcMismatch {
        base_offset: i64,
        stored: u32,
        computed: u32,
    },
    /// The CRC matched but the records did not decode (bad varint, count or
    /// size mismatch, unknown codec, failed decompression).
    MalformedRecords { base_offset: i64, reason: String },
    /// A batch starts above the offset that should come next.
    OffsetGap { expected: i64, found: i64 },
    /// A batch starts at or below an offset already read.
    OffsetOverlap { expected: i64, found: i64 },
    /// Between two segments offsets are missing: the segment that should
    /// start at `expected_base_offset` is absent and `file` starts later.
    MissingSegment {
        expected_base_offset: i64,
        found_base_offset: i64,
    },
    /// A batch starts below the base offset in its segment's file name.
    BatchBeforeSegmentBase {
        segment_base_offset: i64,
        batch_base_offset: i64,
    },
    /// A `.log` file whose name is not a 20-digit base offset.
    BadSegmentName,
    /// A checkpoint file fails Kafka's strict parsing; it is treated as
    /// absent.
    MalformedCheckpoint { problem: String },
    /// A leader-epoch-checkpoint entry starts past the log end offset. Kafka
    /// truncates such entries on recovery (`truncateFromEnd(LEO)`), so one
    /// left on disk means the epoch file and the log disagree. An entry that
    /// starts exactly at the log end is normal (KAFKA-7415: a new leader
    /// records `(epoch, LEO)` before its first append).
    EpochEntryPastLogEnd {
        epoch: i32,
        start_offset: i64,
        log_end_offset: i64,
    },
    /// A high watermark or recovery point checkpointed past this replica's
    /// log end offset.
    CheckpointPastLogEnd {
        topic: String,
        partition: i32,
        offset: i64,
        log_end_offset: i64,
    },
    /// A `.snapshot` file whose name is not a 20-digit offset. Kafka never
    /// writes one; the reader does not read it.
    BadSnapshotName,
    /// A snapshot larger than the reader's bound; it is not read. Kafka
    /// would read it whole.
    SnapshotTooLarge {
        size_bytes: u64,
        size_bytes_max: u64,
    },
    /// The snapshot's version is not 1, the only one Kafka loads; Kafka
    /// deletes it as corrupt. A zero-filled file reads as version 0.
    UnknownSnapshotVersion { version: i16 },
    /// The snapshot ends before its header (10 bytes) or before the entries
    /// its count declares (46 bytes each); `at` is the start of the header or
    /// of the first incomplete entry. Kafka's parse underflows and it deletes the file as
    /// corrupt. An empty file — created, never written — is this too.
    SnapshotTruncated {
        bytes_remaining: u64,
        bytes_needed: u64,
    },
    /// The entry count is negative; Kafka rejects the file.
    SnapshotNegativeEntryCount { entry_count: i32 },
    /// The stored CRC-32C does not match the bytes after the crc field.
    /// Kafka deletes the file as corrupt; its entries are not returned.
    SnapshotCrcMismatch { stored: u32, computed: u32 },
    /// Bytes after the last declared entry. Kafka never writes them and,
    /// since its parser ignores them and the CRC covers them, loads the file
    /// anyway: the entries are returned.
    SnapshotTrailingBytes { trailing_bytes: u64 },
    /// A producer id that appears twice in one snapshot. Kafka writes one
    /// entry per id (from a map); on load the later entry would win.
    SnapshotDuplicateProducer { producer_id: i64 },
    /// An entry whose last batch ends at or past the snapshot's offset, which
    /// is exclusive: the state of a snapshot at `N` covers offsets below `N`
    /// only. Kafka loads it without checking.
    SnapshotEntryPastSnapshot {
        producer_id: i64,
        last_offset: i64,
        snapshot_offset: i64,
    },
    /// A snapshot whose offset is past the replica's log end offset. Kafka
    /// deletes such snapshots when it recovers or truncates the log
    /// (`truncateAndReload`), so one left on disk means the snapshot and the
    /// log disagree. A snapshot exactly at the log end is the normal one a
    /// clean shutdown or segment roll writes.
    SnapshotPastLogEnd {
        snapshot_offset: i64,
        log_end_offset: i64,
    },
    /// A `.txnindex` file ends inside an entry (its size is not a multiple
    /// of 34 bytes); Kafka's sanity check refuses such an index. The whole
    /// entries before it are read.
    TxnIndexTorn {
        bytes_remaining: u64,
        bytes_needed: u64,
    },
    /// A `.txnindex` entry whose version is not 0, the only one Kafka
    /// writes; it is not read.
    TxnIndexUnknownVersion { version: i16 },
    /// A `.txnindex` entry names an aborted transaction no ABORT marker of
    /// its producer at `last_offset` backs in the log: read_committed
    /// consumers are told to drop records the log never aborted.
    TxnIndexEntryWithoutAbort {
        producer_id: i64,
        first_offset: i64,
        last_offset: i64,
    },
    /// A `.txnindex` entry's first offset is not where the log's aborted
    /// transaction begins: read_committed consumers drop the wrong records.
    TxnIndexFirstOffsetDisagrees {
        producer_id: i64,
        last_offset: i64,
        index_first_offset: i64,
        log_first_offset: i64,
    },
    /// An ABORT marker (at `marker_offset`, in the batch `at` points to)
    /// that no `.txnindex` entry lists: read_committed consumers would be
    /// served the aborted records.
    AbortNotInTxnIndex {
        producer_id: i64,
        first_offset: i64,
        marker_offset: i64,
    },
    /// The file could not be read at all.
    Unreadable { error: String },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Byte(position) => write!(f, "position {position}"),
            Location::Line(line) => write!(f, "line {line}"),
            Location::File => f.write_str("file"),
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FindingKind::TornTail { .. }
            | FindingKind::CorruptBatchHeader { .. }
            | FindingKind::UnsupportedMagic { .. }
            | FindingKind::CrcMismatch { .. }
            | FindingKind::MalformedRecords { .. }
            | FindingKind::OffsetGap { .. }
            | FindingKind::OffsetOverlap { .. }
            | FindingKind::MissingSegment { .. }
            | FindingKind::BatchBeforeSegmentBase { .. }
            | FindingKind::BadSegmentName => self.fmt_segment_kind(f),
            FindingKind::MalformedCheckpoint { problem } => {
                write!(f, "malformed checkpoint: {problem}")
            }
            FindingKind::EpochEntryPastLogEnd {
                epoch,
                start_offset,
                log_end_offset,
            } => write!(
                f,
                "epoch {epoch} starts at {start_offset}, past the log end offset {log_end_offset}"
            ),
            FindingKind::CheckpointPastLogEnd {
                topic,
                partition,
                offset,
                log_end_offset,
            } => write!(
                f,
                "{topic}-{partition} checkpointed at {offset}, past the log end offset {log_end_offset}"
            ),
            FindingKind::BadSnapshotName
            | FindingKind::SnapshotTooLarge { .. }
            | FindingKind::UnknownSnapshotVersion { .. }
            | FindingKind::SnapshotTruncated { .. }
            | FindingKind::SnapshotNegativeEntryCount { .. }
            | FindingKind::SnapshotCrcMismatch { .. }
            | FindingKind::SnapshotTrailingBytes { .. }
            | FindingKind::SnapshotDuplicateProducer { .. }
            | FindingKind::SnapshotEntryPastSnapshot { .. }
            | FindingKind::SnapshotPastLogEnd { .. } => self.fmt_snapshot_kind(f),
            FindingKind::TxnIndexTorn { .. }
            | FindingKind::TxnIndexUnknownVersion { .. }
            | FindingKind::TxnIndexEntryWithoutAbort { .. }
            | FindingKind::TxnIndexFirstOffsetDisagrees { .. }
            | FindingKind::AbortNotInTxnIndex { .. } => self.fmt_txn_index_kind(f),
            FindingKind::Unreadable { error } => write!(f, "unreadable: {error}"),
        }
    }
}

impl FindingKind {
    /// The message of a kind found holding `.txnindex` files to the log.
    fn fmt_txn_index_kind(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FindingKind::TxnIndexTorn {
                bytes_remaining,
                bytes_needed,
            } => write!(
                f,
                "torn transaction index: {bytes_remaining} bytes remain, an entry needs {bytes_needed}"
            ),
            FindingKind::TxnIndexUnknownVersion { version } => {
                write!(
                    f,
                    "transaction index entry version {version} (only 0 is read)"
                )
            }
            FindingKind::TxnIndexEntryWithoutAbort {
                producer_id,
                first_offset,
                last_offset,
            } => write!(
                f,
                "transaction index lists producer {producer_id}'s transaction {first_offset}..={last_offset} as aborted, but the log holds no abort marker of it at {last_offset}"
            ),
            FindingKind::TxnIndexFirstOffsetDisagrees {
                producer_id,
                last_offset,
                index_first_offset,
                log_first_offset,
            } => write!(
                f,
                "transaction index has producer {producer_id}'s transaction aborted at {last_offset} begin at {index_first_offset}, the log at {log_first_offset}"
            ),
            FindingKind::AbortNotInTxnIndex {
                producer_id,
                first_offset,
                marker_offset,
            } => write!(
                f,
                "abort marker at {marker_offset} of producer {producer_id}'s transaction from {first_offset} is in no transaction index"
            ),
            other => unreachable!("{other:?} is not a transaction index kind"),
        }
    }
}

impl FindingKind {
    /// The message of a kind found walking a segment's batches.
    fn fmt_segment_kind(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FindingKind::TornTail {
                bytes_remaining,
                bytes_needed,
            } => write!(
                f,
                "torn tail: {bytes_remaining} bytes remain, the batch needs {bytes_needed}"
            ),
            FindingKind::CorruptBatchHeader { batch_length } => {
                write!(f, "corrupt batch header: batch length {batch_length}")
            }
            FindingKind::UnsupportedMagic { magic } => {
                write!(f, "unsupported magic {magic} (only v2 is read), skipped")
            }
            FindingKind::CrcMismatch {
                base_offset,
                stored,
                computed,
            } => write!(
                f,
                "CRC mismatch in batch at offset {base_offset}: stored {stored}, computed {computed}"
            ),
            FindingKind::MalformedRecords {
                base_offset,
                reason,
            } => write!(
                f,
                "malformed records in batch at offset {base_offset}: {reason}"
            ),
            FindingKind::OffsetGap { expected, found } => {
                write!(f, "offset gap: expected {expected}, found {found}")
            }
            FindingKind::OffsetOverlap { expected, found } => {
                write!(f, "offset overlap: expected {expected}, found {found}")
            }
            FindingKind::MissingSegment {
                expected_base_offset,
                found_base_offset,
            } => write!(
                f,
                "missing segment: expected one starting at {expected_base_offset}, next starts at {found_base_offset}"
            ),
            FindingKind::BatchBeforeSegmentBase {
                segment_base_offset,
                batch_base_offset,
            } => write!(
                f,
                "batch at offset {batch_base_offset} below its segment's base offset {segment_base_offset}"
            ),
            FindingKind::BadSegmentName => f.write_str("segment name is not a 20-digit offset"),
            other => unreachable!("{other:?} is not a segment kind"),
        }
    }

    /// The message of a kind found reading a producer-state snapshot.
    fn fmt_snapshot_kind(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FindingKind::BadSnapshotName => {
                f.write_str("producer snapshot name is not a 20-digit offset")
            }
            FindingKind::SnapshotTooLarge {
                size_bytes,
                size_bytes_max,
            } => write!(
                f,
                "producer snapshot of {size_bytes} bytes is over the {size_bytes_max}-byte bound, not read"
            ),
            FindingKind::UnknownSnapshotVersion { version } => {
                write!(f, "producer snapshot version {version} (only 1 is read)")
            }
            FindingKind::SnapshotTruncated {
                bytes_remaining,
                bytes_needed,
            } => write!(
                f,
                "truncated producer snapshot: {bytes_remaining} bytes remain, {bytes_needed} needed"
            ),
            FindingKind::SnapshotNegativeEntryCount { entry_count } => {
                write!(f, "producer snapshot entry count {entry_count} is negative")
            }
            FindingKind::SnapshotCrcMismatch { stored, computed } => write!(
                f,
                "producer snapshot CRC mismatch: stored {stored}, computed {computed}"
            ),
            FindingKind::SnapshotTrailingBytes { trailing_bytes } => write!(
                f,
                "{trailing_bytes} bytes after the producer snapshot's last entry"
            ),
            FindingKind::SnapshotDuplicateProducer { producer_id } => write!(
                f,
                "producer id {producer_id} appears twice in the producer snapshot"
            ),
            FindingKind::SnapshotEntryPastSnapshot {
                producer_id,
                last_offset,
                snapshot_offset,
            } => write!(
                f,
                "producer {producer_id}'s last offset {last_offset} is not below the snapshot offset {snapshot_offset}"
            ),
            FindingKind::SnapshotPastLogEnd {
                snapshot_offset,
                log_end_offset,
            } => write!(
                f,
                "producer snapshot at {snapshot_offset}, past the log end offset {log_end_offset}"
            ),
            other => unreachable!("{other:?} is not a snapshot kind"),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.file.display(), self.at, self.kind)
    }
}
