//! `<data>/state-change.log`: the broker's record of every control decision it
//! received (LeaderAndIsr, UpdateMetadata), one JSON object a line, and whether
//! it applied or rejected it (broker/README.md, "State-change log"). Read here
//! with the harness's own types: fields the harness does not know are ignored,
//! as the format only ever gains fields.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub const STATE_CHANGE_LOG: &str = "state-change.log";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateChange {
    pub time_ms: u64,
    /// `LeaderAndIsr`, `UpdateMetadata` or `StopReplica`.
    pub request: String,
    pub controller_id: i32,
    pub controller_epoch: i32,
    pub topic: String,
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    /// `applied` or `rejected`.
    pub outcome: String,
    #[serde(default)]
    pub reason: Option<String>,
}

impl StateChange {
    pub fn applied(&self) -> bool {
        self.outcome == "applied"
    }
}

#[cfg(test)]
impl StateChange {
    /// An applied LeaderAndIsr for `t-0` from controller 1 (epoch 1), for
    /// tests.
    pub fn of_t0(leader: i32, leader_epoch: i32, isr: &[i32]) -> Self {
        StateChange {
            time_ms: 1,
            request: "LeaderAndIsr".into(),
            controller_id: 1,
            controller_epoch: 1,
            topic: "t".into(),
            partition: 0,
            leader,
            leader_epoch,
            isr: isr.to_vec(),
            outcome: "applied".into(),
            reason: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateChangeError {
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: not a state-change entry: {source}", path.display())]
    Parse {
        path: std::path::PathBuf,
        line: usize,
        source: serde_json::Error,
    },
}

/// Every entry of a data directory's state-change log; an absent file is an
/// empty log (a broker that never received a decision). A last line cut short
/// by a crash mid-write is skipped; any other bad line is an error naming it.
pub fn read_state_changes(data_dir: &Path) -> Result<Vec<StateChange>, StateChangeError> {
    let path = data_dir.join(STATE_CHANGE_LOG);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StateChangeError::Io { path, source }),
    };
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut entries = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(entry) => entries.push(entry),
            Err(_) if i + 1 == lines.len() && !complete => break,
            Err(source) => {
                return Err(StateChangeError::Parse {
                    path,
                    line: i + 1,
                    source,
                });
            }
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"time_ms":1,"request":"LeaderAndIsr","controller_id":1,"controller_epoch":2,"topic":"t","partition":0,"leader":2,"leader_epoch":3,"isr":[2,3],"outcome":"applied","extra":true}"#;

    #[test]
    fn reads_entries_skips_a_torn_tail_and_names_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_state_changes(dir.path()).unwrap().is_empty());
        let path = dir.path().join(STATE_CHANGE_LOG);
        std::fs::write(&path, format!("{LINE}\n{{\"time_ms\":")).unwrap();
        let entries = read_state_changes(dir.path()).unwrap();
        assert_eq!(entries.len(), 1);
        assert!(entries[0].applied());
        assert_eq!(entries[0].leader_epoch, 3);
        std::fs::write(&path, format!("garbage\n{LINE}\n")).unwrap();
        let err = read_state_changes(dir.path()).unwrap_err().to_string();
        assert!(err.contains("state-change.log:1:"), "{err}");
    }
}
