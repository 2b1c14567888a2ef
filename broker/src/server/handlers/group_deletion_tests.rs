//! DeleteGroups and OffsetDelete on a broker that coordinates the group:
//! answers as Kafka's, and tombstones that keep the deletion when the
//! offsets partition is read again (a coordinator move or a restart).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::config::OffsetsLoad;
use crate::group::{JoinParams, Protocol};
use crate::server::handlers::offset_commit;
use crate::server::test_support::TestBroker;

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Commits offset 5 of each of `partitions` for `group`, as a consumer
/// that assigns its partitions itself.
async fn commit(test: &TestBroker, group: &str, partitions: &[(&str, i32)]) {
    let topics = partitions
        .iter()
        .map(|(t, p)| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(name(t)))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(*p)
                        .with_committed_offset(5),
                ])
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(name(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(topics);
    let resp = offset_commit::handle(&test.broker.group_writes(), req, 8).await;
    assert!(
        resp.topics
            .iter()
            .all(|t| t.partitions.iter().all(|p| p.error_code == 0)),
        "{resp:?}"
    );
}

/// Reads `group`'s offsets partition again from its log, as a new
/// coordinator would.
fn reload(test: &TestBroker, group: &str) {
    let partition = test.broker.offsets.partition_of(group).partition;
    test.broker.offsets.resigned(partition);
    test.broker
        .groups
        .unload_partition(partition as u32, test.broker.offsets.partitions());
    test.broker.offsets.elected(partition, 0);
    offsets::load(
        &test.broker.offsets,
        &test.broker.replicas,
        partition,
        0,
        OffsetsLoad::Current,
    );
}

fn delete_request(groups: &[&str]) -> DeleteGroupsRequest {
    DeleteGroupsRequest::default()
        .with_groups_names(groups.iter().map(|g| GroupId(name(g))).collect())
}

fn codes(resp: &DeleteGroupsResponse) -> Vec<i16> {
    resp.results.iter().map(|r| r.error_code).collect()
}

fn offset_delete_request(group: &str, partitions: &[(&str, i32)]) -> OffsetDeleteRequest {
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(name(group)))
        .with_topics(
            partitions
                .iter()
                .map(|(t, p)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(name(t)))
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(*p),
                        ])
                })
                .collect(),
        )
}

fn partition_codes(resp: &OffsetDeleteResponse) -> Vec<(String, i32, i16)> {
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect()
}

#[tokio::test]
async fn a_deleted_group_s_offsets_stay_deleted_when_its_partition_is_read_again() {
    let test = TestBroker::leading(&[("t", 2)]).await;
    test.coordinate("g");
    if test.broker.offsets.standing("kept") != offsets::Standing::Ready {
        test.coordinate("kept");
    }
    commit(&test, "g", &[("t", 0), ("t", 1)]).await;
    commit(&test, "kept", &[("t", 0)]).await;
    let resp = delete_groups(
        &test.broker.group_writes(),
        delete_request(&["g", "never", "", "elsewhere"]),
    )
    .await;
    let not_coordinator = if test.broker.offsets.standing("elsewhere") == offsets::Standing::Ready {
        ResponseError::GroupIdNotFound.code()
    } else {
        ResponseError::NotCoordinator.code()
    };
    assert_eq!(
        codes(&resp),
        [
            0,
            ResponseError::GroupIdNotFound.code(),
            ResponseError::InvalidGroupId.code(),
            not_coordinator
        ]
    );
    assert!(test.broker.offsets.fetch("g", None).unwrap().is_empty());
    reload(&test, "g");
    if test.broker.offsets.standing("kept") != offsets::Standing::Ready {
        reload(&test, "kept");
    }
    assert!(
        test.broker.offsets.fetch("g", None).unwrap().is_empty(),
        "the tombstones keep the deletion"
    );
    assert_eq!(
        test.broker.offsets.fetch("kept", None).unwrap().len(),
        1,
        "another group keeps its offsets"
    );
    // Known by its offsets alone after the reload, "kept" is deleted as an
    // Empty group; deleted, it is not found.
    let resp = delete_groups(
        &test.broker.group_writes(),
        delete_request(&["kept", "kept"]),
    )
    .await;
    assert_eq!(codes(&resp), [0, ResponseError::GroupIdNotFound.code()]);
}

/// A consumer subscription (v0) to `topics`.
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = vec![0, 0];
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
    Bytes::from(b)
}

/// Joins a consumer subscribed to `topics` to `group` and waits until the
/// group has it (the join itself stays parked in the rebalance).
async fn join_member(test: &TestBroker, group: &str, topics: &[&str]) {
    let params = JoinParams {
        group_id: group.into(),
        member_id: String::new(),
        group_instance_id: None,
        require_known_member_id: false,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![Protocol {
            name: "range".into(),
            metadata: subscription(topics),
        }],
    };
    let groups = test.broker.groups.clone();
    tokio::spawn(async move { groups.join(params).await });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while test
        .broker
        .groups
        .describe(group)
        .is_none_or(|d| d.members.is_empty())
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the member never joined"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn offsets_of_a_subscribed_topic_are_kept_and_the_others_deleted() {
    let test = TestBroker::leading(&[("sub", 1), ("other", 2)]).await;
    test.coordinate("g");
    commit(&test, "g", &[("sub", 0), ("other", 0), ("other", 1)]).await;
    join_member(&test, "g", &["sub"]).await;

    let resp = delete_groups(&test.broker.group_writes(), delete_request(&["g"])).await;
    assert_eq!(codes(&resp), [ResponseError::NonEmptyGroup.code()]);

    let req = offset_delete_request("g", &[("sub", 0), ("other", 0), ("nope", 0)]);
    let resp = offset_delete(&test.broker.group_writes(), req).await;
    assert_eq!(resp.error_code, 0);
    assert_eq!(
        partition_codes(&resp),
        [
            (
                "sub".into(),
                0,
                ResponseError::GroupSubscribedToTopic.code()
            ),
            ("other".into(), 0, 0),
            (
                "nope".into(),
                0,
                ResponseError::UnknownTopicOrPartition.code()
            ),
        ]
    );
    let left = |test: &TestBroker| {
        let mut keys: Vec<(String, i32)> = test
            .broker
            .offsets
            .fetch("g", None)
            .unwrap()
            .into_keys()
            .collect();
        keys.sort();
        keys
    };
    let expected = vec![("other".to_owned(), 1), ("sub".to_owned(), 0)];
    assert_eq!(left(&test), expected);
    reload(&test, "g");
    assert_eq!(left(&test), expected, "the tombstone keeps the deletion");

    // The reload forgot the member: the group is known by its offsets, so
    // every partition may go.
    let resp = offset_delete(
        &test.broker.group_writes(),
        offset_delete_request("g", &[("sub", 0)]),
    )
    .await;
    assert_eq!(partition_codes(&resp), [("sub".into(), 0, 0)]);
    let resp = offset_delete(
        &test.broker.group_writes(),
        offset_delete_request("never", &[("sub", 0)]),
    )
    .await;
    assert_eq!(resp.error_code, ResponseError::GroupIdNotFound.code());
}
