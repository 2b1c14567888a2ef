//! Admin clients against the cluster ([clients]): confluent-kafka's
//! AdminClient and kafka-python's KafkaAdminClient each create a topic, add
//! partitions to it, describe its configs, set its `min.insync.replicas`
//! (IncrementalAlterConfigs and AlterConfigs respectively) and delete a
//! topic; the per-topic setting takes effect — with a broker down, an
//! acks=all produce to the topic is refused NOT_ENOUGH_REPLICAS while a topic
//! on the broker's default takes the same produce — and, dropped again, the
//! topic takes writes. The deleted topic leaves etcd and every broker's
//! data directory.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::groups;
use epochal::node::NodeId;
use epochal::runtime::{ProcessRuntime, Runtime};
use epochal::topic_partition::PartitionRef;
use serde_json::{Value, json};

const READY: Duration = Duration::from_secs(30);
/// The clients' own bound on one step.
const CLIENT_DEADLINE: &str = "30";
const SETTLE: Duration = Duration::from_secs(30);

struct Admin<'a> {
    library: &'a str,
    bootstrap: String,
}

impl Admin<'_> {
    fn try_step(&self, step: &str, topic: &str, arg: &str) -> (Value, bool) {
        groups::client_script(
            "admin.py",
            &[
                self.library,
                &self.bootstrap,
                step,
                topic,
                arg,
                CLIENT_DEADLINE,
            ],
        )
    }

    fn step(&self, step: &str, topic: &str, arg: &str) -> Value {
        let (result, ok) = self.try_step(step, topic, arg);
        assert!(ok, "{} {step} {topic} {arg}: {result}", self.library);
        result
    }

    /// min.insync.replicas as the client describes it: [value, source].
    fn min_isr(&self, topic: &str) -> Value {
        self.step("describe", topic, "-")["min.insync.replicas"].clone()
    }

    /// Produces until the answer is `want` (the brokers learn a config
    /// change from etcd's watch, a moment after the alter is answered).
    fn produce_until(&self, topic: &str, want: &str) {
        let deadline = Instant::now() + SETTLE;
        loop {
            let (result, _) = self.try_step("produce", topic, "-");
            let got = if result.get("offset").is_some() {
                "acknowledged"
            } else {
                "refused"
            };
            if got == want {
                if want == "refused" {
                    assert_eq!(result, json!({"error": "NotEnoughReplicasError"}));
                }
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{topic}: {result}, wanted {want}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Waits until etcd's view satisfies `ok`.
async fn await_view(
    runtime: &ProcessRuntime,
    what: &str,
    ok: impl Fn(&epochal::observe::ClusterView) -> bool,
) {
    let deadline = Instant::now() + SETTLE;
    loop {
        let view = groups::view(runtime).await;
        if ok(&view) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {view:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn admin_round(library: &str, source_default: &str, source_topic: &str) {
    let run = tempfile::tempdir().unwrap();
    // A follower leaves the ISR 2 s after it stops fetching (Kafka's 10 s).
    let settings = [("replica_lag_time_max_ms", toml::Value::Integer(2000))];
    let mut runtime = groups::start_cluster(run.path(), READY, &settings).await;
    let admin = Admin {
        library,
        bootstrap: groups::bootstrap(&runtime),
    };

    admin.step("create", "strict", "3");
    admin.step("create", "relaxed", "3");
    admin.step("create", "doomed", "3");
    admin.step("grow", "strict", "3");
    let described = admin.step("describe", "strict", "-");
    assert_eq!(described["partitions"], 3, "{described}");
    assert_eq!(
        described["min.insync.replicas"],
        json!(["1", source_default])
    );
    await_view(&runtime, "strict has 3 led partitions of 3 replicas", |v| {
        (0..3).all(|p| {
            v.partition(&PartitionRef::new("strict", p))
                .is_some_and(|p| p.replicas.len() == 3 && p.leader.is_some())
        })
    })
    .await;

    admin.step("set", "strict", "3");
    assert_eq!(admin.min_isr("strict"), json!(["3", source_topic]));
    assert_eq!(admin.min_isr("relaxed"), json!(["1", source_default]));
    admin.produce_until("strict", "acknowledged");

    // One broker down: every ISR drops to 2 (the controller drops a dead
    // leader at once, each leader its dead follower after the lag time).
    let down = NodeId::all(3).last().unwrap();
    runtime.kill_node(down).await.unwrap();
    await_view(&runtime, "every ISR without the killed broker", |v| {
        v.partitions
            .iter()
            .filter(|(p, _)| p.topic == "strict" || p.topic == "relaxed")
            .all(|(_, p)| p.isr.len() == 2 && !p.isr.contains(&down))
    })
    .await;
    admin.produce_until("strict", "refused");
    admin.produce_until("relaxed", "acknowledged");
    admin.step("unset", "strict", "-");
    assert_eq!(admin.min_isr("strict"), json!(["1", source_default]));
    admin.produce_until("strict", "acknowledged");

    // Deletion waits for every replica, so the broker comes back first.
    runtime.start_node(down).await.unwrap();
    common::ready(&runtime, READY).await;
    admin.step("delete", "doomed", "-");
    let topics = admin.step("topics", "-", "-");
    let names: BTreeSet<&str> = topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !names.contains("doomed") && names.contains("strict"),
        "{topics}"
    );
    let view = groups::view(&runtime).await;
    assert!(
        view.partitions.keys().all(|p| p.topic != "doomed"),
        "etcd still holds doomed: {view:?}"
    );
    let dirs: Vec<_> = runtime
        .nodes()
        .into_iter()
        .map(|n| runtime.data_dir(n).unwrap())
        .collect();
    runtime.shutdown().await.unwrap();
    for dir in dirs {
        assert!(
            !dir.join("doomed-0").exists(),
            "{} keeps doomed-0",
            dir.display()
        );
        assert!(
            dir.join("strict-2").exists(),
            "{} lacks strict-2",
            dir.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_admin_grows_alters_and_deletes_and_min_insync_replicas_takes_effect() {
    admin_round("confluent-kafka", "DEFAULT_CONFIG", "DYNAMIC_TOPIC_CONFIG").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_admin_grows_alters_and_deletes_and_min_insync_replicas_takes_effect() {
    admin_round("kafka-python", "DEFAULT_CONFIG", "DYNAMIC_TOPIC_CONFIG").await;
}
