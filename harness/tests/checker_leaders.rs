//! The one-leader-per-epoch checker on hand-built runs: replicas written as
//! real segment files through kafka-protocol's encoder and read back by the
//! harness's reader, state-change logs and etcd's timeline, all loaded through
//! `RunData::load` as a stored run would be.

use epochal::checker::Anomaly;
use epochal::checker::{self, Verdict, leaders};
use epochal::observe::timeline::Timeline;

use crate::common;
use common::run_dir::{Node, decision, load_run, state};
use common::segments::{
    SpecCodec, SpecDataDir, SpecRecord, SpecReplica, SpecSegment, batch, records, text,
};

/// `t-0` holding `batches` of `(leader epoch, records)` in one segment.
fn data(batches: Vec<(i32, Vec<SpecRecord>)>) -> SpecDataDir {
    let mut epochs: Vec<(i32, i64)> = Vec::new();
    for (epoch, records) in &batches {
        if epochs.last().is_none_or(|(last, _)| last != epoch) {
            epochs.push((*epoch, records[0].offset));
        }
    }
    SpecDataDir {
        name: "run",
        replicas: vec![SpecReplica {
            topic: "t",
            partition: 0,
            segments: vec![SpecSegment {
                base_offset: 0,
                batches: batches
                    .into_iter()
                    .map(|(epoch, records)| batch(epoch, SpecCodec::None, records))
                    .collect(),
            }],
            epochs,
        }],
        high_watermarks: vec![],
        recovery_points: vec![],
        clean_shutdown: true,
    }
}

/// Records `offsets` valued `<prefix><offset>`.
fn valued(prefix: &str, offsets: std::ops::RangeInclusive<i64>) -> Vec<SpecRecord> {
    let mut records = records(offsets);
    for record in &mut records {
        record.value = text(format!("{prefix}{}", record.offset));
    }
    records
}

/// Leader 1 in epoch 0, then leader 2 in epoch 1, as etcd and every broker saw it.
fn timeline() -> Timeline {
    Timeline {
        partition_states: vec![state(10, (1, 0), &[1, 2], 1), state(14, (2, 1), &[2], 1)],
        controllers: vec![],
        registrations: Vec::new(),
    }
}

fn decisions() -> Vec<epochal::reader::state_change::StateChange> {
    vec![
        decision("LeaderAndIsr", (1, 1), (1, 0), &[1, 2], "applied"),
        decision("LeaderAndIsr", (1, 1), (2, 1), &[2], "applied"),
    ]
}

fn node(name: &'static str, data_dir: SpecDataDir) -> Node {
    Node {
        name,
        data: Some(data_dir),
        state_changes: decisions(),
    }
}

fn run_leaders(nodes: &[Node], timeline: Option<&Timeline>) -> checker::CheckResult {
    let dir = tempfile::tempdir().unwrap();
    let run = load_run(dir.path(), nodes, timeline);
    let mut report = checker::check(&run, &[leaders::checker()]);
    report.results.remove(0)
}

#[test]
fn checker_leaders_rejects_two_replicas_with_different_values_at_one_offset_in_one_epoch() {
    let nodes = [
        node(
            "b1",
            data(vec![(0, valued("v", 0..=2)), (1, valued("v", 3..=4))]),
        ),
        // b2 also holds epoch-1 batches at 3 and 4, with other values.
        node(
            "b2",
            data(vec![(0, valued("v", 0..=2)), (1, valued("x", 3..=4))]),
        ),
        node("b3", data(vec![(0, valued("v", 0..=2))])),
    ];
    let result = run_leaders(&nodes, Some(&timeline()));
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence.len(), 1, "{:?}", result.evidence);
    let evidence = &result.evidence[0];
    assert_eq!(evidence.anomaly, Anomaly::TwoWritersInOneEpoch);
    assert_eq!(
        evidence.summary,
        "t-0 offset 3, leader epoch 1: b1 holds v3, b2 holds x3 (2 offsets differ in this epoch)"
    );
    assert_eq!(evidence.details.json()["first_offset"], 3);
    assert_eq!(evidence.details.json()["differing_offsets"], 2);
    assert_eq!(evidence.details.json()["replicas"][1]["node"], "b2");
    assert_eq!(evidence.details.json()["replicas"][1]["value"], "x3");
    assert_eq!(
        evidence.details.json()["replicas"][1]["file"],
        "t-0/00000000000000000000.log"
    );
}

#[test]
fn checker_leaders_accepts_replicas_that_differ_only_across_epochs() {
    let nodes = [
        node(
            "b1",
            data(vec![(0, valued("v", 0..=2)), (1, valued("v", 3..=4))]),
        ),
        // An old leader's epoch-0 tail not yet truncated: other values at the
        // same offsets, but another epoch. Not two leaders in one epoch.
        node(
            "b2",
            data(vec![(0, valued("v", 0..=2)), (0, valued("old", 3..=5))]),
        ),
        node(
            "b3",
            data(vec![(0, valued("v", 0..=2)), (1, valued("v", 3..=3))]),
        ),
    ];
    let result = run_leaders(&nodes, Some(&timeline()));
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(result.counts["applied-leader-and-isr"], 6);
    assert_eq!(result.counts["etcd-partition-states"], 2);
    // The same run with no timeline cannot be valid: rule (a) did not run.
    let result = run_leaders(&nodes, None);
    assert_eq!(result.verdict, Verdict::Unknown, "{result:?}");
    assert!(result.message.contains("(a) needs etcd's timeline"));
}

#[test]
fn checker_leaders_rejects_two_leaders_for_one_epoch_in_etcd() {
    let nodes = [node("b1", data(vec![(0, valued("v", 0..=2))]))];
    let mut timeline = timeline();
    timeline.partition_states.push(state(17, (3, 1), &[3], 2));
    let result = run_leaders(&nodes, Some(&timeline));
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence.len(), 1, "{:?}", result.evidence);
    assert_eq!(result.evidence[0].anomaly, Anomaly::TwoLeadersInEtcd);
    assert_eq!(
        result.evidence[0].summary,
        "t-0 leader epoch 1: etcd recorded leaders 2 (revisions [14]) and 3 (revisions [17])"
    );
}

#[test]
fn checker_leaders_rejects_two_brokers_applying_different_leaders_for_one_epoch() {
    let mut b2 = node("b2", data(vec![(0, valued("v", 0..=2))]));
    // A stale controller's decision: leader 3 in epoch 1, applied by b2 only.
    b2.state_changes[1] = decision("LeaderAndIsr", (3, 1), (3, 1), &[3], "applied");
    let nodes = [node("b1", data(vec![(0, valued("v", 0..=2))])), b2];
    let result = run_leaders(&nodes, Some(&timeline()));
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence.len(), 1, "{:?}", result.evidence);
    assert_eq!(result.evidence[0].anomaly, Anomaly::TwoLeadersApplied);
    assert!(
        result.evidence[0]
            .summary
            .contains("naming leaders 2 (applied by b1) and 3 (applied by b2)"),
        "{}",
        result.evidence[0].summary
    );
    assert_eq!(
        result.evidence[0].details.json()["leaders"][1]["applied"][0]["controller_id"],
        3
    );
}
