//! KAFKA-532 (`suites/schedules/kafka-532-stale-controller.toml`) end to end: the real
//! `epochal` binary, a real etcd, the proxy and three brokers. Controller b1 is
//! stopped by its failpoint holding "b2 is gone" while b2 comes back, leads
//! t-0 for a new controller and shrinks the ISR to itself. Under
//! `controller_epoch_fencing=false` b1 resumes, elects itself from its stale view
//! and tells b1 and b3 but not b2, which keeps acknowledging acks=all writes as
//! leader of the old epoch: one of them is lost when b2 finally learns. Under
//! `true` b1's write is refused, it resigns, and every checker is valid.

use crate::common;

use std::collections::BTreeMap;

use common::scenario::{self, Run, schedule_file};
use serde_json::{Value, json};

/// Runs the schedule under `controller_epoch_fencing=fencing`, which must end
/// with the verdict `expect` (see [`scenario::run`]) and apply that setting.
fn run(fencing: bool, expect: i32) -> Run {
    let run = scenario::run(
        &schedule_file("kafka-532-stale-controller.toml"),
        &[&format!("controller_epoch_fencing={fencing}")],
        expect,
    );
    run.assert_applied(&[&format!("controller_epoch_fencing = {fencing}")]);
    run
}

impl Run {
    /// The ok sends: value → the ok op's value (offsets, ISR, leader epoch,
    /// node), asserting each is acks=all.
    fn acked_sends(&self) -> BTreeMap<i64, Value> {
        let mut acked = BTreeMap::new();
        for send in self.sends() {
            assert_eq!(send["acks"], "all", "{send}");
            for v in send["values"].as_array().unwrap() {
                acked.insert(v.as_i64().unwrap(), send.clone());
            }
        }
        acked
    }

    /// etcd's t-0 states in revision order: (leader, leader epoch, ISR,
    /// controller epoch).
    fn states(&self) -> Vec<(i64, i64, Vec<i64>, i64)> {
        self.t0_leaders()
            .into_iter()
            .zip(self.t0_states())
            .map(|((leader, epoch, isr), s)| {
                (leader, epoch, isr, s["controller_epoch"].as_i64().unwrap())
            })
            .collect()
    }

    /// The part both settings share, up to the resume: the faults fired as
    /// written (the new controller's LeaderAndIsr to b1 held from before the
    /// resume until b1's second campaign stopped it, then released as b1
    /// resumed again), b1 stopped at its failpoint and resumed, the new controller
    /// elected b2 (epoch 1, controller epoch 2), b2 shrank the ISR to [2], and
    /// values 1–3 (ISR [1, 2, 3]) and 4 (ISR [2], on b2 alone) were
    /// acknowledged with acks=all. Returns etcd's states after that prefix.
    fn check_the_setup(&self) -> Vec<(i64, i64, Vec<i64>, i64)> {
        self.assert_nemesis(&[
            ("crash", &["b2"]),
            ("restart", &["b2"]),
            ("one-way", &["b3", "b2"]),
            ("hold-requests", &["b2", "b1"]),
            ("resume", &["b1"]),
            ("resume", &["b1"]),
            ("release-requests", &["b2", "b1"]),
            ("crash", &["b2"]),
            ("heal", &[]),
            ("start", &["b2"]),
        ]);
        let b1 = self.broker_log("b1");
        assert!(
            b1.contains("failpoint: stopping (SIGSTOP) until SIGCONT failpoint=controller-before-broker-loss"),
            "b1 never stopped at its failpoint"
        );
        assert!(b1.contains("failpoint: resumed failpoint=controller-before-broker-loss"));

        let acked = self.acked_sends();
        assert_eq!(
            acked.keys().copied().collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
        for v in [1, 2, 3] {
            assert_eq!(acked[&v]["isr"], json!([1, 2, 3]), "{}", acked[&v]);
            assert_eq!(acked[&v]["node"], "b1");
        }
        assert_eq!(acked[&1]["offsets"], json!([0, 1, 2]));
        assert_eq!(acked[&4]["node"], "b2");
        assert_eq!(acked[&4]["offsets"], json!([3]));
        assert_eq!(acked[&4]["isr"], json!([2]));
        assert_eq!(acked[&4]["leader_epoch"], 1);
        assert_eq!(acked[&5]["node"], "b2");
        assert_eq!(acked[&5]["offsets"], json!([4]));

        let states = self.states();
        assert_eq!(
            states[..3],
            [
                (1, 0, vec![1, 2, 3], 1),
                (2, 1, vec![2, 3], 2),
                (2, 1, vec![2], 2),
            ],
            "{states:?}"
        );
        states[3..].to_vec()
    }
}

#[test]
fn cluster_kafka532_without_fencing_the_stale_controller_deposes_a_live_leader_and_an_acked_write_is_lost()
 {
    let run = run(false, 1);
    let after = run.check_the_setup();

    // The stale decision: b1, at controller epoch 1, elected itself in leader
    // epoch 2 from its stale view (b2 dead) — the next state in etcd. Every
    // later state keeps leader 1, epoch 2: no other election happened.
    assert_eq!(after[0], (1, 2, vec![1], 1), "{after:?}");
    assert!(after.iter().all(|s| (s.0, s.1) == (1, 2)), "{after:?}");
    // b1 then resigned for its lapsed session (or the lease it replaced it
    // with), not for any fence.
    assert!(
        run.broker_log("b1")
            .contains("resigned as controller epoch=1 reason=controller moved: own etcd"),
        "{}",
        run.broker_log("b1")
    );
    // b3 applied it after having applied controller epoch 2; b2 was never sent
    // it: b2 applied no LeaderAndIsr of controller epoch 1 past epoch 0 (its
    // epoch 2 came from the newer controller after its restart), and then
    // truncated to where b1's epoch 2 begins.
    let b3 = run.state_changes("b3");
    assert!(
        b3.iter()
            .any(|c| c.controller_epoch == 1 && c.leader == 1 && c.leader_epoch == 2),
        "{b3:?}"
    );
    let b2 = run.state_changes("b2");
    assert!(
        b2.iter()
            .all(|c| c.controller_epoch >= 2 || c.leader_epoch == 0),
        "{b2:?}"
    );
    // Where b1's epoch 2 begins: the new controller's order to follow b2 in
    // epoch 1 is held until b1's stale controller is done, so b1 should not
    // have fetched value 4 and begin epoch 2 at offset 3; offset 4 (value 4
    // kept) is what the race the hold closes gave, and is still accepted.
    // Both lose value 5; only the second keeps value 4.
    let b2_log = run.broker_log("b2");
    let truncated = "follower truncated its log topic=t partition=0 from=5 to=";
    let kept: i64 = b2_log
        .split(truncated)
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("b2 did not truncate value 5: {b2_log}"));
    assert!(kept == 3 || kept == 4, "b2 truncated to {kept}");

    // Value 5 was acknowledged by b2 as leader of epoch 1, after etcd already
    // named b1 leader of epoch 2 with ISR [1].
    let acked = run.acked_sends();
    assert_eq!(acked[&5]["leader_epoch"], 2, "{}", acked[&5]);
    assert_eq!(acked[&5]["isr"][0], 1, "{}", acked[&5]);

    // The stale controller's election of b1 was outside the ISR [2] while b2,
    // its one member, stayed registered: the clean-election checker names it,
    // and it excuses nothing. The lost-write checker names value 5 and, when
    // b1 began epoch 2 without it, value 4 (acked under ISR [2] before the
    // stale election): both lost to the stale decision.
    let election = run.checker("clean-election");
    assert_eq!(election["verdict"], "invalid", "{election}");
    let named = &election["evidence"][0];
    assert_eq!(named["anomaly"], "election-outside-isr", "{election}");
    assert_eq!(
        (
            &named["details"]["leader"],
            &named["details"]["leader_epoch"]
        ),
        (&Value::from(1), &Value::from(2)),
        "{election}"
    );
    assert_eq!(
        named["details"]["registered_isr_members"],
        serde_json::json!([2]),
        "{election}"
    );
    let lost = run.checker("lost-write");
    assert_eq!(lost["verdict"], "invalid", "{lost}");
    let evidence = lost["evidence"].as_array().unwrap();
    let mut unexcused: Vec<(i64, i64)> = evidence
        .iter()
        .filter(|e| e["anomaly"] == "lost-acknowledged-write")
        .map(|e| {
            (
                e["details"]["value"].as_i64().unwrap(),
                e["details"]["acked_offset"].as_i64().unwrap(),
            )
        })
        .collect();
    unexcused.sort_unstable();
    let expected = if kept == 3 {
        vec![(4, 3), (5, 4)]
    } else {
        vec![(5, 4)]
    };
    assert_eq!(unexcused, expected, "{lost}");
    assert!(
        evidence
            .iter()
            .all(|e| e["anomaly"] != "lost-acks-all-write-excused"),
        "{lost}"
    );

    // The fencing checker sees b3 take the stale decision.
    let fenced = run.checker("stale-controller-fenced");
    assert_eq!(fenced["verdict"], "invalid", "{fenced}");
    assert!(
        fenced["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["anomaly"] == "stale-controller-epoch-applied"
                && e["details"]["node"] == "b3"
                && e["details"]["stale"]["controller_epoch"] == 1),
        "{fenced}"
    );

    // The loss is final: every replica holds values 1–3 (and 4) only.
    let held: Vec<(i64, i64)> = (0..kept).map(|offset| (offset, offset + 1)).collect();
    for node in ["b1", "b2", "b3"] {
        assert_eq!(run.records(node), held, "{node}");
    }
}

#[test]
fn cluster_kafka532_with_fencing_the_stale_controller_resigns_and_every_checker_is_valid() {
    let run = run(true, 0);
    let after = run.check_the_setup();

    // b1's write was refused by the per-path rule; it resigned without writing.
    assert!(
        run.broker_log("b1")
            .contains("resigned as controller epoch=1 reason=controller moved: /epochal/brokers/topics/t/partitions/0/state: stored controller epoch 2, writer's 1"),
        "{}",
        run.broker_log("b1")
    );
    assert!(
        after.iter().all(|s| s.3 >= 2),
        "a state from controller epoch 1 after the takeover: {after:?}"
    );
    // b2 took b1 back into its ISR, then lost leadership only by its crash,
    // cleanly, to b1 (in the ISR) in epoch 2.
    let mut isr = after[0].2.clone();
    isr.sort();
    assert_eq!(
        (after[0].0, after[0].1, isr),
        (2, 1, vec![1, 2]),
        "{after:?}"
    );
    assert_eq!((after[1].0, after[1].1), (1, 2), "{after:?}");
    let acked = run.acked_sends();
    let mut isr: Vec<i64> = serde_json::from_value(acked[&5]["isr"].clone()).unwrap();
    isr.sort();
    assert_eq!(isr, vec![1, 2], "{}", acked[&5]);
    assert_eq!(acked[&5]["leader_epoch"], 1, "{}", acked[&5]);

    run.others_valid(&[]);
    // Nothing of controller epoch 1 was applied after the new controller spoke.
    for node in ["b1", "b2", "b3"] {
        let changes = run.state_changes(node);
        if let Some(first_new) = changes.iter().position(|c| c.controller_epoch >= 2) {
            assert!(
                changes[first_new..].iter().all(|c| c.controller_epoch >= 2),
                "{node}: {changes:?}"
            );
        }
    }
    // Every acknowledged value, at its offset, on every replica.
    for node in ["b1", "b2", "b3"] {
        assert_eq!(
            run.records(node),
            vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)],
            "{node}"
        );
    }
}
