//! A group of three real consumers under broker faults ([groups]): three
//! members of one group, each its own kafka-python or confluent-kafka
//! (librdkafka) process, `subscribe()` to a 6-partition topic a
//! confluent-kafka producer keeps writing (acks=all, idempotent), and commit
//! after each poll, while the test SIGKILLs and restarts a partition leader,
//! then the group's coordinator, then SIGSTOPs the new coordinator until its
//! leadership moves, then a partition leader likewise. After the producer
//! stops, the members read on until every acknowledged record was consumed.
//!
//! What Kafka promises such a group, checked against what the members
//! reported and what the replicas hold on disk:
//! - every acknowledged record consumed at least once, at the offset the
//!   producer was told;
//! - none skipped: each partition's consumed offsets have no hole, and a
//!   member reads each partition it holds in order without a gap or a step
//!   back until its assignment changes;
//! - committed offsets monotone: each replica of the group's offsets
//!   partition holds the group's commits of a partition in non-decreasing
//!   order, every commit a member was told succeeded is among them, and no
//!   commit is beyond what was consumed.
//!
//! Every wait has a deadline; the client processes are killed on drop and
//! bound themselves by their own deadline; the cluster is shut down at the end
//! and killed on drop before it.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::etcd::assign_topic_t;
use common::groups;
use epochal::node::NodeId;
use epochal::reader::offsets_topic::offset_commits;
use epochal::reader::read_data_dir;
use epochal::runtime::{ProcessRuntime, Runtime};
use epochal::topic_partition::{OFFSETS_TOPIC, PartitionRef};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

const PARTITIONS: u32 = 6;
const MEMBERS: usize = 3;
const READY: Duration = Duration::from_secs(30);
const FAILOVER: Duration = Duration::from_secs(40);
/// How long the group may take to consume [`PROGRESS_RECORDS`] more after
/// a fault healed (rebalances, coordinator discovery, client back-offs).
const PROGRESS: Duration = Duration::from_secs(90);
const PROGRESS_RECORDS: usize = 200;
/// Commits acknowledged before the coordinator is killed: with 1 KiB
/// segments, more than one segment of the offsets partition holds them.
const COMMITS_BEFORE_THE_COORDINATOR_DIES: usize = 30;
const DRAIN: Duration = Duration::from_secs(120);
const EXIT: Duration = Duration::from_secs(60);
/// The client processes' own bound, far beyond the test's waits.
const CLIENT_DEADLINE: Duration = Duration::from_secs(600);
const GROUP: &str = "g-faults";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_group_of_three_consumes_everything_through_leader_and_coordinator_faults() {
    let violations = group_through_faults("kafka-python", &[]).await;
    assert!(violations.is_empty(), "{violations:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_group_of_three_consumes_everything_through_leader_and_coordinator_faults()
{
    let violations = group_through_faults("confluent-kafka", &[]).await;
    assert!(violations.is_empty(), "{violations:#?}");
}

/// The checks catch what they exist for: on `offsets_load = "kafka-5600"`
/// (Kafka 0.11.0.0's coordinator load, fixed in 0.11.0.1) with segments
/// of 1 KiB and 30 commits acknowledged before the coordinator dies, so the
/// group's commits span several segments of its offsets partition, the coordinator
/// that takes over after the kill or the pause loads an old commit; the
/// members rewind to it and commit offsets below the group's last, which the
/// replicas hold going backwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_kafka_5600_the_group_s_commits_go_backwards_on_disk() {
    let settings = [
        ("offsets_load", toml::Value::String("kafka-5600".to_owned())),
        ("segment_bytes", toml::Value::Integer(1024)),
    ];
    let violations = group_through_faults("confluent-kafka", &settings).await;
    eprintln!("{violations:#?}");
    assert!(
        violations.iter().any(|v| v.contains("going back")),
        "no commit went backwards on kafka-5600: {violations:#?}"
    );
}

/// What one client process reported, line by line, in arrival order.
#[derive(Default)]
struct Reports {
    lines: Vec<(usize, Value)>,
}

impl Reports {
    /// Records consumed, or (`"committed"`) commits acknowledged.
    fn count(&self, what: &str) -> usize {
        let lines = self.lines.iter().filter_map(|(_, line)| line.get(what));
        if what == "poll" {
            lines.filter_map(Value::as_array).map(Vec::len).sum()
        } else {
            lines.count()
        }
    }
}

/// A client process: stdin closed tells it to stop; its reader task files
/// every JSON line under `index`; stderr is kept for the failure message.
struct Client {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<String>>,
}

fn spawn(name: String, args: &[&str], index: usize, reports: &Arc<Mutex<Reports>>) -> Client {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/group_member.py");
    let python = groups::python();
    let mut child = Command::new(&python)
        .arg(&script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e} (set EPOCHAL_PYTHON)"));
    let stdout = child.stdout.take().unwrap();
    let reports = Arc::clone(reports);
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let value: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| Value::String(format!("unparsed line {line:?}: {e}")));
            reports.lock().unwrap().lines.push((index, value));
        }
    });
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err = child.stderr.take().unwrap();
    let sink = Arc::clone(&stderr);
    tokio::spawn(async move {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text).await;
        sink.lock().unwrap().push_str(&text);
    });
    Client {
        name,
        stdin: child.stdin.take(),
        child,
        stderr,
    }
}

impl Client {
    /// Closes its stdin and waits for it to exit 0 within [`EXIT`].
    async fn stop(&mut self) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(EXIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} did not exit within {EXIT:?} of being told", self.name))
            .unwrap();
        assert!(
            status.success(),
            "{} exited {status}; stderr: {}",
            self.name,
            self.stderr.lock().unwrap()
        );
    }
}

/// Waits for `more` records consumed (`"poll"`) or commits acknowledged
/// (`"committed"`) since the call.
async fn await_more(reports: &Arc<Mutex<Reports>>, what: &str, more: usize, after: &str) {
    let start = reports.lock().unwrap().count(what);
    let deadline = Instant::now() + PROGRESS;
    loop {
        let now = reports.lock().unwrap().count(what);
        if now >= start + more {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the group had {} more {what} in {PROGRESS:?} after {after} (wanted {more})",
            now - start
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn heal(runtime: &ProcessRuntime, reports: &Arc<Mutex<Reports>>, what: &str) {
    common::ready(runtime, READY).await;
    await_more(reports, "poll", PROGRESS_RECORDS, what).await;
    eprintln!("{what}: healed, the group consumed on");
}

/// Runs the group through the faults on brokers with `settings`; what the
/// checks found wrong.
async fn group_through_faults(client: &str, settings: &[(&str, toml::Value)]) -> Vec<String> {
    let run = tempfile::tempdir().unwrap();
    let mut runtime = groups::start_cluster(run.path(), READY, settings).await;
    let replicas: BTreeMap<String, [u32; 3]> = (0..PARTITIONS)
        .map(|p| {
            let first = p % 3 + 1;
            let order = if p < 3 {
                [first, first % 3 + 1, (first + 1) % 3 + 1]
            } else {
                [first, (first + 1) % 3 + 1, first % 3 + 1]
            };
            (p.to_string(), order)
        })
        .collect();
    assign_topic_t(
        runtime.etcd_endpoint(),
        &serde_json::to_string(&replicas).unwrap(),
    )
    .await;
    common::ready(&runtime, READY).await;
    let bootstrap = groups::bootstrap(&runtime);

    let reports = Arc::new(Mutex::new(Reports::default()));
    let deadline = CLIENT_DEADLINE.as_secs().to_string();
    let partitions = PARTITIONS.to_string();
    let mut producer = spawn(
        "the producer".to_owned(),
        &["produce", &bootstrap, "t", &partitions, &deadline],
        MEMBERS,
        &reports,
    );
    let mut members: Vec<Client> = (0..MEMBERS)
        .map(|i| {
            spawn(
                format!("{client} member {i}"),
                &["consume", client, &bootstrap, "t", GROUP, &deadline],
                i,
                &reports,
            )
        })
        .collect();
    await_more(&reports, "poll", PROGRESS_RECORDS, "the group formed").await;

    // A partition leader SIGKILLed and restarted once another leads.
    let t0 = PartitionRef::new("t", 0);
    let leader = groups::view(&runtime).await.leader_of(&t0).unwrap();
    runtime.kill_node(leader).await.unwrap();
    groups::await_new_leader(&runtime, &t0, leader, FAILOVER).await;
    runtime.start_node(leader).await.unwrap();
    heal(
        &runtime,
        &reports,
        &format!("killing {leader}, t-0's leader"),
    )
    .await;

    // The coordinator likewise, once the group's commits fill several
    // segments where segments are small (the kafka-5600 test's premise).
    await_more(
        &reports,
        "committed",
        COMMITS_BEFORE_THE_COORDINATOR_DIES,
        "a restart",
    )
    .await;
    let offsets = groups::offsets_partition(GROUP);
    let coordinator = groups::coordinator_of(&groups::view(&runtime).await, GROUP);
    runtime.kill_node(coordinator).await.unwrap();
    groups::await_new_leader(&runtime, &offsets, coordinator, FAILOVER).await;
    runtime.start_node(coordinator).await.unwrap();
    heal(
        &runtime,
        &reports,
        &format!("killing {coordinator}, the coordinator"),
    )
    .await;

    // The new coordinator paused until its leadership moves, then resumed.
    let coordinator = groups::coordinator_of(&groups::view(&runtime).await, GROUP);
    pause_until_deposed(&mut runtime, coordinator, &offsets).await;
    heal(
        &runtime,
        &reports,
        &format!("pausing {coordinator}, the coordinator"),
    )
    .await;

    // A partition leader that is not the coordinator likewise.
    let view = groups::view(&runtime).await;
    let coordinator = groups::coordinator_of(&view, GROUP);
    let (partition, leader) = (0..PARTITIONS)
        .map(|p| PartitionRef::new("t", p))
        .find_map(|p| {
            view.leader_of(&p)
                .filter(|l| *l != coordinator)
                .map(|l| (p, l))
        })
        .expect("some partition of t is led by a broker other than the coordinator");
    pause_until_deposed(&mut runtime, leader, &partition).await;
    heal(
        &runtime,
        &reports,
        &format!("pausing {leader}, {partition}'s leader"),
    )
    .await;

    producer.stop().await;
    let acked = acked_records(&reports.lock().unwrap());
    assert!(!acked.is_empty(), "the producer had nothing acknowledged");
    await_everything_consumed(&reports, &acked).await;
    for member in &mut members {
        member.stop().await;
    }

    let data_dirs: Vec<(NodeId, std::path::PathBuf)> = runtime
        .nodes()
        .into_iter()
        .map(|node| (node, runtime.data_dir(node).unwrap()))
        .collect();
    runtime.shutdown().await.unwrap();

    let reports = reports.lock().unwrap();
    let mut violations = check_consumed(client, &reports, &acked);
    violations.extend(check_commits(client, &reports, &data_dirs, &offsets));
    violations
}

/// SIGSTOPs `node` until etcd names another leader of `partition`, then
/// SIGCONTs it.
async fn pause_until_deposed(runtime: &mut ProcessRuntime, node: NodeId, partition: &PartitionRef) {
    runtime.pause_node(node).await.unwrap();
    groups::await_new_leader(runtime, partition, node, FAILOVER).await;
    runtime.resume_node(node).await.unwrap();
}

type Record = (u32, i64, String);

fn acked_records(reports: &Reports) -> BTreeSet<Record> {
    reports
        .lines
        .iter()
        .filter_map(|(_, line)| line["acked"].as_array())
        .map(|a| record(a))
        .collect()
}

fn record(fields: &[Value]) -> Record {
    // confluent-kafka gives a delivery report no offset (`msg.offset()`
    // None) when librdkafka has none for it: the broker answered the
    // Produce with base offset -1 and no error, or with
    // DUPLICATE_SEQUENCE_NUMBER, which librdkafka counts as delivered
    // (rdkafka_request.c). Neither should come from this broker; seen once
    // under this test's faults, cause not yet found, so it fails the test
    // by name rather than by a bare unwrap.
    let offset = fields[1].as_i64().unwrap_or_else(|| {
        panic!("a delivery report without an offset (broker answered base offset -1?): {fields:?}")
    });
    (
        fields[0].as_u64().unwrap() as u32,
        offset,
        fields[2].as_str().unwrap().to_owned(),
    )
}

fn consumed_records(reports: &Reports) -> BTreeSet<Record> {
    reports
        .lines
        .iter()
        .filter_map(|(_, line)| line["poll"].as_array())
        .flatten()
        .map(|r| record(r.as_array().unwrap()))
        .collect()
}

async fn await_everything_consumed(reports: &Arc<Mutex<Reports>>, acked: &BTreeSet<Record>) {
    let deadline = Instant::now() + DRAIN;
    loop {
        let consumed = consumed_records(&reports.lock().unwrap());
        let missing: Vec<&Record> = acked.difference(&consumed).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} acknowledged records never consumed within {DRAIN:?} of the producer \
             stopping (e.g. {:?})",
            missing.len(),
            acked.len(),
            &missing[..missing.len().min(5)]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// At least once, at the acknowledged offset, no hole in any partition, and
/// each member's reads of a partition in order while it holds it.
fn check_consumed(client: &str, reports: &Reports, acked: &BTreeSet<Record>) -> Vec<String> {
    let mut violations = Vec::new();
    let consumed = consumed_records(reports);
    let missing: Vec<&Record> = acked.difference(&consumed).collect();
    if !missing.is_empty() {
        violations.push(format!(
            "{client}: acknowledged but never consumed (or consumed at another offset): {:?}",
            &missing[..missing.len().min(5)]
        ));
    }
    let mut offsets: BTreeMap<u32, BTreeSet<i64>> = BTreeMap::new();
    for (partition, offset, _) in &consumed {
        offsets.entry(*partition).or_default().insert(*offset);
    }
    for (partition, read) in &offsets {
        let last = *read.last().unwrap();
        let holes: Vec<i64> = (0..=last).filter(|o| !read.contains(o)).collect();
        if !holes.is_empty() {
            violations.push(format!(
                "{client}: t-{partition} offsets below {last} no member consumed: {:?}",
                &holes[..holes.len().min(10)]
            ));
        }
    }

    // Per member: the offset after its last read of each partition it holds.
    let mut rebalances = 0;
    let mut next: Vec<BTreeMap<u32, i64>> = vec![BTreeMap::new(); MEMBERS];
    for (member, line) in &reports.lines {
        if line.get("assigned").is_some() || line.get("revoked").is_some() {
            rebalances += usize::from(line.get("assigned").is_some());
            next[*member].clear();
        }
        for r in line["poll"].as_array().into_iter().flatten() {
            let (partition, offset, _) = record(r.as_array().unwrap());
            if let Some(expected) = next[*member].get(&partition).filter(|e| **e != offset) {
                violations.push(format!(
                    "{client}: member {member} read t-{partition} offset {offset} after \
                     {} with no rebalance between (a skip or a step back)",
                    expected - 1
                ));
            }
            next[*member].insert(partition, offset + 1);
        }
    }
    let failed = |what: &str| {
        reports
            .lines
            .iter()
            .filter(|(_, l)| l.get(what).is_some())
            .count()
    };
    eprintln!(
        "{client}: {} acknowledged, {} distinct records consumed, {rebalances} assignments, \
         {} polls and {} commits failed",
        acked.len(),
        consumed.len(),
        failed("poll_failed"),
        failed("commit_failed")
    );
    violations
}

/// Each replica of the group's offsets partition, read from disk: the
/// group's commits per partition in non-decreasing order, none beyond what
/// was consumed; the longest replica holds every acknowledged commit.
fn check_commits(
    client: &str,
    reports: &Reports,
    data_dirs: &[(NodeId, std::path::PathBuf)],
    offsets: &PartitionRef,
) -> Vec<String> {
    let mut violations = Vec::new();
    let consumed = consumed_records(reports);
    let mut end: BTreeMap<u32, i64> = BTreeMap::new();
    for (partition, offset, _) in &consumed {
        let e = end.entry(*partition).or_default();
        *e = (*e).max(offset + 1);
    }
    let mut longest: Option<Vec<(u32, i64)>> = None;
    for (node, dir) in data_dirs {
        let state = read_data_dir(dir).unwrap();
        let Some(replica) = state.replica(OFFSETS_TOPIC, offsets.partition as i32) else {
            continue;
        };
        let commits: Vec<(u32, i64)> = offset_commits(replica)
            .unwrap_or_else(|e| panic!("{node}'s replica of {offsets}: {e}"))
            .into_iter()
            .filter(|c| c.group == GROUP && c.topic == "t")
            .map(|c| {
                let committed = c.committed.unwrap_or_else(|| {
                    panic!("{node}: the group's commit of t-{} deleted", c.partition)
                });
                (c.partition as u32, committed)
            })
            .collect();
        let mut last: BTreeMap<u32, i64> = BTreeMap::new();
        for (partition, committed) in &commits {
            if let Some(before) = last.insert(*partition, *committed)
                && *committed < before
            {
                violations.push(format!(
                    "{client}: {node}'s replica of {offsets} holds t-{partition}'s commit \
                     going back from {before} to {committed}"
                ));
            }
            if *committed > end.get(partition).copied().unwrap_or(0) {
                violations.push(format!(
                    "{client}: {node} holds a commit of t-{partition} at {committed}, beyond \
                     what any member consumed"
                ));
            }
        }
        if longest.as_ref().is_none_or(|l| commits.len() > l.len()) {
            longest = Some(commits);
        }
    }
    let longest = longest.unwrap_or_else(|| panic!("no replica of {offsets} on disk"));
    let held: BTreeSet<(u32, i64)> = longest.iter().copied().collect();
    let acknowledged: BTreeSet<(u32, i64)> = reports
        .lines
        .iter()
        .filter_map(|(_, line)| line["committed"].as_object())
        .flatten()
        .map(|(p, o)| (p.parse().unwrap(), o.as_i64().unwrap()))
        .collect();
    let lost: Vec<&(u32, i64)> = acknowledged.difference(&held).collect();
    if !lost.is_empty() {
        violations.push(format!(
            "{client}: commits acknowledged to a member but on no replica of {offsets}: {:?}",
            &lost[..lost.len().min(5)]
        ));
    }
    assert!(!acknowledged.is_empty(), "{client}: no commit acknowledged");
    eprintln!(
        "{client}: {} commits acknowledged, {} on disk",
        acknowledged.len(),
        longest.len()
    );
    violations
}
