//! KIP-101 scenario 1 (`suites/kip-101-scenario-1.toml`) end to end: the real
//! `epochal` binary, a real etcd, the proxy and two brokers. Under
//! `truncation=high-watermark` the follower A (b2) restarts, truncates to its
//! checkpointed HW, and is cleanly elected when B (b1) dies at once: an
//! acknowledged acks=all write is lost. Under the epoch-based settings A does not
//! cut before hearing from the leader, and every acknowledged write survives.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use epochal::history::{Op, OpType, Process, read_history};
use epochal::reader::state_change::{StateChange, read_state_changes};
use serde_json::Value;

fn schedule() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/kip-101-scenario-1.toml")
}

fn epochal() -> Command {
    Command::new(env!("CARGO_BIN_EXE_epochal"))
}

fn show(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// What one run of the scenario left in its store.
struct Run {
    _store: tempfile::TempDir,
    dir: PathBuf,
    ops: Vec<Op>,
}

/// Runs the schedule under `truncation`; the run must complete with the
/// verdict `expect` (exit 0 valid, 1 invalid), and `epochal check` on the
/// stored run, with no cluster, must say the same.
fn run(truncation: &str, expect: i32) -> Run {
    let store = tempfile::tempdir().unwrap();
    let output = epochal()
        .arg("run")
        .arg(schedule())
        .arg("--store")
        .arg(store.path())
        .arg("--quiet")
        .arg("--set")
        .arg(format!("truncation={truncation}"))
        .output()
        .expect("epochal runs");
    assert_eq!(output.status.code(), Some(expect), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(stdout.contains("status: completed"), "{}", show(&output));
    let dir = std::fs::canonicalize(store.path().join("latest")).unwrap();
    let checked = epochal().arg("check").arg(&dir).output().unwrap();
    assert_eq!(checked.status.code(), Some(expect), "{}", show(&checked));
    // The offline report is the run's, line for line.
    let report = |text: &str| text[text.find("checks:").unwrap()..].to_owned();
    assert_eq!(
        report(&String::from_utf8_lossy(&checked.stdout)),
        report(&stdout)
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let verdict = if expect == 0 { "valid" } else { "invalid" };
    assert_eq!(results["verdict"], verdict, "{results}");
    let applied = std::fs::read_to_string(dir.join("schedule.toml")).unwrap();
    assert!(
        applied.contains(&format!("truncation = \"{truncation}\"")),
        "{applied}"
    );
    // A loss under unclean election would be legitimate; this one must not be.
    assert!(
        applied.contains("unclean_leader_election = false"),
        "{applied}"
    );
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    Run {
        _store: store,
        dir,
        ops,
    }
}

impl Run {
    /// The acknowledged sends: value → offset, each acks=all.
    fn acked(&self) -> BTreeMap<i64, i64> {
        let mut acked = BTreeMap::new();
        for op in self
            .ops
            .iter()
            .filter(|op| op.f == "send" && op.kind == OpType::Ok)
        {
            assert_eq!(op.value["acks"], "all", "{op:?}");
            let values = op.value["values"].as_array().unwrap();
            let offsets = op.value["offsets"].as_array().unwrap();
            assert_eq!(values.len(), offsets.len(), "{op:?}");
            for (v, o) in values.iter().zip(offsets) {
                acked.insert(v.as_i64().unwrap(), o.as_i64().unwrap());
            }
        }
        acked
    }

    /// The ok send that acknowledged `value`.
    fn send_of(&self, value: i64) -> &Op {
        self.ops
            .iter()
            .find(|op| {
                op.f == "send"
                    && op.kind == OpType::Ok
                    && op.value["values"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|v| v.as_i64() == Some(value))
            })
            .unwrap_or_else(|| panic!("no ok send of {value}"))
    }

    /// (f, nodes) of every completed nemesis op, in order.
    fn nemesis(&self) -> Vec<(String, Vec<String>)> {
        self.ops
            .iter()
            .filter(|op| op.process == Process::Nemesis && op.kind == OpType::Info)
            .map(|op| {
                (
                    op.f.clone(),
                    serde_json::from_value(op.value["nodes"].clone()).unwrap(),
                )
            })
            .collect()
    }

    fn state_changes(&self, node: &str) -> Vec<StateChange> {
        read_state_changes(&self.dir.join("nodes").join(node).join("data"))
            .unwrap()
            .into_iter()
            .filter(|c| {
                c.request == "LeaderAndIsr" && c.applied() && c.topic == "t" && c.partition == 0
            })
            .collect()
    }

    fn broker_log(&self, node: &str) -> String {
        std::fs::read_to_string(self.dir.join("nodes").join(node).join("broker.log")).unwrap()
    }

    /// `epochal inspect --compact` of a node's frozen data dir: t-0's records
    /// as (offset, value).
    fn records(&self, node: &str) -> Vec<(i64, i64)> {
        let output = epochal()
            .args(["inspect", "--compact"])
            .arg(self.dir.join("nodes").join(node).join("data"))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", show(&output));
        let compact: Value = serde_json::from_slice(&output.stdout).unwrap();
        let replica = compact["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["topic"] == "t" && r["partition"] == 0)
            .unwrap_or_else(|| panic!("{node} holds no t-0: {compact}"))
            .clone();
        // A checkpoint written before a truncation can name an offset past the
        // new log end until the next periodic checkpoint: timing, not damage.
        let damage: Vec<&Value> = replica["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["kind"] != "checkpoint_past_log_end")
            .collect();
        assert!(damage.is_empty(), "{node}: {replica}");
        replica["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r[0].as_i64().unwrap(),
                    r[2].as_str().unwrap().parse().unwrap(),
                )
            })
            .collect()
    }

    /// The scenario ran as written, and b2's election was clean: the final
    /// leader is b2, elected by the controller (b2 itself, once b1's lease
    /// lapsed) in the epoch after one whose ISR still held b2. Returns the
    /// final leader's name.
    fn check_scenario_and_clean_election(&self) -> &'static str {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            self.nemesis(),
            vec![
                ("stop".into(), n(&["b2"])),
                ("start".into(), n(&["b2"])),
                ("one-way".into(), n(&["b2", "b1"])),
                ("crash".into(), n(&["b2"])),
                ("restart".into(), n(&["b2"])),
                ("crash".into(), n(&["b1"])),
                ("heal".into(), n(&[])),
                ("start".into(), n(&["b1"])),
            ]
        );
        let one_way = self
            .ops
            .iter()
            .find(|op| op.f == "one-way" && op.kind == OpType::Info)
            .unwrap();
        assert_eq!(one_way.value["blocked"], serde_json::json!(["b2->b1"]));

        // The final leader: the leader of the newest epoch any node applied.
        let mut all: Vec<StateChange> = ["b1", "b2"]
            .iter()
            .flat_map(|n| self.state_changes(n))
            .collect();
        all.sort_by_key(|c| c.leader_epoch);
        let last = all.last().unwrap();
        assert_eq!(last.leader, 2, "final leader: {last:?}");
        assert_eq!(last.isr, vec![2], "{last:?}");
        // b1 came back as b2's follower in that epoch.
        assert!(
            self.state_changes("b1")
                .iter()
                .any(|c| c.leader == 2 && c.leader_epoch == last.leader_epoch),
            "{:?}",
            self.state_changes("b1")
        );
        // Clean: in the epoch before, b1 led and b2 was in the ISR, as b2's
        // restarted incarnation was told just before b1 died.
        let before = self
            .state_changes("b2")
            .into_iter()
            .rfind(|c| c.leader_epoch == last.leader_epoch - 1)
            .expect("b2 applied the epoch before its election");
        assert_eq!(before.leader, 1, "{before:?}");
        assert!(before.isr.contains(&2), "b2 was in the ISR: {before:?}");
        "b2"
    }
}

#[test]
fn cluster_kip101_high_watermark_truncation_loses_an_acked_write() {
    let run = run("high-watermark", 1);
    let leader = run.check_scenario_and_clean_election();

    // The lost-write checker names the value and the offset it was acked at.
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run.dir.join("results.json")).unwrap())
            .unwrap();
    let lost = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "lost-write")
        .unwrap();
    assert_eq!(lost["verdict"], "invalid", "{lost}");
    let summary = lost["evidence"][0]["summary"].as_str().unwrap();
    assert!(summary.contains("value 2 acked at offset 1"), "{summary}");

    // m1 and m2 were both acknowledged with acks=all, each with b2 in the ISR.
    let acked = run.acked();
    assert_eq!(acked, BTreeMap::from([(1, 0), (2, 1)]));
    assert_eq!(run.send_of(2).value["isr"], serde_json::json!([1, 2]));

    // b2 restarted, cut back to its checkpointed HW, and was elected without m2.
    assert!(
        run.broker_log("b2")
            .contains("follower truncated its log topic=t partition=0 from=2 to=1"),
        "b2 did not truncate m2 away"
    );
    let log = run.records(leader);
    assert_eq!(log, vec![(0, 1)], "{leader}'s final log");
    assert!(
        !log.iter().any(|&(_, v)| v == 2),
        "acked m2 must be lost: {log:?}"
    );
    // b1, restarted as follower, copied the leader's log: the loss is final.
    assert_eq!(run.records("b1"), log);
}

fn every_acked_write_survives(truncation: &str) {
    let run = run(truncation, 0);
    let leader = run.check_scenario_and_clean_election();
    let acked = run.acked();
    assert_eq!(acked, BTreeMap::from([(1, 0), (2, 1)]), "{truncation}");
    assert!(
        !run.broker_log("b2").contains("follower truncated its log"),
        "{truncation}: b2 truncated"
    );
    for node in [leader, "b1"] {
        let log = run.records(node);
        for (&value, &offset) in &acked {
            assert!(
                log.contains(&(offset, value)),
                "{truncation}: acked {value}@{offset} missing from {node}: {log:?}"
            );
        }
    }
}

#[test]
fn cluster_kip101_current_keeps_every_acked_write() {
    every_acked_write_survives("current");
}

#[test]
fn cluster_kip101_kip_101_and_kip_279_keep_every_acked_write() {
    every_acked_write_survives("kip-101");
    every_acked_write_survives("kip-279");
}
