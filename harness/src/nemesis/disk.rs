//! Disk faults: cutting a stopped broker's log files the way lost or damaged
//! storage would.
//!
//! Each fault takes the data directory of a broker the caller has already
//! killed, finds batch boundaries with the harness's own reader
//! ([`crate::reader`], never the broker's code), cuts the `.log` files and
//! returns a [`Cut`] per replica for the run's history. It must never run
//! against a live broker (the broker's open files and in-memory indexes would
//! disagree with the disk) and never touches anything outside the replica
//! directories it cuts, except the clean-shutdown marker that
//! [`power_loss`] removes.
//!
//! How a cut is applied, for every fault:
//! - The cut is a segment and a byte length: that segment is truncated to the
//!   length and every later segment of the replica is deleted. Later segments
//!   go first, last one first, so an interrupted cut still leaves a prefix of
//!   the log.
//! - A deleted segment takes its `.index`, `.timeindex` and `.txnindex`
//!   siblings with it. The cut segment's index files are *deleted*, not
//!   truncated: they are derived data, and Kafka rebuilds a missing offset or
//!   time index when it loads the log (`Log.loadSegmentFiles`, "Could not find
//!   offset index file … rebuilding index files"), while an unclean start
//!   re-recovers every segment past the recovery point anyway
//!   (`LogSegment.recover` resets its indexes). epochal's broker writes no
//!   index files at all (`broker/src/storage/segment.rs` keeps its index in
//!   memory and recovery rebuilds it), so in epochal runs there are none.
//! - A segment that is not cut keeps its files untouched.
//! - Files are fsynced after truncation and the replica directory after
//!   deletion, so the cut survives a crash of the harness.
//! - Checkpoints (`leader-epoch-checkpoint`, `replication-offset-checkpoint`,
//!   `recovery-point-offset-checkpoint`) are left as they are: Kafka writes
//!   them atomically and fsyncs them, so a lost page cache does not lose them,
//!   and a checkpoint left past the new log end is exactly what the broker's
//!   recovery has to cope with (the reader reports it as a finding).
//!
//! Bytes the reader cannot frame (a torn tail, a corrupt header) are removed
//! only when they lie past the cut.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::reader::checkpoint::{CLEAN_SHUTDOWN_MARKER, RECOVERY_POINT_OFFSET_CHECKPOINT};
use crate::reader::{DataDirState, FindingKind, ReadError, ReplicaState, read_data_dir};

/// Index files Kafka keeps beside each `<base offset>.log`.
const INDEX_SUFFIXES: [&str; 3] = ["index", "timeindex", "txnindex"];

/// How [`truncate_log`] shortens a log:
/// - `ToOffset`: remove the offset and everything after it, at batch
///   boundaries, as Kafka's `LogSegment.truncateTo` does: it cuts at
///   `translateOffset(offset)`, the first batch whose last offset is
///   `>= offset`, so the batch holding the offset goes whole and the log may
///   end below `offset`. As Kafka's `Log.truncateTo`, segments whose base
///   offset is above the offset are deleted and the one holding the cut is
///   kept, even when it is left empty.
/// - `ByBytes`: chop this many bytes off the end of the log, wherever that
///   falls: it may leave a torn batch, which recovery must find. When it
///   exceeds the last segment it carries on into earlier ones; segments it
///   empties are deleted, except the first, which is kept (at zero bytes) so
///   the log keeps its start offset.
/// - `ByRecords`: `ToOffset` at the reader's log end minus the count ("lose
///   the last N records"); the batch holding that offset goes whole, so a
///   batch of several records may take more.
/// - `Fraction`: `ByBytes` with that fraction of the replica's `.log` bytes
///   (every segment), rounded down: `0.5` cuts the second half of the log,
///   wherever its bytes fall.
pub use crate::schedule::Truncate;

/// What a disk fault did to one replica, for the run's history.
pub use crate::history::ReplicaCut as Cut;

/// A disk fault that could not be applied. Every variant names the file or
/// directory concerned. A fault checks everything it can before changing
/// anything, so only [`DiskError::Io`] can leave a fault half done.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The data directory itself cannot be read.
    #[error(transparent)]
    DataDir(#[from] ReadError),
    #[error("no replica directory {}", path.display())]
    MissingReplica { path: PathBuf },
    /// A replica directory or segment the reader could not read: cutting a
    /// log whose batches are unknown could cut anywhere.
    #[error("cannot read {}: {error}", path.display())]
    Unreadable { path: PathBuf, error: String },
    /// `recovery-point-offset-checkpoint` exists but cannot be read or
    /// parsed, so the recovery points are unknown.
    #[error("cannot use {}: {problem}", path.display())]
    RecoveryPoints { path: PathBuf, problem: String },
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Simulates a power loss on a stopped broker: every byte not yet flushed is
/// lost.
///
/// Each replica is cut back to its recovery point from
/// `recovery-point-offset-checkpoint` (the offset below which the broker has
/// fsynced the log): batches whose last offset is below it are kept, the log
/// is cut at the first batch at or beyond it, and later segments are deleted,
/// as [`Truncate::ToOffset`] with the recovery point. A replica with no entry
/// in the checkpoint, or every replica when there is no checkpoint file, has
/// recovery point 0 and loses every batch (as Kafka recovers such a log from
/// its start; the first segment stays, empty). `.kafka_cleanshutdown` is
/// removed: a power loss is never clean.
/// Checkpoints are left as they are (they were fsynced when written).
///
/// Returns one [`Cut`] per replica, in the reader's order (by topic, then
/// partition), including replicas that lost nothing.
pub fn power_loss(data_dir: &Path) -> Result<Vec<Cut>, DiskError> {
    let before = read_data_dir(data_dir)?;
    if let Some(finding) = before
        .findings
        .iter()
        .find(|finding| finding.file == Path::new(RECOVERY_POINT_OFFSET_CHECKPOINT))
    {
        return Err(DiskError::RecoveryPoints {
            path: data_dir.join(&finding.file),
            problem: finding.kind.to_string(),
        });
    }
    let plans = before
        .replicas
        .iter()
        .map(|replica| {
            check_readable(data_dir, replica)?;
            let recovery_point = replica.recovery_point.unwrap_or(0);
            Ok(plan_to_offset(replica, recovery_point))
        })
        .collect::<Result<Vec<_>, DiskError>>()?;

    let mut removed = Vec::with_capacity(plans.len());
    for (replica, plan) in before.replicas.iter().zip(&plans) {
        removed.push(apply(data_dir, replica, plan.as_ref())?);
    }
    remove_clean_shutdown_marker(data_dir)?;

    let after = read_data_dir(data_dir)?;
    before
        .replicas
        .iter()
        .zip(removed)
        .map(|(replica, removed)| cut_report(data_dir, &after, replica, removed))
        .collect()
}

/// Shortens one replica's log on a stopped broker, as [`Truncate`] says.
///
/// Nothing else changes: checkpoints stay as they are (so they may now point
/// past the log end) and so does `.kafka_cleanshutdown`. With the marker in
/// place this is damage found after a clean stop, which Kafka loads without
/// recovering the log; epochal's broker recovers on every start regardless.
pub fn truncate_log(
    data_dir: &Path,
    topic: &str,
    partition: i32,
    how: Truncate,
) -> Result<Cut, DiskError> {
    let before = read_data_dir(data_dir)?;
    let replica = before
        .replica(topic, partition)
        .ok_or_else(|| DiskError::MissingReplica {
            path: data_dir.join(format!("{topic}-{partition}")),
        })?;
    check_readable(data_dir, replica)?;
    let plan = match how {
        // An offset past i64::MAX is past every batch: nothing to cut.
        Truncate::ToOffset(offset) => {
            plan_to_offset(replica, i64::try_from(offset).unwrap_or(i64::MAX))
        }
        Truncate::ByBytes(bytes) => plan_by_bytes(replica, bytes),
        Truncate::ByRecords(records) => plan_to_offset(
            replica,
            replica
                .log_end_offset
                .saturating_sub(i64::try_from(records).unwrap_or(i64::MAX)),
        ),
        Truncate::Fraction(fraction) => {
            let total: u64 = replica.segments.iter().map(|s| s.size_bytes).sum();
            // Rounded down; the cast saturates and the fraction is at most 1.
            plan_by_bytes(replica, (total as f64 * fraction) as u64)
        }
    };
    let removed = apply(data_dir, replica, plan.as_ref())?;
    let after = read_data_dir(data_dir)?;
    cut_report(data_dir, &after, replica, removed)
}

/// Where to cut one replica: `segment` (an index into its segments) is
/// truncated to `size_bytes` and every later segment deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    segment: usize,
    size_bytes: u64,
}

/// What applying a plan removed.
#[derive(Debug, Default)]
struct Removed {
    bytes: u64,
    segments: Vec<PathBuf>,
}

/// The cut before the first batch whose last offset is `>= offset`
/// (`LogSegment.truncateTo`); `None` when no batch reaches `offset`.
fn plan_to_offset(replica: &ReplicaState, offset: i64) -> Option<Plan> {
    let (index, position) = replica
        .segments
        .iter()
        .enumerate()
        .find_map(|(index, segment)| {
            let batch = segment
                .batches
                .iter()
                .find(|batch| batch.last_offset >= offset)?;
            Some((index, batch.position))
        })?;
    // `Log.truncateTo` deletes every segment whose base offset is above the
    // offset: one that starts past it (after a gap in the offsets) goes whole
    // rather than being kept empty. The first segment always stays.
    if position == 0 && index > 0 && replica.segments[index].base_offset > offset {
        let previous = &replica.segments[index - 1];
        return Some(Plan {
            segment: index - 1,
            size_bytes: previous.size_bytes,
        });
    }
    Some(Plan {
        segment: index,
        size_bytes: position,
    })
}

/// The cut `bytes` before the end of the log, deleting the segments it
/// empties except the first; `None` when there is nothing to cut.
fn plan_by_bytes(replica: &ReplicaState, mut bytes: u64) -> Option<Plan> {
    if bytes == 0 {
        return None;
    }
    for (index, segment) in replica.segments.iter().enumerate().rev() {
        if bytes < segment.size_bytes || index == 0 {
            return Some(Plan {
                segment: index,
                size_bytes: segment.size_bytes.saturating_sub(bytes),
            });
        }
        bytes -= segment.size_bytes;
    }
    None
}

/// Refuses a replica the reader could not read whole: its directory listing
/// or one of its segments. An unreadable epoch checkpoint is not cut, so it
/// does not matter here.
fn check_readable(data_dir: &Path, replica: &ReplicaState) -> Result<(), DiskError> {
    let unreadable = replica
        .findings
        .iter()
        .find_map(|finding| match &finding.kind {
            FindingKind::Unreadable { error }
                if finding.file == replica.dir
                    || finding.file.extension().is_some_and(|ext| ext == "log") =>
            {
                Some((&finding.file, error))
            }
            _ => None,
        });
    match unreadable {
        Some((file, error)) => Err(DiskError::Unreadable {
            path: data_dir.join(file),
            error: error.clone(),
        }),
        None => Ok(()),
    }
}

fn apply(
    data_dir: &Path,
    replica: &ReplicaState,
    plan: Option<&Plan>,
) -> Result<Removed, DiskError> {
    let mut removed = Removed::default();
    let Some(plan) = plan else {
        return Ok(removed);
    };
    let later = &replica.segments[plan.segment + 1..];
    for segment in later.iter().rev() {
        let path = data_dir.join(&segment.file);
        remove_file(&path, "delete segment")?;
        remove_index_files(&path)?;
        removed.bytes += segment.size_bytes;
    }
    removed.segments = later.iter().map(|segment| segment.file.clone()).collect();

    let cut = &replica.segments[plan.segment];
    if plan.size_bytes < cut.size_bytes {
        let path = data_dir.join(&cut.file);
        let io = |action| {
            let path = path.clone();
            move |source| DiskError::Io {
                action,
                path,
                source,
            }
        };
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io("open segment"))?;
        file.set_len(plan.size_bytes)
            .map_err(io("truncate segment"))?;
        file.sync_all().map_err(io("fsync segment"))?;
        remove_index_files(&path)?;
        removed.bytes += cut.size_bytes - plan.size_bytes;
    }
    sync_dir(&data_dir.join(&replica.dir))?;
    Ok(removed)
}

/// Deletes the `.index`, `.timeindex` and `.txnindex` beside `log`, where
/// they exist.
fn remove_index_files(log: &Path) -> Result<(), DiskError> {
    for suffix in INDEX_SUFFIXES {
        let index = log.with_extension(suffix);
        match fs::remove_file(&index) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                return Err(DiskError::Io {
                    action: "delete index",
                    path: index,
                    source: error,
                });
            }
            _ => {}
        }
    }
    Ok(())
}

fn remove_clean_shutdown_marker(data_dir: &Path) -> Result<(), DiskError> {
    let marker = data_dir.join(CLEAN_SHUTDOWN_MARKER);
    match fs::remove_file(&marker) {
        Ok(()) => sync_dir(data_dir),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(DiskError::Io {
            action: "remove clean-shutdown marker",
            path: marker,
            source,
        }),
    }
}

fn remove_file(path: &Path, action: &'static str) -> Result<(), DiskError> {
    fs::remove_file(path).map_err(|source| DiskError::Io {
        action,
        path: path.to_owned(),
        source,
    })
}

/// Makes deletions and truncations in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), DiskError> {
    fs::File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|source| DiskError::Io {
            action: "fsync directory",
            path: dir.to_owned(),
            source,
        })
}

/// The history's record of one replica's cut, with the log end offset the
/// reader finds now.
fn cut_report(
    data_dir: &Path,
    after: &DataDirState,
    before: &ReplicaState,
    removed: Removed,
) -> Result<Cut, DiskError> {
    let replica_after = after
        .replica(&before.topic, before.partition)
        .ok_or_else(|| DiskError::MissingReplica {
            path: data_dir.join(&before.dir),
        })?;
    Ok(Cut {
        replica: before.dir.display().to_string(),
        log_end_offset_before: before.log_end_offset,
        log_end_offset_after: replica_after.log_end_offset,
        bytes_removed: removed.bytes,
        segments_deleted: removed.segments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::{Batch, Codec, Segment};

    fn replica(sizes: &[u64]) -> ReplicaState {
        ReplicaState {
            topic: "t".into(),
            partition: 0,
            dir: "t-0".into(),
            segments: sizes
                .iter()
                .enumerate()
                .map(|(index, &size_bytes)| Segment {
                    file: format!("t-0/{index:020}.log").into(),
                    base_offset: index as i64,
                    size_bytes,
                    batches: Vec::new(),
                })
                .collect(),
            leader_epochs: None,
            producer_snapshots: Vec::new(),
            high_watermark: None,
            recovery_point: None,
            log_end_offset: 0,
            findings: Vec::new(),
        }
    }

    fn plan(segment: usize, size_bytes: u64) -> Option<Plan> {
        Some(Plan {
            segment,
            size_bytes,
        })
    }

    /// One batch of `base..=last` at the start of `segment`, 60 bytes long.
    fn only_batch(segment: &mut Segment, base_offset: i64, last_offset: i64) {
        segment.size_bytes = 60;
        segment.batches = vec![Batch {
            file: std::sync::Arc::from(segment.file.as_path()),
            position: 0,
            size_bytes: 60,
            base_offset,
            last_offset,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            crc_valid: true,
            attributes: 0,
            codec: Codec::None,
            first_timestamp: 0,
            max_timestamp: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records_count: (last_offset - base_offset + 1) as i32,
            intact: true,
            records: Vec::new(),
        }];
    }

    #[test]
    fn to_offset_deletes_a_segment_that_starts_past_the_offset() {
        // Offsets 3 and 4 are missing (compaction can do that): segment 5
        // starts above 3, so `Log.truncateTo(3)` deletes it whole.
        let mut log = replica(&[0, 0]);
        log.segments[1].base_offset = 5;
        only_batch(&mut log.segments[0], 0, 2);
        only_batch(&mut log.segments[1], 5, 7);
        assert_eq!(plan_to_offset(&log, 3), plan(0, 60));
        assert_eq!(plan_to_offset(&log, 5), plan(1, 0));
        assert_eq!(plan_to_offset(&log, 6), plan(1, 0));
        assert_eq!(plan_to_offset(&log, 2), plan(0, 0));
        assert_eq!(plan_to_offset(&log, 8), None);
    }

    #[test]
    fn by_bytes_spans_segments_and_keeps_the_first() {
        let log = replica(&[100, 50, 30]);
        assert_eq!(plan_by_bytes(&log, 0), None);
        assert_eq!(plan_by_bytes(&log, 10), plan(2, 20));
        // Emptying the last segment exactly deletes it.
        assert_eq!(plan_by_bytes(&log, 30), plan(1, 50));
        assert_eq!(plan_by_bytes(&log, 45), plan(1, 35));
        assert_eq!(plan_by_bytes(&log, 80), plan(0, 100));
        assert_eq!(plan_by_bytes(&log, 1000), plan(0, 0));
        assert_eq!(plan_by_bytes(&replica(&[]), 5), None);
    }

    #[test]
    fn cut_serializes_for_the_history() {
        let cut = Cut {
            replica: "t-0".into(),
            log_end_offset_before: 19,
            log_end_offset_after: 8,
            bytes_removed: 447,
            segments_deleted: vec!["t-0/00000000000000000010.log".into()],
        };
        assert_eq!(
            serde_json::to_value(&cut).unwrap(),
            serde_json::json!({
                "replica": "t-0",
                "log_end_offset_before": 19,
                "log_end_offset_after": 8,
                "bytes_removed": 447,
                "segments_deleted": ["t-0/00000000000000000010.log"],
            })
        );
    }
}
