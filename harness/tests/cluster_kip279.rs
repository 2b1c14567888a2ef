//! KIP-279 / KAFKA-6361 (`suites/kip-279-fast-failover.toml`) end to end: the
//! real `epochal` binary, a real etcd, the proxies and three brokers (b3 only
//! the controller). A (b1) leads in epoch E and appends two batches, only the
//! first reaching B (b2); A crashes and restarts inside its lease, so B leads in
//! E+1 and appends a batch ending where A's log ends; before A truncates, B does
//! the same and A leads in E+2 and appends. B, A's follower, asks about E+1:
//!
//! - `truncation=kip-101`: A answers the start of its epoch E+2, which is B's
//!   log end, so B cuts nothing: the replicas diverge silently at offset 2.
//! - `truncation=kip-279` and `current`: A answers (E, 4), B cuts to the end of
//!   its own epoch E (2) and copies A: identical logs, every checker valid.
//! - `truncation=high-watermark`: each new follower cuts to its checkpointed HW
//!   (0) without asking, so A drops the acks=all batch and is then cleanly
//!   elected without it: lost-write.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use epochal::history::{Op, OpType, Process, read_history};
use epochal::reader::state_change::{StateChange, read_state_changes};
use serde_json::{Value, json};

fn schedule() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/kip-279-fast-failover.toml")
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
    truncation: String,
    _store: tempfile::TempDir,
    dir: PathBuf,
    ops: Vec<Op>,
    results: Value,
    /// The leader epoch A led in when the scenario began (E).
    epoch: i64,
}

/// Runs the schedule under `truncation`; the run must complete with the
/// verdict `expect` (exit 0 valid, 1 invalid), and `epochal check` on the
/// stored run, with no cluster, must say the same. Then checks that the
/// scenario ran as written (see [`Run::check_scenario`]).
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
    // A loss or divergence under unclean election could be legitimate; every
    // election here must be clean.
    assert!(
        applied.contains("unclean_leader_election = false"),
        "{applied}"
    );
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    let mut run = Run {
        truncation: truncation.to_owned(),
        _store: store,
        dir,
        ops,
        results,
        epoch: -1,
    };
    run.epoch = run.check_scenario();
    run
}

impl Run {
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

    /// The ok sends, in order.
    fn sends(&self) -> Vec<&Value> {
        self.ops
            .iter()
            .filter(|op| op.f == "send" && op.kind == OpType::Ok)
            .map(|op| &op.value)
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
            let name = r["checker"].as_str().unwrap();
            if !except.contains(&name) {
                assert_eq!(r["verdict"], "valid", "{}: {r}", self.truncation);
            }
        }
    }

    /// The faults fired as written, the sends were acknowledged as the scenario
    /// needs, and leadership went A (E), B (E+1), A (E+2), each move made by the
    /// controller b3 with both replicas in the ISR (clean). Returns E.
    fn check_scenario(&self) -> i64 {
        let t = &self.truncation;
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            self.nemesis(),
            vec![
                ("stop".into(), n(&["b2"])),
                ("stop".into(), n(&["b1"])),
                ("start".into(), n(&["b1"])),
                ("start".into(), n(&["b2"])),
                ("one-way".into(), n(&["b1", "b2"])),
                ("crash".into(), n(&["b1"])),
                ("restart".into(), n(&["b1"])),
                ("one-way".into(), n(&["b2", "b1"])),
                ("crash".into(), n(&["b2"])),
                ("restart".into(), n(&["b2"])),
                ("heal".into(), n(&[])),
            ],
            "{t}"
        );
        let blocked: Vec<&Value> = self
            .ops
            .iter()
            .filter(|op| op.f == "one-way" && op.kind == OpType::Info)
            .map(|op| &op.value["blocked"])
            .collect();
        assert_eq!(blocked, vec![&json!(["b1->b2"]), &json!(["b2->b1"])], "{t}");

        // The four batches: A's first (acks=all, so B had it), A's second
        // (acks=1, after the cut), B's (acks=1, at the same offsets), A's last.
        let sends = self.sends();
        assert_eq!(sends.len(), 4, "{t}: {sends:?}");
        let e = sends[0]["leader_epoch"].as_i64().unwrap();
        assert!(e >= 3, "{t}: the setup takes at least three epochs: {e}");
        let expect = |i: usize, node: &str, acks: &str, values: [i64; 2], epoch: i64| {
            let s = sends[i];
            assert_eq!(s["node"], node, "{t}: {s}");
            assert_eq!(s["acks"], acks, "{t}: {s}");
            assert_eq!(s["values"], json!(values), "{t}: {s}");
            assert_eq!(s["leader_epoch"], epoch, "{t}: {s}");
            // Both replicas in the ISR at every ack: nobody was dropped.
            assert_eq!(s["isr"], json!([1, 2]), "{t}: {s}");
        };
        expect(0, "b1", "all", [1, 2], e);
        expect(1, "b1", "1", [3, 4], e);
        expect(2, "b2", "1", [5, 6], e + 1);
        expect(3, "b1", "1", [7, 8], e + 2);
        assert_eq!(sends[0]["offsets"], json!([0, 1]), "{t}");
        // B's epoch-(E+1) batch sits exactly where A's unreplicated batch is,
        // so it ends where A's epoch E+2 starts.
        assert_eq!(sends[1]["offsets"], json!([2, 3]), "{t}");
        assert_eq!(sends[2]["offsets"], json!([2, 3]), "{t}");

        // etcd's timeline: the last three leader epochs are A, B, A, each with
        // both replicas in the ISR, all written by the controller b3.
        let timeline: Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("timeline.json")).unwrap())
                .unwrap();
        let states: Vec<&Value> = timeline["partition_states"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["topic"] == "t" && s["partition"] == 0)
            .collect();
        let at = |epoch: i64| -> Vec<(i64, Value)> {
            states
                .iter()
                .filter(|s| s["leader_epoch"] == epoch)
                .map(|s| (s["leader"].as_i64().unwrap(), s["isr"].clone()))
                .collect()
        };
        assert_eq!(
            at(e).last().unwrap(),
            &(1, json!([1, 2])),
            "{t}: {states:?}"
        );
        assert_eq!(at(e + 1), vec![(2, json!([1, 2]))], "{t}: {states:?}");
        assert_eq!(at(e + 2), vec![(1, json!([1, 2]))], "{t}: {states:?}");
        assert_eq!(
            states.last().unwrap()["leader_epoch"],
            e + 2,
            "{t}: no later epoch: {states:?}"
        );
        let controllers = timeline["controllers"].as_array().unwrap();
        assert_eq!(controllers.last().unwrap()["broker_id"], 3, "{t}");

        // What each replica applied in those epochs, from b3.
        let roles = |node: &str| -> Vec<(i32, i32)> {
            self.state_changes(node)
                .into_iter()
                .filter(|c| i64::from(c.leader_epoch) >= e)
                .inspect(|c| assert_eq!(c.controller_id, 3, "{t}: {c:?}"))
                .map(|c| (c.leader_epoch, c.leader))
                .collect()
        };
        let e32 = e as i32;
        assert_eq!(
            roles("b1"),
            vec![(e32, 1), (e32 + 1, 2), (e32 + 2, 1)],
            "{t}: b1 led, followed B, led again"
        );
        assert_eq!(
            roles("b2").last(),
            Some(&(e32 + 2, 1)),
            "{t}: b2 ends as A's follower"
        );
        assert!(roles("b2").contains(&(e32 + 1, 2)), "{t}: b2 led E+1");

        // A never cut its log under the epoch-based settings ("before A
        // truncates"): its question to B was held by the cut.
        if t != "high-watermark" {
            assert!(
                !self.broker_log("b1").contains("follower truncated its log"),
                "{t}: b1 truncated"
            );
        }
        e
    }

    /// B's single OffsetsForLeaderEpoch answer, as the fetcher logged it.
    fn b2_answer(&self) -> String {
        let log = self.broker_log("b2");
        let answers: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("OffsetsForLeaderEpoch answered"))
            .collect();
        assert_eq!(answers.len(), 1, "{}: {answers:?}", self.truncation);
        let line = answers[0];
        assert!(
            line.contains(&format!("asked={}", self.epoch + 1)),
            "{}: B asks about its own epoch E+1: {line}",
            self.truncation
        );
        line[line.find("answer=").unwrap()..].to_owned()
    }
}

#[test]
fn cluster_kip279_kip_101_answer_leaves_the_replicas_diverged() {
    let run = run("kip-101", 1);
    let e = run.epoch;

    // The divergence checker names offset 2 and what each replica holds there.
    let divergence = run.checker("divergence");
    assert_eq!(divergence["verdict"], "invalid", "{divergence}");
    let evidence = &divergence["evidence"][0];
    assert_eq!(evidence["anomaly"], "replica-divergence", "{evidence}");
    assert_eq!(
        evidence["summary"],
        format!(
            "t-0 diverges at offset 2 (common end 6): b1 holds 3 (epoch {e}), b2 holds 5 (epoch {})",
            e + 1
        ),
        "{evidence}"
    );
    assert_eq!(evidence["details"]["offset"], 2, "{evidence}");
    // Silent: no acks=all write is lost, nothing else is flagged.
    run.others_valid(&["divergence"]);

    // KIP-101's answer: one offset, the start of A's epoch E+2 = B's log end.
    assert_eq!(
        run.b2_answer(),
        "answer=EpochEndOffset { leader_epoch: -1, end_offset: 4 }"
    );
    assert!(
        !run.broker_log("b2").contains("follower truncated its log"),
        "b2 truncated"
    );
    assert_eq!(
        run.records("b1"),
        vec![
            (0, e, 1),
            (1, e, 2),
            (2, e, 3),
            (3, e, 4),
            (4, e + 2, 7),
            (5, e + 2, 8)
        ]
    );
    assert_eq!(
        run.records("b2"),
        vec![
            (0, e, 1),
            (1, e, 2),
            (2, e + 1, 5),
            (3, e + 1, 6),
            (4, e + 2, 7),
            (5, e + 2, 8)
        ]
    );
}

#[test]
fn cluster_kip279_high_watermark_truncation_loses_the_acked_batch() {
    let run = run("high-watermark", 1);
    let e = run.epoch;

    let lost = run.checker("lost-write");
    assert_eq!(lost["verdict"], "invalid", "{lost}");
    let summaries: Vec<&str> = lost["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|ev| ev["anomaly"] == "lost-acknowledged-write")
        .map(|ev| ev["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries.len(), 2, "{lost}");
    assert!(
        summaries[0].contains("value 1 acked at offset 0"),
        "{summaries:?}"
    );
    assert!(
        summaries[1].contains("value 2 acked at offset 1"),
        "{summaries:?}"
    );
    run.others_valid(&["lost-write"]);

    // Each new follower cut to its checkpointed HW without asking.
    for node in ["b1", "b2"] {
        assert!(
            run.broker_log(node)
                .contains("follower truncated its log topic=t partition=0 from=4 to=0"),
            "{node} did not cut to its HW"
        );
        assert!(
            !run.broker_log(node)
                .contains("OffsetsForLeaderEpoch answered"),
            "{node} asked"
        );
        assert_eq!(
            run.records(node),
            vec![(0, e + 2, 7), (1, e + 2, 8)],
            "{node}"
        );
    }
}

fn replicas_stay_identical(truncation: &str) {
    let run = run(truncation, 0);
    let e = run.epoch;
    run.others_valid(&[]);
    // KIP-279's answer: (largest epoch <= E+1 the leader had, its end).
    assert_eq!(
        run.b2_answer(),
        format!("answer=EpochEndOffset {{ leader_epoch: {e}, end_offset: 4 }}"),
        "{truncation}"
    );
    assert!(
        run.broker_log("b2")
            .contains("follower truncated its log topic=t partition=0 from=4 to=2"),
        "{truncation}: b2 did not cut its epoch-(E+1) batch"
    );
    let a = vec![
        (0, e, 1),
        (1, e, 2),
        (2, e, 3),
        (3, e, 4),
        (4, e + 2, 7),
        (5, e + 2, 8),
    ];
    assert_eq!(run.records("b1"), a, "{truncation}");
    assert_eq!(run.records("b2"), a, "{truncation}");
    // B's acks=1 batch is gone, which acks=1 allows; lost-write counts it.
    let lost = run.checker("lost-write");
    assert_eq!(lost["counts"]["lost-acks-1"], 2, "{truncation}: {lost}");
}

#[test]
fn cluster_kip279_kip_279_keeps_the_replicas_identical() {
    replicas_stay_identical("kip-279");
}

#[test]
fn cluster_kip279_current_keeps_the_replicas_identical() {
    replicas_stay_identical("current");
}
