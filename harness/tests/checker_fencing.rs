//! The stale-controller-fenced checker (KAFKA-532) on hand-built runs: the
//! brokers' state-change logs and etcd's timeline, loaded through
//! `RunData::load` as a stored run would be.

use epochal::checker::Anomaly;
use epochal::checker::{self, CheckResult, Verdict, fencing};
use epochal::observe::timeline::Timeline;
use epochal::reader::state_change::StateChange;

use crate::common;
use common::run_dir::{Node, decision, load_run, state};

/// Controller 1 (epoch 1) makes 1 leader in epoch 0; controller 2 (epoch 2)
/// takes over and makes 2 leader in epoch 1.
fn timeline() -> Timeline {
    Timeline {
        partition_states: vec![state(10, (1, 0), &[1, 2], 1), state(20, (2, 1), &[2], 2)],
        controllers: vec![],
        registrations: Vec::new(),
    }
}

fn node(name: &'static str, state_changes: Vec<StateChange>) -> Node {
    Node {
        name,
        data: None,
        state_changes,
    }
}

fn run_fencing(nodes: &[Node], timeline: Option<&Timeline>) -> CheckResult {
    let dir = tempfile::tempdir().unwrap();
    let run = load_run(dir.path(), nodes, timeline);
    checker::check(&run, &[fencing::checker()])
        .results
        .remove(0)
}

#[test]
fn checker_fencing_accepts_a_stale_decision_the_broker_rejected() {
    let b1 = vec![
        decision("LeaderAndIsr", (1, 1), (1, 0), &[1, 2], "applied"),
        decision("UpdateMetadata", (2, 2), (2, 1), &[2], "applied"),
        decision("LeaderAndIsr", (2, 2), (2, 1), &[2], "applied"),
        // The paused controller 1 resumes and sends what it decided: fenced.
        decision("LeaderAndIsr", (1, 1), (1, 1), &[1], "rejected"),
    ];
    let result = run_fencing(&[node("b1", b1.clone())], Some(&timeline()));
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(result.counts["applied"], 3);
    assert_eq!(result.counts["rejected"], 1);
    // Without the timeline rule 2 cannot run: unknown, saying so.
    let result = run_fencing(&[node("b1", b1)], None);
    assert_eq!(result.verdict, Verdict::Unknown, "{result:?}");
    assert!(result.message.contains("rule 1 ("), "{}", result.message);
    assert!(
        result.message.contains("needs etcd's timeline"),
        "{}",
        result.message
    );
}

#[test]
fn checker_fencing_rejects_a_lower_controller_epoch_applied_after_a_higher_one() {
    let b1 = vec![
        decision("LeaderAndIsr", (1, 1), (1, 0), &[1, 2], "applied"),
        decision("LeaderAndIsr", (2, 2), (2, 1), &[2], "applied"),
        // Controller 1's UpdateMetadata applied after epoch 2: not fenced.
        decision("UpdateMetadata", (1, 1), (1, 0), &[1, 2], "applied"),
    ];
    // Rule 1 needs no timeline: invalid even without one.
    let result = run_fencing(&[node("b1", b1)], None);
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence.len(), 1, "{:?}", result.evidence);
    let evidence = &result.evidence[0];
    assert_eq!(evidence.anomaly, Anomaly::StaleControllerEpochApplied);
    assert!(
        evidence.summary.starts_with(
            "b1 applied UpdateMetadata for t-0 (leader 1, leader epoch 0) from controller 1 \
             at controller epoch 1 after applying controller epoch 2"
        ),
        "{}",
        evidence.summary
    );
    assert_eq!(evidence.details.json()["stale"]["entry"], 2);
    assert_eq!(evidence.details.json()["newer_applied_before"]["entry"], 1);
}

#[test]
fn checker_fencing_rejects_an_applied_leader_and_isr_etcd_never_recorded() {
    // b2 never saw controller epoch 2 before the stale decision came, so rule
    // 1 cannot see it; etcd shows no controller ever made 1 leader in epoch 1.
    let b2 = vec![
        decision("LeaderAndIsr", (1, 1), (1, 0), &[1, 2], "applied"),
        decision("LeaderAndIsr", (1, 1), (1, 1), &[1], "applied"),
    ];
    let b1 = vec![
        decision("LeaderAndIsr", (1, 1), (1, 0), &[1, 2], "applied"),
        decision("LeaderAndIsr", (2, 2), (2, 1), &[2], "applied"),
    ];
    let nodes = [node("b1", b1), node("b2", b2)];
    let result = run_fencing(&nodes, Some(&timeline()));
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence.len(), 1, "{:?}", result.evidence);
    let evidence = &result.evidence[0];
    assert_eq!(evidence.anomaly, Anomaly::UncommittedDecisionApplied);
    assert_eq!(
        evidence.summary,
        "b2 applied LeaderAndIsr for t-0 naming leader 1 at leader epoch 1 (controller 1, \
         controller epoch 1), which etcd never recorded; etcd's leader for that epoch: 2 \
         (revision 20)"
    );
    assert_eq!(
        evidence.details.json()["etcd_states_in_that_epoch"][0]["revision"],
        20
    );
    // Without the timeline the same run is unknown, not valid.
    let result = run_fencing(&nodes, None);
    assert_eq!(result.verdict, Verdict::Unknown, "{result:?}");
}
