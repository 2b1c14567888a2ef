//! Schedules: a TOML file naming the cluster (brokers, topics, broker settings and
//! failpoints per node), the workload's defaults, and the steps of a run — faults,
//! client operations, and `await`s on observed conditions, each bounded. This
//! module parses and validates a schedule and prints it back; it runs nothing.
//!
//! docs/schedules.md is the user's reference, with examples the tests parse.

mod broker_settings;
pub mod condition;
pub mod model;
mod parse;
pub mod step;

pub use broker_settings::{BROKER_SETTINGS, FAILPOINTS, HARNESS_OWNED_SETTINGS, SettingKind};
pub use condition::{Checkpoint, Compare, Condition, Offset};
pub use model::{
    Acks, Background, Cluster, Compression, Consume, Fault, NodeConfig, OneWay, PartitionRef,
    Produce, Schedule, Target, Topic, Truncate, TruncateLog, Workload,
};
pub use parse::{Invalid, ScheduleError};
pub use step::Step;

use std::path::Path;

use crate::node::NodeId;

impl Schedule {
    /// Reads, parses and validates a schedule file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ScheduleError> {
        let path = path.as_ref();
        let src = std::fs::read_to_string(path).map_err(|source| ScheduleError::Io {
            file: path.to_owned(),
            source,
        })?;
        Self::parse(path, &src)
    }

    /// Parses and validates schedule text; `file` only names it in errors.
    pub fn parse(file: impl AsRef<Path>, src: &str) -> Result<Self, ScheduleError> {
        parse::parse(file.as_ref(), src)
    }

    /// The schedule as TOML, parseable back to an equal schedule.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a schedule always serializes to TOML")
    }

    /// The cluster's nodes, `b1` .. `bN`.
    pub fn nodes(&self) -> Vec<NodeId> {
        NodeId::all(self.cluster.brokers).collect()
    }
}
