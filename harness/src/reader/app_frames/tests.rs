use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::*;

fn batch(base: i64, values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 0,
            producer_id: 7,
            producer_epoch: 1,
            timestamp_type: TimestampType::Creation,
            offset: base + i as i64,
            sequence: 3 + i as i32,
            timestamp: 0,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    out.freeze()
}

fn request_frame<T: Encodable + HeaderVersion>(
    key: ApiKey,
    version: i16,
    id: i32,
    body: &T,
) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(id)
        .with_client_id(Some(StrBytes::from_static_str("app-1")));
    let mut out = BytesMut::new();
    header.encode(&mut out, T::header_version(version)).unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

fn response_frame<T: Encodable + HeaderVersion>(version: i16, id: i32, body: &T) -> Bytes {
    let mut out = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(id)
        .encode(&mut out, T::header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("t"))
}

#[test]
fn produce_and_fetch_pair_by_correlation_id_and_the_rest_is_counted_and_named() {
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch(0, &["1", "2"]))),
                ]),
        ]);
    let produced = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(topic())
            .with_partition_responses(vec![
                PartitionProduceResponse::default()
                    .with_index(0)
                    .with_base_offset(40),
            ]),
    ]);
    let fetch = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic())
                .with_partitions(vec![FetchPartition::default().with_fetch_offset(41)]),
        ]);
    let fetched = FetchResponse::default().with_responses(vec![
        FetchableTopicResponse::default()
            .with_topic(topic())
            .with_partitions(vec![
                PartitionData::default()
                    .with_high_watermark(42)
                    .with_last_stable_offset(42)
                    .with_records(Some(batch(40, &["1", "2"]))),
            ]),
    ]);
    let recorded = vec![
        Recorded::Request {
            time_ns: 10,
            connection: 3,
            frame: request_frame(ApiKey::Produce, 9, 5, &produce),
        },
        Recorded::Request {
            time_ns: 11,
            connection: 4,
            frame: request_frame(ApiKey::Fetch, 12, 5, &fetch),
        },
        // Answers in the other order, each on its connection.
        Recorded::Response {
            time_ns: 20,
            connection: 4,
            frame: response_frame(12, 5, &fetched),
        },
        Recorded::Response {
            time_ns: 21,
            connection: 3,
            frame: response_frame(9, 5, &produced),
        },
        // An answer to nothing recorded, and a produce that does not decode.
        Recorded::Response {
            time_ns: 22,
            connection: 3,
            frame: Bytes::from_static(b"\x00\x00\x00\x63"),
        },
        Recorded::Request {
            time_ns: 23,
            connection: 3,
            frame: Bytes::from_static(b"\x00\x00\x00\x09\x00\x00\x00\x06\x00"),
        },
        // Answered after the cut-off: unanswered.
        Recorded::Request {
            time_ns: 30,
            connection: 4,
            frame: request_frame(ApiKey::Fetch, 12, 6, &fetch),
        },
        Recorded::Response {
            time_ns: 200,
            connection: 4,
            frame: response_frame(12, 6, &fetched),
        },
    ];
    let mut out = AppFrames::default();
    decode_link("client-b2", &recorded, 100, &mut out);
    out.exchanges.sort_by_key(|e| e.request_ns);
    assert_eq!(out.exchanges.len(), 3, "{out:#?}");
    let first = &out.exchanges[0];
    assert_eq!(
        (first.client_id.as_deref(), first.response_ns),
        (Some("app-1"), Some(21))
    );
    let Call::Produce(p) = &first.call else {
        panic!("{first:?}")
    };
    assert_eq!(p.acks, -1);
    let part = &p.partitions[0];
    assert_eq!(
        (part.producer_id, part.producer_epoch, part.base_sequence),
        (7, 1, 3)
    );
    assert_eq!(part.values.len(), 2);
    assert_eq!(part.answer, Some((0, 40)));
    let Call::Fetch(f) = &out.exchanges[1].call else {
        panic!()
    };
    let answer = f.partitions[0].answer.as_ref().unwrap();
    // The batch starts at 40; the consumer asked from 41.
    let offsets: Vec<i64> = answer.records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![41]);
    assert_eq!((answer.high_watermark, answer.last_stable_offset), (42, 42));
    assert_eq!(out.exchanges[2].response_ns, None);
    assert_eq!(out.undecodable_count, 2, "{:?}", out.undecodable);
    let named: Vec<String> = out.undecodable.iter().map(ToString::to_string).collect();
    assert!(
        named[0].contains("answers no recorded request"),
        "{named:?}"
    );
    assert!(
        named[1].starts_with("Produce (key 0) v9 on client-b2 connection 3"),
        "{named:?}"
    );
}

#[test]
fn a_groups_commit_and_its_read_back_decode_with_their_answers() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponsePartition, OffsetFetchResponseTopic,
    };
    use kafka_protocol::messages::{
        GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    };
    let group = GroupId(StrBytes::from_static_str("g"));
    let commit = OffsetCommitRequest::default()
        .with_group_id(group.clone())
        .with_generation_id_or_member_epoch(3)
        .with_member_id(StrBytes::from_static_str("m-1"))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(topic())
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(10),
                ]),
        ]);
    let committed = OffsetCommitResponse::default().with_topics(vec![
        OffsetCommitResponseTopic::default()
            .with_name(topic())
            .with_partitions(vec![
                OffsetCommitResponsePartition::default().with_error_code(0),
            ]),
    ]);
    let fetch = OffsetFetchRequest::default().with_group_id(group);
    let fetched = OffsetFetchResponse::default().with_topics(vec![
        OffsetFetchResponseTopic::default()
            .with_name(topic())
            .with_partitions(vec![
                OffsetFetchResponsePartition::default().with_committed_offset(5),
            ]),
    ]);
    let recorded = vec![
        Recorded::Request {
            time_ns: 1,
            connection: 1,
            frame: request_frame(ApiKey::OffsetCommit, 8, 1, &commit),
        },
        Recorded::Response {
            time_ns: 2,
            connection: 1,
            frame: response_frame(8, 1, &committed),
        },
        Recorded::Request {
            time_ns: 3,
            connection: 1,
            frame: request_frame(ApiKey::OffsetFetch, 7, 2, &fetch),
        },
        Recorded::Response {
            time_ns: 4,
            connection: 1,
            frame: response_frame(7, 2, &fetched),
        },
    ];
    let mut out = AppFrames::default();
    decode_link("client-b1", &recorded, 100, &mut out);
    assert_eq!(out.undecodable_count, 0, "{:?}", out.undecodable);
    let [first, second] = &out.exchanges[..] else {
        panic!("{out:#?}")
    };
    let Call::OffsetCommit(c) = &first.call else {
        panic!("{first:?}")
    };
    assert_eq!(
        (c.group.as_str(), c.generation, c.member.as_str()),
        ("g", 3, "m-1")
    );
    assert_eq!(c.partitions, [("t".to_owned(), 0, 10, Some(0))]);
    let Call::OffsetFetch(f) = &second.call else {
        panic!("{second:?}")
    };
    assert_eq!(f.answered, [("g".to_owned(), "t".to_owned(), 0, 5, 0)]);
}

/// Fetch v13 on (KIP-516) names topics by id alone: the name comes from a
/// Metadata answer recorded on any link (here another broker's), and a
/// partition whose id no answer named is left out and counted.
#[test]
fn a_fetch_by_topic_id_is_named_from_a_metadata_answer_on_any_link() {
    use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    const ID: &str = "6f2c1b1e-3c59-4f43-9a55-2f7a8f0e9d11";
    const UNKNOWN: &str = "00000000-0000-0000-0000-00000000abcd";
    let metadata = MetadataResponse::default().with_topics(vec![
        MetadataResponseTopic::default()
            .with_name(Some(topic()))
            .with_topic_id(ID.parse().unwrap()),
    ]);
    let by_id = |id: &str| {
        FetchTopic::default()
            .with_topic_id(id.parse().unwrap())
            .with_partitions(vec![FetchPartition::default().with_fetch_offset(40)])
    };
    let fetch = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![by_id(ID), by_id(UNKNOWN)]);
    let fetched = FetchResponse::default().with_responses(vec![
        FetchableTopicResponse::default()
            .with_topic_id(ID.parse().unwrap())
            .with_partitions(vec![
                PartitionData::default()
                    .with_high_watermark(42)
                    .with_records(Some(batch(40, &["1", "2"]))),
            ]),
    ]);
    let on_b1 = vec![
        Recorded::Request {
            time_ns: 1,
            connection: 1,
            frame: request_frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default()),
        },
        Recorded::Response {
            time_ns: 2,
            connection: 1,
            frame: response_frame(12, 1, &metadata),
        },
    ];
    let on_b2 = vec![
        Recorded::Request {
            time_ns: 3,
            connection: 2,
            frame: request_frame(ApiKey::Fetch, 13, 7, &fetch),
        },
        Recorded::Response {
            time_ns: 4,
            connection: 2,
            frame: response_frame(13, 7, &fetched),
        },
    ];
    let mut out = AppFrames::default();
    // The fetching link first: its ids are named once every link is read.
    decode_link("client-b2", &on_b2, 100, &mut out);
    decode_link("client-b1", &on_b1, 100, &mut out);
    out.name_fetched_topics();
    assert_eq!(out.exchanges.len(), 1, "{out:#?}");
    let Call::Fetch(fetch) = &out.exchanges[0].call else {
        panic!("{out:#?}");
    };
    assert_eq!(fetch.partitions.len(), 1, "{fetch:#?}");
    let read = &fetch.partitions[0];
    assert_eq!(
        (read.topic.as_str(), read.topic_id.as_deref()),
        ("t", Some(ID))
    );
    let answer = read.answer.as_ref().expect("answered");
    let offsets: Vec<i64> = answer.records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [40, 41]);
    assert_eq!(out.undecodable_count, 1, "{:#?}", out.undecodable);
    assert!(
        out.undecodable[0].why.contains(UNKNOWN),
        "{}",
        out.undecodable[0]
    );
}
