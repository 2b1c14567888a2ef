//! The synthetic run (`checker::synthetic`) is shaped like a loaded one:
//! a history the validator accepts, acknowledged sends, polls with records,
//! sends that end info, one power loss among the faults, leader epochs
//! that move, and a replica of every partition on every broker.

use epochal::checker::synthetic::{SyntheticSpec, synthetic_run};
use epochal::history::{OpType, Validator, Verb};
use epochal::topic_partition::PartitionRef;

#[test]
fn a_synthetic_history_is_valid_and_shaped_like_a_loaded_run() {
    let run = synthetic_run(&SyntheticSpec::with_ops(2_000));
    let mut validator = Validator::new();
    for op in &run.history {
        validator
            .check(op)
            .unwrap_or_else(|e| panic!("op {}: {e}", op.index));
    }
    let acked = run.history.iter().filter(|op| op.acked_send().is_some());
    let polled = run.history.iter().filter_map(|op| op.read());
    let info = run.history.iter().filter(|op| op.kind == OpType::Info);
    let faults: Vec<Verb> = run
        .history
        .iter()
        .filter(|op| op.kind == OpType::Info)
        .filter_map(|op| Some(op.fault()?.verb))
        .collect();
    assert!(acked.count() > 500);
    assert!(polled.filter(|(_, read)| !read.records.is_empty()).count() > 100);
    assert!(info.count() > faults.len(), "some sends end info");
    assert_eq!(
        faults.iter().filter(|&&v| v == Verb::PowerLoss).count(),
        1,
        "{faults:?}"
    );
    let epochs: Vec<i32> = run
        .timeline
        .as_ref()
        .unwrap()
        .partition_states
        .iter()
        .map(|s| s.leader_epoch)
        .collect();
    assert!(epochs.iter().max() > Some(&0), "{epochs:?}");
    assert_eq!(run.replicas.len(), 3);
    assert!(run.holders(&PartitionRef::new("t", 1)).len() == 3);
}
