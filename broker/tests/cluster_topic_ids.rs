//! Topic ids (KIP-516): each creation of a topic gets a new random UUID,
//! kept in etcd with its assignment, so it survives a restart and a topic
//! deleted and made again is told apart from the one before (librdkafka
//! otherwise keeps the old topic's partition count). CreateTopics v7,
//! Metadata v10+ and DeleteTopics v6 carry it; DeleteTopics v6 takes it in
//! place of a name.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, topic};
use epochal_broker::controller::metadata_store::topic_key;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest};

const UNKNOWN_TOPIC_ID: i16 = 100;

/// CreateTopics v7 of `name`; (error code, the id it answered).
fn create(c: &mut KafkaClient, name: &str) -> (i16, String) {
    let req = CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(topic(name))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ])
        .with_timeout_ms(15_000);
    let resp = c.send(&req, 7).expect("CreateTopics");
    let t = &resp.topics[0];
    (t.error_code, t.topic_id.to_string())
}

/// `name`'s id in a Metadata v12 answer, once it has a leader.
fn listed_id(c: &mut KafkaClient, name: &str) -> Option<String> {
    let req = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic(name))),
        ]));
    let resp = c.send(&req, 12).ok()?;
    let t = resp.topics.first()?;
    let led = t.error_code == 0 && t.partitions.iter().all(|p| p.leader_id.0 >= 0);
    led.then(|| t.topic_id.to_string())
}

/// DeleteTopics v6 of the topic whose id is `id`; (error code, name answered).
fn delete_by_id(c: &mut KafkaClient, id: &str) -> (i16, Option<String>) {
    let req = DeleteTopicsRequest::default()
        .with_topics(vec![
            DeleteTopicState::default().with_topic_id(id.parse().expect("a UUID")),
        ])
        .with_timeout_ms(10_000);
    let resp = c.send(&req, 6).expect("DeleteTopics");
    let r = &resp.responses[0];
    (r.error_code, r.name.as_ref().map(|n| n.to_string()))
}

#[test]
fn cluster_topic_ids_are_new_for_each_creation_and_kept_in_etcd() {
    let mut cluster = Cluster::start(1, &["--lease-ttl-s", "2"]);
    let mut c = cluster.client(1);
    let zero = "00000000-0000-0000-0000-000000000000";

    let (error, first) = create(&mut c, "ids");
    assert_eq!(error, 0, "{}", cluster.logs());
    assert_ne!(first, zero, "CreateTopics v7 answers the new id");
    assert_eq!(listed_id(&mut c, "ids").as_deref(), Some(first.as_str()));
    let stored = cluster
        .etcd
        .get(&topic_key("ids"))
        .expect("the topic's key");
    assert!(
        stored.contains(&first),
        "kept with the assignment: {stored}"
    );

    // A restart reads it back from etcd.
    cluster.restart(1);
    let mut c = cluster.client(1);
    let listed = common::await_some(
        "the topic led after a restart",
        Duration::from_secs(30),
        || listed_id(&mut c, "ids"),
    );
    assert_eq!(listed, first);

    assert_eq!(delete_by_id(&mut c, zero).0, UNKNOWN_TOPIC_ID);
    assert_eq!(delete_by_id(&mut c, &first), (0, Some("ids".to_owned())));
    common::await_some("the topic's keys to go", Duration::from_secs(30), || {
        cluster.etcd.get(&topic_key("ids")).is_none().then_some(())
    });

    // The same name again is another topic, with another id.
    let (error, second) = create(&mut c, "ids");
    assert_eq!(error, 0, "{}", cluster.logs());
    assert_ne!(second, zero);
    assert_ne!(second, first, "a topic made again gets a new id");
    assert_eq!(listed_id(&mut c, "ids").as_deref(), Some(second.as_str()));
}
