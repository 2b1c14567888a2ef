//! Produce as a leader answers it (produce.rs): the errors a partition gets
//! from the topic's configs and from a transaction's coordinator.

use std::collections::BTreeSet;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use super::*;
use crate::server::test_support::TestBroker;
use crate::storage::record_batch::test_writer::{TestRecord, write_batch};
use crate::transactions::state::{TxnMetadata, TxnStatus};

const INVALID_RECORD: i16 = 87;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const MESSAGE_TOO_LARGE: i16 = 10;

/// An acks=1 produce of `records` to `topic`-0, naming `transactional_id`.
async fn produce(
    test: &TestBroker,
    topic: &str,
    records: Bytes,
    transactional_id: Option<&str>,
) -> i16 {
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(1_000)
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ]);
    match handle(&test.broker, req).await {
        ProduceOutcome::Respond(resp) => resp.responses[0].partition_responses[0].error_code,
        _ => panic!("an acks=1 produce is answered"),
    }
}

/// One record with this key (null or not) and a value.
fn record(key: Option<&str>) -> TestRecord {
    TestRecord {
        timestamp: 1_700_000_000_000,
        key: key.map(|k| k.as_bytes().to_vec()),
        value: Some(b"v".to_vec()),
        headers: Vec::new(),
    }
}

/// Kafka's `LogValidator.validateKey`: a compacted topic (`cleanup.policy`
/// holding `compact`) takes no record without a key — "Compacted topic
/// cannot accept message without key" — and the produce is INVALID_RECORD
/// for the partition, nothing of it appended; compressed or not, wherever
/// the keyless record sits in the batch. A topic that only deletes takes it.
#[tokio::test]
async fn a_keyless_record_for_a_compacted_topic_is_invalid_record() {
    let test = TestBroker::leading(&[("compacted", 1), ("both", 1), ("deleted", 1)]).await;
    test.configure("compacted", &[("cleanup.policy", "compact")]);
    test.configure("both", &[("cleanup.policy", "delete,compact")]);
    test.configure("deleted", &[("cleanup.policy", "delete")]);
    let keyless = [record(Some("k")), record(None)];
    let keyed = [record(Some("k")), record(Some("l"))];
    for compression in [Compression::None, Compression::Lz4] {
        for topic in ["compacted", "both"] {
            assert_eq!(
                produce(&test, topic, write_batch(&keyless, compression), None).await,
                INVALID_RECORD,
                "{topic}, {compression:?}"
            );
            assert_eq!(
                produce(&test, topic, write_batch(&keyed, compression), None).await,
                0,
                "{topic}, {compression:?}"
            );
        }
        assert_eq!(
            produce(&test, "deleted", write_batch(&keyless, compression), None).await,
            0
        );
    }
    let tp = TopicPartition::new("compacted", 0);
    assert_eq!(
        test.broker.replicas.high_watermark(&tp),
        Some(4),
        "only the keyed batches were appended"
    );
}

/// A transactional producer fenced by a newer epoch of its id (InitProducerId
/// bumped it) produces: INVALID_PRODUCER_EPOCH, not the coordinator's
/// PRODUCER_FENCED, which a client does not expect from Produce (Kafka's
/// `AddPartitionsToTxnManager`, KIP-890).
#[tokio::test]
async fn a_fenced_transactional_producer_s_produce_is_invalid_producer_epoch() {
    let test = TestBroker::leading(&[("t", 1)]).await;
    test.coordinate_txn(
        "tx",
        TxnMetadata {
            producer_id: 7,
            producer_epoch: 1,
            timeout_ms: 60_000,
            status: TxnStatus::Ongoing,
            partitions: BTreeSet::from([("t".to_owned(), 0)]),
            last_update_ms: 0,
            start_ms: 0,
        },
    );
    let batch = |epoch| {
        let value = Some(Bytes::from_static(b"v"));
        crate::storage::record_batch::transactional_batch(vec![(None, value)], 0, (7, epoch))
    };
    assert_eq!(
        produce(&test, "t", batch(0), Some("tx")).await,
        INVALID_PRODUCER_EPOCH,
        "epoch 0 was fenced by epoch 1"
    );
    assert_eq!(produce(&test, "t", batch(1), Some("tx")).await, 0);
}

/// A topic's `max.message.bytes` bounds each batch, log overhead included
/// (Kafka's `Log.analyzeAndValidateRecords`, RecordTooLargeException):
/// a larger batch is MESSAGE_TOO_LARGE for the partition and not appended.
/// Without an override the broker takes Kafka's default, 1048588 bytes.
#[tokio::test]
async fn a_batch_over_max_message_bytes_is_message_too_large() {
    let test = TestBroker::leading(&[("small", 1), ("plain", 1)]).await;
    let batch = write_batch(&[record(Some("k"))], Compression::None);
    let size = batch.len();
    test.configure("small", &[("max.message.bytes", &size.to_string())]);
    assert_eq!(produce(&test, "small", batch.clone(), None).await, 0);
    test.configure("small", &[("max.message.bytes", &(size - 1).to_string())]);
    assert_eq!(
        produce(&test, "small", batch.clone(), None).await,
        MESSAGE_TOO_LARGE
    );
    let big = TestRecord {
        value: Some(vec![7; 1_048_588]),
        ..record(Some("k"))
    };
    assert_eq!(
        produce(&test, "plain", write_batch(&[big], Compression::None), None).await,
        MESSAGE_TOO_LARGE,
        "Kafka's default max.message.bytes"
    );
    assert_eq!(produce(&test, "plain", batch, None).await, 0);
    let tp = TopicPartition::new("small", 0);
    assert_eq!(test.broker.replicas.high_watermark(&tp), Some(1));
}
