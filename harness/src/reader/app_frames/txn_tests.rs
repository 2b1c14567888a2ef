//! The group-membership and transaction APIs, decoded from a real client's
//! recording (tests/fixtures/app-txn: confluent-kafka's transactional
//! producer ran three transactions through `epochal up`, committing the
//! first and the third and aborting the second, and a read_committed
//! consumer of group app-txn-readers read them back) and from encodings of
//! the forms that recording lacks.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, GroupId, ProducerId,
    RequestHeader, ResponseHeader, TopicName, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

use super::*;

fn fixture() -> AppFrames {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/app-txn");
    read_app_frames(&dir, u64::MAX, None).unwrap()
}

#[test]
fn a_real_clients_transactions_and_membership_decode_whole() {
    let frames = fixture();
    assert_eq!(frames.undecodable_count, 0, "{:?}", frames.undecodable);
    let init: Vec<&InitProducerId> = frames
        .exchanges
        .iter()
        .filter_map(|e| match &e.call {
            Call::InitProducerId(i) => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(init.len(), 1, "{init:?}");
    assert_eq!(init[0].transactional_id.as_deref(), Some("app-txn"));
    assert!(matches!(init[0].answer, Some((0, Stamp { id, .. })) if id >= 0));
    // Each transaction adds t-0; the coordinator answers a transaction
    // begun while the last one's markers are still being written
    // CONCURRENT_TRANSACTIONS (51), and the client retries.
    let mut added = 0;
    for e in &frames.exchanges {
        if let Call::AddPartitionsToTxn(add) = &e.call {
            assert_eq!(add.transactional_id, "app-txn");
            let [(topic, 0, Some(code))] = &add.partitions[..] else {
                panic!("{add:?}")
            };
            assert!(topic == "t" && [0, 51].contains(code), "{add:?}");
            added += usize::from(*code == 0);
        }
    }
    assert_eq!(added, 3);
    let ends: Vec<(bool, Option<i16>)> = frames
        .exchanges
        .iter()
        .filter_map(|e| match &e.call {
            Call::EndTxn(end) => Some((end.committed, end.error_code)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [(true, Some(0)), (false, Some(0)), (true, Some(0))]);
    // The transactional produces name their transactional id.
    let produced: Vec<&Produce> = frames
        .exchanges
        .iter()
        .filter_map(|e| match &e.call {
            Call::Produce(p) => Some(p),
            _ => None,
        })
        .collect();
    assert!(!produced.is_empty());
    assert!(
        produced
            .iter()
            .all(|p| p.transactional_id.as_deref() == Some("app-txn")
                && p.partitions.iter().all(|pp| pp.transactional)),
        "{produced:?}"
    );
    // The reader joined and synced: one generation, t-0 assigned to it.
    let joined: Vec<&JoinGroup> = frames
        .exchanges
        .iter()
        .filter_map(|e| match &e.call {
            Call::JoinGroup(j) if j.answer.as_ref().is_some_and(|a| a.error_code == 0) => Some(j),
            _ => None,
        })
        .collect();
    let [join] = &joined[..] else {
        panic!("{joined:?}")
    };
    assert_eq!(
        (join.group.as_str(), &join.topics[..]),
        ("app-txn-readers", &["t".to_owned()][..])
    );
    let answer = join.answer.as_ref().unwrap();
    assert_eq!(answer.leader, answer.member);
    assert_eq!(answer.members, 1);
    let synced: Vec<&SyncGroup> = frames
        .exchanges
        .iter()
        .filter_map(|e| match &e.call {
            Call::SyncGroup(s) => Some(s),
            _ => None,
        })
        .collect();
    let [sync] = &synced[..] else {
        panic!("{synced:?}")
    };
    assert_eq!(
        (sync.generation, &sync.member),
        (answer.generation, &answer.member)
    );
    assert_eq!(sync.answer, Some((0, vec![("t".to_owned(), 0)])));
}

fn request_frame<T: Encodable + HeaderVersion>(key: ApiKey, version: i16, body: &T) -> Bytes {
    let mut out = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .encode(&mut out, T::header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

fn response_frame<T: Encodable + HeaderVersion>(version: i16, body: &T) -> Bytes {
    let mut out = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(1)
        .encode(&mut out, T::header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

/// One request and its answer on a link, decoded.
fn exchange(request: Bytes, response: Bytes) -> (Vec<Exchange>, u64) {
    let recorded = vec![
        Recorded::Request {
            time_ns: 1,
            connection: 1,
            frame: request,
        },
        Recorded::Response {
            time_ns: 2,
            connection: 1,
            frame: response,
        },
    ];
    let mut out = AppFrames::default();
    decode_link("client-b1", &recorded, 100, &mut out);
    (out.exchanges, out.undecodable_count)
}

#[test]
fn a_partitions_refusal_and_a_transactions_group_offsets_decode_with_their_answers() {
    let topic = TopicName(StrBytes::from_static_str("t"));
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str("x")))
        .with_v3_and_below_producer_id(ProducerId(4))
        .with_v3_and_below_producer_epoch(2)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(topic.clone())
                .with_partitions(vec![0, 1]),
        ]);
    let refused = AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(vec![
        AddPartitionsToTxnTopicResult::default()
            .with_name(topic.clone())
            .with_results_by_partition(vec![
                AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(1)
                    .with_partition_error_code(53),
            ]),
    ]);
    let (decoded, undecodable) = exchange(
        request_frame(ApiKey::AddPartitionsToTxn, 3, &add),
        response_frame(3, &refused),
    );
    assert_eq!(undecodable, 0);
    let Call::AddPartitionsToTxn(add) = &decoded[0].call else {
        panic!("{decoded:?}")
    };
    assert_eq!(add.producer, Stamp { id: 4, epoch: 2 });
    assert_eq!(
        add.partitions,
        [("t".to_owned(), 0, None), ("t".to_owned(), 1, Some(53))]
    );
    let offsets = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_static_str("x")))
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id(7)
        .with_topics(vec![
            TxnOffsetCommitRequestTopic::default()
                .with_name(topic.clone())
                .with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(43),
                ]),
        ]);
    let accepted = TxnOffsetCommitResponse::default().with_topics(vec![
        TxnOffsetCommitResponseTopic::default()
            .with_name(topic)
            .with_partitions(vec![TxnOffsetCommitResponsePartition::default()]),
    ]);
    let (decoded, undecodable) = exchange(
        request_frame(ApiKey::TxnOffsetCommit, 3, &offsets),
        response_frame(3, &accepted),
    );
    assert_eq!(undecodable, 0);
    let Call::TxnOffsetCommit(commit) = &decoded[0].call else {
        panic!("{decoded:?}")
    };
    assert_eq!((commit.group.as_str(), commit.generation), ("g", 7));
    assert_eq!(commit.partitions, [("t".to_owned(), 0, 43, Some(0))]);
}
