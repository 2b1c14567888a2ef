//! The record batch v2 header: reading it, validating it, and patching it in place.
//!
//! A batch is a 61-byte header followed by its records; the CRC-32C covers
//! everything from the attributes to the end, so baseOffset and
//! partitionLeaderEpoch, which lie before it, can be rewritten without touching
//! the checksum. This module owns the byte layout and never allocates per batch on
//! the hot path. Produced records are checked by walking them with own code
//! ([`check_records`], `framing.rs`: Kafka's format, every field at its
//! documented width, null header values included), and against the topic's
//! configs (`produced.rs`: [`RecordRules`]); decoding
//! them into records is left to `kafka-protocol` ([`decode_records`]) and done
//! only for the broker's own internal records.
//!
//! Layout (big-endian), from Kafka's `DefaultRecordBatch`:
//!
//! ```text
//!  0 baseOffset i64        21 attributes i16        43 producerId i64
//!  8 batchLength i32       23 lastOffsetDelta i32   51 producerEpoch i16
//! 12 partitionLeaderEpoch  27 baseTimestamp i64     53 baseSequence i32
//! 16 magic i8              35 maxTimestamp i64      57 recordCount i32
//! 17 crc u32 (CRC-32C of bytes 21..end)             61 records
//! ```

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{self, Decompressor};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, RecordSet,
    TimestampType,
};

mod framing;
mod produced;
pub use framing::{
    RecordField, RecordFramingError, RecordsSeen, check_record_framing, timestamp_deltas,
    walk_records,
};
pub use produced::{ProducedError, RecordRules, RuleViolation, validate_produced_under};

/// baseOffset + batchLength: the bytes of a batch not counted by batchLength.
pub const LOG_OVERHEAD: usize = 12;
/// The fixed part of a v2 batch.
pub const HEADER_SIZE: usize = 61;
/// The only batch format this broker stores (Kafka 0.11+).
pub const MAGIC_V2: i8 = 2;

const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;

/// Why a batch was rejected. Precise enough for tests and for recovery's warning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than the header or the batch length needs: a torn write when
    /// found at the end of a segment.
    #[error("incomplete batch: needs {needed} bytes, {available} available")]
    Incomplete { needed: usize, available: usize },
    #[error("invalid batch length {batch_length} (a v2 batch is at least {} bytes)", HEADER_SIZE - LOG_OVERHEAD)]
    InvalidLength { batch_length: i32 },
    #[error("unsupported magic {magic} (only record batch v2 is stored)")]
    UnsupportedMagic { magic: i8 },
    #[error("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// lastOffsetDelta and recordCount disagree, or are negative (Kafka's
    /// `LogValidator` rejects both: "Inconsistent batch offset range").
    #[error("invalid offsets: lastOffsetDelta {last_offset_delta}, recordCount {record_count}")]
    InvalidOffsets {
        last_offset_delta: i32,
        record_count: i32,
    },
    /// The batch does not continue the log: its base offset is not the next offset.
    #[error("batch base offset {actual}, expected {expected}")]
    UnexpectedBaseOffset { expected: i64, actual: i64 },
    /// The header is sound but the records inside do not decode.
    #[error("records do not decode: {reason}")]
    Undecodable { reason: String },
}

/// Why a snappy payload is refused before (or while) it is decompressed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SnappyPayloadError {
    /// A raw block declaring more than snappy could expand it to: forged.
    #[error("snappy block claims {declared} bytes from {compressed} compressed")]
    ForgedLength { declared: u64, compressed: usize },
    #[error("xerial snappy header cut short")]
    XerialHeaderCutShort,
    #[error("xerial snappy block length cut short")]
    XerialLengthCutShort,
    #[error("negative xerial snappy block length")]
    XerialNegativeLength,
    #[error("xerial snappy block past the end of the batch")]
    XerialBlockPastEnd,
    /// The decoder's error is the source and not repeated here: the batch's
    /// error prints the whole chain (`{:#}`), which would say it twice.
    #[error("xerial snappy block")]
    XerialBlock(#[source] snap::Error),
}

/// A parsed v2 batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// The batch's whole size on disk, overhead included.
    pub fn size_bytes(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// The compression codec id (attributes bits 0-2).
    pub fn compression_id(&self) -> i16 {
        self.attributes & 0x7
    }
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn i64_at(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Reads the batch length from the first 12 bytes and checks it is plausible.
/// Returns the batch's total size. Separate from [`parse_header`] so a scanner can
/// learn how many bytes to read before it has them.
pub fn batch_size(buf: &[u8]) -> Result<usize, BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Err(BatchError::Incomplete {
            needed: LOG_OVERHEAD,
            available: buf.len(),
        });
    }
    let batch_length = i32_at(buf, BATCH_LENGTH_AT);
    if batch_length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
        return Err(BatchError::InvalidLength { batch_length });
    }
    Ok(LOG_OVERHEAD + batch_length as usize)
}

/// Parses and structurally checks the header at the start of `buf`: length,
/// magic, and offset/count consistency. The CRC is not checked here (see
/// [`check_crc`]), and `buf` needs to hold only the header, not the whole batch.
pub fn parse_header(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    batch_size(buf)?;
    if buf.len() <= MAGIC_AT {
        return Err(BatchError::Incomplete {
            needed: MAGIC_AT + 1,
            available: buf.len(),
        });
    }
    let magic = buf[MAGIC_AT] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic { magic });
    }
    if buf.len() < HEADER_SIZE {
        return Err(BatchError::Incomplete {
            needed: HEADER_SIZE,
            available: buf.len(),
        });
    }
    let header = BatchHeader {
        base_offset: i64_at(buf, BASE_OFFSET_AT),
        batch_length: i32_at(buf, BATCH_LENGTH_AT),
        partition_leader_epoch: i32_at(buf, LEADER_EPOCH_AT),
        magic,
        crc: u32::from_be_bytes([
            buf[CRC_AT],
            buf[CRC_AT + 1],
            buf[CRC_AT + 2],
            buf[CRC_AT + 3],
        ]),
        attributes: i16_at(buf, ATTRIBUTES_AT),
        last_offset_delta: i32_at(buf, 23),
        base_timestamp: i64_at(buf, 27),
        max_timestamp: i64_at(buf, 35),
        producer_id: i64_at(buf, 43),
        producer_epoch: i16_at(buf, 51),
        base_sequence: i32_at(buf, 53),
        record_count: i32_at(buf, 57),
    };
    // We never compact, so every stored batch holds exactly the offsets
    // base..=base+lastOffsetDelta, one record each.
    if header.record_count <= 0
        || header.last_offset_delta < 0
        || i64::from(header.last_offset_delta) + 1 != i64::from(header.record_count)
        || header
            .base_offset
            .checked_add(i64::from(header.record_count))
            .is_none()
    {
        return Err(BatchError::InvalidOffsets {
            last_offset_delta: header.last_offset_delta,
            record_count: header.record_count,
        });
    }
    Ok(header)
}

/// Checks the CRC-32C over attributes..end. `batch` must be exactly one batch.
pub fn check_crc(batch: &[u8]) -> Result<(), BatchError> {
    if batch.len() < HEADER_SIZE {
        return Err(BatchError::Incomplete {
            needed: HEADER_SIZE,
            available: batch.len(),
        });
    }
    let stored = u32::from_be_bytes([
        batch[CRC_AT],
        batch[CRC_AT + 1],
        batch[CRC_AT + 2],
        batch[CRC_AT + 3],
    ]);
    let computed = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    Ok(())
}

/// Full header validation of the first batch in `buf`: length, magic, offsets and
/// CRC. Returns the header; the batch is `buf[..header.size_bytes()]`.
pub fn validate(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let size = batch_size(buf)?;
    let header = parse_header(buf)?;
    if buf.len() < size {
        return Err(BatchError::Incomplete {
            needed: size,
            available: buf.len(),
        });
    }
    check_crc(&buf[..size])?;
    Ok(header)
}

/// Overwrites baseOffset. It lies outside the CRC, so the batch stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites partitionLeaderEpoch, also outside the CRC (KIP-101 placed it there
/// so a leader can stamp batches without recomputing checksums).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// The records payload of a batch with codec `compression`, decompressed,
/// after the records walk passed it ([`walk_records`]), and what the walk
/// saw: each codec's output is checked before it is used, and a snappy
/// block's declared length before it is allocated.
fn decompressed(
    payload: &mut Bytes,
    compression: Compression,
    count: usize,
) -> anyhow::Result<(Bytes, RecordsSeen)> {
    let checked = |payload: &mut Bytes| -> anyhow::Result<(Bytes, RecordsSeen)> {
        let seen = walk_records(payload, count)?;
        Ok((payload.clone(), seen))
    };
    match compression {
        Compression::None => checked(payload),
        Compression::Gzip => compression::Gzip::decompress(payload, checked),
        Compression::Snappy if payload.starts_with(XERIAL_MAGIC) => {
            let mut unframed = Bytes::from(unframe_xerial(payload)?);
            checked(&mut unframed)
        }
        Compression::Snappy => {
            check_snappy_length(payload)?;
            compression::Snappy::decompress(payload, checked)
        }
        Compression::Lz4 => compression::Lz4::decompress(payload, checked),
        Compression::Zstd => compression::Zstd::decompress(payload, checked),
    }
}

/// Checks one batch's records as the leader does before it appends them
/// (Kafka's `LogValidator` walks every record): decompressed when compressed,
/// then exactly `record_count` well-framed v2 records with offset deltas 0, 1,
/// 2, … ([`check_record_framing`]). The header must already have passed
/// [`validate`]. Own code rather than kafka-protocol's decoder, which refuses a
/// null header value (length -1) that Kafka's record format allows and real
/// clients send ([clients]); nothing is decoded into records, and nothing
/// allocated but a compressed payload's output. Says what the walk saw that
/// a topic's configs may refuse ([`RecordRules`]).
pub fn check_records(batch: &Bytes, header: &BatchHeader) -> Result<RecordsSeen, BatchError> {
    let count = header.record_count as usize;
    let mut payload = batch.slice(HEADER_SIZE..);
    decompressed(&mut payload, compression_of(header)?, count)
        .map(|(_, seen)| seen)
        .map_err(|e| BatchError::Undecodable {
            reason: format!("{e:#}"),
        })
}

fn compression_of(header: &BatchHeader) -> Result<Compression, BatchError> {
    Ok(match header.compression_id() {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        other => {
            return Err(BatchError::Undecodable {
                reason: format!("unknown compression codec {other}"),
            });
        }
    })
}

/// The timestampType bit of a batch's attributes: set, LogAppendTime.
const LOG_APPEND_TIME: i16 = 0x08;

/// Each record's timestamp in a stored batch, in offset order: the base
/// timestamp plus the record's delta (wrapping, as Java's `long` addition),
/// or the batch's max timestamp for each under LogAppendTime, as Kafka's
/// `DefaultRecordBatch` iterator gives them.
pub fn record_timestamps(batch: &Bytes, header: &BatchHeader) -> Result<Vec<i64>, BatchError> {
    let count = header.record_count.max(0) as usize;
    if header.attributes & LOG_APPEND_TIME != 0 {
        return Ok(vec![header.max_timestamp; count]);
    }
    let undecodable = |reason: String| BatchError::Undecodable { reason };
    let mut payload = batch.slice(HEADER_SIZE..);
    let (records, _) = decompressed(&mut payload, compression_of(header)?, count)
        .map_err(|e| undecodable(format!("{e:#}")))?;
    let deltas = timestamp_deltas(&records, count).map_err(|e| undecodable(e.to_string()))?;
    Ok(deltas
        .into_iter()
        .map(|d| header.base_timestamp.wrapping_add(d))
        .collect())
}

/// Decodes one batch's records with `kafka-protocol`'s decoder, for the
/// broker's own internal records (the offsets topic's commits). The header
/// must already have passed [`validate`]. Taking `Bytes` lets the decoder
/// slice keys and values out without copying.
///
/// The decoder sizes buffers from the counts it reads (records, headers, a
/// snappy block's length) before reading what they count, so a forged count
/// could make it allocate without bound. Each payload is therefore walked first
/// by [`check_record_framing`], which allocates nothing.
///
/// kafka-protocol 0.15.1 fails on a null header value (length -1, which Kafka
/// allows): the broker's internal records have no headers, and produced data
/// is checked by [`check_records`] instead.
pub fn decode_records(batch: Bytes, header: &BatchHeader) -> Result<RecordSet, BatchError> {
    let count = header.record_count as usize;
    let undecodable = |reason: String| BatchError::Undecodable { reason };
    if header.compression_id() == 0 {
        check_record_framing(&batch[HEADER_SIZE..], count)
            .map_err(|e| undecodable(e.to_string()))?;
    }
    let decompress = |compressed: &mut Bytes, compression: Compression| -> anyhow::Result<Bytes> {
        decompressed(compressed, compression, count).map(|(records, _)| records)
    };
    let mut buf = batch;
    let set = RecordBatchDecoder::decode_with_custom_compression(&mut buf, Some(decompress))
        .map_err(|e| undecodable(format!("{e:#}")))?;
    if set.records.len() != count {
        return Err(undecodable(format!(
            "header says {count} records, decoded {}",
            set.records.len()
        )));
    }
    Ok(set)
}

/// Validates a producer's records as the leader does before it appends any of
/// them (Kafka's `LogValidator`): every batch framed, magic 2, CRC, offsets,
/// and its records walked ([`check_records`]). Returns each batch's
/// position and header, in order; the first problem is the error, with the
/// position of the batch it is in. Empty records are no batches, not an error.
pub fn validate_produced(
    records: &Bytes,
) -> Result<Vec<(usize, BatchHeader)>, (usize, BatchError)> {
    let mut headers = Vec::new();
    for item in Batches::new(records) {
        let batch = item?;
        let size = batch.header.size_bytes();
        let bytes = records.slice(batch.position..batch.position + size);
        check_records(&bytes, &batch.header).map_err(|source| (batch.position, source))?;
        headers.push((batch.position, batch.header));
    }
    Ok(headers)
}

/// The stream format of snappy-java (xerial), which Kafka's Java producer
/// writes for snappy batches (`SnappyOutputStream`): this magic, a big-endian
/// int32 version and compatible version, then blocks of a big-endian int32
/// length and one raw snappy block each. kafka-protocol and librdkafka write a
/// single raw block; Kafka's broker reads both (`SnappyInputStream` falls back
/// to raw), and keeps the batch as sent.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

/// The raw bytes of an xerial-framed snappy payload, each block checked like
/// a raw one ([`check_snappy_length`]) before it is decoded.
fn unframe_xerial(framed: &[u8]) -> Result<Vec<u8>, SnappyPayloadError> {
    let mut rest = framed
        .get(XERIAL_HEADER_BYTES..)
        .ok_or(SnappyPayloadError::XerialHeaderCutShort)?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (length, after) = rest
            .split_first_chunk::<4>()
            .ok_or(SnappyPayloadError::XerialLengthCutShort)?;
        let length = usize::try_from(i32::from_be_bytes(*length))
            .map_err(|_| SnappyPayloadError::XerialNegativeLength)?;
        let block = after
            .get(..length)
            .ok_or(SnappyPayloadError::XerialBlockPastEnd)?;
        check_snappy_length(block)?;
        let decoded = snap::raw::Decoder::new()
            .decompress_vec(block)
            .map_err(SnappyPayloadError::XerialBlock)?;
        out.extend(decoded);
        rest = &after[length..];
    }
    Ok(out)
}

/// Raw snappy declares its uncompressed length up front and the decoder
/// allocates it at once. Snappy expands at most about 22 times (a 3-byte copy
/// yields 64 bytes), so a larger claim is forged.
fn check_snappy_length(compressed: &[u8]) -> Result<(), SnappyPayloadError> {
    let mut declared: u64 = 0;
    for (i, &byte) in compressed.iter().take(5).enumerate() {
        declared |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            break;
        }
    }
    let limit = 32 * compressed.len() as u64 + 1024;
    if declared > limit {
        return Err(SnappyPayloadError::ForgedLength {
            declared,
            compressed: compressed.len(),
        });
    }
    Ok(())
}

/// One uncompressed batch of plain records (no producer id, no sequence),
/// each a key and a value, as a coordinator appends its state to an
/// internal topic (there a `None` value is a tombstone).
pub fn plain_batch(entries: Vec<(Option<Bytes>, Option<Bytes>)>, now_ms: i64) -> Bytes {
    coordinator_batch(entries, now_ms, None)
}

/// [`plain_batch`] written for a transactional producer `(id, epoch)`: the
/// batch carries the producer and the transactional bit, with sequence 0,
/// as Kafka's group coordinator writes a TxnOffsetCommit
/// (`GroupMetadataManager.storeOffsets`).
pub fn transactional_batch(
    entries: Vec<(Option<Bytes>, Option<Bytes>)>,
    now_ms: i64,
    producer: (i64, i16),
) -> Bytes {
    coordinator_batch(entries, now_ms, Some(producer))
}

fn coordinator_batch(
    entries: Vec<(Option<Bytes>, Option<Bytes>)>,
    now_ms: i64,
    producer: Option<(i64, i16)>,
) -> Bytes {
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    let records: Vec<Record> = entries
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: producer.is_some(),
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if producer.is_some() { i as i32 } else { -1 },
            timestamp: now_ms,
            key,
            value,
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options)
        .expect("an uncompressed batch of plain records encodes");
    buf.freeze()
}

/// One batch found in a buffer.
#[derive(Debug, Clone, Copy)]
pub struct RawBatch<'a> {
    /// Byte position of the batch in the buffer iterated.
    pub position: usize,
    pub header: BatchHeader,
    pub bytes: &'a [u8],
}

/// Iterates the batches of a buffer, validating each fully (length, magic,
/// offsets, CRC). Yields the first problem as `Err((position, error))` and then
/// stops: after a bad length nothing further can be framed.
pub struct Batches<'a> {
    buf: &'a [u8],
    position: usize,
    failed: bool,
}

impl<'a> Batches<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Batches {
            buf,
            position: 0,
            failed: false,
        }
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<RawBatch<'a>, (usize, BatchError)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.position >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.position..];
        match validate(rest) {
            Ok(header) => {
                let size = header.size_bytes();
                let batch = RawBatch {
                    position: self.position,
                    header,
                    bytes: &rest[..size],
                };
                self.position += size;
                Some(Ok(batch))
            }
            Err(e) => {
                self.failed = true;
                Some(Err((self.position, e)))
            }
        }
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(crate) mod test_writer;
#[cfg(test)]
#[path = "record_batch_tests.rs"]
mod tests;
