//! A run directory: everything one run leaves in the store, in one place, and
//! the only place its layout is spelled. Written in phases, so whatever ends a
//! run, what was recorded before stays:
//!
//! ```text
//! <store>/<group...>/<UTC timestamp>-<n>/     (group: adhoc/<schedule>, or suite/scenario/setting)
//!     schedule.toml     the schedule as applied (--set merged in); written first
//!     system.toml       the system under test's file, for any system but the
//!                       reference broker (a run without one is the reference's)
//!     harness.log       what the harness did and saw, line by line
//!     history.jsonl     the history, one op a line, as it happens (history/op.rs)
//!     clock.json        the wall-clock time the history's clock started from
//!     timeline.json     etcd's revision history of the cluster's decisions, at the end
//!     final-read/       the final read over the protocol (systems whose final state is
//!                       read so: observe/final_read.rs), as Kafka segments + final-read.json
//!     database/         the system's database read by the harness's own client after
//!                       the brokers were killed (systems with `[final_state] database`:
//!                       observe/database.rs), as Kafka segments + database.json
//!     run.json          how the run ended (completed, or unknown and why); absent if cut off
//!     results.json      the checkers' report and the verdict
//!     expectation.json  a gate's run only: the verdict it expected, and whether it was met
//!     control.sock      `epochal up`'s control socket, only while its session runs
//!     nodes/etcd.log, nodes/proxy.log
//!     nodes/postgres-data/, nodes/postgres.log (systems that need PostgreSQL)
//!     nodes/shared/     what every broker of the run shares (systems that keep one
//!                       store for all brokers, e.g. tansu's SQLite database)
//!     nodes/etcd-data-<n>/ (process runtime, only where /dev/shm is missing: etcd's
//!                       data is kept in memory and dropped with it; timeline.json has
//!                       what the checkers read), nodes/docker-run-id (Docker runtime)
//!     nodes/b<i>/broker.log, nodes/b<i>/broker.toml (its settings, if any)
//!     nodes/b<i>/data/  the broker's data directory, frozen at the end (SIGKILL)
//! <store>/latest -> the newest run directory
//! ```
//!
//! `run`, `check`, `replay`, the gate, snapshots and the reader's users all
//! reach these files through [`RunDir`]; none of them joins a file name itself.
//! It knows paths, not what upper layers put in them: the checkers' report
//! and etcd's timeline are written by the phases that make them (run/check.rs,
//! run/collect.rs) at the paths it hands out, as JSON the store's way
//! ([`store::write_json`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::history::clock::ClockPair;
use crate::node::NodeId;
use crate::store::{self, StoreError};
use crate::system::{System, SystemError};

/// One run's directory in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    const SCHEDULE: &'static str = "schedule.toml";
    const HARNESS_LOG: &'static str = "harness.log";
    const HISTORY: &'static str = "history.jsonl";
    const TIMELINE: &'static str = "timeline.json";
    const RUN_END: &'static str = "run.json";
    const RESULTS: &'static str = "results.json";
    const CLOCK: &'static str = "clock.json";
    const NODES: &'static str = "nodes";
    const SYSTEM: &'static str = "system.toml";
    const FINAL_READ: &'static str = "final-read";
    const DATABASE: &'static str = "database";
    const CONTROL: &'static str = "control.sock";
    const EXPECTATION: &'static str = "expectation.json";

    /// A fresh run directory under `store/<group...>/`, and `store/latest`
    /// pointed at it.
    pub fn create(store: &Path, group: &[&str]) -> Result<RunDir, StoreError> {
        let path = store::create_run_dir(store, group)?;
        store::link_latest(store, &path)?;
        Ok(RunDir { path })
    }

    /// An existing run directory (nothing is checked until a file is read).
    pub fn open(path: impl Into<PathBuf>) -> RunDir {
        RunDir { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this looks like a run directory: it has a history.
    pub fn is_run(&self) -> bool {
        self.history().is_file()
    }

    pub fn schedule(&self) -> PathBuf {
        self.path.join(Self::SCHEDULE)
    }

    pub fn harness_log(&self) -> PathBuf {
        self.path.join(Self::HARNESS_LOG)
    }

    pub fn history(&self) -> PathBuf {
        self.path.join(Self::HISTORY)
    }

    /// The final read's directory (observe/final_read.rs writes it).
    pub fn final_read(&self) -> PathBuf {
        self.path.join(Self::FINAL_READ)
    }

    /// The database's directory (observe/database.rs writes it).
    pub fn database(&self) -> PathBuf {
        self.path.join(Self::DATABASE)
    }

    /// Writes `system.toml` for any system but the reference broker, whose
    /// runs stay as they were before systems were data.
    pub fn write_system(&self, system: &System) -> Result<(), StoreError> {
        if system.is_reference() {
            return Ok(());
        }
        let path = self.path.join(Self::SYSTEM);
        std::fs::write(&path, &system.text).map_err(|source| StoreError { path, source })
    }

    /// The system the run tested: `system.toml`, else the reference broker.
    pub fn read_system(&self) -> Result<System, SystemError> {
        let path = self.path.join(Self::SYSTEM);
        if path.is_file() {
            System::load(&path)
        } else {
            Ok(System::reference())
        }
    }

    /// `epochal up`'s control socket: there while its session runs, for
    /// `epochal fault` to send faults through.
    pub fn control_socket(&self) -> PathBuf {
        self.path.join(Self::CONTROL)
    }

    pub fn timeline(&self) -> PathBuf {
        self.path.join(Self::TIMELINE)
    }

    pub fn run_end(&self) -> PathBuf {
        self.path.join(Self::RUN_END)
    }

    pub fn results(&self) -> PathBuf {
        self.path.join(Self::RESULTS)
    }

    /// Where the runtime keeps every node's files.
    pub fn nodes(&self) -> PathBuf {
        self.path.join(Self::NODES)
    }

    /// Node-side layout, relative to [`RunDir::nodes`]: what a runtime
    /// creates, and what the reader later finds.
    pub fn node_layout(nodes: &Path) -> NodeLayout {
        NodeLayout {
            nodes: nodes.to_owned(),
        }
    }

    /// A broker's directory: `nodes/b<i>`.
    pub fn node(&self, node: NodeId) -> PathBuf {
        Self::node_layout(&self.nodes()).node(node)
    }

    /// A broker's data directory as frozen at the end of the run.
    pub fn data_dir(&self, node: NodeId) -> PathBuf {
        Self::node_layout(&self.nodes()).data_dir(node)
    }

    /// Nodes that left a data directory, in node order.
    pub fn nodes_with_data(&self) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = std::fs::read_dir(self.nodes())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<NodeId>().ok())
            .filter(|&n| self.data_dir(n).is_dir())
            .collect();
        nodes.sort();
        nodes
    }

    /// `run.json`, written once the run has ended.
    pub fn write_end(&self, end: &RunEnd) -> Result<(), StoreError> {
        store::write_json(&self.run_end(), end)
    }

    /// `run.json`; a run directory without it was cut off before it finished
    /// (e.g. Ctrl-C): unknown, saying so.
    pub fn read_end(&self) -> RunEnd {
        std::fs::read_to_string(self.run_end())
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(RunEnd {
                completed: false,
                unknown: Some("the run did not finish (no run.json)".into()),
                stuck: Vec::new(),
                stuck_groups: Vec::new(),
                stuck_topics: Vec::new(),
                unrecovered: None,
            })
    }

    /// `expectation.json`: what a gate expected of this run and whether the
    /// run met it (gate/run.rs writes it once the run is judged; the store's
    /// index shows it beside the verdict). Ad-hoc runs have none.
    pub fn write_expectation(&self, expectation: &Expectation) -> Result<(), StoreError> {
        store::write_json(&self.path.join(Self::EXPECTATION), expectation)
    }

    /// What `expectation.json` says, if a gate wrote one.
    pub fn read_expectation(&self) -> Option<Expectation> {
        let text = std::fs::read_to_string(self.path.join(Self::EXPECTATION)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// `clock.json`: the wall-clock time at which the history's clock read
    /// zero, so the report can place the brokers' wall-clock state-change
    /// logs among the ops, and the monotonic clock's reading at that moment,
    /// which places the proxy's recordings (history/clock.rs). Written when
    /// the history is created.
    pub fn write_clock(&self, opened: ClockPair) -> Result<(), StoreError> {
        store::write_json(
            &self.path.join(Self::CLOCK),
            &serde_json::json!({
                "history_opened_unix_ms": opened.unix_ns / 1_000_000,
                "history_opened_unix_ns": opened.unix_ns,
                "history_opened_monotonic_ns": opened.monotonic_ns,
            }),
        )
    }

    /// What `clock.json` says of the wall clock, if the run wrote one (runs
    /// before it did not).
    pub fn read_clock(&self) -> Option<u64> {
        self.clock_json()?.get("history_opened_unix_ms")?.as_u64()
    }

    /// Both clocks when the history opened, if `clock.json` has them (runs
    /// before the proxy stamped with the monotonic clock have the wall
    /// clock's alone).
    pub fn read_clock_pair(&self) -> Option<ClockPair> {
        let clock = self.clock_json()?;
        Some(ClockPair {
            unix_ns: clock.get("history_opened_unix_ns")?.as_u64()?,
            monotonic_ns: clock.get("history_opened_monotonic_ns")?.as_u64()?,
        })
    }

    fn clock_json(&self) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(self.path.join(Self::CLOCK)).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn write_schedule(&self, schedule: &crate::schedule::Schedule) -> Result<(), StoreError> {
        let path = self.schedule();
        std::fs::write(&path, schedule.to_toml()).map_err(|source| StoreError { path, source })
    }

    /// `schedule.toml` as the run left it, if it reads back.
    pub fn read_schedule(&self) -> Option<crate::schedule::Schedule> {
        crate::schedule::Schedule::load(self.schedule()).ok()
    }
}

/// Where a runtime puts one cluster's node files (`nodes/` of a run directory).
#[derive(Debug, Clone)]
pub struct NodeLayout {
    nodes: PathBuf,
}

impl NodeLayout {
    pub fn root(&self) -> &Path {
        &self.nodes
    }

    pub fn node(&self, node: NodeId) -> PathBuf {
        self.nodes.join(node.to_string())
    }

    pub fn data_dir(&self, node: NodeId) -> PathBuf {
        self.node(node).join("data")
    }

    pub fn broker_log(&self, node: NodeId) -> PathBuf {
        self.node(node).join("broker.log")
    }

    /// The broker's settings file, when it has settings.
    pub fn broker_config(&self, node: NodeId) -> PathBuf {
        self.node(node).join("broker.toml")
    }

    pub fn etcd_log(&self) -> PathBuf {
        self.nodes.join("etcd.log")
    }

    pub fn proxy_log(&self) -> PathBuf {
        self.nodes.join("proxy.log")
    }

    /// What the proxy recorded of the Kafka requests it forwarded, one file
    /// per link (`epochal-proxy --record`): `<proxy name>.frames`.
    pub fn proxy_frames(&self) -> PathBuf {
        self.nodes.join("proxy-frames")
    }

    /// A directory every broker of the run shares (`{shared_dir}` in a
    /// system's command line): storage a system keeps in one place for all
    /// its brokers, e.g. an SQLite database.
    pub fn shared_dir(&self) -> PathBuf {
        self.nodes.join("shared")
    }

    /// PostgreSQL's data directory (initdb makes it), for systems that need one.
    pub fn postgres_data(&self) -> PathBuf {
        self.nodes.join("postgres-data")
    }

    pub fn postgres_log(&self) -> PathBuf {
        self.nodes.join("postgres.log")
    }

    /// The process runtime's etcd data directory when there is no memory to
    /// keep it in (runtime/orphans.rs, `etcd_memory_dir`); each start attempt
    /// gets a fresh one, so a member that failed to bind leaves nothing to rejoin.
    pub fn etcd_data(&self, attempt: u32) -> PathBuf {
        self.nodes.join(format!("etcd-data-{attempt}"))
    }

    /// The Docker runtime's run id (its containers' `epochal.run` label), so a
    /// person or a test can find the run's containers.
    pub fn docker_run_id(&self) -> PathBuf {
        self.nodes.join("docker-run-id")
    }
}

/// `run.json`: how the run ended, kept so an offline re-check reaches the same
/// verdict (an await that timed out stays unknown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    pub completed: bool,
    /// Why the run is unknown, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// Partitions that acknowledged no write within the liveness window
    /// after the final heal (`[workload] liveness_ms`; run/liveness.rs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stuck: Vec<Stuck>,
    /// Groups whose coordinator took no commit within the liveness window
    /// (run/liveness.rs; runs whose workload uses groups).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stuck_groups: Vec<StuckGroup>,
    /// The topic-lives workload's topic when deleting, re-creating or
    /// reading it failed through the liveness window (run/liveness.rs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stuck_topics: Vec<StuckTopic>,
    /// The final quiesce's finding when the cluster made no progress toward
    /// settling in the last half of its bound (run/quiesce.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrecovered: Option<Unrecovered>,
}

/// A cluster that did not recover after the final heal: what was still
/// unsettled at the quiesce's bound — a partition without a leader or its
/// full ISR, or its replicas' (HW, LEO) short of one another — unchanged for
/// `unchanged_ms` of the `bound_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unrecovered {
    pub unsettled: String,
    /// Each partition whose replicas' log ends differ then, every replica
    /// with its (HW, LEO) and the leader named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<String>,
    pub unchanged_ms: u64,
    pub bound_ms: u64,
}

/// A partition the liveness window found taking no writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stuck {
    pub partition: crate::topic_partition::PartitionRef,
    pub window_ms: u64,
    /// The last attempt's error, if any attempt was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A consumer group the liveness window found its coordinator serving no
/// commit for: no coordinator named, or none that took a commit and answered
/// it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StuckGroup {
    pub group: String,
    pub window_ms: u64,
    /// The last attempt's error, if any attempt was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A topic the liveness window could not delete, create again and read:
/// `step` names the one that never succeeded (`delete-topic`,
/// `create-topic` or `life-read`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StuckTopic {
    pub topic: String,
    pub step: String,
    pub window_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// `expectation.json`: a gate case's expectation of its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expectation {
    /// `valid`, `invalid` or `invalid (anomaly)`, as the gate prints it.
    pub expected: String,
    pub met: bool,
    /// Why it was not met (empty when met).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}
