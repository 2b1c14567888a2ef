//! Kafka's checkpoint files: a version line `0`, a count line, then one entry a
//! line; written atomically, read strictly.
//!
//! Two entry formats share the frame: `leader-epoch-checkpoint` holds
//! `<epoch> <start offset>` lines, and the data-dir-wide offset checkpoints
//! (`replication-offset-checkpoint`, `recovery-point-offset-checkpoint`) hold
//! `<topic> <partition> <offset>` lines. A write goes to `<file>.tmp`, is fsynced,
//! renamed over the file and the directory fsynced, so a crash leaves either the
//! old or the new file, never a mix. A read rejects what Kafka's `CheckpointFile`
//! rejects: a version other than 0, a malformed line, or a count that does not
//! match; an empty file reads as no entries.
//!
//! The frame and what a read refuses are `checkpoint/frame.rs`; this file holds
//! the two entry formats and the files: their names, the atomic write, the
//! leader epoch cache's entry ([`EpochEntry`]) and the recovery points every
//! log of a data dir shares ([`RecoveryPointFile`]).

mod frame;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use self::frame::{CHECKPOINT_VERSION, CheckpointError};
use self::frame::{fields, parse, render};
use super::{StorageError, TopicPartition};

/// Per-partition file of leader epochs and their start offsets.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
/// Data-dir file of high watermarks (Kafka's `ReplicaManager.HighWatermarkFilename`).
pub const HIGH_WATERMARK_CHECKPOINT: &str = "replication-offset-checkpoint";
/// Data-dir file naming, per partition, the offset below which the log is fsynced.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// Data-dir file naming, per partition whose log start a DeleteRecords moved
/// past its first segment's base, that log start offset (Kafka's
/// `LogManager.LogStartOffsetCheckpointFile`, KIP-107).
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";

/// The data dir's offset checkpoints each log writes its own entry of.
#[derive(Debug, Clone)]
pub(crate) struct SharedCheckpoints {
    pub(crate) recovery_points: Arc<RecoveryPointFile>,
    pub(crate) log_starts: Arc<RecoveryPointFile>,
}

/// One entry of the leader epoch cache, and one line of its
/// `leader-epoch-checkpoint`: `epoch` began writing at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// A data dir's offset checkpoint shared by every log, so a change anywhere
/// rewrites it at once: the `recovery-point-offset-checkpoint` (at each
/// flush) and the `log-start-offset-checkpoint` (at each DeleteRecords).
#[derive(Debug)]
pub(crate) struct RecoveryPointFile {
    path: PathBuf,
    offsets: Mutex<BTreeMap<TopicPartition, i64>>,
}

impl RecoveryPointFile {
    /// The file at `path`, with no entry yet (the log manager fills it in
    /// once every log is open).
    pub(super) fn new(path: PathBuf) -> Self {
        RecoveryPointFile {
            path,
            offsets: Mutex::new(BTreeMap::new()),
        }
    }

    /// The file at `path`, holding `offsets` as read from it (nothing is
    /// written until an entry changes).
    pub(super) fn loaded(path: PathBuf, offsets: BTreeMap<TopicPartition, i64>) -> Self {
        RecoveryPointFile {
            path,
            offsets: Mutex::new(offsets),
        }
    }

    /// Sets one partition's entry and rewrites the file.
    pub(crate) fn record(&self, tp: &TopicPartition, offset: i64) -> Result<(), StorageError> {
        // A poisoned lock only means another thread panicked mid-update of a map
        // of plain integers; the map is still usable.
        let mut offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        offsets.insert(tp.clone(), offset);
        write_offset_checkpoint(&self.path, &offsets)
    }

    /// Drops one partition's entry (its log was deleted) and rewrites the
    /// file, if it had one.
    pub(crate) fn forget(&self, tp: &TopicPartition) -> Result<(), StorageError> {
        let mut offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        if offsets.remove(tp).is_some() {
            write_offset_checkpoint(&self.path, &offsets)?;
        }
        Ok(())
    }

    /// Every entry.
    pub(crate) fn entries(&self) -> BTreeMap<TopicPartition, i64> {
        self.offsets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One partition's entry, if it has one.
    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<i64> {
        let offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        offsets.get(tp).copied()
    }

    /// Replaces every entry and rewrites the file.
    pub(super) fn record_all(
        &self,
        all: BTreeMap<TopicPartition, i64>,
    ) -> Result<(), StorageError> {
        let mut offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        *offsets = all;
        write_offset_checkpoint(&self.path, &offsets)
    }
}

/// Writes `contents` to `path` atomically: temp file, fsync, rename, fsync the
/// directory (without the last step a crash could forget the rename).
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), StorageError> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut file = File::create(&tmp).map_err(StorageError::io("create", &tmp))?;
    file.write_all(contents)
        .map_err(StorageError::io("write", &tmp))?;
    file.sync_all().map_err(StorageError::io("fsync", &tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(StorageError::io("rename to", path))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// fsyncs a directory so entries created, renamed or removed in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StorageError::io("fsync directory", dir))
}

pub fn render_epoch_checkpoint(entries: &[EpochEntry]) -> String {
    render(entries.iter(), |e| {
        format!("{} {}", e.epoch, e.start_offset)
    })
}

pub fn render_offset_checkpoint(offsets: &BTreeMap<TopicPartition, i64>) -> String {
    render(offsets.iter(), |(tp, offset)| {
        format!("{} {} {}", tp.topic, tp.partition, offset)
    })
}

pub fn parse_epoch_checkpoint(
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<EpochEntry>, CheckpointError> {
    parse(path, bytes, |line| {
        let [epoch, offset] = fields::<2>(line)?;
        Some(EpochEntry {
            epoch: epoch.parse().ok()?,
            start_offset: offset.parse().ok()?,
        })
    })
}

pub fn parse_offset_checkpoint(
    path: &Path,
    bytes: &[u8],
) -> Result<BTreeMap<TopicPartition, i64>, CheckpointError> {
    let entries = parse(path, bytes, |line| {
        let [topic, partition, offset] = fields::<3>(line)?;
        Some((
            TopicPartition::new(topic, partition.parse().ok()?),
            offset.parse::<i64>().ok()?,
        ))
    })?;
    Ok(entries.into_iter().collect())
}

/// Reads a file, treating a missing file as empty (Kafka creates missing
/// checkpoints empty).
fn read_or_empty(path: &Path) -> Result<Vec<u8>, StorageError> {
    match fs::read(path) {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(StorageError::io("read", path)(e)),
    }
}

pub fn read_epoch_checkpoint(path: &Path) -> Result<Vec<EpochEntry>, StorageError> {
    Ok(parse_epoch_checkpoint(path, &read_or_empty(path)?)?)
}

pub fn write_epoch_checkpoint(path: &Path, entries: &[EpochEntry]) -> Result<(), StorageError> {
    write_atomically(path, render_epoch_checkpoint(entries).as_bytes())
}

pub fn read_offset_checkpoint(path: &Path) -> Result<BTreeMap<TopicPartition, i64>, StorageError> {
    Ok(parse_offset_checkpoint(path, &read_or_empty(path)?)?)
}

pub fn write_offset_checkpoint(
    path: &Path,
    offsets: &BTreeMap<TopicPartition, i64>,
) -> Result<(), StorageError> {
    write_atomically(path, render_offset_checkpoint(offsets).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("/x/leader-epoch-checkpoint")
    }

    #[test]
    fn epoch_checkpoint_round_trips_in_kafkas_layout() {
        let entries = [
            EpochEntry {
                epoch: 0,
                start_offset: 1,
            },
            EpochEntry {
                epoch: 1,
                start_offset: 2,
            },
        ];
        let text = render_epoch_checkpoint(&entries);
        assert_eq!(text, "0\n2\n0 1\n1 2\n");
        assert_eq!(
            parse_epoch_checkpoint(p(), text.as_bytes()).unwrap(),
            entries
        );
    }

    #[test]
    fn empty_and_version_only_files_read_as_empty() {
        assert_eq!(parse_epoch_checkpoint(p(), b"").unwrap(), vec![]);
        assert_eq!(parse_epoch_checkpoint(p(), b"0\n").unwrap(), vec![]);
        assert_eq!(parse_epoch_checkpoint(p(), b"0\n0\n").unwrap(), vec![]);
    }

    #[test]
    fn strict_parse_rejects_what_kafka_rejects() {
        assert_eq!(
            parse_epoch_checkpoint(p(), b"1\n0\n"),
            Err(CheckpointError::UnsupportedVersion {
                path: p().into(),
                version: 1
            })
        );
        assert_eq!(
            parse_epoch_checkpoint(p(), b"0\n2\n0 1\n"),
            Err(CheckpointError::CountMismatch {
                path: p().into(),
                expected: 2,
                found: 1
            })
        );
        assert_eq!(
            parse_epoch_checkpoint(p(), b"0\n2\n0 1\n1 x\n"),
            Err(CheckpointError::MalformedLine {
                path: p().into(),
                line: 4,
                text: "1 x".into()
            })
        );
        for bad in [
            &b"zero\n"[..],
            b"0\nmany\n",
            b"0\n1\n1 2 3\n",
            b"0\n1\n 1 2\n",
            b"0\n1\n\n",
            b"0\n1\n1\xff 2\n",
        ] {
            assert!(
                matches!(
                    parse_epoch_checkpoint(p(), bad),
                    Err(CheckpointError::MalformedLine { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn offset_checkpoint_keeps_topics_with_dashes() {
        let text = b"0\n2\nmy-topic 3 17\nt 0 5\n";
        let parsed = parse_offset_checkpoint(p(), text).unwrap();
        assert_eq!(parsed[&TopicPartition::new("my-topic", 3)], 17);
        assert_eq!(render_offset_checkpoint(&parsed).as_bytes(), text);
        assert!(matches!(
            parse_offset_checkpoint(p(), b"0\n1\nt 0\n"),
            Err(CheckpointError::MalformedLine { line: 3, .. })
        ));
    }

    #[test]
    fn atomic_write_replaces_the_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replication-offset-checkpoint");
        write_atomically(&path, b"first").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("replication-offset-checkpoint")]
        );
    }
}
