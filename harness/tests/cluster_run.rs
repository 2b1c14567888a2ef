//! `epochal run` end to end, as a user runs it: the real binary, a real etcd,
//! the proxy and three brokers, schedules from `tests/schedules/`. Each run's
//! store is a temp dir; the assertions read what the run left there.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use common::scenario::{
    await_harness_log, broker_log, epochal, inspect_t0, interrupt, latest, read_results,
    run_quietly, show,
};
use epochal::history::{Op, OpType, Process, read_history};
use serde_json::Value;

fn schedule(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedules")
        .join(name)
}

/// The completions of nemesis ops with this `f`.
fn nemesis<'a>(ops: &'a [Op], f: &str) -> Vec<&'a Op> {
    ops.iter()
        .filter(|op| op.process == Process::Nemesis && op.kind == OpType::Info && op.f() == f)
        .collect()
}

fn nodes(op: &Op) -> Vec<String> {
    serde_json::from_value(op.value()["nodes"].clone()).unwrap()
}

#[test]
fn cluster_run_kills_the_leader_and_keeps_history_logs_and_identical_replicas() {
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule("crash_restart.toml"), store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("status: completed"), "{stdout}");
    assert!(
        stdout.contains("t-0: records identical on b1, b2, b3"),
        "{stdout}"
    );

    let dir = latest(store.path());
    assert!(
        dir.starts_with(std::fs::canonicalize(store.path().join("adhoc/crash_restart")).unwrap())
    );
    let applied = std::fs::read_to_string(dir.join("schedule.toml")).unwrap();
    assert!(applied.contains("min_insync_replicas = 2"), "{applied}");
    assert!(
        std::fs::read_to_string(dir.join("harness.log"))
            .unwrap()
            .contains("completed")
    );

    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    let crash = nemesis(&ops, "crash");
    assert_eq!(crash.len(), 1);
    assert_eq!(crash[0].value()["target"], "leader of t-0");
    assert_eq!(nodes(crash[0]), ["b1"]);
    let sends: Vec<&Op> = ops
        .iter()
        .filter(|op| op.f() == "send" && op.kind == OpType::Ok)
        .collect();
    assert_eq!(sends.len(), 2);
    assert_eq!(sends[0].value()["node"], "b1");
    assert_eq!(sends[0].value()["offsets"], serde_json::json!([0, 1, 2]));
    assert_eq!(sends[1].value()["node"], "b2");
    assert_eq!(sends[1].value()["offsets"], serde_json::json!([3, 4]));
    let poll = ops
        .iter()
        .find(|op| op.f() == "poll" && op.kind == OpType::Ok)
        .unwrap();
    assert_eq!(
        poll.value()["records"],
        serde_json::json!([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])
    );

    // Every node's log and frozen data dir are in the store, and the replicas
    // are the same record for record, epoch for epoch.
    let expected = serde_json::json!([
        [0, 0, "1"],
        [1, 0, "2"],
        [2, 0, "3"],
        [3, 1, "4"],
        [4, 1, "5"]
    ]);
    for node in ["b1", "b2", "b3"] {
        assert!(broker_log(&dir, node).contains("broker ready"));
        assert_eq!(inspect_t0(&dir, node), expected, "{node}");
    }
    // b1 was killed and started again: two incarnations in one log.
    assert_eq!(broker_log(&dir, "b1").matches("broker ready").count(), 2);
}

#[test]
fn cluster_run_fires_every_fault_kind_and_records_what_each_resolved_to() {
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule("every_fault.toml"), store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(store.path());
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");

    let one = |f: &str| -> &Op {
        let found = nemesis(&ops, f);
        assert_eq!(found.len(), 1, "{f}: {found:?}");
        assert_eq!(found[0].error, None, "{f}");
        found[0]
    };
    // Targets resolved when fired: the leader was b1, then b2 led and its
    // lowest in-sync follower was b1.
    assert_eq!(nodes(one("pause")), ["b1"]);
    assert_eq!(nodes(one("resume")), ["b1"]);
    assert_eq!(nodes(one("stop")), ["b3"]);
    assert_eq!(nodes(one("start")), ["b3"]);
    assert_eq!(nodes(one("power-loss")), ["b3"]);
    assert_eq!(nodes(one("crash")), ["b1"]);
    assert_eq!(nodes(one("truncate-log")), ["b1"]);
    assert_eq!(nodes(one("isolate")), ["b3"]);
    assert_eq!(nodes(one("one-way")), ["b2", "b3"]);
    assert_eq!(nodes(one("node-from-etcd")), ["b3"]);
    assert_eq!(nemesis(&ops, "heal").len(), 3);

    // Partitions name the directed pairs they cut.
    let blocked = |f: &str| -> Vec<String> {
        serde_json::from_value(one(f).value()["blocked"].clone()).unwrap()
    };
    assert_eq!(blocked("one-way"), ["b2->b3"]);
    assert_eq!(blocked("node-from-etcd"), ["b3->etcd", "etcd->b3"]);
    let isolate = blocked("isolate");
    for pair in [
        "b3->b1", "b1->b3", "b3->b2", "b2->b3", "b3->etcd", "etcd->b3",
    ] {
        assert!(isolate.iter().any(|p| p == pair), "{pair} in {isolate:?}");
    }

    // The disk faults say what they cut: power loss took b3 back to its
    // recovery point (3) from 5; truncate-log took b1 to offset 1.
    let power = one("power-loss").value().to_string();
    assert!(power.contains("\"log_end_offset_before\":5"), "{power}");
    assert!(power.contains("\"log_end_offset_after\":3"), "{power}");
    let truncated = one("truncate-log").value().to_string();
    assert!(
        truncated.contains("\"log_end_offset_after\":1"),
        "{truncated}"
    );

    // A stop is a clean shutdown; a crash and a power loss are not.
    assert!(broker_log(&dir, "b3").contains("stopped cleanly"));
    assert!(!broker_log(&dir, "b1").contains("stopped cleanly"));
    assert_eq!(broker_log(&dir, "b1").matches("broker ready").count(), 2);
    assert_eq!(broker_log(&dir, "b3").matches("broker ready").count(), 3);

    // After all of it, one log on every replica.
    let b2 = inspect_t0(&dir, "b2");
    assert_eq!(b2.as_array().unwrap().len(), 6, "{b2}");
    for node in ["b1", "b3"] {
        assert_eq!(inspect_t0(&dir, node), b2, "{node}");
    }
}

#[test]
fn cluster_run_node_from_clients_cuts_only_the_clients_link() {
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule("node_from_clients.toml"), store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(store.path());
    assert_eq!(read_results(&dir)["verdict"], "valid");
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    let cut = nemesis(&ops, "node-from-clients");
    assert_eq!(cut.len(), 1, "{cut:?}");
    assert_eq!(nodes(cut[0]), ["b1"]);
    assert_eq!(
        cut[0].value()["blocked"],
        serde_json::json!(["b1->clients", "clients->b1"])
    );
    let heal = nemesis(&ops, "heal");
    assert_eq!(
        heal[0].value()["healed"],
        serde_json::json!(["client-b1:Upstream", "client-b1:Downstream"])
    );
    // The send during the cut got no answer; the ones around it did.
    let sends: Vec<(OpType, Value)> = ops
        .iter()
        .filter(|op| op.f() == "send" && op.kind != OpType::Invoke)
        .map(|op| (op.kind, op.value()["values"].clone()))
        .collect();
    assert_eq!(sends.len(), 3, "{sends:?}");
    assert_eq!(sends[0], (OpType::Ok, serde_json::json!([1, 2])));
    assert_ne!(sends[1].0, OpType::Ok, "{sends:?}");
    assert_eq!(sends[2], (OpType::Ok, serde_json::json!([4])));
    // The harness's look during the cut went to b1's own port: it saw b1 lead.
    let log = std::fs::read_to_string(dir.join("harness.log")).unwrap();
    assert!(
        log.contains("step 5: leader of t-0 is b1 in epoch 0"),
        "{log}"
    );
    // Reset at heal, the held send never reached a replica.
    let expected = serde_json::json!([[0, 0, "1"], [1, 0, "2"], [2, 0, "4"]]);
    for node in ["b1", "b2", "b3"] {
        assert_eq!(inspect_t0(&dir, node), expected, "{node}");
    }
}

#[test]
fn cluster_run_interrupted_leaves_no_child_and_a_valid_history() {
    let store = tempfile::tempdir().unwrap();
    let mut child = epochal()
        .arg("run")
        .arg(schedule("await_forever.toml"))
        .arg("--store")
        .arg(store.path())
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the run is inside its long await, with writes acknowledged.
    await_harness_log(
        store.path(),
        "await b2 is stopped",
        &mut child,
        Duration::from_secs(90),
    );
    let pids = common::children(child.id());
    // etcd, the proxy and three brokers.
    assert_eq!(pids.len(), 5, "children {pids:?}");
    let status = interrupt(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "exit status {status}");
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "child {pid} is still there after SIGINT"
        );
    }
    let dir = latest(store.path());
    let ops = read_history(dir.join("history.jsonl")).expect("the history so far is valid");
    let acked = ops
        .iter()
        .filter(|op| op.f() == "send" && op.kind == OpType::Ok)
        .count();
    assert_eq!(acked, 1, "{ops:?}");
    assert!(dir.join("nodes/b1/broker.log").is_file());
}

#[test]
fn cluster_run_killed_outright_leaves_orphans_that_gc_kills_and_a_run_check_calls_unknown() {
    let store = tempfile::tempdir().unwrap();
    // A private ledger directory, so this test's gc sees only its own harness.
    let ledgers = tempfile::tempdir().unwrap();
    let mut child = epochal()
        .arg("run")
        .arg(schedule("await_forever.toml"))
        .arg("--store")
        .arg(store.path())
        .arg("--quiet")
        .env("EPOCHAL_LEDGER_DIR", ledgers.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_harness_log(
        store.path(),
        "await b2 is stopped",
        &mut child,
        Duration::from_secs(90),
    );
    let pids = common::children(child.id());
    assert_eq!(pids.len(), 5, "children {pids:?}");
    // etcd's data in memory, in a directory named as the harness's ledger is.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
    let start = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_owned();
    let memory = epochal::runtime::orphans::etcd_memory_root()
        .map(|root| root.join(format!("{}-{start}", child.id())));
    if let Some(memory) = &memory {
        assert!(
            memory.is_dir(),
            "no etcd data in memory at {}",
            memory.display()
        );
    }
    // SIGKILL: no handler runs, and the children are left behind.
    child.kill().unwrap();
    child.wait().unwrap();
    for pid in &pids {
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "child {pid} died with the harness: nothing to reap"
        );
    }
    let output = epochal()
        .arg("gc")
        .env("EPOCHAL_LEDGER_DIR", ledgers.path())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .contains("killed 5 process groups left by 1 killed harnesses"),
        "{}",
        show(&output)
    );
    if let Some(memory) = &memory {
        assert!(
            !memory.exists(),
            "gc left the killed harness's etcd data in memory: {}\n{}",
            memory.display(),
            show(&output)
        );
    }
    for pid in &pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|at| stat[at + 1..].split_whitespace().next().map(str::to_owned));
        assert!(
            state.is_none() || state.as_deref() == Some("Z"),
            "child {pid} survived gc: {stat}"
        );
    }
    // The run's files: whole history lines, and a check that says why it
    // cannot judge.
    let dir = latest(store.path());
    read_history(dir.join("history.jsonl")).expect("the history so far is valid");
    let output = epochal().arg("check").arg(&dir).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("did not finish"),
        "{}",
        show(&output)
    );
}

fn expect_usage_error(output: &Output, mentions: &[&str]) {
    assert_eq!(output.status.code(), Some(3), "{}", show(output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for m in mentions {
        assert!(stderr.contains(m), "stderr should mention {m:?}:\n{stderr}");
    }
}

const HEAD: &str = r#"[cluster]
brokers = 3

[[cluster.topic]]
name = "t"
partitions = 1
replication_factor = 3
"#;

#[test]
fn run_rejects_a_malformed_schedule_naming_line_and_key_before_starting_anything() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let cases: &[(&str, &[&str])] = &[
        // A typo in a step key: line 10, key `awiat`.
        (
            "[[step]]\nawiat = \"leader of t-0 is b1\"\n",
            &["typo.toml:10:", "awiat"],
        ),
        ("[[step]]\nfault = { crash = \"b7\" }\n", &["b7"]),
        (
            "[[step]]\nproduce = { partition = \"t-9\", values = [1] }\n",
            &["t-9"],
        ),
        (
            "[cluster.settings]\nflush_everything = true\n",
            &["flush_everything"],
        ),
    ];
    for (body, mentions) in cases {
        let file = dir.path().join("typo.toml");
        std::fs::write(&file, format!("{HEAD}\n{body}")).unwrap();
        expect_usage_error(&run_quietly(&file, &store, &[]), mentions);
    }
    let file = dir.path().join("fine.toml");
    std::fs::write(&file, HEAD).unwrap();
    expect_usage_error(
        &run_quietly(&file, &store, &["--set", "bogus=1"]),
        &["bogus"],
    );
    expect_usage_error(
        &run_quietly(&file, &store, &["--set", "truncation=sideways"]),
        &["truncation", "sideways"],
    );
    expect_usage_error(
        &run_quietly(&dir.path().join("absent.toml"), &store, &[]),
        &["absent.toml"],
    );
    // Nothing was started, so nothing was stored.
    assert!(!store.join("adhoc").exists());
}

#[test]
fn run_names_missing_binaries_as_a_harness_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fine.toml");
    std::fs::write(&file, HEAD).unwrap();
    let output = epochal()
        .arg("run")
        .arg(&file)
        .arg("--store")
        .arg(dir.path().join("store"))
        .arg("--quiet")
        .env("EPOCHAL_BIN_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("epochal-broker") && stderr.contains("epochal-proxy"),
        "{stderr}"
    );
}

#[test]
fn cluster_run_an_acks_1_write_lost_to_an_unclean_election_is_counted_and_valid() {
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule("unclean_acks_1.toml"), store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("lost-acks-1: 1"), "{stdout}");
    assert!(stdout.contains("verdict: valid"), "{stdout}");
    let dir = latest(store.path());
    let results = read_results(&dir);
    let lost = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "lost-write")
        .unwrap()
        .clone();
    assert_eq!(lost["verdict"], "valid", "{lost}");
    assert_eq!(lost["counts"]["lost-acks-1"], 1, "{lost}");
    // Reported by value: 2 was acked with acks=1 at offset 1.
    assert_eq!(
        lost["evidence"][0]["anomaly"], "lost-acks-1-write",
        "{lost}"
    );
    assert!(
        lost["evidence"][0]["summary"]
            .as_str()
            .unwrap()
            .contains("value 2 acked at offset 1"),
        "{lost}"
    );
    // The loss came from an unclean election, which etcd's timeline shows:
    // b2 led epoch 1 though the ISR before it was [1].
    let timeline: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("timeline.json")).unwrap()).unwrap();
    let states = timeline["partition_states"].as_array().unwrap();
    assert!(
        states
            .windows(2)
            .any(|w| w[1]["leader"] == 2 && w[0]["isr"] == serde_json::json!([1])),
        "{timeline}"
    );
}

#[test]
fn cluster_run_an_await_that_times_out_is_unknown_naming_the_condition() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("never.toml");
    std::fs::write(
        &file,
        format!("{HEAD}\n[[step]]\nawait = \"b2 is stopped\"\ntimeout_ms = 500\n"),
    )
    .unwrap();
    let store = dir.path().join("store");
    let output = run_quietly(&file, &store, &[]);
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("status: unknown: step 1: await \"b2 is stopped\" not within 500ms"),
        "{stdout}"
    );
    // Offline, the stored run is unknown for the same reason.
    let checked = epochal().arg("check").arg(latest(&store)).output().unwrap();
    assert_eq!(checked.status.code(), Some(2), "{}", show(&checked));
    assert!(String::from_utf8_lossy(&checked.stdout).contains("b2 is stopped"));
    // Replaying the stored run applies the same schedule under the same name.
    let replayed = epochal()
        .arg("replay")
        .arg(latest(&store))
        .arg("--store")
        .arg(&store)
        .arg("--quiet")
        .output()
        .unwrap();
    assert_eq!(replayed.status.code(), Some(2), "{}", show(&replayed));
    let runs = std::fs::read_dir(store.join("adhoc/never"))
        .unwrap()
        .count();
    assert_eq!(runs, 2);
}

#[test]
fn cluster_run_sends_keyed_padded_values_one_request_each_and_checks_them_as_values() {
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule("produce_options.toml"), store.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(store.path());
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    // One op per value for the first step, in order, each at its own offset.
    let sends: Vec<&Op> = ops
        .iter()
        .filter(|op| op.f() == "send" && op.kind == OpType::Ok)
        .collect();
    let offsets: Vec<Value> = sends
        .iter()
        .map(|op| op.value()["offsets"].clone())
        .collect();
    assert_eq!(
        offsets,
        [
            serde_json::json!([0]),
            serde_json::json!([1]),
            serde_json::json!([2]),
            serde_json::json!([3])
        ]
    );
    // A poll reads the values, not their padding.
    let poll = ops
        .iter()
        .find(|op| op.f() == "poll" && op.kind == OpType::Ok)
        .unwrap();
    assert_eq!(
        poll.value()["records"],
        serde_json::json!([[0, 1], [1, 2], [2, 3]])
    );
    // On disk: 64-byte values, keyed where the step said so.
    let state = epochal::reader::read_data_dir(&dir.join("nodes/b2/data")).unwrap();
    let replica = state.replica("t", 0).unwrap();
    let records: Vec<(Option<String>, String)> = replica
        .records()
        .map(|(_, r)| {
            (
                r.key.as_ref().map(|k| k.to_string()),
                r.value.as_ref().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(records.len(), 4);
    for (i, (key, value)) in records.iter().enumerate() {
        assert_eq!(value.len(), 64, "{value:?}");
        assert!(value.starts_with(&format!("{} ..", i + 1)), "{value:?}");
        let want_key = (i < 3).then(|| "k".to_owned());
        assert_eq!(key, &want_key);
    }
    // Every checker found the values it was told were acknowledged.
    let results = read_results(&dir);
    assert_eq!(results["verdict"], "valid", "{results}");
    let lost = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "lost-write")
        .unwrap();
    assert_eq!(lost["counts"]["acknowledged"], 4, "{lost}");
}
