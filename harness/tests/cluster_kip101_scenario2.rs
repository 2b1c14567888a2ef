//! KIP-101 scenario 2 (`suites/kip-101-scenario-2.toml`) end to end: the real
//! `epochal` binary, a real etcd, the proxy and two brokers. Both brokers lose
//! power, A (b2) first; B (b1) had not flushed m2, restarts first, leads again
//! and appends m3 at m2's offset in a newer leader epoch. Under
//! `truncation=high-watermark` A restarts, truncates only to its checkpointed
//! HW (which covers m2) and the replicas diverge at offset 1 with equal HWs and
//! LEOs. Under the epoch-based settings A learns where m2's epoch ended on B,
//! cuts m2 and fetches m3. m2 was acknowledged under ISR {b1} and cut by b1's
//! power loss, so its loss is excused on every setting (DESIGN.md, "Lost write,
//! precisely").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use epochal::history::{Op, OpType, Process, read_history};
use epochal::reader::state_change::{StateChange, read_state_changes};
use serde_json::{Value, json};

fn schedule() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/kip-101-scenario-2.toml")
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
    results: Value,
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
    // No loss may be put down to an unclean election.
    assert!(
        applied.contains("unclean_leader_election = false"),
        "{applied}"
    );
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    Run {
        _store: store,
        dir,
        ops,
        results,
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

    /// (f, nodes) of every completed nemesis op, in order (the final heal
    /// records none here: nothing is left cut, paused or down).
    fn nemesis(&self) -> Vec<(String, Vec<String>)> {
        self.nemesis_ops()
            .map(|op| {
                (
                    op.f.clone(),
                    serde_json::from_value(op.value["nodes"].clone()).unwrap(),
                )
            })
            .collect()
    }

    fn nemesis_ops(&self) -> impl Iterator<Item = &Op> {
        self.ops
            .iter()
            .filter(|op| op.process == Process::Nemesis && op.kind == OpType::Info)
    }

    /// What the power loss of `node` cut from its t-0: (LEO before, LEO after,
    /// bytes removed).
    fn power_loss_cut(&self, node: &str) -> (i64, i64, i64) {
        let op = self
            .nemesis_ops()
            .find(|op| op.f == "power-loss" && op.value["nodes"] == json!([node]))
            .unwrap_or_else(|| panic!("no power loss of {node}"));
        let cut = op.value["cut"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["node"] == node)
            .unwrap()["cuts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["replica"] == "t-0")
            .unwrap()
            .clone();
        (
            cut["log_end_offset_before"].as_i64().unwrap(),
            cut["log_end_offset_after"].as_i64().unwrap(),
            cut["bytes_removed"].as_i64().unwrap(),
        )
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

    /// etcd's partition states of t-0: (leader, leader epoch, ISR).
    fn timeline(&self) -> Vec<(i64, i64, Vec<i64>)> {
        let timeline: Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("timeline.json")).unwrap())
                .unwrap();
        timeline["partition_states"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["topic"] == "t" && s["partition"] == 0)
            .map(|s| {
                (
                    s["leader"].as_i64().unwrap(),
                    s["leader_epoch"].as_i64().unwrap(),
                    serde_json::from_value(s["isr"].clone()).unwrap(),
                )
            })
            .collect()
    }

    /// The result of checker `name` in results.json.
    fn checker(&self, name: &str) -> &Value {
        self.results["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["checker"] == name)
            .unwrap_or_else(|| panic!("no {name} result: {}", self.results))
    }

    /// Every checker but those named is valid.
    fn others_valid(&self, except: &[&str]) {
        for r in self.results["results"].as_array().unwrap() {
            if !except.contains(&r["checker"].as_str().unwrap()) {
                assert_eq!(r["verdict"], "valid", "{r}");
            }
        }
    }

    /// `epochal inspect --compact` of a node's frozen data dir: t-0's records
    /// as (offset, batch leader epoch, value).
    fn records(&self, node: &str) -> Vec<(i64, i64, i64)> {
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
                    r[1].as_i64().unwrap(),
                    r[2].as_str().unwrap().parse().unwrap(),
                )
            })
            .collect()
    }

    /// The scenario ran as written, the same way under every setting: both
    /// power losses, A's cutting nothing and B's cutting m2; m2 acked under
    /// ISR {b1}; b1 the only leader, elected cleanly each time, and m3 acked in
    /// leader epoch 2, newer than m2's epoch 1.
    fn check_scenario(&self) {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            self.nemesis(),
            vec![
                ("crash".into(), n(&["b2"])),
                ("restart".into(), n(&["b2"])),
                ("power-loss".into(), n(&["b2"])),
                ("power-loss".into(), n(&["b1"])),
                ("restart".into(), n(&["b1"])),
                ("restart".into(), n(&["b2"])),
            ]
        );
        // A had fsynced all it held; B had flushed m1 only (its segment roll).
        assert_eq!(self.power_loss_cut("b2"), (2, 2, 0));
        let (before, after, removed) = self.power_loss_cut("b1");
        assert_eq!((before, after), (2, 1));
        assert!(removed > 0);

        // Three acks=all writes; m3 reuses m2's offset.
        assert_eq!(self.acked(), BTreeMap::from([(1, 0), (2, 1), (3, 1)]));
        assert_eq!(self.send_of(1).value["isr"], json!([1, 2]));
        assert_eq!(self.send_of(2).value["isr"], json!([1]));
        assert_eq!(self.send_of(2).value["leader_epoch"], json!(1));
        assert_eq!(self.send_of(3).value["isr"], json!([1]));
        assert_eq!(self.send_of(3).value["leader_epoch"], json!(2));

        // etcd: b1 leads throughout; b2 leaves the ISR twice (its crash, its
        // power loss) and rejoins twice; every leader is in the ISR before it.
        assert_eq!(
            self.timeline(),
            vec![
                (1, 0, vec![1, 2]),
                (1, 1, vec![1]),
                (1, 1, vec![1, 2]),
                (1, 2, vec![1]),
                (1, 2, vec![1, 2]),
            ]
        );
        // The restarted b1 (controller epoch 2: it won the controller again
        // after its lease lapsed) was told it leads epoch 2 with ISR {b1}.
        assert!(
            self.state_changes("b1")
                .iter()
                .any(|c| c.controller_epoch == 2
                    && c.leader == 1
                    && c.leader_epoch == 2
                    && c.isr == vec![1]),
            "{:?}",
            self.state_changes("b1")
        );
        // b2's last incarnation followed b1 in epoch 2.
        let last = self.state_changes("b2").pop().unwrap();
        assert_eq!((last.leader, last.leader_epoch), (1, 2), "{last:?}");

        // m2's loss is excused by b1's power loss, on every setting.
        let lost = self.checker("lost-write");
        assert_eq!(lost["verdict"], "valid", "{lost}");
        let excused = lost["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["anomaly"] == "lost-acks-all-write-excused")
            .unwrap_or_else(|| panic!("{lost}"));
        let summary = excused["summary"].as_str().unwrap();
        assert!(summary.contains("value 2 acked at offset 1"), "{summary}");
        assert!(
            summary.contains("power loss of every ISR member"),
            "{summary}"
        );
        // So m3 at offset 1 is no inconsistent offset.
        let consumer = self.checker("consumer");
        assert_eq!(consumer["verdict"], "valid", "{consumer}");
        assert_eq!(
            consumer["counts"]["acks-all-values-excused"], 1,
            "{consumer}"
        );
    }
}

#[test]
fn cluster_kip101_scenario2_high_watermark_truncation_leaves_the_replicas_divergent() {
    let run = run("high-watermark", 1);
    run.check_scenario();

    // The divergence checker names offset 1: m3 (epoch 2) on b1, m2 (epoch 1)
    // on b2, both in the final ISR.
    let divergence = run.checker("divergence");
    assert_eq!(divergence["verdict"], "invalid", "{divergence}");
    let evidence = &divergence["evidence"][0];
    assert_eq!(evidence["anomaly"], "replica-divergence");
    assert_eq!(evidence["details"]["offset"], 1, "{evidence}");
    assert_eq!(evidence["details"]["common_end"], 2, "{evidence}");
    assert_eq!(evidence["details"]["replicas"], json!(["b1", "b2"]));
    assert_eq!(
        evidence["details"]["holds"],
        json!({
            "b1": {"epoch": 2, "control": false, "value": "3"},
            "b2": {"epoch": 1, "control": false, "value": "2"},
        })
    );
    let summary = evidence["summary"].as_str().unwrap();
    assert!(
        summary.contains("t-0 diverges at offset 1 (common end 2)"),
        "{summary}"
    );
    run.others_valid(&["divergence"]);

    // b2 kept m2: its restart cut nothing from 2, and both logs are 2 long
    // (the run quiesced with HW = LEO on both).
    assert!(
        !run.broker_log("b2").contains("from=2 to=1"),
        "b2 truncated m2"
    );
    assert_eq!(run.records("b1"), vec![(0, 0, 1), (1, 2, 3)]);
    assert_eq!(run.records("b2"), vec![(0, 0, 1), (1, 1, 2)]);
}

fn the_follower_truncates_the_divergent_record(truncation: &str) {
    let run = run(truncation, 0);
    run.check_scenario();
    run.others_valid(&[]);
    let divergence = run.checker("divergence");
    assert_eq!(
        divergence["counts"]["partitions-compared"], 1,
        "{divergence}"
    );

    // b2 learned from b1 that m2's epoch ends at 1, cut m2 and fetched m3.
    assert!(
        run.broker_log("b2")
            .contains("follower truncated its log topic=t partition=0 from=2 to=1"),
        "{truncation}: b2 did not cut m2"
    );
    for node in ["b1", "b2"] {
        assert_eq!(
            run.records(node),
            vec![(0, 0, 1), (1, 2, 3)],
            "{truncation}: {node}"
        );
    }
}

#[test]
fn cluster_kip101_scenario2_current_truncates_the_divergent_record() {
    the_follower_truncates_the_divergent_record("current");
}

#[test]
fn cluster_kip101_scenario2_kip_101_and_kip_279_truncate_the_divergent_record() {
    the_follower_truncates_the_divergent_record("kip-101");
    the_follower_truncates_the_divergent_record("kip-279");
}
