//! The records inside a v2 batch: decompression and the varint record format.
//!
//! After its 61-byte header a batch holds `records_count` records, compressed
//! as a whole when attributes bits 0-2 name a codec. Each record is a
//! zigzag-varint length, then attributes, timestamp delta, offset delta, key,
//! value and headers. This module turns those bytes into [`Record`]s and
//! reports anything that does not add up as a [`RecordError`]; it never trusts
//! a length it has not bounds-checked.

use std::io::Read;

use serde::{Deserialize, Serialize};

use super::payload::Payload;

/// A decompressed batch larger than this is refused. Kafka's own default
/// `message.max.bytes` is about 1 MiB; this leaves room for any sane producer
/// while keeping a corrupt or hostile batch from exhausting memory.
pub const DECOMPRESSED_BATCH_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Compression codec from attributes bits 0-2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
    Unknown(u8),
}

impl Codec {
    pub fn from_attributes(attributes: i16) -> Codec {
        match attributes & 0x07 {
            0 => Codec::None,
            1 => Codec::Gzip,
            2 => Codec::Snappy,
            3 => Codec::Lz4,
            4 => Codec::Zstd,
            other => Codec::Unknown(other as u8),
        }
    }

    /// The name DumpLogSegments prints as `compresscodec`.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
            Codec::Unknown(_) => "unknown",
        }
    }
}

/// One record of a batch, with its absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Payload>,
    pub value: Option<Payload>,
    /// Boxed: no record's headers grow once read (issue 22's memory figure).
    #[serde(default, skip_serializing_if = "<[Header]>::is_empty")]
    pub headers: Box<[Header]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub key: Payload,
    pub value: Option<Payload>,
}

/// Why a batch's records could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
    #[error("{codec} decompression failed: {reason}")]
    Decompression { codec: &'static str, reason: String },
    #[error("decompressed batch exceeds {DECOMPRESSED_BATCH_BYTES_MAX} bytes")]
    TooLarge,
    #[error("record {index}: {reason}")]
    Record { index: i32, reason: &'static str },
    #[error("negative record count {0}")]
    NegativeCount(i32),
    #[error("{0} bytes left after the last record")]
    TrailingBytes(usize),
}

/// Fields of the batch header that records are relative to.
#[derive(Debug, Clone, Copy)]
pub struct RecordContext {
    pub base_offset: i64,
    pub first_timestamp: i64,
    pub records_count: i32,
    pub codec: Codec,
}

/// Decompresses `body` (the bytes after the batch header) and decodes its records.
pub fn decode_records(context: RecordContext, body: &[u8]) -> Result<Vec<Record>, RecordError> {
    if context.records_count < 0 {
        return Err(RecordError::NegativeCount(context.records_count));
    }
    let decompressed;
    let plain = match context.codec {
        Codec::None => body,
        codec => {
            decompressed = decompress(codec, body)?;
            &decompressed[..]
        }
    };
    let mut cursor = Cursor::new(plain);
    // Capacity from the count is bounded by the bytes: a record takes at least 7.
    let capacity = (context.records_count as usize).min(plain.len() / 7);
    let mut records = Vec::with_capacity(capacity);
    for index in 0..context.records_count {
        let record = read_record(&mut cursor, context)
            .map_err(|reason| RecordError::Record { index, reason })?;
        records.push(record);
    }
    match cursor.remaining() {
        0 => Ok(records),
        left => Err(RecordError::TrailingBytes(left)),
    }
}

fn read_record(cursor: &mut Cursor<'_>, context: RecordContext) -> Result<Record, &'static str> {
    let length = cursor.varint()?;
    let length = usize::try_from(length).map_err(|_| "negative record length")?;
    let mut record = Cursor::new(
        cursor
            .take(length)
            .ok_or("record length past the batch end")?,
    );
    let _attributes = record.byte()?;
    let timestamp_delta = record.varlong()?;
    let offset_delta = record.varint()?;
    let key = record.bytes()?;
    let value = record.bytes()?;
    let header_count = record.varint()?;
    if header_count < 0 {
        return Err("negative header count");
    }
    let mut headers = Vec::new();
    for _ in 0..header_count {
        let key = record.bytes()?.ok_or("null header key")?;
        let value = record.bytes()?;
        headers.push(Header { key, value });
    }
    if record.remaining() != 0 {
        return Err("bytes left inside the record after its headers");
    }
    Ok(Record {
        offset: context.base_offset.wrapping_add(i64::from(offset_delta)),
        timestamp: context.first_timestamp.wrapping_add(timestamp_delta),
        key,
        value,
        headers: headers.into_boxed_slice(),
    })
}

/// The xerial snappy-java stream header the Java client writes: magic, then
/// version and compatible-version as big-endian int32s.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

fn decompress(codec: Codec, body: &[u8]) -> Result<Vec<u8>, RecordError> {
    let failed = |reason: String| RecordError::Decompression {
        codec: codec.name(),
        reason,
    };
    match codec {
        Codec::None => Ok(body.to_vec()),
        Codec::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(body))
            .map_err(|e| e.into_record_error(failed)),
        Codec::Snappy if body.starts_with(XERIAL_MAGIC) => {
            unframe_xerial(&body[XERIAL_MAGIC.len()..]).map_err(|e| failed(e.to_string()))
        }
        Codec::Snappy => snappy_block(body).map_err(|e| failed(e.to_string())),
        Codec::Lz4 => {
            let decoder = lz4::Decoder::new(body).map_err(|e| failed(e.to_string()))?;
            read_bounded(decoder).map_err(|e| e.into_record_error(failed))
        }
        Codec::Zstd => {
            let decoder =
                zstd::stream::read::Decoder::new(body).map_err(|e| failed(e.to_string()))?;
            read_bounded(decoder).map_err(|e| e.into_record_error(failed))
        }
        Codec::Unknown(code) => Err(RecordError::UnknownCodec(code)),
    }
}

/// Why a snappy body did not decompress; its text goes into
/// [`RecordError::Decompression`].
#[derive(Debug, thiserror::Error)]
enum SnappyError {
    #[error("xerial {0}")]
    Xerial(&'static str),
    #[error("decompressed batch too large")]
    TooLarge,
    #[error(transparent)]
    Snap(#[from] snap::Error),
}

/// Kafka's Java client wraps snappy in snappy-java's stream format: after the
/// 16-byte header, blocks of a big-endian int32 length and a raw snappy block.
/// kafka-protocol and librdkafka write one raw block instead; both are valid
/// on disk because the broker keeps batches as the producer sent them.
fn unframe_xerial(after_magic: &[u8]) -> Result<Vec<u8>, SnappyError> {
    let mut rest = after_magic
        .get(XERIAL_HEADER_BYTES - XERIAL_MAGIC.len()..)
        .ok_or(SnappyError::Xerial("header cut short"))?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (length, after) = rest
            .split_first_chunk::<4>()
            .ok_or(SnappyError::Xerial("block length cut short"))?;
        let length = usize::try_from(i32::from_be_bytes(*length))
            .map_err(|_| SnappyError::Xerial("negative block length"))?;
        let block = after
            .get(..length)
            .ok_or(SnappyError::Xerial("block past the end"))?;
        out.extend(snappy_block(block)?);
        if out.len() as u64 > DECOMPRESSED_BATCH_BYTES_MAX {
            return Err(SnappyError::TooLarge);
        }
        rest = &after[length..];
    }
    Ok(out)
}

fn snappy_block(block: &[u8]) -> Result<Vec<u8>, SnappyError> {
    let length = snap::raw::decompress_len(block)?;
    if length as u64 > DECOMPRESSED_BATCH_BYTES_MAX {
        return Err(SnappyError::TooLarge);
    }
    Ok(snap::raw::Decoder::new().decompress_vec(block)?)
}

enum BoundedReadError {
    Io(std::io::Error),
    TooLarge,
}

impl BoundedReadError {
    fn into_record_error(self, failed: impl Fn(String) -> RecordError) -> RecordError {
        match self {
            BoundedReadError::Io(error) => failed(error.to_string()),
            BoundedReadError::TooLarge => RecordError::TooLarge,
        }
    }
}

fn read_bounded(reader: impl Read) -> Result<Vec<u8>, BoundedReadError> {
    let mut out = Vec::new();
    reader
        .take(DECOMPRESSED_BATCH_BYTES_MAX + 1)
        .read_to_end(&mut out)
        .map_err(BoundedReadError::Io)?;
    if out.len() as u64 > DECOMPRESSED_BATCH_BYTES_MAX {
        return Err(BoundedReadError::TooLarge);
    }
    Ok(out)
}

/// A bounds-checked reader over record bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes }
    }

    fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (taken, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(taken)
    }

    fn byte(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1).ok_or("record cut short")?[0])
    }

    /// Unsigned LEB128 of at most `max_bytes` bytes.
    fn unsigned(&mut self, max_bytes: u32) -> Result<u64, &'static str> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long")
    }

    fn varint(&mut self) -> Result<i32, &'static str> {
        let raw = u32::try_from(self.unsigned(5)?).map_err(|_| "varint overflows int32")?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, &'static str> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// A varint length then that many bytes; length -1 is null.
    fn bytes(&mut self) -> Result<Option<Payload>, &'static str> {
        match self.varint()? {
            -1 => Ok(None),
            length if length < 0 => Err("negative length"),
            length => Ok(Some(Payload::from(
                self.take(length as usize)
                    .ok_or("length past the record end")?,
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_varints_decode_like_kafka() {
        // Kafka's ByteUtils: 0→0, -1→1, 1→2, -2→3, 300→[0xd8,0x04].
        let mut cursor = Cursor::new(&[0x00, 0x01, 0x02, 0x03, 0xd8, 0x04]);
        let decoded: Vec<i32> = (0..5).map(|_| cursor.varint().unwrap()).collect();
        assert_eq!(decoded, vec![0, -1, 1, -2, 300]);
        let mut long = Cursor::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(long.varlong().unwrap(), i64::MIN);
        let mut too_long = Cursor::new(&[0xff; 6]);
        assert!(too_long.varint().is_err());
    }

    #[test]
    fn a_truncated_record_is_an_error_not_a_panic() {
        let context = RecordContext {
            base_offset: 0,
            first_timestamp: 0,
            records_count: 1,
            codec: Codec::None,
        };
        // length 10, but only 3 bytes follow
        let error = decode_records(context, &[0x14, 0, 0, 0]).unwrap_err();
        assert!(matches!(error, RecordError::Record { index: 0, .. }));
    }
}
