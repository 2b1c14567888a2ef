//! Property: every batch a real encoder writes is taken by the leader's
//! record check and read back from the log as it was sent.
//!
//! Two encoders write the batches: kafka-protocol 0.15's `RecordBatchEncoder`
//! (what the harness and the broker's tests produce with), which keeps every
//! timestamp within `i32` of the batch's least one; and the tests' writer
//! (`test_writer`), which lays records out as Kafka's Java client and
//! librdkafka do and so takes timestamps from the whole `i64` range in one
//! batch. Records have null and non-null keys and values, and headers with
//! null values; every codec the broker reads (none, gzip, snappy, lz4, zstd)
//! is used. Each batch is appended to a partition log as a leader appends a
//! produce, then read back: the stored bytes are the sent ones but for the
//! base offset and partition leader epoch the leader stamps, and they decode
//! to the records written.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;

use super::test_writer::{self, TestRecord};
use crate::storage::{LogConfig, LogManager, TopicPartition};

/// Few cases, so the property runs in the default suite in a few seconds.
const CASES: u32 = 64;
/// Where the stamped fields end: baseOffset, batchLength, partitionLeaderEpoch.
const STAMPED_UNTIL: usize = 16;

fn codec() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Snappy),
        Just(Compression::Lz4),
        Just(Compression::Zstd),
    ]
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// Header keys: short, any Unicode (a header key is a UTF-8 string).
fn header_key() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..6).prop_map(String::from_iter)
}

/// One record stamped `timestamp`: key and value null or not, up to three
/// headers (distinct keys: kafka-protocol keeps headers in a map), any of
/// them with a null value.
fn record(timestamp: impl Strategy<Value = i64>) -> impl Strategy<Value = TestRecord> {
    (
        timestamp,
        proptest::option::of(bytes(16)),
        proptest::option::of(bytes(48)),
        proptest::collection::vec((header_key(), proptest::option::of(bytes(8))), 0..3),
    )
        .prop_map(|(timestamp, key, value, headers)| {
            let unique: IndexMap<String, Option<Vec<u8>>> = headers.into_iter().collect();
            TestRecord {
                timestamp,
                key,
                value,
                headers: unique.into_iter().collect(),
            }
        })
}

/// Records as kafka-protocol can encode them: timestamps within `i32` of
/// a base that any of them may sit on.
fn narrow_records() -> impl Strategy<Value = Vec<TestRecord>> {
    (i64::MIN..=i64::MAX - i64::from(i32::MAX)).prop_flat_map(|base| {
        let timestamp = (0..=i64::from(i32::MAX)).prop_map(move |d| base + d);
        proptest::collection::vec(record(timestamp), 1..8)
    })
}

/// Records stamped anywhere in `i64`, the extremes likely.
fn wide_records() -> impl Strategy<Value = Vec<TestRecord>> {
    let timestamp = prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(-1i64),
        Just(0i64),
        any::<i64>(),
        any::<i64>(),
    ];
    proptest::collection::vec(record(timestamp), 1..8)
}

/// `records` through kafka-protocol's encoder, as one batch.
fn kafka_protocol_batch(records: &[TestRecord], compression: Compression) -> Bytes {
    let encoded: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // One batch needs offset minus sequence constant; -1 + i keeps
            // the header's baseSequence -1, as a plain producer sends.
            sequence: i as i32 - 1,
            timestamp: r.timestamp,
            key: r.key.clone().map(Bytes::from),
            value: r.value.clone().map(Bytes::from),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                .collect(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &encoded, &options).expect("kafka-protocol encodes it");
    buf.freeze()
}

/// Appends `sent` to a fresh partition log as leader, reads the log back,
/// and checks both the bytes and the records they decode to.
fn append_and_read_back(sent: Bytes, records: &[TestRecord]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut logs = LogManager::open(dir.path(), LogConfig::default()).expect("a log manager");
    let log = logs
        .get_or_create(&TopicPartition::new("t", 0))
        .expect("a log");
    // Something before it, so the batch is given an offset other than its own.
    log.append_as_leader(
        test_writer::write_batch(&records[..1], Compression::None),
        3,
    )
    .expect("the first batch");
    let info = log.append_as_leader(sent.clone(), 4);
    prop_assert!(info.is_ok(), "refused: {:?}", info);
    let stored = log.read(1, usize::MAX).expect("the log reads back");
    prop_assert_eq!(stored.len(), sent.len());
    prop_assert_eq!(&stored[STAMPED_UNTIL..], &sent[STAMPED_UNTIL..]);
    let (header, read) = test_writer::read_batch(&stored);
    prop_assert_eq!((header.base_offset, header.partition_leader_epoch), (1, 4));
    prop_assert_eq!(read, records);
    // The lookup by timestamp reads each record's timestamp back too.
    let times: Vec<i64> = records.iter().map(|r| r.timestamp).collect();
    prop_assert_eq!(super::record_timestamps(&stored, &header), Ok(times));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        // A failure prints its case; nothing is written into the tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn kafka_protocol_batches_are_taken_and_read_back_unchanged(
        records in narrow_records(),
        compression in codec(),
    ) {
        let sent = kafka_protocol_batch(&records, compression);
        // kafka-protocol bases a batch on its least timestamp, not its first.
        let least = records.iter().map(|r| r.timestamp).min();
        prop_assert_eq!(Some(super::parse_header(&sent).unwrap().base_timestamp), least);
        append_and_read_back(sent, &records)?;
    }

    #[test]
    fn java_and_librdkafka_layout_batches_are_taken_and_read_back_unchanged(
        records in wide_records(),
        compression in codec(),
    ) {
        append_and_read_back(test_writer::write_batch(&records, compression), &records)?;
    }
}
