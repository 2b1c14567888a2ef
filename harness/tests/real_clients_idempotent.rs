//! Real Kafka clients' idempotent producers against the broker through a
//! leader crash (issue #20): kafka-python 3.x with its defaults (acks='all',
//! idempotence on since 3.0) and confluent-kafka (librdkafka) with
//! `enable.idempotence=true` each produce 10,000 records while the
//! partition's leader is killed with SIGKILL and restarted. Every record the
//! client reports delivered must be in the final log exactly once, and no
//! value twice: the retries of batches in flight at the crash carry the same
//! producer id, epoch and sequence (KIP-98), and the new leader, which built
//! its producer state from the batches it replicated, answers a retry of a
//! batch it already has with the original offset instead of appending it
//! again.
//!
//! The clients come from PyPI in the test virtualenv `ci/dev.sh` makes
//! (`EPOCHAL_PYTHON`). Every wait has a deadline; the client process and the
//! cluster are killed and reaped on every exit path, panics included.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::bin_dir;
use common::etcd::assign_topic_t;
use epochal::kafka_client::{FetchOptions, KafkaClient};
use epochal::node::NodeId;
use epochal::runtime::{ClusterConfig, Link, ProcessRuntime, Runtime};
use epochal::topic_partition::PartitionRef;

const RECORDS: usize = 10_000;
const READY: Duration = Duration::from_secs(30);
/// The client's own bound on sending and flushing everything.
const CLIENT_DEADLINE: Duration = Duration::from_secs(150);
/// A little more than the client's, for its exit and final line.
const CLIENT_EXIT: Duration = Duration::from_secs(170);
/// How long the client may take to deliver its first records.
const FIRST_DELIVERIES: Duration = Duration::from_secs(60);
/// A new leader after the crash: the dead broker's lease (6 s by default)
/// must lapse first.
const FAILOVER: Duration = Duration::from_secs(40);
const CALL: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);
/// The leader is killed once this many records were delivered.
const KILL_AFTER: usize = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_defaults_deliver_each_record_once_through_a_leader_kill() {
    produce_through_a_leader_kill("kafka-python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_idempotent_delivers_each_record_once_through_a_leader_kill() {
    produce_through_a_leader_kill("confluent-kafka").await;
}

/// The client process, killed and reaped when dropped.
struct ClientProcess(Child);

impl Drop for ClientProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python() -> String {
    std::env::var("EPOCHAL_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

async fn produce_through_a_leader_kill(client: &str) {
    let run = tempfile::tempdir().unwrap();
    let mut runtime = ProcessRuntime::start(ClusterConfig::new(3, bin_dir(), run.path()))
        .await
        .unwrap();
    common::ready(&runtime, READY).await;
    assign_topic_t(runtime.etcd_endpoint(), r#"{"0":[1,2,3]}"#).await;
    let view = common::ready(&runtime, READY).await;
    let t0 = PartitionRef::new("t", 0);
    let leader = view.partitions[&t0].leader.expect("t-0 has a leader");

    let bootstrap: Vec<String> = runtime
        .nodes()
        .into_iter()
        .map(|node| {
            runtime
                .link_address(Link::ClientToBroker(node))
                .expect("every node has a client link")
                .to_owned()
        })
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/idempotent_produce.py");
    let python = python();
    let mut child = ClientProcess(
        Command::new(&python)
            .arg(&script)
            .args([
                client,
                &bootstrap.join(","),
                "t",
                &RECORDS.to_string(),
                &CLIENT_DEADLINE.as_secs().to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {python}: {e} (set EPOCHAL_PYTHON)")),
    );
    let lines = spawn_line_reader(child.0.stdout.take().unwrap());
    let stderr = child.0.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());

    // Kill the leader once the client is well under way, with batches in
    // flight, and restart it once another broker leads.
    let mut last = String::new();
    await_line(&lines, FIRST_DELIVERIES, &mut last, |line| {
        progress(line).is_some_and(|n| n >= KILL_AFTER)
    })
    .unwrap_or_else(|why| panic!("{client}: {why}; last line {last:?}"));
    runtime.kill_node(leader).await.unwrap();
    let new_leader = common::groups::await_new_leader(&runtime, &t0, leader, FAILOVER).await;
    runtime.start_node(leader).await.unwrap();

    let verdict = await_line(&lines, CLIENT_EXIT, &mut last, |line| line.starts_with('{'))
        .unwrap_or_else(|why| panic!("{client}: {why}; last line {last:?}"));
    let status = wait_exit(&mut child.0, Duration::from_secs(10));
    let stderr = stderr.join().unwrap_or_default();
    let verdict: serde_json::Value = serde_json::from_str(&verdict).unwrap();
    let delivered: Vec<u64> = serde_json::from_value(verdict["delivered"].clone()).unwrap();
    assert_eq!(
        status,
        Some(0),
        "{client} did not get an answer for every record in time; errors: {}; stderr: {stderr}",
        verdict["errors"]
    );

    let log = read_partition(&runtime, new_leader).await;
    let mut offsets: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for (offset, value) in &log {
        offsets.entry(*value).or_default().push(*offset);
    }
    let twice: Vec<_> = offsets.iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "{client}: idempotent producer's values at more than one offset: {:?}",
        &twice[..twice.len().min(20)]
    );
    let missing: Vec<u64> = delivered
        .iter()
        .copied()
        .filter(|value| !offsets.contains_key(value))
        .collect();
    assert!(
        missing.is_empty(),
        "{client}: {} delivered value(s) not in the final log, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    assert!(
        delivered.len() >= RECORDS * 9 / 10,
        "{client}: only {} of {RECORDS} delivered; errors: {}",
        delivered.len(),
        verdict["errors"]
    );
    runtime.shutdown().await.unwrap();
}

fn progress(line: &str) -> Option<usize> {
    line.strip_prefix("progress ")?.trim().parse().ok()
}

/// The child's stdout, line by line, on a channel (a thread reads it so the
/// test's waits can have deadlines).
fn spawn_line_reader(stdout: std::process::ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line within `timeout` that `wanted` accepts.
fn await_line(
    lines: &mpsc::Receiver<String>,
    timeout: Duration,
    last: &mut String,
    wanted: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if wanted(&line) => return Ok(line),
            Ok(line) => *last = line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(format!("no awaited line within {timeout:?}"));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err("the client exited before the awaited line".into());
            }
        }
    }
}

fn wait_exit(child: &mut Child, timeout: Duration) -> Option<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Every record of t-0 up to its high watermark, as (offset, value), read
/// from `node` directly (not through its proxy).
async fn read_partition(runtime: &ProcessRuntime, node: NodeId) -> Vec<(i64, u64)> {
    let addr = runtime
        .observe_address(node)
        .expect("the leader is running");
    let mut client = KafkaClient::connect(&addr, "real-clients-check", CALL)
        .await
        .unwrap();
    let mut out = Vec::new();
    let mut next = 0i64;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let fetched = client
            .fetch("t", 0, next, &FetchOptions::default(), CALL)
            .await
            .unwrap();
        for record in &fetched.records {
            let value = record.value.as_ref().expect("a value");
            let text = std::str::from_utf8(value).unwrap();
            out.push((record.offset, text.parse().unwrap()));
            next = record.offset + 1;
        }
        if next >= fetched.high_watermark {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "t-0 not read to its high watermark {} within 60 s (at {next})",
            fetched.high_watermark
        );
    }
}
