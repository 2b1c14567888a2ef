//! Walks the headers of record batches (magic v2) in a byte buffer without
//! decoding records: where each batch starts, its offsets, and whether its CRC
//! holds. The fetch path uses it to stop a consumer's read at the high watermark.

use bytes::Bytes;

/// Bytes before `batchLength`'s payload: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// Size of the fixed v2 batch header, up to and including recordCount.
pub const HEADER_BYTES: usize = 61;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub last_offset: i64,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    /// Whole batch size in bytes, including the 12-byte log overhead.
    pub size: usize,
}

/// The headers of every complete batch in `buf`, in order; a trailing partial
/// batch is ignored.
pub fn headers(buf: &[u8]) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while buf.len() - pos >= HEADER_BYTES {
        let b = &buf[pos..];
        let batch_len = i32::from_be_bytes(b[8..12].try_into().unwrap());
        if batch_len < 0 {
            break;
        }
        let size = LOG_OVERHEAD + batch_len as usize;
        if size < HEADER_BYTES || b.len() < size {
            break;
        }
        let base_offset = i64::from_be_bytes(b[0..8].try_into().unwrap());
        let last_delta = i32::from_be_bytes(b[23..27].try_into().unwrap());
        out.push(BatchHeader {
            base_offset,
            last_offset: base_offset + last_delta as i64,
            partition_leader_epoch: i32::from_be_bytes(b[12..16].try_into().unwrap()),
            magic: b[16] as i8,
            size,
        });
        pos += size;
    }
    out
}

/// The prefix of `buf` holding only whole batches whose last offset is below `end`.
pub fn cut_below(buf: Bytes, end: i64) -> Bytes {
    let mut keep = 0usize;
    for h in headers(&buf) {
        if h.last_offset >= end {
            break;
        }
        keep += h.size;
    }
    buf.slice(..keep)
}

/// Does the batch at the start of `batch` carry a valid CRC-32C over the bytes
/// from its attributes to its end?
pub fn crc_ok(batch: &[u8]) -> bool {
    if batch.len() < HEADER_BYTES {
        return false;
    }
    let stored = u32::from_be_bytes(batch[17..21].try_into().unwrap());
    crc32c::crc32c(&batch[21..]) == stored
}
