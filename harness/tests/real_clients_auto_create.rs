//! Topic auto-creation as Kafka does it ([clients]): kcat, confluent-kafka
//! and kafka-python each produce to a topic nobody created, as an
//! application does on a Kafka whose `auto.create.topics.enable` is on (the
//! default through 3.x); the record is acknowledged and the topic exists
//! with the broker's `num_partitions` and `default_replication_factor`. With
//! the setting off, the broker answers Kafka's UNKNOWN_TOPIC_OR_PARTITION,
//! the producer fails as against such a Kafka, and nothing is created.

use crate::common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::groups;
use epochal::node::NodeId;
use epochal::runtime::{ProcessRuntime, Runtime};
use epochal::topic_partition::PartitionRef;
use serde_json::json;

const READY: Duration = Duration::from_secs(30);
/// The clients' own bound on one produce.
const CLIENT_DEADLINE: &str = "60";

/// The topics `runtime`'s etcd holds, each with every partition's replicas.
async fn topics(runtime: &ProcessRuntime) -> Vec<(String, Vec<Vec<NodeId>>)> {
    let view = groups::view(runtime).await;
    let names: BTreeSet<&str> = view.partitions.keys().map(|p| p.topic.as_str()).collect();
    names
        .into_iter()
        .map(|name| {
            let replicas = (0..)
                .map_while(|p| view.partition(&PartitionRef::new(name, p)))
                .map(|p| p.replicas.clone())
                .collect();
            (name.to_owned(), replicas)
        })
        .collect()
}

fn kcat_produce(bootstrap: &str, topic: &str) -> std::process::Output {
    let mut child = Command::new("kcat")
        .args(["-P", "-b", bootstrap, "-t", topic, "-X", "acks=all"])
        .args(["-X", "topic.metadata.propagation.max.ms=5000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat runs (Debian: apt-get install kcat)");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"auto\n").unwrap();
    // kcat flushes and exits once stdin closes, bounded by its message timeout.
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_confluent_kafka_and_kafka_python_produce_to_a_missing_topic_and_create_it() {
    let run = tempfile::tempdir().unwrap();
    let settings = [
        ("num_partitions", toml::Value::Integer(3)),
        ("default_replication_factor", toml::Value::Integer(3)),
    ];
    let runtime = groups::start_cluster(run.path(), READY, &settings).await;
    let bootstrap = groups::bootstrap(&runtime);
    assert!(topics(&runtime).await.is_empty(), "no topic before");

    let kcat = kcat_produce(&bootstrap, "by-kcat");
    assert!(
        kcat.status.success(),
        "kcat -P: {}",
        String::from_utf8_lossy(&kcat.stderr)
    );
    for (library, topic) in [
        ("confluent-kafka", "by-confluent-kafka"),
        ("kafka-python", "by-kafka-python"),
    ] {
        let (result, ok) = groups::client_script(
            "auto_create.py",
            &["produce", library, &bootstrap, topic, CLIENT_DEADLINE],
        );
        assert!(ok, "{library}: {result}");
        assert_eq!(result["offset"], json!(0), "{library}: {result}");
    }
    // kcat's record, read back: acknowledged means stored.
    let read = Command::new("kcat")
        .args(["-C", "-b", &bootstrap, "-t", "by-kcat", "-o", "beginning"])
        .args(["-c", "1", "-e", "-q", "-f", "%s\\n"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&read.stdout), "auto\n");

    let all: BTreeSet<NodeId> = NodeId::all(3).collect();
    let created = topics(&runtime).await;
    let names: Vec<&str> = created.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(names, ["by-confluent-kafka", "by-kafka-python", "by-kcat"]);
    for (topic, partitions) in &created {
        assert_eq!(partitions.len(), 3, "{topic}: num_partitions = 3");
        for replicas in partitions {
            let set: BTreeSet<NodeId> = replicas.iter().copied().collect();
            assert_eq!(set, all, "{topic}: default_replication_factor = 3");
        }
    }
    runtime.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auto_creation_off_a_missing_topic_is_kafka_s_unknown_topic() {
    let run = tempfile::tempdir().unwrap();
    let settings = [("auto_create_topics_enable", toml::Value::Boolean(false))];
    let runtime = groups::start_cluster(run.path(), READY, &settings).await;
    let bootstrap = groups::bootstrap(&runtime);

    let (meta, _) = groups::client_script(
        "auto_create.py",
        &["metadata", &bootstrap, "missing", CLIENT_DEADLINE],
    );
    assert_eq!(
        meta,
        json!({"error": "UNKNOWN_TOPIC_OR_PART", "partitions": 0})
    );
    // librdkafka fails the record with the broker's error once the topic
    // stays unknown past topic.metadata.propagation.max.ms, as against a Kafka
    // with creation off.
    let (result, ok) = groups::client_script(
        "auto_create.py",
        &[
            "produce",
            "confluent-kafka",
            &bootstrap,
            "missing",
            CLIENT_DEADLINE,
        ],
    );
    assert!(!ok);
    assert_eq!(result, json!({"error": "UNKNOWN_TOPIC_OR_PART"}));
    assert!(!kcat_produce(&bootstrap, "missing").status.success());
    assert!(topics(&runtime).await.is_empty(), "nothing created");
    runtime.shutdown().await.unwrap();
}
