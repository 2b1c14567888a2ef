//! What a DeleteTopics answer waits for. Kafka answers a deleted topic once
//! the controller has taken it out of the metadata (its `DelayedDeleteTopics`
//! completes when the broker's metadata cache no longer holds the topic),
//! not once every replica has deleted its log: a replica that is down keeps
//! the deletion going on after the answer. librdkafka's test 0081 deletes 7
//! topics with a 1.5 s timeout and expects NO_ERROR for each.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, topic};
use epochal_broker::controller::metadata_store::{topic_deletion_key, topic_key};
use kafka_protocol::messages::DeleteTopicsRequest;

const REQUEST_TIMED_OUT: i16 = 7;

/// DeleteTopics v4 of `names`; each topic's error code.
fn delete_topics(c: &mut KafkaClient, names: &[&str], timeout_ms: i32) -> Vec<i16> {
    let req = DeleteTopicsRequest::default()
        .with_topic_names(names.iter().map(|n| topic(n)).collect())
        .with_timeout_ms(timeout_ms);
    let resp = c.send(&req, 4).expect("DeleteTopics");
    names
        .iter()
        .map(|n| {
            resp.responses
                .iter()
                .find(|r| r.name.as_ref().is_some_and(|r| r.as_str() == *n))
                .expect("every topic answered")
                .error_code
        })
        .collect()
}

#[test]
fn cluster_delete_topics_answers_once_the_topic_leaves_the_metadata() {
    let mut cluster = Cluster::start(2, &["--lease-ttl-s", "2"]);
    let mut c = cluster.client(1);
    for name in ["doomed", "later"] {
        assert_eq!(c.create_topic(name, 2, 2), 0, "{}", cluster.logs());
    }
    // Broker 2 holds a replica of every partition and is gone: the deletion
    // cannot finish until it is back.
    cluster.broker_mut(2).kill9();

    let codes = delete_topics(&mut c, &["doomed"], 10_000);
    assert_eq!(codes, vec![0], "{}", cluster.logs());
    let listed = c.metadata(None);
    assert!(
        listed
            .topics
            .iter()
            .all(|t| t.name.as_ref().is_none_or(|n| n.as_str() != "doomed")),
        "a topic answered deleted is gone from the metadata"
    );
    let etcd = &cluster.etcd;
    assert!(
        etcd.get(&topic_key("doomed")).is_some()
            && etcd.get(&topic_deletion_key("doomed")).is_some(),
        "the answer came before the replicas' logs were deleted"
    );

    // A timeout of 0 waits for nothing (Kafka's ZkAdminManager.deleteTopics).
    assert_eq!(
        delete_topics(&mut c, &["later"], 0),
        vec![REQUEST_TIMED_OUT]
    );

    // Back, broker 2 is told to delete its logs and the keys go.
    cluster.restart(2);
    common::await_some_or(
        "both topics' keys to leave etcd",
        Duration::from_secs(30),
        || {
            let etcd = &cluster.etcd;
            (etcd.get(&topic_key("doomed")).is_none() && etcd.get(&topic_key("later")).is_none())
                .then_some(())
        },
        || cluster.logs(),
    );
}
