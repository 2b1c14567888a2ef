//! ListOffsets by timestamp (list_offsets.rs): KIP-79's lookup of the first
//! record at or after a timestamp, KIP-734's largest timestamp, and the
//! bound a client reads to.

use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::records::Compression;

use super::*;
use crate::server::handlers::topic_name;
use crate::server::test_support::TestBroker;
use crate::storage::record_batch::test_writer::{TestRecord, write_batch};

const TOPIC: &str = "times";

/// (error code, offset, timestamp, leader epoch) of a v7 ListOffsets of
/// `TOPIC`-0 at `timestamp`.
fn list(test: &TestBroker, timestamp: i64, isolation_level: i8) -> (i16, i64, i64, i32) {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let resp = handle(&test.broker.replicas, req, 7);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp, p.leader_epoch)
}

fn batch(timestamps: &[i64], compression: Compression) -> bytes::Bytes {
    let records: Vec<TestRecord> = timestamps
        .iter()
        .map(|t| TestRecord::keyed(*t, "k", "v"))
        .collect();
    write_batch(&records, compression)
}

/// Offsets 0-2 at 1000, 3000, 2000; 3-4 at 4000, 5000 (lz4).
async fn filled() -> TestBroker {
    let test = TestBroker::leading(&[(TOPIC, 1)]).await;
    let tp = TopicPartition::new(TOPIC, 0);
    for b in [
        batch(&[1000, 3000, 2000], Compression::None),
        batch(&[4000, 5000], Compression::Lz4),
    ] {
        test.broker
            .replicas
            .append_as_leader(&tp, b, 1)
            .expect("the leader appends");
    }
    test
}

#[tokio::test]
async fn a_timestamp_lists_the_first_offset_at_or_after_it() {
    let test = filled().await;
    assert_eq!(list(&test, 0, 0), (0, 0, 1000, 0));
    assert_eq!(list(&test, 1000, 0), (0, 0, 1000, 0));
    // The first record in offset order that reaches it.
    assert_eq!(list(&test, 1001, 0), (0, 1, 3000, 0));
    assert_eq!(list(&test, 3001, 0), (0, 3, 4000, 0));
    assert_eq!(list(&test, 4500, 0), (0, 4, 5000, 0));
    // None reaches it: offset and timestamp -1, no error (Kafka's answer).
    assert_eq!(list(&test, 5001, 0), (0, -1, -1, -1));
    // KIP-734's largest timestamp.
    assert_eq!(list(&test, -3, 0), (0, 4, 5000, 0));
    // Earliest and latest as before, with no timestamp.
    assert_eq!(list(&test, -2, 0), (0, 0, -1, 0));
    assert_eq!(list(&test, -1, 0), (0, 5, -1, 0));
    // Kafka defines no other negative timestamp before KIP-1005.
    assert_eq!(list(&test, -7, 0).0, 42, "INVALID_REQUEST");
}

/// A read_committed client finds nothing past the last stable offset: an
/// open transaction's records are no answer until it ends.
#[tokio::test]
async fn a_lookup_stops_at_what_the_client_may_read() {
    let test = filled().await;
    let tp = TopicPartition::new(TOPIC, 0);
    let open = crate::storage::record_batch::transactional_batch(
        vec![(None, Some(bytes::Bytes::from_static(b"t")))],
        9000,
        (7, 0),
    );
    test.broker
        .replicas
        .append_as_leader(&tp, open, 1)
        .expect("the leader appends");
    assert_eq!(list(&test, 6000, 0), (0, 5, 9000, 0));
    assert_eq!(list(&test, 6000, 1), (0, -1, -1, -1));
    assert_eq!(list(&test, -3, 1), (0, -1, -1, -1));
}
