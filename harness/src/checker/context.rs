//! What the checkers look at, loaded from a run directory (run_dir.rs has the
//! layout), so a stored run can be checked again with no cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::history::{Op, read_history};
use crate::node::NodeId;
use crate::observe::timeline::Timeline;
use crate::reader::state_change::{StateChange, read_state_changes};
use crate::reader::{DataDirState, ReplicaState, read_data_dir};
use crate::run_dir::RunDir;
use crate::schedule::Schedule;
use crate::topic_partition::PartitionRef;

/// Everything a run left: the checkers' input.
#[derive(Debug, Clone, Default)]
pub struct RunData {
    pub dir: PathBuf,
    pub schedule: Option<Schedule>,
    /// Validated on load.
    pub history: Vec<Op>,
    /// Each node's frozen data directory, as the reader saw it.
    pub replicas: BTreeMap<NodeId, DataDirState>,
    /// Each node's state-change log.
    pub state_changes: BTreeMap<NodeId, Vec<StateChange>>,
    /// etcd's history of the partition-state and controller keys; `None` when
    /// the run did not record one (checkers needing it are then unknown).
    pub timeline: Option<Timeline>,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: not a run directory (no history.jsonl)", .0.display())]
    NotARun(PathBuf),
    #[error(transparent)]
    Schedule(#[from] crate::schedule::ScheduleError),
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
    #[error(transparent)]
    Read(#[from] crate::reader::ReadError),
    #[error(transparent)]
    StateChange(#[from] crate::reader::state_change::StateChangeError),
    #[error("{}: {error}", path.display())]
    Timeline { path: PathBuf, error: String },
}

impl RunData {
    /// Loads a run directory: `schedule.toml`, `history.jsonl` (validated),
    /// each `nodes/b<i>/data` through the reader, the state-change logs and
    /// `timeline.json` when present.
    pub fn load(dir: &RunDir) -> Result<Self, LoadError> {
        if !dir.is_run() {
            return Err(LoadError::NotARun(dir.path().to_owned()));
        }
        let schedule_path = dir.schedule();
        let schedule = if schedule_path.is_file() {
            Some(Schedule::load(&schedule_path)?)
        } else {
            None
        };
        let history = read_history(dir.history())?;
        let mut replicas = BTreeMap::new();
        let mut state_changes = BTreeMap::new();
        for node in dir.nodes_with_data() {
            let data = dir.data_dir(node);
            state_changes.insert(node, read_state_changes(&data)?);
            replicas.insert(node, read_data_dir(&data)?);
        }
        let timeline_path = dir.timeline();
        let timeline = if timeline_path.is_file() {
            let text =
                std::fs::read_to_string(&timeline_path).map_err(|e| LoadError::Timeline {
                    path: timeline_path.clone(),
                    error: e.to_string(),
                })?;
            Some(
                serde_json::from_str(&text).map_err(|e| LoadError::Timeline {
                    path: timeline_path.clone(),
                    error: e.to_string(),
                })?,
            )
        } else {
            None
        };
        Ok(RunData {
            dir: dir.path().to_owned(),
            schedule,
            history,
            replicas,
            state_changes,
            timeline,
        })
    }

    /// Every partition some node holds a replica of.
    pub fn partitions(&self) -> BTreeSet<PartitionRef> {
        self.replicas
            .values()
            .flat_map(|dir| dir.replicas.iter().map(ReplicaState::partition_ref))
            .collect()
    }

    /// Every node holding a replica of `partition`, in node order.
    pub fn holders(&self, partition: &PartitionRef) -> Vec<(NodeId, &ReplicaState)> {
        self.replicas
            .iter()
            .filter_map(|(&node, dir)| {
                Some((
                    node,
                    dir.replica(&partition.topic, partition.wire_partition())?,
                ))
            })
            .collect()
    }
}
