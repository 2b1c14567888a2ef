//! Fetch's byte limits (fetch.rs): `max_bytes` caps the whole answer and
//! `partition_max_bytes` each partition, except that the first partition with
//! data returns its first batch whole whatever its size (KIP-74).

use bytes::Bytes;
use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::records::Compression;

use super::*;
use crate::controller::metadata_store::wire_topic_id;
use crate::server::handlers::topic_name;
use crate::server::test_support::TestBroker;
use crate::storage::record_batch::test_writer::{TestRecord, write_batch};

const TOPIC: &str = "fetch-limits";
const PARTITIONS: i32 = 3;
const BATCHES: usize = 5;

/// One batch of a single record with a 1000-byte value.
fn big_batch() -> Bytes {
    let record = TestRecord {
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(vec![b'x'; 1000]),
        headers: Vec::new(),
    };
    write_batch(&[record], Compression::None)
}

/// A broker leading `TOPIC`'s partitions, each holding `BATCHES` batches;
/// returns it and the size of one batch.
async fn filled() -> (TestBroker, usize) {
    let test = TestBroker::leading(&[(TOPIC, PARTITIONS)]).await;
    for p in 0..PARTITIONS {
        let tp = TopicPartition::new(TOPIC, p);
        for _ in 0..BATCHES {
            test.broker
                .replicas
                .append_as_leader(&tp, big_batch(), 1)
                .expect("the leader appends");
        }
    }
    (test, big_batch().len())
}

/// A consumer's fetch of every partition from `offsets[p]`, answered at once.
async fn fetch(
    test: &TestBroker,
    max_bytes: i32,
    partition_max_bytes: i32,
    offsets: [i64; PARTITIONS as usize],
) -> Vec<usize> {
    let partitions = offsets
        .iter()
        .enumerate()
        .map(|(p, offset)| {
            FetchPartition::default()
                .with_partition(p as i32)
                .with_fetch_offset(*offset)
                .with_partition_max_bytes(partition_max_bytes)
                .with_current_leader_epoch(-1)
        })
        .collect();
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(max_bytes)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(TOPIC))
                .with_partitions(partitions),
        ]);
    let resp = handle(
        &test.broker.replicas,
        &test.broker.metadata,
        req,
        12,
        "consumer",
    )
    .await;
    resp.responses[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
            p.records.as_ref().map_or(0, Bytes::len)
        })
        .collect()
}

/// librdkafka's test 0082 (fetch_max_bytes): a partition limit far above the
/// request's `max_bytes` must not let the first partition fill the answer
/// with it. The first partition reads what fits in `max_bytes`, the next
/// ones what remains, whole batches only.
#[tokio::test]
async fn max_bytes_caps_the_first_partition_too() {
    let (test, batch) = filled().await;
    let max_bytes = 2 * batch + batch / 2;
    let read = fetch(&test, max_bytes as i32, 20 * batch as i32, [0; 3]).await;
    assert_eq!(read, vec![2 * batch, 0, 0]);

    // The first partition at its end: the second one is now the first with
    // data, and the third gets what remains of the answer.
    let at_end = BATCHES as i64;
    let read = fetch(&test, 3 * batch as i32, 20 * batch as i32, [at_end, 0, 0]).await;
    assert_eq!(read, vec![0, 3 * batch, 0]);
}

/// KIP-74: a first batch larger than every limit comes whole, so a consumer
/// never sticks on it; nothing else comes with it, from that partition or
/// another, and the later partitions get no such exception.
#[tokio::test]
async fn only_the_first_batch_may_exceed_the_limits() {
    let (test, batch) = filled().await;
    let read = fetch(&test, (batch / 2) as i32, 20 * batch as i32, [0; 3]).await;
    assert_eq!(read, vec![batch, 0, 0]);
    let read = fetch(&test, 20 * batch as i32, (batch / 2) as i32, [0; 3]).await;
    assert_eq!(read, vec![batch, 0, 0]);
}

/// `partition_max_bytes` cuts each partition while the answer has room.
#[tokio::test]
async fn partition_max_bytes_applies_to_each_partition() {
    let (test, batch) = filled().await;
    let read = fetch(&test, 20 * batch as i32, (2 * batch) as i32, [0; 3]).await;
    assert_eq!(read, vec![2 * batch; 3]);
    let read = fetch(&test, (5 * batch) as i32, (2 * batch) as i32, [0; 3]).await;
    assert_eq!(read, vec![2 * batch, 2 * batch, batch]);
}

/// Fetch v13 (KIP-516): a topic named by its id alone is read and answered
/// by id; an id this broker's metadata does not hold is UNKNOWN_TOPIC_ID.
#[tokio::test]
async fn a_topic_named_by_its_id_is_read_from_v13() {
    const ID: &str = "6f2c1b1e-3c59-4f43-9a55-2f7a8f0e9d11";
    const UNKNOWN: &str = "00000000-0000-0000-0000-00000000abcd";
    let (test, batch) = filled().await;
    let mut view = test.broker.metadata.snapshot();
    view.topic_ids.insert(TOPIC.to_owned(), ID.to_owned());
    test.broker.metadata.replace(view);
    let topic = |id: &str| {
        FetchTopic::default()
            .with_topic_id(wire_topic_id(Some(id)))
            .with_partitions(vec![
                FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)
                    .with_current_leader_epoch(-1),
            ])
    };
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![topic(ID), topic(UNKNOWN)]);
    let resp = handle(
        &test.broker.replicas,
        &test.broker.metadata,
        req,
        13,
        "consumer",
    )
    .await;
    let known = &resp.responses[0];
    assert_eq!(known.topic_id.to_string(), ID);
    assert_eq!(known.partitions[0].error_code, 0);
    let read = known.partitions[0].records.as_ref().map_or(0, Bytes::len);
    assert_eq!(read, BATCHES * batch);
    let unknown = &resp.responses[1];
    assert_eq!(unknown.topic_id.to_string(), UNKNOWN);
    assert_eq!(
        unknown.partitions[0].error_code,
        ResponseError::UnknownTopicId.code()
    );
}
