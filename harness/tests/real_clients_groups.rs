//! Real Kafka clients' `subscribe()` against the reference broker ([groups]):
//! kafka-python and confluent-kafka (librdkafka) join a consumer group on a
//! 3-broker cluster (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
//! OffsetFetch, OffsetCommit, LeaveGroup) and read every record of a
//! 3-partition topic once, committing after each poll; then the group's
//! coordinator — the leader of its partition of the offsets topic — is
//! killed (SIGKILL) and started again, and a new member of the same group
//! resumes from the committed offsets: it reads exactly what the first
//! member had not, nothing before its commits and nothing skipped.
//!
//! The clients come from PyPI in the test virtualenv `ci/dev.sh` makes
//! (`EPOCHAL_PYTHON`). Every wait has a deadline; the client processes and
//! the cluster are killed and reaped on every exit path.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::etcd::assign_topic_t;
use common::groups;
use epochal::kafka_client::{KafkaClient, ProduceOptions, ProduceRecord};
use epochal::runtime::{ProcessRuntime, Runtime};
use epochal::topic_partition::PartitionRef;

const READY: Duration = Duration::from_secs(30);
const CALL: Duration = Duration::from_secs(10);
const PER_PARTITION: usize = 100;
/// The client's own bound on reading what it wants.
const CLIENT_DEADLINE: Duration = Duration::from_secs(90);
const FAILOVER: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_subscribes_commits_and_resumes_after_a_coordinator_kill() {
    subscribe_through_a_coordinator_kill("kafka-python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_subscribes_commits_and_resumes_after_a_coordinator_kill() {
    subscribe_through_a_coordinator_kill("confluent-kafka").await;
}

/// kcat's balanced consumer (`-G`, librdkafka's high-level consumer) reads
/// every record once and commits on exit; a second run in the same group
/// starts at the committed offsets and finds nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_balanced_consumer_reads_everything_once_and_commits() {
    let (runtime, _run, bootstrap, produced) = cluster_with_records().await;
    let kcat = |group: &str| -> Vec<Record> {
        let output = Command::new("kcat")
            // Not `-o beginning`: with -G kcat forces that offset on every
            // assignment, over what the group committed.
            .args(["-b", &bootstrap, "-G", group, "-e", "-q"])
            .args(["-X", "auto.offset.reset=earliest"])
            .args(["-f", "%p %o %s\\n", "-X", "session.timeout.ms=10000"])
            .arg("t")
            .output()
            .expect("kcat runs (Debian: apt-get install kcat)");
        assert!(
            output.status.success(),
            "kcat -G: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| {
                let mut parts = l.splitn(3, ' ');
                let p = parts.next().unwrap().parse().unwrap();
                let o = parts.next().unwrap().parse().unwrap();
                (p, o, parts.next().unwrap_or_default().to_owned())
            })
            .collect()
    };
    let first = kcat("g-kcat");
    let first_set: BTreeSet<Record> = first.iter().cloned().collect();
    assert_eq!(first.len(), first_set.len(), "kcat read a record twice");
    assert_eq!(first_set, produced);
    let second = kcat("g-kcat");
    assert!(
        second.is_empty(),
        "the group's second member re-read {} committed records",
        second.len()
    );
    runtime.shutdown().await.unwrap();
}

type Record = (i32, i64, String);

/// Runs the group consumer until it read `want` records; its records.
fn consume(client: &str, bootstrap: &str, group: &str, want: usize) -> Vec<Record> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/group_consume.py");
    let python = groups::python();
    let child = Command::new(&python)
        .arg(&script)
        .args([
            client,
            bootstrap,
            "t",
            group,
            &want.to_string(),
            &CLIENT_DEADLINE.as_secs().to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e} (set EPOCHAL_PYTHON)"));
    // The script bounds itself by CLIENT_DEADLINE; its output is read to EOF.
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("{client}: no result line; stderr: {stderr}"));
    let result: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{client} read {} of {want} records in {CLIENT_DEADLINE:?}; errors: {}; stderr: {stderr}",
        result["records"].as_array().map_or(0, Vec::len),
        result["errors"]
    );
    serde_json::from_value(result["records"].clone()).unwrap()
}

/// A 3-broker cluster (a lone consumer's first rebalance waits 200 ms, not
/// Kafka's 3 s) with topic t of 3 partitions holding [`PER_PARTITION`]
/// records each: the runtime, its run dir, the bootstrap list (every
/// client link) and every record as (partition, offset, value).
async fn cluster_with_records() -> (ProcessRuntime, tempfile::TempDir, String, BTreeSet<Record>) {
    let run = tempfile::tempdir().unwrap();
    let runtime = groups::start_cluster(run.path(), READY, &[]).await;
    assign_topic_t(
        runtime.etcd_endpoint(),
        r#"{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]}"#,
    )
    .await;
    let view = common::ready(&runtime, READY).await;
    let mut produced = BTreeSet::new();
    for partition in 0..3u32 {
        let leader = view.partitions[&PartitionRef::new("t", partition)]
            .leader
            .unwrap();
        let addr = runtime.observe_address(leader).unwrap();
        let mut producer = KafkaClient::connect(&addr, "groups-test", CALL)
            .await
            .unwrap();
        let values: Vec<String> = (0..PER_PARTITION)
            .map(|i| format!("{partition}-{i}"))
            .collect();
        let records: Vec<ProduceRecord> = values
            .iter()
            .map(|v| ProduceRecord::value(v.clone()))
            .collect();
        // etcd names the leader before the leader has applied it: retry
        // NOT_LEADER / UNKNOWN_TOPIC_OR_PARTITION until it has, within READY.
        let deadline = Instant::now() + READY;
        loop {
            let sent = producer
                .produce(
                    "t",
                    partition as i32,
                    &records,
                    &ProduceOptions::default(),
                    CALL,
                )
                .await;
            match sent {
                Ok(_) => break,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("producing to t-{partition}: {e}"),
            }
        }
        for (i, v) in values.into_iter().enumerate() {
            produced.insert((partition as i32, i as i64, v));
        }
    }
    let bootstrap = groups::bootstrap(&runtime);
    (runtime, run, bootstrap, produced)
}

async fn subscribe_through_a_coordinator_kill(client: &str) {
    let (mut runtime, _run, bootstrap, produced) = cluster_with_records().await;
    let group = format!("g-{client}");

    // Half of it, committing after each poll.
    let half = 3 * PER_PARTITION / 2;
    let first = consume(client, &bootstrap, &group, half);
    let first_set: BTreeSet<Record> = first.iter().cloned().collect();
    assert_eq!(first.len(), half, "{client} read more than it asked for");
    assert_eq!(first.len(), first_set.len(), "{client} read a record twice");
    assert!(first_set.is_subset(&produced));

    // Kill the coordinator and bring it back.
    let coordinator = groups::coordinator_of(&groups::view(&runtime).await, &group);
    runtime.kill_node(coordinator).await.unwrap();
    groups::await_new_leader(
        &runtime,
        &groups::offsets_partition(&group),
        coordinator,
        FAILOVER,
    )
    .await;
    runtime.start_node(coordinator).await.unwrap();
    common::ready(&runtime, READY).await;

    // A new member resumes where the commits left off.
    let rest: BTreeSet<Record> = produced.difference(&first_set).cloned().collect();
    let second = consume(client, &bootstrap, &group, rest.len());
    let second_set: BTreeSet<Record> = second.iter().cloned().collect();
    let rewound: Vec<&Record> = second_set.intersection(&first_set).collect();
    assert!(
        rewound.is_empty(),
        "{client}: after the coordinator's failover the group re-read committed records, e.g. {:?}",
        &rewound[..rewound.len().min(5)]
    );
    assert_eq!(
        second_set, rest,
        "{client}: the second member read other than what the first had not"
    );
    runtime.shutdown().await.unwrap();
}
