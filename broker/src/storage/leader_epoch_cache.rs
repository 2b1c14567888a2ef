//! The leader epoch cache: which leader epoch wrote which offsets of a partition.
//!
//! It is an ordered list of `(epoch, start offset)` entries, strictly rising in both
//! fields, persisted to the partition's `leader-epoch-checkpoint` on every change.
//! It answers OffsetsForLeaderEpoch in the three ways Kafka releases did
//! ([`EpochAnswerRule`]), which is what makes KIP-101's and KIP-279's failure
//! scenarios reproducible. It never looks at the log itself: callers pass the log
//! end offset in and truncate it when the log is truncated.
//!
//! The assignment and truncation rules follow Kafka's `LeaderEpochFileCache`
//! (storage/src/main/java/org/apache/kafka/storage/internals/epoch/).

use std::path::{Path, PathBuf};

use super::StorageError;
use super::checkpoint::{self, EpochEntry};

/// Kafka's `UNDEFINED_EPOCH`.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// How a leader answers OffsetsForLeaderEpoch, release by release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochAnswerRule {
    /// 0.11 – 1.1 (KIP-101): one offset — the LEO for the latest epoch, else the
    /// start of the first epoch above the one asked, else -1 (also below the first
    /// epoch). An epoch the leader never had is silently answered with the next
    /// epoch's start, the flaw KIP-279 fixed.
    Kip101,
    /// 2.0 (KIP-279, commit 9679c44d2b5): `(largest epoch ≤ asked, its end
    /// offset)`; below the first epoch still `(-1, -1)`.
    Kip279,
    /// 2.1+ (KAFKA-7415): as `Kip279`, but below the first epoch the answer is
    /// `(asked, first start offset)`.
    Current,
}

/// The answer to OffsetsForLeaderEpoch for one partition. `(-1, -1)` means
/// undefined. Under [`EpochAnswerRule::Kip101`] `leader_epoch` is always -1: v0
/// responses carry no epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub leader_epoch: i32,
    pub end_offset: i64,
}

impl EpochEndOffset {
    pub const UNDEFINED: EpochEndOffset = EpochEndOffset {
        leader_epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_EPOCH_OFFSET,
    };

    fn new(leader_epoch: i32, end_offset: i64) -> Self {
        EpochEndOffset {
            leader_epoch,
            end_offset,
        }
    }
}

/// The cache and the file that persists it.
#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the cache from `path`, creating an empty file when there is none (as
    /// Kafka's `CheckpointFile` does). Entries are replayed through the assignment
    /// rules, so a file with non-monotonic entries loads as Kafka would load it.
    pub fn open(path: &Path) -> Result<LeaderEpochCache, StorageError> {
        if !path.exists() {
            std::fs::File::create(path).map_err(StorageError::io("create", path))?;
            if let Some(dir) = path.parent() {
                checkpoint::sync_dir(dir)?;
            }
        }
        let stored = checkpoint::read_epoch_checkpoint(path)?;
        let mut cache = LeaderEpochCache {
            path: path.to_path_buf(),
            entries: Vec::with_capacity(stored.len()),
        };
        for entry in stored {
            cache.assign_in_memory(entry.epoch, entry.start_offset, true)?;
        }
        Ok(cache)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Records that `epoch` starts at `start_offset`, and persists the change.
    ///
    /// Nothing changes when `epoch` is already the latest and starts no later (an
    /// offset once assigned to an epoch is never moved forward), so calling this
    /// on every append costs nothing. Otherwise every entry at the end whose epoch
    /// is ≥ `epoch` or whose start offset is ≥ `start_offset` is removed first,
    /// which keeps both columns strictly rising (KAFKA-7415).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<(), StorageError> {
        if self.assign_in_memory(epoch, start_offset, true)? {
            self.persist()?;
        }
        Ok(())
    }

    /// Assigns a sequence of `(epoch, start offset)` pairs, writing the file once
    /// at the end and only if the entries changed. Recovery replays a log's
    /// batches this way (as Kafka's `LogSegment.recover` does) without rewriting
    /// the file per epoch, and warns once if the replay changed the cache.
    pub(crate) fn assign_all(
        &mut self,
        starts: impl IntoIterator<Item = (i32, i64)>,
    ) -> Result<(), StorageError> {
        let before = self.entries.clone();
        for (epoch, start_offset) in starts {
            self.assign_in_memory(epoch, start_offset, false)?;
        }
        if self.entries != before {
            tracing::warn!(
                file = %self.path.display(),
                ?before,
                after = ?self.entries,
                "leader epoch cache: replaying the log's batches changed the cache"
            );
            self.persist()?;
        }
        Ok(())
    }

    fn assign_in_memory(
        &mut self,
        epoch: i32,
        start_offset: i64,
        warn: bool,
    ) -> Result<bool, StorageError> {
        if epoch < 0 || start_offset < 0 {
            return Err(StorageError::InvalidEpochEntry {
                epoch,
                start_offset,
            });
        }
        let needed = match self.entries.last() {
            Some(latest) => epoch != latest.epoch || start_offset < latest.start_offset,
            None => true,
        };
        if !needed {
            return Ok(false);
        }
        let removed_from =
            self.rposition_keep(|e| e.epoch < epoch && e.start_offset < start_offset);
        let removed: Vec<EpochEntry> = self.entries.drain(removed_from..).collect();
        // Only worth a warning when history was rewritten, not when an entry was
        // merely replaced at the same offset (as Kafka logs it).
        if warn
            && (removed.len() > 1
                || removed
                    .first()
                    .is_some_and(|r| r.start_offset != start_offset))
        {
            tracing::warn!(
                file = %self.path.display(),
                epoch,
                start_offset,
                ?removed,
                "leader epoch cache: new entry removed non-monotonic entries"
            );
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        Ok(true)
    }

    /// Index after the last entry, scanning from the end, that satisfies `keep`:
    /// entries after it are the ones to remove from the end.
    fn rposition_keep(&self, keep: impl Fn(&EpochEntry) -> bool) -> usize {
        self.entries.iter().rposition(keep).map_or(0, |i| i + 1)
    }

    /// The epoch that wrote `offset`: the latest entry starting at or before it.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .take_while(|e| e.start_offset <= offset)
            .last()
            .map(|e| e.epoch)
    }

    /// Removes entries starting at or after `end_offset`, as the log is cut there.
    /// A negative offset (undefined) is a no-op.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), StorageError> {
        if end_offset < 0 {
            return Ok(());
        }
        let keep = self.rposition_keep(|e| e.start_offset < end_offset);
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            self.persist()?;
        }
        Ok(())
    }

    /// Drops entries wholly before `start_offset`; the entry covering it is kept
    /// and moved to start there, since the log now begins there. A negative offset
    /// (undefined) is a no-op.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), StorageError> {
        if start_offset < 0 {
            return Ok(());
        }
        let covered = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        if covered == 0 {
            return Ok(());
        }
        let covering = self.entries[covered - 1];
        self.entries.drain(..covered);
        self.entries.insert(
            0,
            EpochEntry {
                epoch: covering.epoch,
                start_offset,
            },
        );
        self.persist()
    }

    /// Empties the cache (Kafka's `clearAndFlush`), used when a log is truncated
    /// below its start.
    pub fn clear(&mut self) -> Result<(), StorageError> {
        self.entries.clear();
        self.persist()
    }

    fn persist(&self) -> Result<(), StorageError> {
        checkpoint::write_epoch_checkpoint(&self.path, &self.entries)
    }

    /// Answers OffsetsForLeaderEpoch for `requested_epoch` under `rule`, given the
    /// log end offset.
    pub fn end_offset_for(
        &self,
        rule: EpochAnswerRule,
        requested_epoch: i32,
        log_end_offset: i64,
    ) -> EpochEndOffset {
        if requested_epoch == UNDEFINED_EPOCH {
            return EpochEndOffset::UNDEFINED;
        }
        let Some(latest) = self.latest_entry() else {
            return EpochEndOffset::UNDEFINED;
        };
        let first = self.entries[0];
        // The first entry with an epoch above the one asked: its start offset is
        // where every epoch ≤ the asked one ended.
        let higher = self.entries.iter().find(|e| e.epoch > requested_epoch);
        // The largest epoch ≤ the asked one.
        let floor = self
            .entries
            .iter()
            .take_while(|e| e.epoch <= requested_epoch)
            .last();
        match rule {
            EpochAnswerRule::Kip101 => {
                let end_offset = if requested_epoch == latest.epoch {
                    log_end_offset
                } else if requested_epoch < first.epoch {
                    UNDEFINED_EPOCH_OFFSET
                } else {
                    higher.map_or(UNDEFINED_EPOCH_OFFSET, |h| h.start_offset)
                };
                EpochEndOffset::new(UNDEFINED_EPOCH, end_offset)
            }
            EpochAnswerRule::Kip279 | EpochAnswerRule::Current => {
                if requested_epoch == latest.epoch {
                    return EpochEndOffset::new(requested_epoch, log_end_offset);
                }
                match (floor, higher) {
                    // Above the latest epoch: nothing known.
                    (_, None) => EpochEndOffset::UNDEFINED,
                    (Some(floor), Some(higher)) => {
                        EpochEndOffset::new(floor.epoch, higher.start_offset)
                    }
                    // Below the first epoch. 2.0 answered undefined, sending the
                    // follower back to its HW; KAFKA-7415 answers the first start
                    // offset so the follower keeps what the leader has too.
                    (None, Some(higher)) => match rule {
                        EpochAnswerRule::Kip279 => EpochEndOffset::UNDEFINED,
                        _ => EpochEndOffset::new(requested_epoch, higher.start_offset),
                    },
                }
            }
        }
    }
}
