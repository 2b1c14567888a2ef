//! A run directory built by hand, as `RunData::load` reads it: an empty
//! history, each node's data directory written through `segments`, its
//! state-change log, and etcd's timeline as `timeline.json`.

use std::path::Path;

use epochal::checker::RunData;
use epochal::observe::timeline::{PartitionStateChange, Timeline};
use epochal::reader::state_change::{STATE_CHANGE_LOG, StateChange};

use super::segments::{SpecDataDir, write_fixture};

/// One node of a hand-built run.
pub struct Node {
    pub name: &'static str,
    /// `None`: a data directory with no replicas.
    pub data: Option<SpecDataDir>,
    pub state_changes: Vec<StateChange>,
}

/// Writes the run under `root` and loads it the way the checkers get it.
pub fn load_run(root: &Path, nodes: &[Node], timeline: Option<&Timeline>) -> RunData {
    std::fs::write(root.join("history.jsonl"), "").unwrap();
    for node in nodes {
        let data = root.join("nodes").join(node.name).join("data");
        std::fs::create_dir_all(&data).unwrap();
        if let Some(spec) = &node.data {
            write_fixture(spec, &data);
        }
        let log: String = node
            .state_changes
            .iter()
            .map(|entry| serde_json::to_string(entry).unwrap() + "\n")
            .collect();
        std::fs::write(data.join(STATE_CHANGE_LOG), log).unwrap();
    }
    if let Some(timeline) = timeline {
        std::fs::write(
            root.join("timeline.json"),
            serde_json::to_string(timeline).unwrap(),
        )
        .unwrap();
    }
    RunData::load(&epochal::run_dir::RunDir::open(root)).unwrap()
}

/// A state-change entry for `t-0`.
pub fn decision(
    request: &str,
    (controller_id, controller_epoch): (i32, i32),
    (leader, leader_epoch): (i32, i32),
    isr: &[i32],
    outcome: &str,
) -> StateChange {
    StateChange {
        time_ms: 1_000 + controller_epoch as u64 * 10 + leader_epoch as u64,
        request: request.into(),
        controller_id,
        controller_epoch,
        topic: "t".into(),
        partition: 0,
        leader,
        leader_epoch,
        isr: isr.to_vec(),
        outcome: outcome.into(),
        reason: (outcome == "rejected").then(|| "STALE_CONTROLLER_EPOCH".into()),
    }
}

/// A write of `t-0`'s state key.
pub fn state(
    revision: i64,
    (leader, leader_epoch): (i32, i32),
    isr: &[i32],
    controller_epoch: i32,
) -> PartitionStateChange {
    PartitionStateChange {
        controller_epoch,
        ..PartitionStateChange::of_t0(revision, leader, leader_epoch, isr)
    }
}
