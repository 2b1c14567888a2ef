//! KIP-279 / KAFKA-6361 (`suites/schedules/kip-279-fast-failover.toml`) end to end: the
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

use crate::common;

use std::ops::Deref;

use common::scenario::{self, Run};
use epochal::history::OpType;
use serde_json::{Value, json};

/// What one run of the scenario left in its store, under one truncation
/// setting.
struct FailoverRun {
    run: Run,
    truncation: String,
    /// The leader epoch A led in when the scenario began (E).
    epoch: i64,
}

impl Deref for FailoverRun {
    type Target = Run;

    fn deref(&self) -> &Run {
        &self.run
    }
}

/// Runs the schedule under `truncation`, which must end with the verdict
/// `expect` (see [`scenario::run_truncation`]) with clean elections only.
/// Then checks that the scenario ran as written (see
/// [`FailoverRun::check_scenario`]).
fn run(truncation: &str, expect: i32) -> FailoverRun {
    // A loss or divergence under unclean election could be legitimate; every
    // election here must be clean.
    let run = scenario::run_truncation(
        "kip-279-fast-failover.toml",
        truncation,
        &["unclean_leader_election = false"],
        expect,
    );
    let mut run = FailoverRun {
        run,
        truncation: truncation.to_owned(),
        epoch: -1,
    };
    run.epoch = run.check_scenario();
    run
}

impl FailoverRun {
    /// The faults fired as written, the sends were acknowledged as the scenario
    /// needs, and leadership went A (E), B (E+1), A (E+2), each move made by the
    /// controller b3 with both replicas in the ISR (clean). Returns E.
    fn check_scenario(&self) -> i64 {
        let t = &self.truncation;
        self.assert_nemesis(&[
            ("stop", &["b2"]),
            ("stop", &["b1"]),
            ("start", &["b1"]),
            ("start", &["b2"]),
            ("one-way", &["b1", "b2"]),
            ("crash", &["b1"]),
            ("restart", &["b1"]),
            ("one-way", &["b2", "b1"]),
            ("crash", &["b2"]),
            ("restart", &["b2"]),
            ("heal", &[]),
        ]);
        let blocked: Vec<Value> = self
            .ops
            .iter()
            .filter(|op| op.f() == "one-way" && op.kind == OpType::Info)
            .map(|op| op.value()["blocked"].clone())
            .collect();
        assert_eq!(blocked, vec![json!(["b1->b2"]), json!(["b2->b1"])], "{t}");

        // The four batches: A's first (acks=all, so B had it), A's second
        // (acks=1, after the cut), B's (acks=1, at the same offsets), A's last.
        let sends = self.sends();
        assert_eq!(sends.len(), 4, "{t}: {sends:?}");
        let e = sends[0]["leader_epoch"].as_i64().unwrap();
        assert!(e >= 3, "{t}: the setup takes at least three epochs: {e}");
        let expect = |i: usize, node: &str, acks: &str, values: [i64; 2], epoch: i64| {
            let s = &sends[i];
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
        let states = self.t0_states();
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
        let timeline = self.timeline();
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
        run.records_with_epochs("b1"),
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
        run.records_with_epochs("b2"),
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
            run.records_with_epochs(node),
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
    assert_eq!(run.records_with_epochs("b1"), a, "{truncation}");
    assert_eq!(run.records_with_epochs("b2"), a, "{truncation}");
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
