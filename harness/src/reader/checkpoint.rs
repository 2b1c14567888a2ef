//! Kafka's checkpoint files, parsed as strictly as Kafka parses them.
//!
//! A checkpoint is text: a version line (`0`), a count line, then one entry a
//! line — `epoch start_offset` in a partition's `leader-epoch-checkpoint`,
//! `topic partition offset` in the data directory's `replication-offset-checkpoint`
//! (high watermarks) and `recovery-point-offset-checkpoint`. Parsing follows
//! Kafka's `CheckpointFile` reader: an empty file (or one that stops after the
//! version line) is an empty list; a wrong version, a malformed line or a count
//! that does not match the entries is an error naming the file and the line.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `CURRENT_VERSION` of both `LeaderEpochCheckpointFile` and `OffsetCheckpointFile`.
pub const CHECKPOINT_VERSION: i32 = 0;

pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const RECOVERY_POINT_OFFSET_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// One line of a leader-epoch-checkpoint: `epoch` began at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// One line of an offset checkpoint (high watermark or recovery point).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// A checkpoint that Kafka would refuse to load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: line {line}: {problem}", file.display())]
pub struct CheckpointError {
    pub file: PathBuf,
    /// 1-based; for a count mismatch, the count line.
    pub line: usize,
    pub problem: CheckpointProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointProblem {
    #[error("unrecognised version {found:?}, expected {CHECKPOINT_VERSION}")]
    Version { found: String },
    #[error("malformed line {text:?}")]
    MalformedLine { text: String },
    #[error("expected {expected} entries, found {found}")]
    CountMismatch { expected: i32, found: usize },
}

/// Parses a leader-epoch-checkpoint. `file` only labels errors.
pub fn parse_leader_epochs(file: &Path, text: &str) -> Result<Vec<EpochEntry>, CheckpointError> {
    parse(file, text, |fields| match fields {
        [epoch, start_offset] => Some(EpochEntry {
            epoch: epoch.parse().ok()?,
            start_offset: start_offset.parse().ok()?,
        }),
        _ => None,
    })
}

/// Parses a replication-offset-checkpoint or recovery-point-offset-checkpoint.
pub fn parse_offsets(file: &Path, text: &str) -> Result<Vec<OffsetEntry>, CheckpointError> {
    parse(file, text, |fields| match fields {
        [topic, partition, offset] => Some(OffsetEntry {
            topic: (*topic).to_owned(),
            partition: partition.parse().ok()?,
            offset: offset.parse().ok()?,
        }),
        _ => None,
    })
}

fn parse<T>(
    file: &Path,
    text: &str,
    entry: impl Fn(&[&str]) -> Option<T>,
) -> Result<Vec<T>, CheckpointError> {
    let error = |line: usize, problem| CheckpointError {
        file: file.to_owned(),
        line,
        problem,
    };
    let mut lines = text.lines().enumerate().map(|(i, line)| (i + 1, line));

    let Some((_, version)) = lines.next() else {
        return Ok(Vec::new());
    };
    if version.parse::<i32>() != Ok(CHECKPOINT_VERSION) {
        return Err(error(
            1,
            CheckpointProblem::Version {
                found: version.to_owned(),
            },
        ));
    }
    let Some((count_line, count)) = lines.next() else {
        return Ok(Vec::new());
    };
    let expected: i32 = count.parse().map_err(|_| {
        error(
            count_line,
            CheckpointProblem::MalformedLine {
                text: count.to_owned(),
            },
        )
    })?;

    // Kafka reads every remaining line, then compares the count, so a
    // malformed line is reported even when the count is also wrong.
    let mut entries = Vec::new();
    for (number, line) in lines {
        let parsed = fields(line).and_then(|fields| entry(&fields));
        let parsed = parsed.ok_or_else(|| {
            error(
                number,
                CheckpointProblem::MalformedLine {
                    text: line.to_owned(),
                },
            )
        })?;
        entries.push(parsed);
    }
    if usize::try_from(expected) != Ok(entries.len()) {
        return Err(error(
            count_line,
            CheckpointProblem::CountMismatch {
                expected,
                found: entries.len(),
            },
        ));
    }
    Ok(entries)
}

/// Splits like Java's `line.split("\\s+")`: leading whitespace yields an empty
/// first field (which then fails to parse), trailing whitespace is dropped.
fn fields(line: &str) -> Option<Vec<&str>> {
    if line.is_empty() || line.starts_with(char::is_whitespace) {
        return None;
    }
    Some(line.split_whitespace().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(text: &str) -> Result<Vec<EpochEntry>, CheckpointError> {
        parse_leader_epochs(Path::new("t-0/leader-epoch-checkpoint"), text)
    }

    fn problem_at(text: &str) -> (usize, CheckpointProblem) {
        let error = epochs(text).unwrap_err();
        (error.line, error.problem)
    }

    #[test]
    fn reads_kafkas_example() {
        assert_eq!(
            epochs("0\n2\n0 1\n1 2\n").unwrap(),
            vec![
                EpochEntry {
                    epoch: 0,
                    start_offset: 1
                },
                EpochEntry {
                    epoch: 1,
                    start_offset: 2
                }
            ]
        );
    }

    #[test]
    fn empty_file_and_version_only_are_empty() {
        assert_eq!(epochs("").unwrap(), vec![]);
        assert_eq!(epochs("0\n").unwrap(), vec![]);
        assert_eq!(epochs("0\n0\n").unwrap(), vec![]);
    }

    #[test]
    fn strict_errors_name_the_line() {
        assert!(matches!(
            problem_at("1\n0\n"),
            (1, CheckpointProblem::Version { .. })
        ));
        assert!(matches!(
            problem_at("0\nx\n"),
            (2, CheckpointProblem::MalformedLine { .. })
        ));
        assert!(matches!(
            problem_at("0\n2\n0 1\n"),
            (
                2,
                CheckpointProblem::CountMismatch {
                    expected: 2,
                    found: 1
                }
            )
        ));
        assert!(matches!(
            problem_at("0\n1\n0 1 2\n"),
            (3, CheckpointProblem::MalformedLine { .. })
        ));
        assert!(matches!(
            problem_at("0\n2\n0 1\n\n"),
            (4, CheckpointProblem::MalformedLine { .. })
        ));
        assert!(matches!(
            problem_at("0\n1\n 0 1\n"),
            (3, CheckpointProblem::MalformedLine { .. })
        ));
        assert!(matches!(
            problem_at("0\n1\n99999999999 0\n"),
            (3, CheckpointProblem::MalformedLine { .. })
        ));
    }

    #[test]
    fn offsets_checkpoint_keeps_dashed_topics() {
        let entries = parse_offsets(
            Path::new("replication-offset-checkpoint"),
            "0\n1\na-b 3 17\n",
        )
        .unwrap();
        assert_eq!(
            entries,
            vec![OffsetEntry {
                topic: "a-b".into(),
                partition: 3,
                offset: 17
            }]
        );
    }
}
