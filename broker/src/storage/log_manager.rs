//! The log manager: every partition log in one data directory, and the files that
//! directory holds for all of them.
//!
//! Opening a data dir recovers each `<topic>-<partition>` log, restores high
//! watermarks from `replication-offset-checkpoint` (clamped to each recovered
//! log), recovery points from `recovery-point-offset-checkpoint` and log start
//! offsets from `log-start-offset-checkpoint` (which only DeleteRecords
//! writes), and notes and removes the `.kafka_cleanshutdown` marker; a clean
//! shutdown writes them all back, with a producer-state snapshot per log. The
//! manager runs no threads: the server calls [`LogManager::flush_if_due`] and
//! the checkpoint methods on its own schedule.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::checkpoint::{
    self, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    RecoveryPointFile, SharedCheckpoints, read_offset_checkpoint, write_offset_checkpoint,
};
use super::{LogConfig, PartitionLog, StorageError, TopicPartition};

/// Kafka's clean-shutdown marker (`CleanShutdownFileHandler`).
pub const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// Owns a data dir's partition logs. Dropping it without [`LogManager::shutdown`]
/// is, to the next open, a crash: no marker, recovery points as last flushed.
#[derive(Debug)]
pub struct LogManager {
    data_dir: PathBuf,
    config: LogConfig,
    logs: BTreeMap<TopicPartition, PartitionLog>,
    files: SharedCheckpoints,
    had_clean_shutdown: bool,
}

impl LogManager {
    /// Opens `data_dir` (creating it if missing) and every partition log in it.
    /// Errors on a directory that is not `<topic>-<partition>` and on a malformed
    /// checkpoint, as Kafka does: guessing would risk serving wrong offsets.
    pub fn open(data_dir: &Path, config: LogConfig) -> Result<LogManager, StorageError> {
        fs::create_dir_all(data_dir).map_err(StorageError::io("create data dir", data_dir))?;
        let marker = data_dir.join(CLEAN_SHUTDOWN_MARKER);
        let had_clean_shutdown = marker.exists();
        let high_watermarks = read_offset_checkpoint(&data_dir.join(HIGH_WATERMARK_CHECKPOINT))?;
        let recovery_points_path = data_dir.join(RECOVERY_POINT_CHECKPOINT);
        let stored_recovery_points = read_offset_checkpoint(&recovery_points_path)?;
        let recovery_points = Arc::new(RecoveryPointFile::new(recovery_points_path));
        // Written only once a DeleteRecords moves a log's start (KIP-107):
        // a data dir where none did has no such file.
        let log_starts_path = data_dir.join(LOG_START_OFFSET_CHECKPOINT);
        let stored_log_starts = read_offset_checkpoint(&log_starts_path)?;
        let files = SharedCheckpoints {
            recovery_points,
            log_starts: Arc::new(RecoveryPointFile::loaded(
                log_starts_path,
                stored_log_starts,
            )),
        };

        let mut logs = BTreeMap::new();
        let entries = fs::read_dir(data_dir).map_err(StorageError::io("list", data_dir))?;
        for entry in entries {
            let entry = entry.map_err(StorageError::io("list", data_dir))?;
            let path = entry.path();
            let name = entry.file_name();
            let is_dir = entry
                .file_type()
                .map_err(StorageError::io("stat", &path))?
                .is_dir();
            // Files (checkpoints, the state-change log) and hidden directories are
            // not partitions.
            if !is_dir || name.to_string_lossy().starts_with('.') {
                continue;
            }
            let tp = name
                .to_str()
                .and_then(TopicPartition::parse_dir_name)
                .ok_or_else(|| StorageError::InvalidPartitionDir { path: path.clone() })?;
            // A log with no recovery point recorded is recovered from its start.
            let recovery_point = stored_recovery_points.get(&tp).copied().unwrap_or(0);
            let high_watermark = high_watermarks.get(&tp).copied().unwrap_or(0);
            let log = PartitionLog::open(
                &path,
                tp.clone(),
                config,
                recovery_point,
                high_watermark,
                files.clone(),
            )?;
            logs.insert(tp, log);
        }

        let manager = LogManager {
            data_dir: data_dir.to_path_buf(),
            config,
            logs,
            files,
            had_clean_shutdown,
        };
        // Recovery may have cut logs: rewrite both checkpoints now so neither names
        // an offset past a recovered log end.
        manager.checkpoint_recovery_points()?;
        manager.forget_log_starts_of_absent_logs()?;
        manager.checkpoint_high_watermarks()?;
        if had_clean_shutdown {
            fs::remove_file(&marker).map_err(StorageError::io("remove", &marker))?;
            checkpoint::sync_dir(data_dir)?;
        }
        Ok(manager)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Whether the previous run ended with [`LogManager::shutdown`].
    pub fn had_clean_shutdown(&self) -> bool {
        self.had_clean_shutdown
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<&PartitionLog> {
        self.logs.get(tp)
    }

    pub fn get_mut(&mut self, tp: &TopicPartition) -> Option<&mut PartitionLog> {
        self.logs.get_mut(tp)
    }

    /// The log of `tp`, created empty (directory, first segment, empty epoch
    /// file) if it does not exist yet.
    pub fn get_or_create(
        &mut self,
        tp: &TopicPartition,
    ) -> Result<&mut PartitionLog, StorageError> {
        if !self.logs.contains_key(tp) {
            tp.validate()
                .map_err(|reason| StorageError::InvalidTopicPartition {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    reason,
                })?;
            let dir = self.data_dir.join(tp.dir_name());
            fs::create_dir_all(&dir).map_err(StorageError::io("create partition dir", &dir))?;
            checkpoint::sync_dir(&self.data_dir)?;
            let log = PartitionLog::open(&dir, tp.clone(), self.config, 0, 0, self.files.clone())?;
            self.files
                .recovery_points
                .record(tp, log.recovery_point())?;
            self.logs.insert(tp.clone(), log);
        }
        Ok(self.logs.get_mut(tp).expect("inserted above"))
    }

    /// Deletes `tp`'s log (its topic was deleted, StopReplica): the log is
    /// forgotten, both checkpoints rewritten without it, then its directory
    /// removed, so a restart finds neither. Kafka renames the directory to
    /// `<dir>.<id>-delete` and removes it later; removing it at once keeps
    /// the data directory free of names the reader would have to skip.
    /// A log this manager does not hold is nothing to delete.
    pub fn delete(&mut self, tp: &TopicPartition) -> Result<(), StorageError> {
        let Some(log) = self.logs.remove(tp) else {
            return Ok(());
        };
        drop(log);
        self.checkpoint_high_watermarks()?;
        self.checkpoint_recovery_points()?;
        self.files.log_starts.forget(tp)?;
        let dir = self.data_dir.join(tp.dir_name());
        fs::remove_dir_all(&dir).map_err(StorageError::io("remove deleted partition dir", &dir))?;
        checkpoint::sync_dir(&self.data_dir)
    }

    /// Drops log-start entries naming no log of this dir (a directory
    /// removed by hand), so a log created there later starts at 0.
    fn forget_log_starts_of_absent_logs(&self) -> Result<(), StorageError> {
        let absent: Vec<TopicPartition> = self
            .files
            .log_starts
            .entries()
            .into_keys()
            .filter(|tp| !self.logs.contains_key(tp))
            .collect();
        for tp in &absent {
            self.files.log_starts.forget(tp)?;
        }
        Ok(())
    }

    /// Partitions in order.
    pub fn partitions(&self) -> impl Iterator<Item = &TopicPartition> {
        self.logs.keys()
    }

    /// Writes every log's high watermark to `<data>/replication-offset-checkpoint`.
    pub fn checkpoint_high_watermarks(&self) -> Result<(), StorageError> {
        let hws = self
            .logs
            .iter()
            .map(|(tp, log)| (tp.clone(), log.high_watermark()))
            .collect();
        write_offset_checkpoint(&self.data_dir.join(HIGH_WATERMARK_CHECKPOINT), &hws)
    }

    /// Writes every log's recovery point to `<data>/recovery-point-offset-checkpoint`.
    pub fn checkpoint_recovery_points(&self) -> Result<(), StorageError> {
        let points = self
            .logs
            .iter()
            .map(|(tp, log)| (tp.clone(), log.recovery_point()))
            .collect();
        self.files.recovery_points.record_all(points)
    }

    /// The time-based flush policy's tick: flushes each log whose
    /// `flush_interval_ms` has passed since its last flush.
    pub fn flush_if_due(&mut self, now: Instant) -> Result<(), StorageError> {
        for log in self.logs.values_mut() {
            log.flush_if_due(now)?;
        }
        Ok(())
    }

    /// Flushes every log and snapshots its producer state at its log end (as
    /// Kafka's `UnifiedLog.close` does, so the next start replays nothing),
    /// writes both checkpoints, then the clean-shutdown marker (last, so its
    /// presence promises everything before it completed).
    pub fn shutdown(&mut self) -> Result<(), StorageError> {
        for log in self.logs.values_mut() {
            log.flush()?;
            log.snapshot_producer_state()?;
        }
        self.checkpoint_high_watermarks()?;
        self.checkpoint_recovery_points()?;
        let marker = self.data_dir.join(CLEAN_SHUTDOWN_MARKER);
        checkpoint::write_atomically(&marker, b"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_manager_can_be_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LogManager>();
    }
}
