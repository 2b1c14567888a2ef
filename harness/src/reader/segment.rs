//! Walking a segment file batch by batch.
//!
//! A `.log` segment is record batches back to back, each framed by its base
//! offset and a length. The walker reads the framing itself, so it keeps what
//! kafka-protocol's `RecordSet` throws away — where each batch sits and its
//! CRC — and survives what makes that decoder fail the whole buffer: a torn
//! tail ends the walk with a finding and keeps every batch before it, and a
//! CRC mismatch is reported and stepped over by the length field. Offset
//! continuity across batches is checked by the caller, which sees segments in
//! order.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::finding::{Finding, FindingKind, Location};
use super::record::{Codec, Record, RecordContext, decode_records};

/// Bytes before the length field's end: baseOffset (8) + batchLength (4).
/// Every message format frames entries this way, so the walk can step over
/// any of them.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The full v2 batch header, up to and including the records count.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes up to and including the magic byte, enough to know the format.
const HEADER_BYTES_UP_TO_MAGIC: usize = 17;
/// The CRC covers attributes through the end of the batch.
const CRC_COVERED_FROM: usize = 21;

const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;
const LOG_APPEND_TIME_BIT: i16 = 1 << 3;

/// One v2 record batch as found on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Relative to the data directory; shared by the segment's batches (a
    /// long run's replica holds millions of batches: issue 22).
    pub file: Arc<Path>,
    /// Byte position of the batch (its baseOffset field) in `file`.
    pub position: u64,
    /// Bytes the batch takes on disk, framing included.
    pub size_bytes: u64,
    pub base_offset: i64,
    pub last_offset: i64,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    /// The CRC stored in the batch.
    pub crc: u32,
    /// Whether `crc` equals the CRC-32C of the bytes it covers. A batch that
    /// fails is kept for the dump but its records are not decoded.
    pub crc_valid: bool,
    pub attributes: i16,
    pub codec: Codec,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
    /// CRC valid and every record decoded: only then are `records` returned
    /// and does the batch count as part of the log.
    pub intact: bool,
    pub records: Vec<Record>,
}

impl Batch {
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Control batches hold transaction markers, not user records.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & LOG_APPEND_TIME_BIT != 0
    }

    /// The next offset after this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset.saturating_add(1)
    }
}

/// What walking one segment produced.
#[derive(Debug, Default)]
pub struct SegmentWalk {
    pub batches: Vec<Batch>,
    pub findings: Vec<Finding>,
}

/// Walks the bytes of one segment. `file` is the path to report (relative
/// to the data directory).
pub fn walk_segment(file: &Path, bytes: &[u8]) -> SegmentWalk {
    let mut walk = SegmentWalk::default();
    let shared: Arc<Path> = Arc::from(file);
    let mut position = 0usize;
    while position < bytes.len() {
        let rest = &bytes[position..];
        let finding = |kind| Finding {
            file: file.to_owned(),
            at: Location::Byte(position as u64),
            kind,
        };
        if rest.len() < HEADER_BYTES_UP_TO_MAGIC {
            walk.findings.push(finding(FindingKind::TornTail {
                bytes_remaining: rest.len() as u64,
                bytes_needed: HEADER_BYTES_UP_TO_MAGIC as u64,
            }));
            break;
        }
        let batch_length = be_i32(rest, 8);
        let magic = rest[16] as i8;
        // A batch length that cannot even hold the magic byte leaves no way
        // to find the next batch.
        let minimum = if magic == 2 {
            BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES
        } else {
            HEADER_BYTES_UP_TO_MAGIC - LOG_OVERHEAD_BYTES
        };
        if batch_length < minimum as i32 {
            walk.findings
                .push(finding(FindingKind::CorruptBatchHeader { batch_length }));
            break;
        }
        let size = LOG_OVERHEAD_BYTES + batch_length as usize;
        if rest.len() < size {
            walk.findings.push(finding(FindingKind::TornTail {
                bytes_remaining: rest.len() as u64,
                bytes_needed: size as u64,
            }));
            break;
        }
        if magic != 2 {
            walk.findings
                .push(finding(FindingKind::UnsupportedMagic { magic }));
            position += size;
            continue;
        }
        let (batch, problem) = read_batch(&shared, position as u64, &rest[..size]);
        walk.findings.extend(problem.map(finding));
        walk.batches.push(batch);
        position += size;
    }
    walk
}

/// Reads one complete v2 batch (`bytes` is exactly its on-disk size).
fn read_batch(file: &Arc<Path>, position: u64, bytes: &[u8]) -> (Batch, Option<FindingKind>) {
    let base_offset = be_i64(bytes, 0);
    let attributes = be_i16(bytes, 21);
    let crc = be_u32(bytes, 17);
    let computed = crc32c::crc32c(&bytes[CRC_COVERED_FROM..]);
    let mut batch = Batch {
        file: file.clone(),
        position,
        size_bytes: bytes.len() as u64,
        base_offset,
        last_offset: base_offset.wrapping_add(i64::from(be_i32(bytes, 23))),
        partition_leader_epoch: be_i32(bytes, 12),
        magic: bytes[16] as i8,
        crc,
        crc_valid: crc == computed,
        attributes,
        codec: Codec::from_attributes(attributes),
        first_timestamp: be_i64(bytes, 27),
        max_timestamp: be_i64(bytes, 35),
        producer_id: be_i64(bytes, 43),
        producer_epoch: be_i16(bytes, 51),
        base_sequence: be_i32(bytes, 53),
        records_count: be_i32(bytes, 57),
        intact: false,
        records: Vec::new(),
    };
    if !batch.crc_valid {
        return (
            batch,
            Some(FindingKind::CrcMismatch {
                base_offset,
                stored: crc,
                computed,
            }),
        );
    }
    let context = RecordContext {
        base_offset,
        first_timestamp: batch.first_timestamp,
        records_count: batch.records_count,
        codec: batch.codec,
    };
    match decode_records(context, &bytes[BATCH_HEADER_BYTES..]) {
        Ok(records) => {
            batch.records = records;
            batch.intact = true;
            (batch, None)
        }
        Err(error) => (
            batch,
            Some(FindingKind::MalformedRecords {
                base_offset,
                reason: error.to_string(),
            }),
        ),
    }
}

// Callers have checked that `bytes` holds the field.
pub(super) fn be_i64(bytes: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

pub(super) fn be_i32(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

pub(super) fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

pub(super) fn be_i16(bytes: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(bytes[at..at + 2].try_into().expect("2 bytes"))
}
