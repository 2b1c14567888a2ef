//! KIP-101 scenario 1 (`suites/schedules/kip-101-scenario-1.toml`) end to end: the real
//! `epochal` binary, a real etcd, the proxy and two brokers. Under
//! `truncation=high-watermark` the follower A (b2) restarts, truncates to its
//! checkpointed HW, and is cleanly elected when B (b1) dies at once: an
//! acknowledged acks=all write is lost. Under the epoch-based settings A does not
//! cut before hearing from the leader, and every acknowledged write survives.

use crate::common;

use std::collections::BTreeMap;

use common::scenario::{self, Run};
use epochal::history::OpType;
use epochal::reader::state_change::StateChange;

/// Runs the schedule under `truncation`, which must end with the verdict
/// `expect` (see [`scenario::run_truncation`]) with clean elections only.
fn run(truncation: &str, expect: i32) -> Run {
    // A loss under unclean election would be legitimate; this one must not be.
    scenario::run_truncation(
        "kip-101-scenario-1.toml",
        truncation,
        &["unclean_leader_election = false"],
        expect,
    )
}

impl Run {
    /// The scenario ran as written, and b2's election was clean: the final
    /// leader is b2, elected by the controller (b2 itself, once b1's lease
    /// lapsed) in the epoch after one whose ISR still held b2. Returns the
    /// final leader's name.
    fn check_scenario_and_clean_election(&self) -> &'static str {
        self.assert_nemesis(&[
            ("stop", &["b2"]),
            ("start", &["b2"]),
            ("one-way", &["b2", "b1"]),
            ("crash", &["b2"]),
            ("restart", &["b2"]),
            ("crash", &["b1"]),
            ("heal", &[]),
            ("start", &["b1"]),
        ]);
        let one_way = self
            .ops
            .iter()
            .find(|op| op.f() == "one-way" && op.kind == OpType::Info)
            .unwrap();
        assert_eq!(one_way.value()["blocked"], serde_json::json!(["b2->b1"]));

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
    let lost = run.checker("lost-write");
    assert_eq!(lost["verdict"], "invalid", "{lost}");
    let summary = lost["evidence"][0]["summary"].as_str().unwrap();
    assert!(summary.contains("value 2 acked at offset 1"), "{summary}");

    // m1 and m2 were both acknowledged with acks=all, each with b2 in the ISR.
    let acked = run.acked();
    assert_eq!(acked, BTreeMap::from([(1, 0), (2, 1)]));
    assert_eq!(run.send_of(2).value()["isr"], serde_json::json!([1, 2]));

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
