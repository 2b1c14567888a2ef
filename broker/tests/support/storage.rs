//! Helpers shared by the `storage_*` tests (included with `#[path]`): building
//! batches the way a producer does, with kafka-protocol's encoder, and decoding
//! segment files with kafka-protocol's decoder alone.
#![allow(dead_code)]

use std::path::Path;

use bytes::{Bytes, BytesMut};
use epochal_broker::storage::{LogConfig, TopicPartition};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, RecordSet,
    TimestampType,
};

pub fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// A config that never flushes on its own and rolls at `segment_bytes`.
pub fn config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        ..LogConfig::default()
    }
}

/// Record `index` of a batch. kafka-protocol's encoder keeps records in one batch
/// only while offset minus sequence is constant, so the sequence runs -1 + index:
/// the header then carries baseSequence -1, as a non-idempotent producer sends.
fn record(index: i64, offset: i64, value: &str, epoch: i32) -> Record {
    Record {
        transactional: false,
        control: false,
        partition_leader_epoch: epoch,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: index as i32 - 1,
        timestamp: 1_700_000_000_000 + offset,
        key: Some(Bytes::from(format!("k-{value}"))),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
    }
}

fn encode(records: &[Record], compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode");
    buf.freeze()
}

/// One batch as a producer sends it: offsets from 0, no leader epoch.
pub fn producer_batch(values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| record(i as i64, i as i64, v, -1))
        .collect();
    encode(&records, Compression::None)
}

/// One batch as an idempotent producer sends it (KIP-98): producer id and
/// epoch in the header, sequences from `base_sequence`, offsets from 0.
pub fn idempotent_batch(
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    values: &[&str],
) -> Bytes {
    producer_id_batch(producer_id, producer_epoch, base_sequence, false, values)
}

/// [`idempotent_batch`] inside a transaction (KIP-98's transactional bit).
pub fn transactional_batch(
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    values: &[&str],
) -> Bytes {
    producer_id_batch(producer_id, producer_epoch, base_sequence, true, values)
}

fn producer_id_batch(
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    values: &[&str],
) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            producer_id,
            producer_epoch,
            sequence: base_sequence + i as i32,
            transactional,
            ..record(i as i64, i as i64, v, -1)
        })
        .collect();
    encode(&records, Compression::None)
}

pub fn producer_batch_compressed(values: &[&str], compression: Compression) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| record(i as i64, i as i64, v, -1))
        .collect();
    encode(&records, compression)
}

/// One batch as a leader stored it: offsets from `base_offset`, stamped `epoch`.
pub fn leader_batch(base_offset: i64, epoch: i32, values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| record(i as i64, base_offset + i as i64, v, epoch))
        .collect();
    encode(&records, Compression::None)
}

/// Decodes a whole segment file with kafka-protocol's decoder and nothing else.
pub fn decode_file(path: &Path) -> Vec<RecordSet> {
    let mut bytes = Bytes::from(std::fs::read(path).expect("read segment"));
    RecordBatchDecoder::decode_all(&mut bytes).expect("kafka-protocol decodes the segment")
}

/// `(offset, leader epoch, value)` of every record in `sets`.
pub fn flatten(sets: &[RecordSet]) -> Vec<(i64, i32, String)> {
    sets.iter()
        .flat_map(|s| &s.records)
        .map(|r| {
            (
                r.offset,
                r.partition_leader_epoch,
                String::from_utf8(r.value.clone().unwrap_or_default().to_vec()).unwrap(),
            )
        })
        .collect()
}

pub fn segment_path(dir: &Path, tp: &TopicPartition, base_offset: i64) -> std::path::PathBuf {
    dir.join(tp.dir_name())
        .join(format!("{base_offset:020}.log"))
}

pub fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read text file")
}
