//! The walk over a batch's (decompressed) records that the leader makes
//! before it appends a producer's data: every record framed as Kafka's
//! record format v2 lays it out, without decoding or allocating anything.
//!
//! Each field is read with the width Kafka's protocol guide gives it
//! ("Record"; KIP-98 introduced the format, Kafka's `DefaultRecord.readFrom`
//! reads it):
//!
//! ```text
//! length            varint    key               keyLength bytes
//! attributes        int8      valueLength       varint (-1: null)
//! timestampDelta    varlong   value             valueLength bytes
//! offsetDelta       varint    header count      varint
//! keyLength         varint (-1: null)
//!   each header: headerKeyLength varint, headerKey, headerValueLength varint (-1: null), value
//! ```
//!
//! The timestamp delta is the one varlong: a client stamps each record
//! itself, so two records of a batch may lie further apart than 2^31 ms, and
//! a delta then takes up to 10 bytes.

/// Why a record payload is not exactly its count of well-framed v2 records
/// ([`check_record_framing`]). Found before the decoder allocates anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordFramingError {
    #[error("truncated varint")]
    TruncatedVarint,
    #[error("varint longer than 5 bytes")]
    VarintTooLong,
    #[error("varlong longer than 10 bytes")]
    VarlongTooLong,
    #[error("negative {field} length {len}")]
    NegativeLength { field: RecordField, len: i32 },
    #[error("{field} of {len} bytes overruns its record")]
    Overrun { field: RecordField, len: usize },
    /// More headers than the record's remaining bytes could hold (each takes
    /// at least two).
    #[error("record {record}: {headers} headers cannot fit")]
    Headers { record: usize, headers: i32 },
    #[error("record {record}: {bytes} bytes after its headers")]
    TrailingInRecord { record: usize, bytes: usize },
    #[error("{bytes} bytes after the last record")]
    TrailingAfterRecords { bytes: usize },
    /// A v2 batch's records carry offset deltas 0, 1, 2, … in order.
    #[error("record {record} has offset delta {delta}, expected {record}")]
    OffsetDelta { record: usize, delta: i32 },
}

/// The length-prefixed part of a record that [`RecordFramingError`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordField {
    /// The whole record, by its index in the batch.
    Record(usize),
    Attributes,
    Key,
    Value,
    HeaderKey,
    HeaderValue,
}

impl std::fmt::Display for RecordField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordField::Record(i) => write!(f, "record {i}"),
            RecordField::Attributes => f.write_str("attributes"),
            RecordField::Key => f.write_str("key"),
            RecordField::Value => f.write_str("value"),
            RecordField::HeaderKey => f.write_str("header key"),
            RecordField::HeaderValue => f.write_str("header value"),
        }
    }
}

/// What the walk saw of the records besides their framing: what a topic's
/// configs may refuse (`super::RecordRules`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordsSeen {
    /// The index of the first record with a null key, if any.
    pub first_keyless: Option<usize>,
}

/// Reads the raw (still zigzag-encoded) bits of a varint of at most
/// `max_bytes` bytes: 5 for Kafka's varint, 10 for its varlong, as Kafka's
/// `ByteUtils.readVarint` / `readVarlong` allow.
fn read_raw(
    buf: &mut &[u8],
    max_bytes: u32,
    too_long: RecordFramingError,
) -> Result<u64, RecordFramingError> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        let Some((&byte, rest)) = buf.split_first() else {
            return Err(RecordFramingError::TruncatedVarint);
        };
        *buf = rest;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(raw);
        }
    }
    Err(too_long)
}

/// A varint: at most 5 bytes, zigzag, an `i32` (bits past the 32nd dropped,
/// as Kafka's `int` arithmetic drops them).
fn read_varint(buf: &mut &[u8]) -> Result<i32, RecordFramingError> {
    let raw = read_raw(buf, 5, RecordFramingError::VarintTooLong)? as u32;
    Ok((raw >> 1) as i32 ^ -((raw & 1) as i32))
}

/// A varlong: at most 10 bytes, zigzag, an `i64`.
fn read_varlong(buf: &mut &[u8]) -> Result<i64, RecordFramingError> {
    let raw = read_raw(buf, 10, RecordFramingError::VarlongTooLong)?;
    Ok((raw >> 1) as i64 ^ -((raw & 1) as i64))
}

/// Takes `len` bytes off the front of `buf` if there are that many.
fn skip<'a>(
    buf: &mut &'a [u8],
    len: i32,
    field: RecordField,
) -> Result<&'a [u8], RecordFramingError> {
    let len =
        usize::try_from(len).map_err(|_| RecordFramingError::NegativeLength { field, len })?;
    if len > buf.len() {
        return Err(RecordFramingError::Overrun { field, len });
    }
    let (taken, rest) = buf.split_at(len);
    *buf = rest;
    Ok(taken)
}

/// Checks, without allocating, that `payload` is exactly `count` well-framed v2
/// records: every length fits inside its record and every record inside the
/// payload.
pub fn check_record_framing(payload: &[u8], count: usize) -> Result<(), RecordFramingError> {
    walk_records(payload, count).map(drop)
}

/// [`check_record_framing`], saying what it saw on the way.
pub fn walk_records(mut payload: &[u8], count: usize) -> Result<RecordsSeen, RecordFramingError> {
    let mut seen = RecordsSeen::default();
    for i in 0..count {
        let len = read_varint(&mut payload)?;
        let mut record = skip(&mut payload, len, RecordField::Record(i))?;
        skip(&mut record, 1, RecordField::Attributes)?;
        read_varlong(&mut record)?; // timestamp delta
        let delta = read_varint(&mut record)?;
        if usize::try_from(delta) != Ok(i) {
            return Err(RecordFramingError::OffsetDelta { record: i, delta });
        }
        for field in [RecordField::Key, RecordField::Value] {
            let len = read_varint(&mut record)?;
            if len != -1 {
                skip(&mut record, len, field)?;
            } else if field == RecordField::Key && seen.first_keyless.is_none() {
                seen.first_keyless = Some(i);
            }
        }
        let headers = read_varint(&mut record)?;
        // Each header takes at least two bytes (two length varints).
        if headers < 0 || headers as usize > record.len() / 2 {
            return Err(RecordFramingError::Headers { record: i, headers });
        }
        for _ in 0..headers {
            let key_len = read_varint(&mut record)?;
            skip(&mut record, key_len, RecordField::HeaderKey)?;
            let value_len = read_varint(&mut record)?;
            if value_len != -1 {
                skip(&mut record, value_len, RecordField::HeaderValue)?;
            }
        }
        if !record.is_empty() {
            return Err(RecordFramingError::TrailingInRecord {
                record: i,
                bytes: record.len(),
            });
        }
    }
    if !payload.is_empty() {
        return Err(RecordFramingError::TrailingAfterRecords {
            bytes: payload.len(),
        });
    }
    Ok(seen)
}

/// Each of `count` records' timestamp delta, in order: a record's length,
/// its attributes byte, then the delta (a varlong). Only what a lookup by
/// timestamp needs; the framing was checked when the batch was appended.
pub fn timestamp_deltas(mut payload: &[u8], count: usize) -> Result<Vec<i64>, RecordFramingError> {
    // Every record takes at least a byte, so `count` is no allocation risk
    // beyond the payload's size.
    let mut deltas = Vec::with_capacity(count.min(payload.len()));
    for i in 0..count {
        let len = read_varint(&mut payload)?;
        let mut record = skip(&mut payload, len, RecordField::Record(i))?;
        skip(&mut record, 1, RecordField::Attributes)?;
        deltas.push(read_varlong(&mut record)?);
    }
    Ok(deltas)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's varlong takes 10 bytes at most, its varint 5; the varlong's
    /// extremes read back exactly.
    #[test]
    fn varints_and_varlongs_are_read_to_their_widths() {
        let mut max: &[u8] = &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(read_varlong(&mut max), Ok(i64::MAX));
        let mut min: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(read_varlong(&mut min), Ok(i64::MIN));
        let mut eleven: &[u8] = &[0x80; 11];
        assert_eq!(
            read_varlong(&mut eleven),
            Err(RecordFramingError::VarlongTooLong)
        );
        let mut six: &[u8] = &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
        assert_eq!(
            read_varint(&mut six),
            Err(RecordFramingError::VarintTooLong)
        );
        let mut minus_one: &[u8] = &[0x01];
        assert_eq!(read_varint(&mut minus_one), Ok(-1));
    }
}
