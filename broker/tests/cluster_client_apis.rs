//! The client APIs one broker answers, end to end against a real etcd: the
//! broker is configured through a TOML file; ApiVersions advertises exactly the
//! implemented table; CreateTopics validates; Produce with acks=all; ListOffsets
//! earliest, latest and by timestamp; Fetch long-polls until data arrives or max wait passes;
//! and every advertised version of every API answers in a decodable form.

use crate::common;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use common::broker_process::BrokerProcess;
use common::etcd::Etcd;
use common::kafka_client::{KafkaClient, batch, topic};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, CreateTopicsRequest, FetchRequest, LeaderAndIsrRequest,
    ListOffsetsRequest, MetadataRequest, OffsetForLeaderEpochRequest, ProduceRequest,
};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tempfile::TempDir;

fn list_offset(c: &mut KafkaClient, name: &str, timestamp: i64) -> (i16, i64) {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic(name))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let resp = c.send(&req, 5).unwrap();
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// One broker, node 7, configured through a TOML file rather than flags.
fn start_configured_broker(etcd: &Etcd, dir: &TempDir) -> BrokerProcess {
    let data = dir.path().join("b7");
    let config = dir.path().join("broker.toml");
    std::fs::write(
        &config,
        format!(
            "node_id = 7\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\netcd = \"{}\"\nlease_ttl_s = 2\nmin_insync_replicas = 1\n",
            data.display(),
            etcd.endpoint
        ),
    )
    .unwrap();
    BrokerProcess::start_with_args(7, &data, &["--config", config.to_str().unwrap()])
}

/// ApiVersions advertises exactly the implemented table.
fn assert_api_versions_advertised(c: &mut KafkaClient) {
    let versions = c.send(&ApiVersionsRequest::default(), 3).unwrap();
    let mut advertised: Vec<(i16, i16, i16)> = versions
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    advertised.sort();
    assert_eq!(
        advertised,
        vec![
            (0, 3, 9),
            (1, 4, 13),
            (2, 1, 7),
            (3, 0, 12),
            (4, 0, 4),
            // StopReplica, for topic deletion ([clients]).
            (5, 3, 4),
            (6, 5, 7),
            // The group APIs: FindCoordinator … ListGroups ([groups]).
            (8, 0, 8),
            (9, 0, 8),
            (10, 0, 4),
            (11, 0, 9),
            (12, 0, 4),
            (13, 0, 5),
            (14, 0, 5),
            (15, 0, 5),
            (16, 0, 4),
            (18, 0, 3),
            (19, 0, 7),
            // DeleteTopics ([clients]), DeleteRecords (KIP-107).
            (20, 0, 6),
            (21, 0, 2),
            (22, 0, 5),
            (23, 0, 4),
            // AddPartitionsToTxn (v4: KIP-890's verify-only check, between
            // brokers), AddOffsetsToTxn, EndTxn, WriteTxnMarkers
            // ([transactions]).
            (24, 0, 4),
            (25, 0, 3),
            (26, 0, 3),
            (27, 0, 1),
            // TxnOffsetCommit (KIP-98, v3 KIP-447's member fields).
            (28, 0, 3),
            // DescribeAcls, CreateAcls, DeleteAcls (KIP-140), stored only.
            (29, 0, 3),
            (30, 0, 3),
            (31, 0, 3),
            // DescribeConfigs, AlterConfigs, CreatePartitions,
            // IncrementalAlterConfigs, DescribeCluster ([clients]).
            (32, 0, 4),
            (33, 0, 2),
            (37, 0, 3),
            // DeleteGroups (KIP-229).
            (42, 0, 2),
            (44, 0, 1),
            // OffsetDelete (KIP-496).
            (47, 0, 0),
            (60, 0, 1),
        ]
    );
}

/// CreateTopics validates names, replication factors and partition counts,
/// and `validate_only` creates nothing.
fn assert_create_topics_validates(c: &mut KafkaClient) {
    assert_eq!(c.create_topic("apis", 1, 1), 0);
    assert_eq!(c.create_topic("apis", 1, 1), 36, "TOPIC_ALREADY_EXISTS");
    assert_eq!(
        c.create_topic("bad/name", 1, 1),
        17,
        "INVALID_TOPIC_EXCEPTION"
    );
    assert_eq!(
        c.create_topic("too-many-replicas", 1, 3),
        38,
        "INVALID_REPLICATION_FACTOR"
    );
    assert_eq!(
        c.create_topic("no-partitions", 0, 1),
        37,
        "INVALID_PARTITIONS"
    );
    let resp = c
        .send(
            &CreateTopicsRequest::default()
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(topic("dry-run"))
                        .with_num_partitions(1)
                        .with_replication_factor(1),
                ])
                .with_validate_only(true)
                .with_timeout_ms(1000),
            4,
        )
        .unwrap();
    assert_eq!(resp.topics[0].error_code, 0);
    let meta = c.metadata(Some(&["apis", "dry-run"]));
    assert_eq!(meta.controller_id.0, 7);
    assert_eq!(
        meta.brokers.iter().map(|b| b.node_id.0).collect::<Vec<_>>(),
        vec![7]
    );
    assert_eq!(meta.topics[0].partitions[0].leader_id.0, 7);
    assert_eq!(
        meta.topics[1].error_code, 3,
        "validate_only created nothing"
    );
}

/// An unknown topic whose name Kafka's Topic.validate refuses is
/// INVALID_TOPIC_EXCEPTION (17), as KafkaApis.getTopicMetadata answers it; a
/// legal unknown name stays UNKNOWN_TOPIC_OR_PARTITION (3).
fn assert_metadata_refuses_illegal_names(c: &mut KafkaClient) {
    let long = "x".repeat(250);
    let meta = c.metadata(Some(&["a/b", "..", &long, "not-yet"]));
    let codes: Vec<i16> = meta.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [17, 17, 17, 3]);
}

/// Letting the broker create them (auto_create_topics_enable's default): a
/// legal name is created and answered LEADER_NOT_AVAILABLE (5) until its
/// leader is elected, as KafkaApis.createTopic answers; an illegal one stays
/// INVALID_TOPIC_EXCEPTION.
fn assert_metadata_creates_legal_names(c: &mut KafkaClient) {
    let meta = c.metadata_creating(&["a/b", "made-by-metadata"]);
    let codes: Vec<i16> = meta.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [17, 5]);
    let made = common::await_some("made-by-metadata's leader", Duration::from_secs(20), || {
        let meta = c.metadata(Some(&["made-by-metadata"]));
        let t = &meta.topics[0];
        (t.error_code == 0 && t.partitions.iter().all(|p| p.leader_id.0 == 7))
            .then_some(t.partitions.len())
    });
    assert_eq!(made, 1, "num_partitions' default");
}

/// Produce with acks=all, ListOffsets earliest and latest around it, and a
/// Fetch past the log end.
fn assert_produce_and_list_offsets(c: &mut KafkaClient) {
    assert_eq!(
        c.produce("nope", 0, batch(&[b"x"]), 1).unwrap().0,
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(list_offset(c, "apis", -2), (0, 0));
    assert_eq!(list_offset(c, "apis", -1), (0, 0));
    assert_eq!(
        c.produce("apis", 0, batch(&[b"a", b"b"]), -1).unwrap(),
        (0, 0),
        "acks=all"
    );
    assert_eq!(list_offset(c, "apis", -1), (0, 2));
    assert_eq!(list_offset(c, "apis", -2), (0, 0));
    assert_eq!(
        c.fetch("apis", 0, 5, 0).unwrap().0,
        1,
        "OFFSET_OUT_OF_RANGE"
    );
}

/// (error code, offset, timestamp) of a v7 ListOffsets of `name`-0.
fn list_offset_v7(c: &mut KafkaClient, name: &str, timestamp: i64) -> (i16, i64, i64) {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic(name))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let resp = c.send(&req, 7).unwrap();
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

/// One uncompressed batch whose records carry these timestamps.
fn timed_batch(timestamps: &[i64]) -> Bytes {
    let records: Vec<Record> = timestamps
        .iter()
        .enumerate()
        .map(|(i, t)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: *t,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

/// ListOffsets by timestamp, as offsetsForTimes asks it (KIP-79), and the
/// largest timestamp (-3, KIP-734).
fn assert_list_offsets_by_timestamp(c: &mut KafkaClient) {
    assert_eq!(c.create_topic("times", 1, 1), 0);
    assert_eq!(list_offset_v7(c, "times", 0), (0, -1, -1), "an empty log");
    let sent = [timed_batch(&[1000, 3000, 2000]), timed_batch(&[4000])];
    for b in sent {
        assert_eq!(c.produce("times", 0, b, -1).unwrap().0, 0);
    }
    assert_eq!(list_offset_v7(c, "times", 500), (0, 0, 1000));
    assert_eq!(list_offset_v7(c, "times", 1500), (0, 1, 3000));
    assert_eq!(list_offset_v7(c, "times", 3500), (0, 3, 4000));
    assert_eq!(list_offset_v7(c, "times", 4001), (0, -1, -1));
    assert_eq!(list_offset_v7(c, "times", -3), (0, 3, 4000));
}

/// Fetch at the log end waits max_wait_ms when nothing arrives, and returns
/// as soon as another client's produce lands.
fn assert_fetch_long_polls(c: &mut KafkaClient, broker_addr: &str) {
    let started = Instant::now();
    let (err, hw, recs) = c.fetch("apis", 0, 2, 300).unwrap();
    assert_eq!((err, hw, recs.len()), (0, 2, 0));
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "returned after {:?}",
        started.elapsed()
    );
    // ...and returns as soon as another client's produce lands.
    let addr = broker_addr.to_owned();
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let mut p = KafkaClient::connect(&addr).unwrap();
        p.produce("apis", 0, batch(&[b"late"]), 1).unwrap()
    });
    let started = Instant::now();
    let (err, hw, recs) = c.fetch("apis", 0, 2, 10_000).unwrap();
    let waited = started.elapsed();
    assert_eq!(producer.join().unwrap(), (0, 2));
    assert_eq!((err, hw), (0, 3));
    assert_eq!(recs, vec![(2, b"late".to_vec())]);
    assert!(
        waited < Duration::from_secs(5),
        "long poll woke after {waited:?}"
    );
}

fn assert_every_produce_version_answers(c: &mut KafkaClient) {
    for v in 3..=9 {
        let req = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic("apis"))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(batch(&[b"v"]))),
                    ]),
            ]);
        let resp = c
            .send(&req, v)
            .unwrap_or_else(|e| panic!("Produce v{v}: {e}"));
        assert_eq!(
            resp.responses[0].partition_responses[0].error_code, 0,
            "Produce v{v}"
        );
    }
}

fn assert_every_fetch_version_answers(c: &mut KafkaClient) {
    for v in 4..=12 {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(topic("apis"))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]);
        let resp = c
            .send(&req, v)
            .unwrap_or_else(|e| panic!("Fetch v{v}: {e}"));
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "Fetch v{v}");
        assert!(
            p.records.as_ref().is_some_and(|r| !r.is_empty()),
            "Fetch v{v} returned records"
        );
    }
}

fn assert_every_list_offsets_version_answers(c: &mut KafkaClient) {
    for v in 1..=7 {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(topic("apis"))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1),
                    ]),
            ]);
        let resp = c
            .send(&req, v)
            .unwrap_or_else(|e| panic!("ListOffsets v{v}: {e}"));
        assert_eq!(
            resp.topics[0].partitions[0].error_code, 0,
            "ListOffsets v{v}"
        );
    }
}

/// OffsetsForLeaderEpoch (followers ask it; any client may): the only epoch
/// is the latest, so its end is the log end.
fn assert_every_offset_for_leader_epoch_version_answers(c: &mut KafkaClient) {
    for v in 0..=4 {
        let req = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-2))
            .with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(topic("apis"))
                    .with_partitions(vec![
                        OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(-1)
                            .with_leader_epoch(0),
                    ]),
            ]);
        let resp = c
            .send(&req, v)
            .unwrap_or_else(|e| panic!("OffsetForLeaderEpoch v{v}: {e}"));
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "OffsetForLeaderEpoch v{v}");
        assert!(p.end_offset > 0, "OffsetForLeaderEpoch v{v}: {p:?}");
    }
}

fn assert_every_metadata_version_answers(c: &mut KafkaClient) {
    for v in 0..=12 {
        let req = MetadataRequest::default().with_topics(if v == 0 { Some(vec![]) } else { None });
        let resp = c
            .send(&req, v)
            .unwrap_or_else(|e| panic!("Metadata v{v}: {e}"));
        assert!(
            resp.topics
                .iter()
                .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "apis")),
            "Metadata v{v}"
        );
    }
}

fn assert_every_api_versions_version_answers(c: &mut KafkaClient) {
    for v in 0..=3 {
        let resp = c
            .send(&ApiVersionsRequest::default(), v)
            .unwrap_or_else(|e| panic!("ApiVersions v{v}: {e}"));
        assert_eq!(resp.error_code, 0, "ApiVersions v{v}");
    }
}

fn assert_every_create_topics_version_answers(c: &mut KafkaClient) {
    for v in 0..=7 {
        let req = CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic(&format!("created-v{v}")))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ])
            .with_timeout_ms(10_000);
        let resp = c
            .send(&req, v)
            .unwrap_or_else(|e| panic!("CreateTopics v{v}: {e}"));
        assert_eq!(resp.topics[0].error_code, 0, "CreateTopics v{v}");
    }
}

fn assert_every_leader_and_isr_version_answers(c: &mut KafkaClient) {
    for v in 0..=4 {
        let req = LeaderAndIsrRequest::default()
            .with_controller_id(BrokerId(7))
            .with_controller_epoch(1);
        let resp = c
            .send(&req, v)
            .unwrap_or_else(|e| panic!("LeaderAndIsr v{v}: {e}"));
        assert_eq!(resp.error_code, 0, "LeaderAndIsr v{v}");
    }
}

#[test]
fn cluster_client_apis_answer_as_kafka_does() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let broker = start_configured_broker(&etcd, &dir);
    let mut c = KafkaClient::connect(&broker.addr).unwrap();

    assert_api_versions_advertised(&mut c);
    assert_create_topics_validates(&mut c);
    assert_metadata_refuses_illegal_names(&mut c);
    assert_metadata_creates_legal_names(&mut c);
    assert_produce_and_list_offsets(&mut c);
    assert_list_offsets_by_timestamp(&mut c);
    assert_fetch_long_polls(&mut c, &broker.addr);

    // Every advertised version of every client API answers with a response
    // that decodes at that version (the connection stays open throughout).
    assert_every_produce_version_answers(&mut c);
    assert_every_fetch_version_answers(&mut c);
    assert_every_list_offsets_version_answers(&mut c);
    assert_every_offset_for_leader_epoch_version_answers(&mut c);
    assert_every_metadata_version_answers(&mut c);
    assert_every_api_versions_version_answers(&mut c);
    assert_every_create_topics_version_answers(&mut c);
    assert_every_leader_and_isr_version_answers(&mut c);
}
