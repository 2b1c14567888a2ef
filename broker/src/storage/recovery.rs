//! Recovery on open: make a partition directory's segments a valid log again.
//!
//! Bytes below the recovery point were fsynced before, so there only the batch
//! framing is checked (length, magic, offsets) to rebuild the index; from the
//! recovery point on every batch's CRC is checked as well, as Kafka's
//! `LogSegment.recover` does for unflushed segments. The first batch that fails
//! ends the log: the file is cut there with a warning naming the file and byte
//! position, later segments are deleted, and the leader epoch cache is cut back to
//! the recovered log end. Recovery never panics on what it reads; a file it cannot
//! frame is simply where the log ends.

use std::path::{Path, PathBuf};

use super::LeaderEpochCache;
use super::StorageError;
use super::record_batch::{self, BatchError, HEADER_SIZE};
use super::segment::{BatchPosition, Segment};

/// What recovery cut, when it cut something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The segment file cut (also in `deleted_segments` when nothing of it was
    /// kept).
    pub file: PathBuf,
    /// Byte position in that file of the first batch dropped (the new file size).
    pub position: u64,
    pub reason: BatchError,
    /// Segment files removed because they followed the cut.
    pub deleted_segments: Vec<PathBuf>,
}

/// A recovered log: segments in offset order (never empty), its end offset, and
/// what was cut if anything.
#[derive(Debug)]
pub struct RecoveredLog {
    pub segments: Vec<Segment>,
    pub log_end_offset: i64,
    pub truncation: Option<Truncation>,
}

/// Lists `<20-digit>.log` files in `dir` by base offset. Other files (checkpoints,
/// temp files, Kafka's index files) are not ours to judge and are left alone.
fn segment_files(dir: &Path) -> Result<Vec<(i64, PathBuf)>, StorageError> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(StorageError::io("list", dir))?;
    for entry in entries {
        let entry = entry.map_err(StorageError::io("list", dir))?;
        let name = entry.file_name();
        if let Some(base) = name.to_str().and_then(Segment::parse_file_name) {
            found.push((base, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// One segment's scan: the batches that passed, and where and why it stopped
/// early if it did.
struct SegmentScan {
    batches: Vec<BatchPosition>,
    problem: Option<(u64, BatchError)>,
}

/// Scans one segment from byte 0. Batches whose last offset is at or past
/// `recovery_point` get their CRC checked.
fn scan_segment(
    segment: &Segment,
    mut expected_offset: i64,
    recovery_point: i64,
) -> Result<SegmentScan, StorageError> {
    let mut batches = Vec::new();
    let mut batch_buf = Vec::new();
    let mut position = 0u64;
    while position < segment.size_bytes() {
        let checked = check_batch_at(
            segment,
            position,
            expected_offset,
            recovery_point,
            &mut batch_buf,
        )?;
        match checked {
            Ok(batch) => {
                expected_offset = batch.last_offset + 1;
                position += u64::from(batch.size_bytes);
                batches.push(batch);
            }
            Err(e) => {
                return Ok(SegmentScan {
                    batches,
                    problem: Some((position, e)),
                });
            }
        }
    }
    Ok(SegmentScan {
        batches,
        problem: None,
    })
}

/// Checks the batch at `position`: framing from its header, that it continues
/// the log at `expected_offset`, and its CRC when it reaches the recovery point.
/// The outer error is an I/O failure; the inner one a batch that ends the log.
fn check_batch_at(
    segment: &Segment,
    position: u64,
    expected_offset: i64,
    recovery_point: i64,
    batch_buf: &mut Vec<u8>,
) -> Result<Result<BatchPosition, BatchError>, StorageError> {
    let mut header_buf = [0u8; HEADER_SIZE];
    let available = segment.read_some_at(&mut header_buf, position)?;
    let header_bytes = &header_buf[..available];
    let header = match record_batch::parse_header(header_bytes) {
        Ok(header) => header,
        Err(e) => return Ok(Err(e)),
    };
    let size = header.size_bytes();
    // Checked before reading the batch, so a garbage length never becomes a
    // large allocation.
    let remaining = segment.size_bytes() - position;
    if size as u64 > remaining {
        return Ok(Err(BatchError::Incomplete {
            needed: size,
            available: remaining as usize,
        }));
    }
    if header.base_offset != expected_offset {
        return Ok(Err(BatchError::UnexpectedBaseOffset {
            expected: expected_offset,
            actual: header.base_offset,
        }));
    }
    if header.last_offset() >= recovery_point {
        batch_buf.resize(size, 0);
        let read = segment.read_some_at(batch_buf, position)?;
        if let Err(e) = record_batch::check_crc(&batch_buf[..read]) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(BatchPosition {
        base_offset: header.base_offset,
        last_offset: header.last_offset(),
        position,
        size_bytes: size as u32,
        leader_epoch: header.partition_leader_epoch,
        max_timestamp: header.max_timestamp,
    }))
}

/// Recovers the log in `dir`. Creates a first segment at offset 0 if there is
/// none. `epoch_cache` is re-fed the epochs of the batches scanned past the
/// recovery point (as Kafka's recovery does) and then cut to the log end.
pub fn recover(
    dir: &Path,
    recovery_point: i64,
    epoch_cache: &mut LeaderEpochCache,
) -> Result<RecoveredLog, StorageError> {
    let files = segment_files(dir)?;
    if files.is_empty() {
        epoch_cache.truncate_from_end(0)?;
        return Ok(RecoveredLog {
            segments: vec![Segment::create(dir, 0)?],
            log_end_offset: 0,
            truncation: None,
        });
    }

    let mut segments: Vec<Segment> = Vec::with_capacity(files.len());
    let mut truncation = None;
    let mut expected_offset = files[0].0;
    let mut files = files.into_iter();
    for (base_offset, path) in files.by_ref() {
        let mut segment = Segment::open(&path, base_offset)?;
        // A segment must start where the previous one ended: we never leave gaps.
        let problem = if base_offset != expected_offset {
            segment.set_index(Vec::new(), segment.size_bytes());
            Some((
                0,
                BatchError::UnexpectedBaseOffset {
                    expected: expected_offset,
                    actual: base_offset,
                },
            ))
        } else {
            let SegmentScan { batches, problem } =
                scan_segment(&segment, expected_offset, recovery_point)?;
            let valid_bytes = problem.as_ref().map_or(segment.size_bytes(), |p| p.0);
            segment.set_index(batches, valid_bytes);
            problem
        };
        if let Some((position, reason)) = problem {
            if position == 0 && !segments.is_empty() {
                // Nothing of this segment survives: drop the file rather than keep an
                // empty segment whose name might not match the log end.
                let path = segment.path().to_path_buf();
                segment.delete()?;
                truncation = Some(Truncation {
                    file: path.clone(),
                    position,
                    reason,
                    deleted_segments: vec![path],
                });
            } else {
                segment.truncate_file(position)?;
                segment.flush()?;
                truncation = Some(Truncation {
                    file: segment.path().to_path_buf(),
                    position,
                    reason,
                    deleted_segments: Vec::new(),
                });
                segments.push(segment);
            }
            break;
        }
        expected_offset = segment.end_offset();
        segments.push(segment);
    }

    if let Some(cut) = truncation.as_mut() {
        for (_, path) in files {
            std::fs::remove_file(&path).map_err(StorageError::io("delete segment", &path))?;
            cut.deleted_segments.push(path);
        }
        super::checkpoint::sync_dir(dir)?;
        tracing::warn!(
            file = %cut.file.display(),
            position = cut.position,
            reason = %cut.reason,
            deleted_segments = cut.deleted_segments.len(),
            "recovery truncated a torn or corrupt log tail"
        );
    }

    let log_end_offset = segments.last().map_or(0, Segment::end_offset);
    rebuild_epochs(&segments, recovery_point, epoch_cache)?;
    epoch_cache.truncate_from_end(log_end_offset)?;
    // The bytes just validated may exist only in the page cache; make them as
    // durable as the recovery point about to be claimed for them.
    for segment in &segments {
        if segment.end_offset() > recovery_point {
            segment.flush()?;
        }
    }
    Ok(RecoveredLog {
        segments,
        log_end_offset,
        truncation,
    })
}

/// Replays the epochs of batches at or past the recovery point, in offset
/// order, as Kafka's `LogSegment.recover` does: a batch's epoch is assigned
/// only when it is above the latest epoch the cache holds
/// (`cache.latestEpoch.forall(batch.partitionLeaderEpoch > _)`). The replay
/// sees only the log from the recovery point on, so it must never rewrite what
/// lies before it: assigning an older epoch at a later offset would make the
/// cache drop every entry after it and restart that epoch mid-log (a broker
/// killed twice across a leader change lost its `(0, 0)` that way).
fn rebuild_epochs(
    segments: &[Segment],
    recovery_point: i64,
    epoch_cache: &mut LeaderEpochCache,
) -> Result<(), StorageError> {
    let mut latest = epoch_cache.latest_epoch();
    let starts: Vec<(i32, i64)> = segments
        .iter()
        .flat_map(|s| s.batches())
        .filter(|b| b.last_offset >= recovery_point && b.leader_epoch >= 0)
        .filter(|b| {
            let above = latest.is_none_or(|l| b.leader_epoch > l);
            if above {
                latest = Some(b.leader_epoch);
            }
            above
        })
        .map(|b| (b.leader_epoch, b.base_offset))
        .collect();
    epoch_cache.assign_all(starts)
}
