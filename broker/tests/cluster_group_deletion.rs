//! DeleteGroups and OffsetDelete (KIP-229, KIP-496) outlive the
//! coordinator's memory: after a kill -9 and a restart the broker reads the
//! offsets partition again and the deleted offsets stay gone (their
//! tombstones are in the log), while another group's stay. Dynamic broker
//! configs (KIP-226) set before the restart are described after it, from
//! etcd.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, topic};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    AlterConfigsRequest, DeleteGroupsRequest, DescribeConfigsRequest, FindCoordinatorRequest,
    GroupId, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;

const TIMEOUT: Duration = Duration::from_secs(60);
/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
const RETRIABLE: [i16; 3] = [14, 15, 16];
const GROUP_ID_NOT_FOUND: i16 = 69;
const INVALID_REQUEST: i16 = 42;
const BROKER: i8 = 4;
const RELOGIN: &str = "sasl.kerberos.min.time.before.relogin";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn group(g: &str) -> GroupId {
    GroupId(text(g))
}

/// Asks the broker until its answer is not a retriable coordinator error.
fn ask<T>(
    cluster: &Cluster,
    what: &str,
    mut f: impl FnMut(&mut KafkaClient) -> Option<(i16, T)>,
) -> (i16, T) {
    common::await_some_or(
        what,
        TIMEOUT,
        || {
            let mut c = KafkaClient::connect(&cluster.broker(1).addr).ok()?;
            let (code, rest) = f(&mut c)?;
            (!RETRIABLE.contains(&code)).then_some((code, rest))
        },
        || cluster.logs(),
    )
}

/// Commits offset `offset` of t-`partitions` for `g` (a consumer that
/// assigns its partitions itself).
fn commit(cluster: &Cluster, g: &str, partitions: &[i32], offset: i64) {
    let req = OffsetCommitRequest::default()
        .with_group_id(group(g))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(topic("t"))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(offset)
                        })
                        .collect(),
                ),
        ]);
    // FindCoordinator makes the offsets topic, as a client's first ask does.
    let find = FindCoordinatorRequest::default().with_key(text(g));
    let (code, ()) = ask(cluster, "a commit", |c| {
        c.send(&find, 3).ok()?;
        let resp = c.send(&req, 5).ok()?;
        Some((resp.topics[0].partitions[0].error_code, ()))
    });
    assert_eq!(code, 0, "{g}'s commit");
}

/// `g`'s committed offsets of t-0 and t-1 (-1: none).
fn fetch(cluster: &Cluster, g: &str) -> Vec<i64> {
    let req = OffsetFetchRequest::default()
        .with_group_id(group(g))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(topic("t"))
                .with_partition_indexes(vec![0, 1]),
        ]));
    let (code, offsets) = ask(cluster, "an offset fetch", |c| {
        let resp = c.send(&req, 5).ok()?;
        // A group-level error (v2+) answers no topics.
        let offsets = resp
            .topics
            .first()
            .map(|t| t.partitions.iter().map(|p| p.committed_offset).collect())
            .unwrap_or_default();
        Some((resp.error_code, offsets))
    });
    assert_eq!(code, 0);
    offsets
}

fn delete_groups(cluster: &Cluster, groups: &[&str]) -> Vec<i16> {
    let req =
        DeleteGroupsRequest::default().with_groups_names(groups.iter().map(|g| group(g)).collect());
    // Every group here shares one coordinator: the first code says whether
    // it is ready.
    let (_, codes) = ask(cluster, "a group deletion", |c| {
        let resp = c.send(&req, 2).ok()?;
        let codes: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
        Some((
            codes
                .iter()
                .copied()
                .find(|c| RETRIABLE.contains(c))
                .unwrap_or(0),
            codes,
        ))
    });
    codes
}

fn alter_broker(c: &mut KafkaClient, name: &str, value: &str) -> i16 {
    let req = AlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(text(name))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(text(RELOGIN))
                    .with_value(Some(text(value))),
            ]),
    ]);
    c.send(&req, 1).unwrap().responses[0].error_code
}

/// The relogin config as broker 1 describes it: (value, source).
fn describe_relogin(c: &mut KafkaClient) -> (String, i8) {
    let req = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(text("1"))
            .with_configuration_keys(Some(vec![text(RELOGIN)])),
    ]);
    let resp = c.send(&req, 1).unwrap();
    let result = &resp.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    let entry = &result.configs[0];
    (
        entry
            .value
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default(),
        entry.config_source,
    )
}

#[test]
fn cluster_group_deletion_survives_a_restart() {
    let mut cluster = Cluster::start(
        1,
        &[
            "--lease-ttl-s",
            "2",
            "--offsets-topic-replication-factor",
            "1",
        ],
    );
    assert_eq!(cluster.client(1).create_topic("t", 2, 1), 0);
    commit(&cluster, "g", &[0, 1], 7);
    commit(&cluster, "h", &[0, 1], 9);
    commit(&cluster, "kept", &[0], 5);
    assert_eq!(fetch(&cluster, "g"), [7, 7]);

    let req = OffsetDeleteRequest::default()
        .with_group_id(group("h"))
        .with_topics(vec![
            OffsetDeleteRequestTopic::default()
                .with_name(topic("t"))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(1),
                ]),
        ]);
    let (code, partition_code) = ask(&cluster, "an offset deletion", |c| {
        let resp = c.send(&req, 0).ok()?;
        Some((
            resp.error_code,
            resp.topics.first().map(|t| t.partitions[0].error_code),
        ))
    });
    assert_eq!((code, partition_code), (0, Some(0)));
    assert_eq!(
        delete_groups(&cluster, &["g", "never"]),
        [0, GROUP_ID_NOT_FOUND]
    );
    assert_eq!(fetch(&cluster, "g"), [-1, -1]);
    assert_eq!(fetch(&cluster, "h"), [9, -1]);

    let mut c = cluster.client(1);
    assert_eq!(alter_broker(&mut c, "1", "58000"), 0);
    assert_eq!(
        alter_broker(&mut c, "2", "58000"),
        INVALID_REQUEST,
        "another broker's id"
    );
    assert_eq!(
        describe_relogin(&mut c),
        ("58000".to_owned(), 2),
        "DYNAMIC_BROKER_CONFIG"
    );

    cluster.restart(1);
    // The restarted coordinator reads the offsets partition again.
    assert_eq!(fetch(&cluster, "kept"), [5, -1]);
    assert_eq!(
        fetch(&cluster, "g"),
        [-1, -1],
        "the tombstones keep the deletion"
    );
    assert_eq!(fetch(&cluster, "h"), [9, -1]);
    assert_eq!(
        delete_groups(&cluster, &["g", "kept"]),
        [GROUP_ID_NOT_FOUND, 0]
    );
    let mut c = cluster.client(1);
    assert_eq!(
        describe_relogin(&mut c),
        ("58000".to_owned(), 2),
        "kept in etcd"
    );
}
