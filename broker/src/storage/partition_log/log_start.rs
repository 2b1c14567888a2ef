//! A partition log's start offset above its first segment's base: what
//! DeleteRecords (KIP-107) moves on the leader and a follower takes from the
//! leader's fetch answers, kept in the data dir's `log-start-offset-checkpoint`
//! so a restart keeps it, with the whole segments below it deleted.
//!
//! Records below the log start are gone to readers at once (a fetch there is
//! OFFSET_OUT_OF_RANGE, ListOffsets' earliest answers the start), though the
//! segment holding the start keeps its bytes until a later move passes it, as
//! in Kafka, where only whole segments are ever deleted.

use super::super::checkpoint::sync_dir;
use super::super::txn;
use super::super::{StorageError, segment::Segment};
use super::PartitionLog;

impl PartitionLog {
    /// Moves the log start offset up to `offset` (Kafka's
    /// `maybeIncrementLogStartOffset`): nothing happens for an offset at or
    /// below the current start; one past the high watermark is refused
    /// (OFFSET_OUT_OF_RANGE, KIP-107), since records a consumer may not
    /// read yet must not be deleted. The new start is checkpointed first,
    /// then every whole segment below it is deleted, so a crash in between
    /// leaves segments the next open ignores, never a start that went back.
    /// Returns whether the start moved.
    pub fn increment_log_start_offset(&mut self, offset: i64) -> Result<bool, StorageError> {
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        if offset > self.high_watermark {
            return Err(StorageError::OffsetOutOfRange {
                topic_partition: self.topic_partition.clone(),
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.high_watermark,
            });
        }
        self.log_start_offset = offset;
        self.log_starts.record(&self.topic_partition, offset)?;
        self.delete_segments_below_log_start()?;
        tracing::info!(
            topic = %self.topic_partition.topic,
            partition = self.topic_partition.partition,
            log_start_offset = offset,
            "log start offset moved"
        );
        Ok(true)
    }

    /// At open: takes the checkpointed start, if the checkpoint has one for
    /// this log. A start past the recovered log end (the records above it
    /// were not yet flushed when the broker stopped) restarts the log empty
    /// there, as the records below it were deleted anyway.
    pub(super) fn restore_log_start_offset(&mut self) -> Result<(), StorageError> {
        let Some(stored) = self.log_starts.get(&self.topic_partition) else {
            return Ok(());
        };
        if stored > self.log_end_offset {
            tracing::warn!(
                topic = %self.topic_partition.topic,
                partition = self.topic_partition.partition,
                log_start_offset = stored,
                log_end_offset = self.log_end_offset,
                "checkpointed log start is past the recovered log end: restarting the log there"
            );
            self.truncate_fully_and_start_at(stored)?;
            // The truncation forgot the entry; the start still stands.
            return self.log_starts.record(&self.topic_partition, stored);
        }
        self.log_start_offset = stored.max(self.log_start_offset);
        self.delete_segments_below_log_start()
    }

    /// Deletes every segment whose successor starts at or below the log
    /// start (the active segment always stays), with its transaction index.
    fn delete_segments_below_log_start(&mut self) -> Result<(), StorageError> {
        let start = self.log_start_offset;
        let holding = self
            .segments
            .partition_point(|s| s.base_offset() <= start)
            .saturating_sub(1);
        if holding == 0 {
            return Ok(());
        }
        let removed: Vec<Segment> = self.segments.drain(..holding).collect();
        for segment in removed {
            let path = txn::index_path(&self.dir, segment.base_offset());
            segment.delete()?;
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("delete txn index", &path)(e)),
            }
        }
        self.aborted.retain(|t| t.last_offset >= start);
        sync_dir(&self.dir)
    }
}

#[cfg(test)]
mod tests;
