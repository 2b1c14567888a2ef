//! What the checkers look at, loaded from a run directory (run_dir.rs has the
//! layout), so a stored run can be checked again with no cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::history::{Op, read_history};
use crate::node::NodeId;
use crate::observe::database::{DATABASE_JSON, DatabaseRead};
use crate::observe::final_read::{FINAL_READ_JSON, FinalRead};
use crate::observe::timeline::Timeline;
use crate::reader::frames::{Fetches, read_fetches};
use crate::reader::state_change::{StateChange, read_state_changes};
use crate::reader::{DataDirState, ReplicaState, read_data_dir};
use crate::run_dir::RunDir;
use crate::schedule::Schedule;
use crate::system::{Claims, Sees};
use crate::topic_partition::PartitionRef;

/// Everything a run left: the checkers' input.
#[derive(Debug, Clone)]
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
    /// The system under test's name, and what it lets the checkers see
    /// (system.toml; a run without one is the reference broker's).
    pub system: String,
    pub sees: Sees,
    pub claims: Claims,
    /// The final read over the protocol (`final-read/`), for systems whose
    /// replicas' files cannot be read.
    pub final_read: Option<FinalReadState>,
    /// The system's database as read after the run (`database/`), for a
    /// system that names one (`None` otherwise); `Err` says why it was not
    /// read, which the checkers that need it give as why they cannot judge.
    pub database: Option<Result<DatabaseState, DatabaseUnread>>,
    /// The replicas' Fetch requests the proxy recorded on the brokers'
    /// links (`nodes/proxy-frames/`); `None` when the run recorded none.
    pub fetches: Option<Fetches>,
    /// The wall-clock ms at which the history's clock read zero
    /// (`clock.json`), to put the recordings' wall-clock times on it.
    pub history_opened_unix_ms: Option<u64>,
    /// Client ops set aside at load as ops of a topic's earlier life (a
    /// topic deleted and created again; checker/earlier_lives.rs).
    pub earlier_lives_ops: u64,
}

/// The final read as the reader saw its segments, and the broker it went
/// through.
#[derive(Debug, Clone)]
pub struct FinalReadState {
    pub via: NodeId,
    pub data: DataDirState,
    /// Each partition the read did not read to its high watermark, and why.
    pub failed: BTreeMap<PartitionRef, String>,
}

/// Why a run that names a database has none to check: each is what the
/// checkers needing it give as why they cannot judge.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DatabaseUnread {
    /// No `database.json`: the run was cut off before the read.
    #[error(
        "the database was not read ({}: {error}): the run was cut off, or made before \
         databases were read",
        path.display()
    )]
    Missing { path: PathBuf, error: String },
    #[error("{}: {error}", path.display())]
    Malformed { path: PathBuf, error: String },
    /// The read itself failed; `database.json` says why.
    #[error("the database was not read: {0}")]
    Failed(String),
    /// The segments written from it could not be read back.
    #[error("{0}")]
    Segments(String),
}

/// The system's database as the reader saw the segments written from it,
/// and what `database.json` says of the read. Every partition a client sent
/// to or the final read read is there: one the database holds no record
/// of is an empty replica, so a write acknowledged there is missing from it.
#[derive(Debug, Clone)]
pub struct DatabaseState {
    pub summary: DatabaseRead,
    pub data: DataDirState,
}

impl DatabaseState {
    /// `database/` as observe/database.rs wrote it; `Err`: why the run has
    /// no database to check.
    fn load(
        dir: &std::path::Path,
        history: &[Op],
        final_read: Option<&FinalReadState>,
    ) -> Result<DatabaseState, DatabaseUnread> {
        let path = dir.join(DATABASE_JSON);
        let text = std::fs::read_to_string(&path).map_err(|e| DatabaseUnread::Missing {
            path: path.clone(),
            error: e.to_string(),
        })?;
        let summary: DatabaseRead =
            serde_json::from_str(&text).map_err(|e| DatabaseUnread::Malformed {
                path: path.clone(),
                error: e.to_string(),
            })?;
        if let Some(error) = &summary.error {
            return Err(DatabaseUnread::Failed(error.clone()));
        }
        let mut data = read_data_dir(dir).map_err(|e| DatabaseUnread::Segments(e.to_string()))?;
        let sent = history
            .iter()
            .filter_map(|op| Some(op.send()?.partition.clone()));
        let read = final_read
            .into_iter()
            .flat_map(|read| read.data.replicas.iter().map(ReplicaState::partition_ref));
        let absent: BTreeSet<PartitionRef> = sent
            .chain(read)
            .filter(|p| data.replica(&p.topic, p.wire_partition()).is_none())
            .collect();
        for partition in absent {
            data.replicas.push(ReplicaState {
                topic: partition.topic.clone(),
                partition: partition.wire_partition(),
                dir: PathBuf::from(partition.to_string()),
                segments: Vec::new(),
                leader_epochs: None,
                producer_snapshots: Vec::new(),
                high_watermark: Some(0),
                recovery_point: None,
                log_end_offset: 0,
                findings: Vec::new(),
            });
        }
        // As the reader orders them: by topic, then partition.
        data.replicas
            .sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(DatabaseState { summary, data })
    }
}

impl Default for RunData {
    fn default() -> Self {
        RunData {
            dir: PathBuf::new(),
            schedule: None,
            history: Vec::new(),
            replicas: BTreeMap::new(),
            state_changes: BTreeMap::new(),
            timeline: None,
            system: crate::system::REFERENCE.to_owned(),
            sees: Sees::ALL,
            claims: Claims::default(),
            final_read: None,
            database: None,
            fetches: None,
            history_opened_unix_ms: None,
            earlier_lives_ops: 0,
        }
    }
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
    #[error(transparent)]
    System(#[from] crate::system::SystemError),
    #[error("{}: {error}", path.display())]
    FinalRead { path: PathBuf, error: String },
    #[error(transparent)]
    Frames(#[from] crate::reader::frames::FramesError),
}

impl FinalReadState {
    fn load(dir: &std::path::Path) -> Result<FinalReadState, LoadError> {
        let path = dir.join(FINAL_READ_JSON);
        let error = |error: String| LoadError::FinalRead {
            path: path.clone(),
            error,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| error(e.to_string()))?;
        let summary: FinalRead = serde_json::from_str(&text).map_err(|e| error(e.to_string()))?;
        let via = summary
            .via
            .ok_or_else(|| error("names no broker the read went through (`via`)".into()))?;
        let failed = summary
            .partitions
            .iter()
            .filter_map(|p| {
                let partition =
                    PartitionRef::new(p.topic.clone(), u32::try_from(p.partition).ok()?);
                Some((partition, p.error.clone()?))
            })
            .collect();
        Ok(FinalReadState {
            via,
            data: read_data_dir(dir)?,
            failed,
        })
    }
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
        let system = dir.read_system()?;
        let final_read = if dir.final_read().is_dir() {
            Some(FinalReadState::load(&dir.final_read())?)
        } else {
            None
        };
        let database = system
            .final_state
            .database
            .is_some()
            .then(|| DatabaseState::load(&dir.database(), &history, final_read.as_ref()));
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
        let fetches = read_fetches(
            &RunDir::node_layout(&dir.nodes()).proxy_frames(),
            dir.read_clock_pair(),
        )?;
        let mut run = RunData {
            dir: dir.path().to_owned(),
            fetches,
            history_opened_unix_ms: dir.read_clock(),
            earlier_lives_ops: 0,
            schedule,
            history,
            replicas,
            state_changes,
            timeline,
            sees: system.sees(),
            claims: system.claims,
            system: system.name,
            final_read,
            database,
        };
        run.earlier_lives_ops = super::earlier_lives::set_aside(super::earlier_lives::Spanning {
            history: &mut run.history,
            state_changes: &mut run.state_changes,
            timeline: run.timeline.as_mut(),
            fetches: run.fetches.as_mut(),
        });
        Ok(run)
    }

    /// Every partition some node holds a replica of, or the final read read.
    pub fn partitions(&self) -> BTreeSet<PartitionRef> {
        let read = self.final_read.iter().map(|read| &read.data);
        self.replicas
            .values()
            .chain(read)
            .flat_map(|dir| dir.replicas.iter().map(ReplicaState::partition_ref))
            .collect()
    }

    /// Every node holding a replica of `partition`, in node order. For a
    /// system whose replicas cannot be read, the final read is the one
    /// replica there is, held by the broker it went through.
    pub fn holders(&self, partition: &PartitionRef) -> Vec<(NodeId, &ReplicaState)> {
        if !self.sees.replica_files {
            return self
                .final_read
                .iter()
                .filter_map(|read| {
                    let replica = read
                        .data
                        .replica(&partition.topic, partition.wire_partition())?;
                    Some((read.via, replica))
                })
                .collect();
        }
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
