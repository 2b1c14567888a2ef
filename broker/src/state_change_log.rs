//! `<data>/state-change.log`: one JSON object a line for every control decision
//! this broker received (LeaderAndIsr and UpdateMetadata; StopReplica when it
//! lands), per partition, and whether it applied or rejected it.
//!
//! The harness reads this file with its own reader to check that no stale
//! controller's decision was ever applied (KAFKA-532). A line is written right
//! after the decision is applied or rejected and before the controller gets its
//! response; the format is append-only: fields may be added, never renamed.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub const FILE_NAME: &str = "state-change.log";

/// What the broker did with a decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Applied,
    Rejected,
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateChange {
    /// Wall-clock milliseconds since the Unix epoch, when the broker decided.
    pub time_ms: u64,
    /// The control request: `LeaderAndIsr`, `UpdateMetadata` or `StopReplica`.
    pub request: String,
    pub controller_id: i32,
    /// The controller epoch the request carried.
    pub controller_epoch: i32,
    pub topic: String,
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub outcome: Outcome,
    /// Why a decision was rejected (absent when applied).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
}

impl StateChange {
    pub fn now_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("state-change log {path}: {source}")]
pub struct StateChangeLogError {
    path: PathBuf,
    source: std::io::Error,
}

/// The appender. Lines are flushed to the OS on every write so a kill -9 right
/// after a decision still leaves it in the file; they are not fsynced (the log is
/// evidence for the harness, not state the broker recovers from).
pub struct StateChangeLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl StateChangeLog {
    pub fn open(data_dir: &Path) -> Result<Self, StateChangeLogError> {
        let path = data_dir.join(FILE_NAME);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| StateChangeLogError {
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            path,
            file: Mutex::new(file),
        })
    }

    pub fn append(&self, change: &StateChange) -> Result<(), StateChangeLogError> {
        let mut line = serde_json::to_vec(change).expect("a StateChange always serializes");
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // One write call per line: O_APPEND keeps lines whole.
        file.write_all(&line).map_err(|source| StateChangeLogError {
            path: self.path.clone(),
            source,
        })
    }
}

/// Read every line back (used by tests; the harness has its own reader).
pub fn read_all(data_dir: &Path) -> std::io::Result<Vec<StateChange>> {
    let text = std::fs::read_to_string(data_dir.join(FILE_NAME))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(std::io::Error::other))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_rejections_carry_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let log = StateChangeLog::open(dir.path()).unwrap();
        let mut c = StateChange {
            time_ms: 1,
            request: "LeaderAndIsr".into(),
            controller_id: 1,
            controller_epoch: 2,
            topic: "t".into(),
            partition: 0,
            leader: 1,
            leader_epoch: 0,
            isr: vec![1],
            outcome: Outcome::Applied,
            reason: None,
        };
        log.append(&c).unwrap();
        c.outcome = Outcome::Rejected;
        c.reason = Some("STALE_CONTROLLER_EPOCH".into());
        log.append(&c).unwrap();
        let back = read_all(dir.path()).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1], c);
        let raw = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(!raw.lines().next().unwrap().contains("reason"));
    }
}
