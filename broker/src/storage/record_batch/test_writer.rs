//! Tests' own writer and reader of Kafka's record batch v2, byte for byte as
//! Kafka's Java client (`MemoryRecordsBuilder`, `DefaultRecord.writeTo`) and
//! librdkafka (`rd_kafka_msgset_writer`) write it: the batch's base timestamp
//! is its first record's, and each record's timestamp is a **varlong** delta
//! from it (wrapping, as Java's `long` subtraction does), so timestamps any
//! distance apart share a batch. kafka-protocol 0.15's encoder cannot write
//! that (it refuses a delta outside `i32`), which is why the tests have this.
//!
//! Field widths, from Kafka's protocol guide ("Record"): length varint,
//! attributes int8, timestampDelta varlong, offsetDelta varint, keyLength
//! varint, valueLength varint, header count varint, headerKeyLength varint,
//! headerValueLength varint (-1 for null key, value and header value).
//! Compression goes through kafka-protocol's codecs, which are the ones the
//! broker reads.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{self, Compressor, Decompressor};
use kafka_protocol::records::Compression;

use super::{BatchHeader, HEADER_SIZE, LOG_OVERHEAD, parse_header};

/// One record as a producer hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl TestRecord {
    /// A record with a key, a value and no headers.
    pub fn keyed(timestamp: i64, key: &str, value: &str) -> TestRecord {
        TestRecord {
            timestamp,
            key: Some(key.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: Vec::new(),
        }
    }
}

fn put_varlong(buf: &mut Vec<u8>, n: i64) {
    let mut zigzag = ((n << 1) ^ (n >> 63)) as u64;
    while zigzag >= 0x80 {
        buf.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    buf.push(zigzag as u8);
}

fn put_varint(buf: &mut Vec<u8>, n: i32) {
    put_varlong(buf, i64::from(n));
}

fn put_bytes(buf: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            put_varint(buf, b.len() as i32);
            buf.extend_from_slice(b);
        }
        None => put_varint(buf, -1),
    }
}

/// The uncompressed records of a batch whose base timestamp is `base`.
fn records_payload(records: &[TestRecord], base: i64) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        put_varlong(&mut body, r.timestamp.wrapping_sub(base));
        put_varint(&mut body, i as i32);
        put_bytes(&mut body, r.key.as_deref());
        put_bytes(&mut body, r.value.as_deref());
        put_varint(&mut body, r.headers.len() as i32);
        for (k, v) in &r.headers {
            put_bytes(&mut body, Some(k.as_bytes()));
            put_bytes(&mut body, v.as_deref());
        }
        put_varint(&mut out, body.len() as i32);
        out.extend_from_slice(&body);
    }
    out
}

fn compress(raw: &[u8], compression: Compression) -> Vec<u8> {
    fn with<C: Compressor<Vec<u8>, BufMut = BytesMut>>(raw: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        C::compress(&mut out, |tmp: &mut BytesMut| {
            tmp.put_slice(raw);
            Ok(())
        })
        .expect("compresses");
        out
    }
    match compression {
        Compression::None => raw.to_vec(),
        Compression::Gzip => with::<compression::Gzip>(raw),
        Compression::Snappy => with::<compression::Snappy>(raw),
        Compression::Lz4 => with::<compression::Lz4>(raw),
        Compression::Zstd => with::<compression::Zstd>(raw),
    }
}

/// One batch of `records` (at least one) with this codec, from no producer
/// (producer id -1), at base offset 0 and partition leader epoch -1, as a
/// producer sends it.
pub fn write_batch(records: &[TestRecord], compression: Compression) -> Bytes {
    let base = records[0].timestamp;
    let max = records.iter().map(|r| r.timestamp).max().unwrap_or(base);
    let payload = compress(&records_payload(records, base), compression);
    let mut after_crc = Vec::with_capacity(HEADER_SIZE + payload.len());
    after_crc.put_i16(compression as i16); // attributes: codec, CreateTime
    after_crc.put_i32(records.len() as i32 - 1); // lastOffsetDelta
    after_crc.put_i64(base);
    after_crc.put_i64(max);
    after_crc.put_i64(-1); // producerId
    after_crc.put_i16(-1); // producerEpoch
    after_crc.put_i32(-1); // baseSequence
    after_crc.put_i32(records.len() as i32);
    after_crc.extend_from_slice(&payload);
    let mut batch = Vec::with_capacity(LOG_OVERHEAD + 9 + after_crc.len());
    batch.put_i64(0); // baseOffset
    batch.put_i32((after_crc.len() + 9) as i32); // batchLength
    batch.put_i32(-1); // partitionLeaderEpoch
    batch.put_i8(2); // magic
    batch.put_u32(crc32c::crc32c(&after_crc));
    batch.extend_from_slice(&after_crc);
    Bytes::from(batch)
}

fn take_varlong(buf: &mut &[u8]) -> i64 {
    let mut raw = 0u64;
    for i in 0..10 {
        let (&byte, rest) = buf.split_first().expect("varlong cut short");
        *buf = rest;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (raw >> 1) as i64 ^ -((raw & 1) as i64);
        }
    }
    panic!("varlong longer than 10 bytes")
}

fn take_bytes(buf: &mut &[u8]) -> Option<Vec<u8>> {
    let len = take_varlong(buf);
    if len < 0 {
        return None;
    }
    let (taken, rest) = buf.split_at(len as usize);
    *buf = rest;
    Some(taken.to_vec())
}

fn decompress(payload: Bytes, compression_id: i16) -> Bytes {
    fn with<C: Decompressor<Bytes, Buf = Bytes>>(mut payload: Bytes) -> Bytes {
        C::decompress(&mut payload, |out: &mut Bytes| Ok(out.clone())).expect("decompresses")
    }
    match compression_id {
        0 => payload,
        1 => with::<compression::Gzip>(payload),
        2 => with::<compression::Snappy>(payload),
        3 => with::<compression::Lz4>(payload),
        4 => with::<compression::Zstd>(payload),
        other => panic!("codec {other}"),
    }
}

/// Reads one whole batch back: its header and its records, timestamps
/// restored from the base timestamp and each varlong delta.
pub fn read_batch(batch: &Bytes) -> (BatchHeader, Vec<TestRecord>) {
    let header = parse_header(batch).expect("a batch header");
    let payload = decompress(
        batch.slice(HEADER_SIZE..header.size_bytes()),
        header.compression_id(),
    );
    let mut rest: &[u8] = &payload;
    let mut records = Vec::new();
    for i in 0..header.record_count {
        let len = take_varlong(&mut rest) as usize;
        let (mut record, after) = rest.split_at(len);
        rest = after;
        record = &record[1..]; // attributes
        let timestamp = header
            .base_timestamp
            .wrapping_add(take_varlong(&mut record));
        assert_eq!(take_varlong(&mut record), i64::from(i), "offset delta");
        let key = take_bytes(&mut record);
        let value = take_bytes(&mut record);
        let count = take_varlong(&mut record);
        let headers = (0..count)
            .map(|_| {
                let k = take_bytes(&mut record).expect("a header key");
                (
                    String::from_utf8(k).expect("UTF-8"),
                    take_bytes(&mut record),
                )
            })
            .collect();
        assert!(record.is_empty(), "record {i} has bytes left");
        records.push(TestRecord {
            timestamp,
            key,
            value,
            headers,
        });
    }
    assert!(rest.is_empty(), "bytes after the last record");
    (header, records)
}
