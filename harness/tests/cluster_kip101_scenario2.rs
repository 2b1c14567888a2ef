//! KIP-101 scenario 2 (`suites/schedules/kip-101-scenario-2.toml`) end to end: the real
//! `epochal` binary, a real etcd, the proxy and two brokers. Both brokers lose
//! power, A (b2) first; B (b1) had not flushed m2, restarts first, leads again
//! and appends m3 at m2's offset in a newer leader epoch. Under
//! `truncation=high-watermark` A restarts, truncates only to its checkpointed
//! HW (which covers m2) and the replicas diverge at offset 1 with equal HWs and
//! LEOs. Under the epoch-based settings A learns where m2's epoch ended on B,
//! cuts m2 and fetches m3. m2 was acknowledged under ISR {b1} and cut by b1's
//! power loss, so its loss is excused on every setting (GUARANTEES.md,
//! "Excuses").

use crate::common;

use std::collections::BTreeMap;

use common::scenario::{self, Run};
use serde_json::json;

/// Runs the schedule under `truncation`, which must end with the verdict
/// `expect` (see [`scenario::run_truncation`]) with clean elections only.
fn run(truncation: &str, expect: i32) -> Run {
    // No loss may be put down to an unclean election.
    scenario::run_truncation(
        "kip-101-scenario-2.toml",
        truncation,
        &["unclean_leader_election = false"],
        expect,
    )
}

impl Run {
    /// What the power loss of `node` cut from its t-0: (LEO before, LEO after,
    /// bytes removed).
    fn power_loss_cut(&self, node: &str) -> (i64, i64, i64) {
        let op = self
            .nemesis_ops()
            .find(|op| op.f() == "power-loss" && op.value()["nodes"] == json!([node]))
            .unwrap_or_else(|| panic!("no power loss of {node}"));
        let cut = op.value()["cut"]
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

    /// The scenario ran as written, the same way under every setting: both
    /// power losses, A's cutting nothing and B's cutting m2; m2 acked under
    /// ISR {b1}; b1 the only leader, elected cleanly each time, and m3 acked in
    /// leader epoch 3, newer than m2's epoch 1: b1, taking over as controller
    /// on its return, moved its own leadership to a new epoch.
    fn check_kip101_scenario_2(&self) {
        // The final heal records none here: nothing is left cut, paused or down.
        self.assert_nemesis(&[
            ("crash", &["b2"]),
            ("restart", &["b2"]),
            ("power-loss", &["b2"]),
            ("power-loss", &["b1"]),
            ("restart", &["b1"]),
            ("restart", &["b2"]),
        ]);
        // A had fsynced all it held; B had flushed m1 only (its segment roll).
        assert_eq!(self.power_loss_cut("b2"), (2, 2, 0));
        let (before, after, removed) = self.power_loss_cut("b1");
        assert_eq!((before, after), (2, 1));
        assert!(removed > 0);

        // Three acks=all writes; m3 reuses m2's offset.
        assert_eq!(self.acked(), BTreeMap::from([(1, 0), (2, 1), (3, 1)]));
        assert_eq!(self.send_of(1).value()["isr"], json!([1, 2]));
        assert_eq!(self.send_of(2).value()["isr"], json!([1]));
        assert_eq!(self.send_of(2).value()["leader_epoch"], json!(1));
        assert_eq!(self.send_of(3).value()["isr"], json!([1]));
        assert_eq!(self.send_of(3).value()["leader_epoch"], json!(3));

        // etcd: b1 leads throughout; b2 leaves the ISR twice (its crash, its
        // power loss) and rejoins twice; every leader is in the ISR before it.
        assert_eq!(
            self.t0_leaders(),
            vec![
                (1, 0, vec![1, 2]),
                (1, 1, vec![1]),
                (1, 1, vec![1, 2]),
                (1, 2, vec![1]),
                (1, 3, vec![1]),
                (1, 3, vec![1, 2]),
            ]
        );
        // The restarted b1 (controller epoch 2: it won the controller again
        // after its lease lapsed) was told it leads epoch 3 with ISR {b1}.
        assert!(
            self.state_changes("b1")
                .iter()
                .any(|c| c.controller_epoch == 2
                    && c.leader == 1
                    && c.leader_epoch == 3
                    && c.isr == vec![1]),
            "{:?}",
            self.state_changes("b1")
        );
        // b2's last incarnation followed b1 in epoch 3.
        let last = self.state_changes("b2").pop().unwrap();
        assert_eq!((last.leader, last.leader_epoch), (1, 3), "{last:?}");

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
    run.check_kip101_scenario_2();

    // The divergence checker names offset 1: m3 (epoch 3) on b1, m2 (epoch 1)
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
            "b1": {"epoch": 3, "control": false, "value": "3"},
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
    assert_eq!(run.records_with_epochs("b1"), vec![(0, 0, 1), (1, 3, 3)]);
    assert_eq!(run.records_with_epochs("b2"), vec![(0, 0, 1), (1, 1, 2)]);
}

fn the_follower_truncates_the_divergent_record(truncation: &str) {
    let run = run(truncation, 0);
    run.check_kip101_scenario_2();
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
            run.records_with_epochs(node),
            vec![(0, 0, 1), (1, 3, 3)],
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
