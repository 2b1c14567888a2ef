//! The harness's own reader of Kafka-format replica state.
//!
//! Given a broker's data directory it returns every replica's state: the
//! segments walked batch by batch, the leader-epoch-checkpoint, the
//! producer-state snapshots, the high watermark and recovery point
//! checkpoints and the clean-shutdown marker,
//! plus every piece of damage found, as [`Finding`]s. It reads the files with
//! its own code and must never use the broker crate's: a bug in the broker's
//! file handling must not be able to hide itself from the checks.
//!
//! Layout read (Kafka's): `<data>/<topic>-<partition>/<20-digit base offset>.log`,
//! `<data>/<topic>-<partition>/leader-epoch-checkpoint`,
//! `<data>/<topic>-<partition>/<20-digit offset>.snapshot`,
//! `<data>/replication-offset-checkpoint`, `<data>/recovery-point-offset-checkpoint`
//! and `<data>/.kafka_cleanshutdown`. Offset and time index files are ignored:
//! they are derived data and Kafka rebuilds them. The aborted-transaction
//! index (`<base>.txnindex`) is read and held to the log's transaction
//! markers ([`txn`]): read_committed consumers are served from it.

pub mod app_frames;
pub mod checkpoint;
pub mod compact;
pub mod dump;
pub mod finding;
pub mod frames;
pub mod offsets_topic;
pub mod payload;
pub mod producer_snapshot;
pub mod record;
pub mod segment;
pub mod state_change;
pub mod txn;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::topic_partition::PartitionRef;

pub use checkpoint::{CheckpointError, CheckpointProblem, EpochEntry, OffsetEntry};
pub use compact::{
    CompactDataDir, CompactProducer, CompactProducerSnapshot, CompactRecord, CompactReplica,
};
pub use finding::{Finding, FindingKind, Location};
pub use payload::Payload;
pub use producer_snapshot::{ProducerEntry, ProducerSnapshot, parse_snapshot};
pub use record::{Codec, Header, Record};
pub use segment::{Batch, walk_segment};

use checkpoint::{
    CLEAN_SHUTDOWN_MARKER, LEADER_EPOCH_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT, parse_leader_epochs, parse_offsets,
};

/// The data directory itself could not be read. Everything inside it that
/// cannot be read is a [`Finding`] instead.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read data directory {}: {source}", path.display())]
    DataDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("data directory {} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
}

/// Everything one broker's data directory holds, as read from disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataDirState {
    /// The directory that was read; every other path is relative to it.
    pub path: PathBuf,
    /// One per `<topic>-<partition>` directory, ordered by topic then partition.
    pub replicas: Vec<ReplicaState>,
    /// `replication-offset-checkpoint`; `None` when absent or malformed.
    pub high_watermarks: Option<Vec<OffsetEntry>>,
    /// `recovery-point-offset-checkpoint`; `None` when absent or malformed.
    pub recovery_points: Option<Vec<OffsetEntry>>,
    /// Whether `.kafka_cleanshutdown` exists: the broker stopped cleanly and
    /// would skip log recovery on its next start.
    pub clean_shutdown: bool,
    /// Damage in the data directory's own files (the offset checkpoints).
    pub findings: Vec<Finding>,
}

/// One replica: a partition directory and what the data directory's
/// checkpoints say about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaState {
    pub topic: String,
    pub partition: i32,
    /// Relative to the data directory, e.g. `t-0`.
    pub dir: PathBuf,
    /// Ordered by base offset.
    pub segments: Vec<Segment>,
    /// `leader-epoch-checkpoint`; `None` when absent or malformed.
    pub leader_epochs: Option<Vec<EpochEntry>>,
    /// `<offset>.snapshot` producer-state snapshots (KIP-98), ordered by
    /// offset, damaged ones included without entries. Left out of the
    /// serialized form when there are none, so replicas without idempotent
    /// producers serialize as they did before snapshots were read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub producer_snapshots: Vec<ProducerSnapshot>,
    pub high_watermark: Option<i64>,
    pub recovery_point: Option<i64>,
    /// The offset after the last intact batch, or the last segment's base
    /// offset when that is higher (an empty active segment).
    pub log_end_offset: i64,
    /// Damage in this replica's files, in the order it was found.
    pub findings: Vec<Finding>,
}

/// One `.log` file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Relative to the data directory.
    pub file: PathBuf,
    /// From the file name.
    pub base_offset: i64,
    pub size_bytes: u64,
    /// Every batch with a readable frame, intact or not, in file order.
    pub batches: Vec<Batch>,
}

impl DataDirState {
    pub fn replica(&self, topic: &str, partition: i32) -> Option<&ReplicaState> {
        self.replicas
            .iter()
            .find(|replica| replica.topic == topic && replica.partition == partition)
    }

    /// The directory's own findings, then each replica's.
    pub fn all_findings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .chain(self.replicas.iter().flat_map(|replica| &replica.findings))
    }
}

impl ReplicaState {
    /// The partition this is a replica of, as the rest of the harness names it.
    pub fn partition_ref(&self) -> PartitionRef {
        // The number was parsed from the directory name's digits: never negative.
        let number = u32::try_from(self.partition).expect("a partition directory number is >= 0");
        PartitionRef::new(self.topic.clone(), number)
    }

    /// Every batch, in log order, intact or not.
    pub fn batches(&self) -> impl Iterator<Item = &Batch> {
        self.segments.iter().flat_map(|segment| &segment.batches)
    }

    /// Its transactions (KIP-98): each transactional data batch's, and how
    /// the log ended it.
    pub fn transactions(&self) -> txn::Transactions {
        txn::Transactions::of_batches(self.batches())
    }

    /// The records of intact batches, in log order, each with its batch.
    pub fn records(&self) -> impl Iterator<Item = (&Batch, &Record)> {
        self.batches()
            .filter(|batch| batch.intact)
            .flat_map(|batch| batch.records.iter().map(move |record| (batch, record)))
    }
}

/// Reads one broker's data directory. Fails only when the directory itself
/// cannot be listed; damage inside it comes back as findings.
pub fn read_data_dir(path: &Path) -> Result<DataDirState, ReadError> {
    let metadata = fs::metadata(path).map_err(|source| ReadError::DataDir {
        path: path.to_owned(),
        source,
    })?;
    if !metadata.is_dir() {
        return Err(ReadError::NotADirectory {
            path: path.to_owned(),
        });
    }
    let entries = fs::read_dir(path).map_err(|source| ReadError::DataDir {
        path: path.to_owned(),
        source,
    })?;

    let mut partition_dirs = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|source| ReadError::DataDir {
            path: path.to_owned(),
            source,
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // Anything else (meta.properties, state-change.log, `-delete` and
        // `-future` directories) is not a replica.
        if let Some((topic, partition)) = partition_dir_name(name)
            && entry.file_type().is_ok_and(|kind| kind.is_dir())
        {
            partition_dirs.insert((topic.to_owned(), partition), PathBuf::from(name));
        }
    }

    let mut findings = Vec::new();
    let high_watermarks = read_checkpoint(
        path,
        Path::new(REPLICATION_OFFSET_CHECKPOINT),
        &mut findings,
        parse_offsets,
    );
    let recovery_points = read_checkpoint(
        path,
        Path::new(RECOVERY_POINT_OFFSET_CHECKPOINT),
        &mut findings,
        parse_offsets,
    );

    let replicas = partition_dirs
        .into_iter()
        .map(|((topic, partition), dir)| {
            let mut replica = read_replica(path, topic, partition, dir);
            attach_offset_checkpoint(
                &mut replica,
                high_watermarks.as_deref(),
                REPLICATION_OFFSET_CHECKPOINT,
                |replica, offset| replica.high_watermark = Some(offset),
            );
            attach_offset_checkpoint(
                &mut replica,
                recovery_points.as_deref(),
                RECOVERY_POINT_OFFSET_CHECKPOINT,
                |replica, offset| replica.recovery_point = Some(offset),
            );
            replica
        })
        .collect();

    Ok(DataDirState {
        path: path.to_owned(),
        replicas,
        high_watermarks,
        recovery_points,
        clean_shutdown: path.join(CLEAN_SHUTDOWN_MARKER).exists(),
        findings,
    })
}

/// `<topic>-<partition>`: the partition is after the last dash, so topics may
/// contain dashes.
fn partition_dir_name(name: &str) -> Option<(&str, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    if topic.is_empty() || partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((topic, partition.parse().ok()?))
}

/// `<20-digit base offset>.log`.
fn segment_base_offset(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn read_replica(root: &Path, topic: String, partition: i32, dir: PathBuf) -> ReplicaState {
    let mut findings = Vec::new();
    let mut segment_files = Vec::new();
    let mut snapshot_files = Vec::new();
    match fs::read_dir(root.join(&dir)) {
        Ok(entries) => {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                let bad_name = |kind| Finding {
                    file: dir.join(name),
                    at: Location::File,
                    kind,
                };
                // `.snapshot.deleted` (Kafka's asynchronous delete) and every
                // other suffix fall through both arms.
                if name.ends_with(".log") {
                    match segment_base_offset(name) {
                        Some(base_offset) => segment_files.push((base_offset, dir.join(name))),
                        None => findings.push(bad_name(FindingKind::BadSegmentName)),
                    }
                } else if name.ends_with(".snapshot") {
                    match producer_snapshot::snapshot_offset(name) {
                        Some(offset) => snapshot_files.push((offset, dir.join(name))),
                        None => findings.push(bad_name(FindingKind::BadSnapshotName)),
                    }
                }
            }
        }
        Err(error) => findings.push(Finding {
            file: dir.clone(),
            at: Location::File,
            kind: FindingKind::Unreadable {
                error: error.to_string(),
            },
        }),
    }
    segment_files.sort();

    // A file at a time: a segment is bounded by the broker's segment size.
    let mut segments = Vec::with_capacity(segment_files.len());
    for (base_offset, file) in segment_files {
        match fs::read(root.join(&file)) {
            Ok(bytes) => {
                let walk = walk_segment(&file, &bytes);
                findings.extend(walk.findings);
                segments.push(Segment {
                    file,
                    base_offset,
                    size_bytes: bytes.len() as u64,
                    batches: walk.batches,
                });
            }
            Err(error) => findings.push(Finding {
                file,
                at: Location::File,
                kind: FindingKind::Unreadable {
                    error: error.to_string(),
                },
            }),
        }
    }

    let log_end_offset = check_offsets(&segments, &mut findings);
    txn::check_txn_index(
        root,
        &dir,
        segments.iter().flat_map(|s| &s.batches),
        &mut findings,
    );
    snapshot_files.sort();
    let producer_snapshots = producer_snapshot::read_snapshots(root, snapshot_files, &mut findings);
    producer_snapshot::check_against_log_end(&producer_snapshots, log_end_offset, &mut findings);
    let epoch_file = dir.join(LEADER_EPOCH_CHECKPOINT);
    let leader_epochs = read_checkpoint(root, &epoch_file, &mut findings, parse_leader_epochs);
    for (index, entry) in leader_epochs.iter().flatten().enumerate() {
        if entry.start_offset > log_end_offset {
            findings.push(Finding {
                file: epoch_file.clone(),
                at: Location::Line(entry_line(index)),
                kind: FindingKind::EpochEntryPastLogEnd {
                    epoch: entry.epoch,
                    start_offset: entry.start_offset,
                    log_end_offset,
                },
            });
        }
    }

    ReplicaState {
        topic,
        partition,
        dir,
        segments,
        leader_epochs,
        producer_snapshots,
        high_watermark: None,
        recovery_point: None,
        log_end_offset,
        findings,
    }
}

/// Checks that intact batches follow each other without gaps or overlaps,
/// across segment boundaries too, and returns the log end offset.
fn check_offsets(segments: &[Segment], findings: &mut Vec<Finding>) -> i64 {
    let mut next: Option<i64> = None;
    // A torn tail explains a gap before the next segment; only a segment
    // that ended cleanly makes a gap mean a missing segment.
    let mut previous_ended_cleanly = true;
    for segment in segments {
        let mut first_in_segment = true;
        for batch in segment.batches.iter().filter(|batch| batch.intact) {
            let finding = |kind| Finding {
                file: batch.file.to_path_buf(),
                at: Location::Byte(batch.position),
                kind,
            };
            if first_in_segment && batch.base_offset < segment.base_offset {
                findings.push(finding(FindingKind::BatchBeforeSegmentBase {
                    segment_base_offset: segment.base_offset,
                    batch_base_offset: batch.base_offset,
                }));
            }
            if let Some(expected) = next {
                let found = batch.base_offset;
                if found < expected {
                    findings.push(finding(FindingKind::OffsetOverlap { expected, found }));
                } else if found > expected {
                    let missing_segment = first_in_segment
                        && previous_ended_cleanly
                        && segment.base_offset > expected;
                    findings.push(finding(if missing_segment {
                        FindingKind::MissingSegment {
                            expected_base_offset: expected,
                            found_base_offset: segment.base_offset,
                        }
                    } else {
                        FindingKind::OffsetGap { expected, found }
                    }));
                }
            }
            next = Some(next.map_or(batch.next_offset(), |n| n.max(batch.next_offset())));
            first_in_segment = false;
        }
        previous_ended_cleanly = !findings.iter().any(|finding| {
            finding.file == segment.file
                && matches!(
                    finding.kind,
                    FindingKind::TornTail { .. } | FindingKind::CorruptBatchHeader { .. }
                )
        });
    }
    let active_base = segments.last().map_or(0, |segment| segment.base_offset);
    next.map_or(active_base, |next| next.max(active_base))
}

/// Line number of the `index`-th entry: after the version and count lines.
fn entry_line(index: usize) -> usize {
    index + 3
}

/// Reads and parses a checkpoint; absent is `None` without a finding,
/// unreadable or malformed is `None` with one.
fn read_checkpoint<T>(
    root: &Path,
    file: &Path,
    findings: &mut Vec<Finding>,
    parse: impl Fn(&Path, &str) -> Result<Vec<T>, CheckpointError>,
) -> Option<Vec<T>> {
    let text = match fs::read(root.join(file)) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return None,
        Err(error) => {
            findings.push(Finding {
                file: file.to_owned(),
                at: Location::File,
                kind: FindingKind::Unreadable {
                    error: error.to_string(),
                },
            });
            return None;
        }
    };
    let Ok(text) = String::from_utf8(text) else {
        findings.push(Finding {
            file: file.to_owned(),
            at: Location::File,
            kind: FindingKind::MalformedCheckpoint {
                problem: "not UTF-8".to_owned(),
            },
        });
        return None;
    };
    match parse(file, &text) {
        Ok(entries) => Some(entries),
        Err(error) => {
            findings.push(Finding {
                file: error.file,
                at: Location::Line(error.line),
                kind: FindingKind::MalformedCheckpoint {
                    problem: error.problem.to_string(),
                },
            });
            None
        }
    }
}

fn attach_offset_checkpoint(
    replica: &mut ReplicaState,
    entries: Option<&[OffsetEntry]>,
    file: &str,
    set: impl Fn(&mut ReplicaState, i64),
) {
    let Some((index, entry)) = entries
        .into_iter()
        .flatten()
        .enumerate()
        .find(|(_, entry)| entry.topic == replica.topic && entry.partition == replica.partition)
    else {
        return;
    };
    set(replica, entry.offset);
    if entry.offset > replica.log_end_offset {
        replica.findings.push(Finding {
            file: PathBuf::from(file),
            at: Location::Line(entry_line(index)),
            kind: FindingKind::CheckpointPastLogEnd {
                topic: entry.topic.clone(),
                partition: entry.partition,
                offset: entry.offset,
                log_end_offset: replica.log_end_offset,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dirs_split_at_the_last_dash() {
        assert_eq!(partition_dir_name("t-0"), Some(("t", 0)));
        assert_eq!(partition_dir_name("a-b-12"), Some(("a-b", 12)));
        assert_eq!(partition_dir_name("t-0.abc-delete"), None);
        assert_eq!(partition_dir_name("-1"), None);
        assert_eq!(partition_dir_name("t-"), None);
    }

    #[test]
    fn segment_names_are_twenty_digits() {
        assert_eq!(segment_base_offset("00000000000000000042.log"), Some(42));
        assert_eq!(segment_base_offset("42.log"), None);
        assert_eq!(segment_base_offset("00000000000000000042.index"), None);
        assert_eq!(segment_base_offset("99999999999999999999.log"), None);
    }
}
