//! Writing Kafka-format data directories for tests through kafka-protocol's
//! record batch encoder (never the broker crate): a spec of replicas,
//! segments, batches and records in, files on disk out. `reader_fixtures.rs`
//! holds the committed golden directories made from it.

use std::fs;
use std::path::Path;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

pub const BASE_TIMESTAMP_MS: i64 = 1_700_000_000_000;

/// How a batch is compressed on disk. Snappy comes in two framings: the raw
/// block kafka-protocol and librdkafka write, and the xerial stream the Java
/// client writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpecCodec {
    None,
    Gzip,
    SnappyRaw,
    SnappyXerial,
    Lz4,
    Zstd,
}

#[derive(Debug, Clone)]
pub struct SpecRecord {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(&'static str, Option<Vec<u8>>)>,
}

#[derive(Debug, Clone)]
pub struct SpecBatch {
    pub epoch: i32,
    pub codec: SpecCodec,
    /// `(producer id, producer epoch)`; sequences then follow the offsets.
    pub producer: Option<(i64, i16)>,
    pub records: Vec<SpecRecord>,
}

#[derive(Debug, Clone)]
pub struct SpecSegment {
    pub base_offset: i64,
    pub batches: Vec<SpecBatch>,
}

#[derive(Debug, Clone)]
pub struct SpecReplica {
    pub topic: &'static str,
    pub partition: i32,
    pub segments: Vec<SpecSegment>,
    pub epochs: Vec<(i32, i64)>,
}

#[derive(Debug, Clone)]
pub struct SpecDataDir {
    pub name: &'static str,
    pub replicas: Vec<SpecReplica>,
    pub high_watermarks: Vec<(&'static str, i32, i64)>,
    pub recovery_points: Vec<(&'static str, i32, i64)>,
    pub clean_shutdown: bool,
}

pub fn text(s: impl Into<String>) -> Option<Vec<u8>> {
    Some(s.into().into_bytes())
}

/// Plain records `offsets`, keyed `k<offset mod 3>`, valued `v<offset>`.
pub fn records(offsets: std::ops::RangeInclusive<i64>) -> Vec<SpecRecord> {
    offsets
        .map(|offset| SpecRecord {
            offset,
            key: text(format!("k{}", offset % 3)),
            value: text(format!("v{offset}")),
            headers: Vec::new(),
        })
        .collect()
}

pub fn batch(epoch: i32, codec: SpecCodec, records: Vec<SpecRecord>) -> SpecBatch {
    SpecBatch {
        epoch,
        codec,
        producer: None,
        records,
    }
}

pub fn encode_batch(spec: &SpecBatch) -> Vec<u8> {
    let records: Vec<Record> = spec
        .records
        .iter()
        .map(|record| {
            let mut encoded = Record {
                transactional: false,
                control: false,
                partition_leader_epoch: spec.epoch,
                producer_id: spec.producer.map_or(-1, |(id, _)| id),
                producer_epoch: spec.producer.map_or(-1, |(_, epoch)| epoch),
                timestamp_type: TimestampType::Creation,
                offset: record.offset,
                // The encoder cuts a batch wherever `offset - sequence` changes,
                // so sequences must step with offsets even without a producer
                // id; the batch's baseSequence is the first one (-1 then).
                sequence: spec.producer.map_or(-1, |_| 0)
                    + (record.offset - spec.records[0].offset) as i32,
                timestamp: BASE_TIMESTAMP_MS + record.offset,
                key: record.key.clone().map(Bytes::from),
                value: record.value.clone().map(Bytes::from),
                headers: Default::default(),
            };
            for (key, value) in &record.headers {
                encoded.headers.insert(
                    StrBytes::from_static_str(key),
                    value.clone().map(Bytes::from),
                );
            }
            encoded
        })
        .collect();
    let compression = match spec.codec {
        SpecCodec::None => Compression::None,
        SpecCodec::Gzip => Compression::Gzip,
        SpecCodec::SnappyRaw | SpecCodec::SnappyXerial => Compression::Snappy,
        SpecCodec::Lz4 => Compression::Lz4,
        SpecCodec::Zstd => Compression::Zstd,
    };
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    let mut buf = BytesMut::new();
    if spec.codec == SpecCodec::SnappyXerial {
        RecordBatchEncoder::encode_with_custom_compression(
            &mut buf,
            &records,
            &options,
            Some(|plain: &mut BytesMut, out: &mut BytesMut, _| {
                xerial_snappy(plain, out);
                Ok(())
            }),
        )
        .expect("encode");
    } else {
        RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
    }
    buf.to_vec()
}

/// snappy-java's stream framing, as Kafka's Java producer writes it. Blocks
/// are cut small here (Java uses 32 KiB) so the fixture holds several.
pub fn xerial_snappy(plain: &[u8], out: &mut BytesMut) {
    out.put_slice(b"\x82SNAPPY\x00");
    out.put_i32(1);
    out.put_i32(1);
    for chunk in plain.chunks(16) {
        let block = snap::raw::Encoder::new()
            .compress_vec(chunk)
            .expect("snappy");
        out.put_i32(block.len() as i32);
        out.put_slice(&block);
    }
}

pub fn write_fixture(spec: &SpecDataDir, root: &Path) {
    fs::create_dir_all(root).unwrap();
    for replica in &spec.replicas {
        let dir = root.join(format!("{}-{}", replica.topic, replica.partition));
        fs::create_dir_all(&dir).unwrap();
        for segment in &replica.segments {
            let bytes: Vec<u8> = segment.batches.iter().flat_map(encode_batch).collect();
            fs::write(dir.join(format!("{:020}.log", segment.base_offset)), bytes).unwrap();
        }
        let mut epochs = format!("0\n{}\n", replica.epochs.len());
        for (epoch, start_offset) in &replica.epochs {
            epochs.push_str(&format!("{epoch} {start_offset}\n"));
        }
        fs::write(dir.join("leader-epoch-checkpoint"), epochs).unwrap();
    }
    let offsets = |entries: &[(&str, i32, i64)]| {
        let mut text = format!("0\n{}\n", entries.len());
        for (topic, partition, offset) in entries {
            text.push_str(&format!("{topic} {partition} {offset}\n"));
        }
        text
    };
    fs::write(
        root.join("replication-offset-checkpoint"),
        offsets(&spec.high_watermarks),
    )
    .unwrap();
    fs::write(
        root.join("recovery-point-offset-checkpoint"),
        offsets(&spec.recovery_points),
    )
    .unwrap();
    if spec.clean_shutdown {
        fs::write(root.join(".kafka_cleanshutdown"), b"").unwrap();
    }
}
