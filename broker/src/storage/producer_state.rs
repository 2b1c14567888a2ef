//! One partition's producer state (KIP-98): for every idempotent producer id the
//! log holds batches of, its epoch and the metadata of its last five batches —
//! what lets a leader answer a retried batch with its original offsets instead
//! of appending it twice, and refuse a batch that skips sequences or comes from
//! a fenced (older) epoch.
//!
//! The state is a function of the log: the manager is told of every batch
//! appended (validated first when a leader appends a producer's batches,
//! applied as they are when a follower copies the leader's, or when the log is
//! replayed), and rebuilt from the latest snapshot at or below the log end plus
//! the batches after it whenever the log is truncated or opened, as Kafka's
//! `ProducerStateManager.truncateAndReload` does. Batches without a producer id
//! (-1) never touch it. It does not read segments itself: the partition log
//! replays them into it. Producer ids are never expired here (Kafka drops them
//! after `producer.id.expiration.ms`); transactions are not supported.
//!
//! The rules are those of Kafka 2.5+ (`ProducerAppendInfo`, after KIP-360):
//! a lower epoch is INVALID_PRODUCER_EPOCH; a new epoch must start at sequence 0;
//! within an epoch the next batch must start one past the last (wrapping at
//! `i32::MAX`); a producer the partition has no record of may start at any
//! sequence; and a batch equal in epoch, first and last sequence to one of the
//! last five is a duplicate.

mod error;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

pub use self::error::ProducerStateError;
use super::StorageError;
use super::producer_snapshot::{self, SnapshotEntry};
use super::record_batch::BatchHeader;
use super::txn::Marker;

/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: as many batches as a
/// producer may have in flight (max.in.flight.requests.per.connection ≤ 5 with
/// idempotence, KAFKA-5494).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
/// Snapshots kept per partition; older ones are deleted when a new one is
/// written (Kafka 0.11's `maxPidSnapshotsToRetain`). A truncation below the
/// oldest kept rebuilds from the log start, which is slower but as correct.
pub const SNAPSHOTS_RETAINED: usize = 2;
/// `RecordBatch.NO_PRODUCER_EPOCH`: the epoch of a producer not yet seen.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// `RecordBatch.NO_SEQUENCE`.
pub const NO_SEQUENCE: i32 = -1;

/// `DefaultRecordBatch.incrementSequence`: sequences wrap from `i32::MAX` to 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// `DefaultRecordBatch.decrementSequence`, the inverse of [`increment_sequence`].
pub fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        i32::MAX - (decrement - sequence) + 1
    } else {
        sequence - decrement
    }
}

/// Whether `next` is the sequence after `last` (`ProducerAppendInfo.inSequence`).
fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// The producer fields of one idempotent batch, at the offsets it has (or will
/// have) in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    /// Part of a transaction (attributes bit 4): its first batch on this
    /// partition opens the producer's transaction here.
    pub transactional: bool,
}

impl ProducerBatch {
    /// The batch's producer fields if it has a producer id (Kafka's
    /// `hasProducerId`: any id above -1); `first_offset` is where it sits in
    /// the log, which for a producer's batch is not yet in the header.
    pub fn from_header(header: &BatchHeader, first_offset: i64) -> Option<ProducerBatch> {
        if header.producer_id < 0 {
            return None;
        }
        let last_sequence = if header.base_sequence < 0 {
            NO_SEQUENCE
        } else {
            increment_sequence(header.base_sequence, header.last_offset_delta)
        };
        Some(ProducerBatch {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            first_sequence: header.base_sequence,
            last_sequence,
            first_offset,
            last_offset: first_offset + i64::from(header.last_offset_delta),
            max_timestamp: header.max_timestamp,
            transactional: header.is_transactional(),
        })
    }

    fn metadata(&self) -> BatchMetadata {
        BatchMetadata {
            last_sequence: self.last_sequence,
            last_offset: self.last_offset,
            offset_delta: (self.last_offset - self.first_offset) as i32,
            timestamp: self.max_timestamp,
        }
    }
}

/// What the state keeps of one batch (Kafka's `BatchMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub last_sequence: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
}

impl BatchMetadata {
    pub fn first_sequence(&self) -> i32 {
        decrement_sequence(self.last_sequence, self.offset_delta)
    }

    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// One producer id's state in this partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Oldest first, at most [`NUM_BATCHES_TO_RETAIN`], all of `producer_epoch`.
    batches: VecDeque<BatchMetadata>,
    /// The first offset of the producer's open transaction on this
    /// partition (Kafka's `currentTxnFirstOffset`).
    pub current_txn_first_offset: Option<i64>,
    /// The epoch of the transaction coordinator that wrote its last marker.
    pub coordinator_epoch: i32,
}

impl ProducerStateEntry {
    fn new(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            current_txn_first_offset: None,
            coordinator_epoch: -1,
        }
    }

    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    pub fn last_sequence(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_sequence)
    }

    /// A batch already in the log that `batch` repeats: same epoch, same first
    /// and last sequence (`ProducerStateEntry.findDuplicateBatch`).
    pub fn find_duplicate(&self, batch: &ProducerBatch) -> Option<BatchMetadata> {
        if batch.producer_epoch != self.producer_epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|b| {
                b.first_sequence() == batch.first_sequence && b.last_sequence == batch.last_sequence
            })
            .copied()
    }

    /// Takes a data batch: its metadata, and, for the first transactional
    /// one, the start of the producer's transaction here.
    fn add_data_batch(&mut self, batch: &ProducerBatch) {
        if batch.transactional && self.current_txn_first_offset.is_none() {
            self.current_txn_first_offset = Some(batch.first_offset);
        }
        self.add_batch(batch.producer_epoch, batch.metadata());
    }

    /// `ProducerStateEntry.addBatch`: a new epoch forgets the old epoch's batches.
    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        if epoch != self.producer_epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
        self.batches.push_back(batch);
        if self.batches.len() > NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
    }

    fn to_snapshot(&self) -> SnapshotEntry {
        let last = self.batches.back();
        SnapshotEntry {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            last_sequence: last.map_or(NO_SEQUENCE, |b| b.last_sequence),
            last_offset: last.map_or(-1, |b| b.last_offset),
            offset_delta: last.map_or(0, |b| b.offset_delta),
            timestamp: last.map_or(-1, |b| b.timestamp),
            coordinator_epoch: self.coordinator_epoch,
            current_txn_first_offset: self.current_txn_first_offset.unwrap_or(-1),
        }
    }

    fn from_snapshot(e: &SnapshotEntry) -> Self {
        let mut entry = ProducerStateEntry::new(e.producer_id);
        entry.producer_epoch = e.producer_epoch;
        entry.coordinator_epoch = e.coordinator_epoch;
        entry.current_txn_first_offset =
            (e.current_txn_first_offset >= 0).then_some(e.current_txn_first_offset);
        if e.last_sequence >= 0 {
            entry.batches.push_back(BatchMetadata {
                last_sequence: e.last_sequence,
                last_offset: e.last_offset,
                offset_delta: e.offset_delta,
                timestamp: e.timestamp,
            });
        }
        entry
    }
}

/// A transaction a marker ended on this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub aborted: bool,
}

/// What a leader append of producer batches comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderCheck {
    /// Every batch is new and in order: once written, [`ProducerStateManager::commit`]
    /// these entries.
    Append(PendingProducers),
    /// A retry of a batch already in the log: nothing is written, and the
    /// producer is answered with that batch's offsets.
    Duplicate(BatchMetadata),
}

/// The entries an append will change, as they will be after it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PendingProducers(BTreeMap<i64, ProducerStateEntry>);

#[derive(Debug)]
pub struct ProducerStateManager {
    dir: PathBuf,
    producers: BTreeMap<i64, ProducerStateEntry>,
    /// Every batch below this offset has been applied (Kafka's `mapEndOffset`).
    map_end_offset: i64,
    /// Offsets of the snapshot files in `dir`.
    snapshots: BTreeSet<i64>,
    /// Transactions completed by a marker not yet below the high watermark:
    /// first offset → the marker's offset (Kafka's `unreplicatedTxns`).
    unstable: BTreeMap<i64, i64>,
}

impl ProducerStateManager {
    /// An empty state for the log in `dir`, knowing the snapshots there; call
    /// [`Self::truncate_and_reload`] to load one.
    pub fn open(dir: &Path) -> Result<ProducerStateManager, StorageError> {
        let snapshots = producer_snapshot::list(dir)?
            .into_iter()
            .map(|(offset, _)| offset)
            .collect();
        Ok(ProducerStateManager {
            dir: dir.to_path_buf(),
            producers: BTreeMap::new(),
            map_end_offset: 0,
            snapshots,
            unstable: BTreeMap::new(),
        })
    }

    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    pub fn entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    pub fn producers(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values()
    }

    /// Offsets of the snapshot files kept, oldest first.
    pub fn snapshot_offsets(&self) -> Vec<i64> {
        self.snapshots.iter().copied().collect()
    }

    /// Checks a leader's append of `batches` (in log order, producer batches
    /// only) against the state: the first batch that repeats one in the log
    /// makes the append a duplicate (as Kafka's `analyzeAndValidateProducerState`
    /// returns on the first duplicate it finds); otherwise each batch must pass
    /// the epoch and sequence rules, later batches of the same producer checked
    /// against the earlier ones of this append.
    pub fn check_leader_append(
        &self,
        batches: &[ProducerBatch],
    ) -> Result<LeaderCheck, ProducerStateError> {
        let mut pending = PendingProducers::default();
        for batch in batches {
            if batch.first_sequence < 0 {
                return Err(ProducerStateError::InvalidSequence {
                    producer_id: batch.producer_id,
                    base_sequence: batch.first_sequence,
                });
            }
            let current = self.producers.get(&batch.producer_id);
            if let Some(duplicate) = current.and_then(|e| e.find_duplicate(batch)) {
                return Ok(LeaderCheck::Duplicate(duplicate));
            }
            let updated = pending.0.entry(batch.producer_id).or_insert_with(|| {
                current
                    .cloned()
                    .unwrap_or_else(|| ProducerStateEntry::new(batch.producer_id))
            });
            check_batch(updated, batch)?;
            updated.add_data_batch(batch);
        }
        Ok(LeaderCheck::Append(pending))
    }

    /// [`Self::check_leader_append`] for batches a coordinator appends to its
    /// own internal topic (a group coordinator's transactional offset
    /// commits, KIP-98): Kafka checks only their epoch — an older one is
    /// fenced — never their sequences and never for duplicates, since the
    /// coordinator stamps every such batch with sequence 0
    /// (`ProducerAppendInfo` with `AppendOrigin.COORDINATOR`).
    pub fn check_coordinator_append(
        &self,
        batches: &[ProducerBatch],
    ) -> Result<PendingProducers, ProducerStateError> {
        let mut pending = PendingProducers::default();
        for batch in batches {
            let updated = pending.0.entry(batch.producer_id).or_insert_with(|| {
                self.producers
                    .get(&batch.producer_id)
                    .cloned()
                    .unwrap_or_else(|| ProducerStateEntry::new(batch.producer_id))
            });
            if batch.producer_epoch < updated.producer_epoch {
                return Err(ProducerStateError::InvalidProducerEpoch {
                    producer_id: batch.producer_id,
                    epoch: batch.producer_epoch,
                    current_epoch: updated.producer_epoch,
                });
            }
            updated.add_data_batch(batch);
        }
        Ok(pending)
    }

    /// Installs what [`Self::check_leader_append`] prepared, once the batches
    /// are written, and moves the state to the new log end.
    pub fn commit(&mut self, pending: PendingProducers, end_offset: i64) {
        self.producers.extend(pending.0);
        self.map_end_offset = end_offset;
    }

    /// Applies a batch as it is in the log (a follower's copy of the leader's,
    /// or the log replayed), without the sequence rules: the leader already
    /// judged it (Kafka's `AppendOrigin.REPLICATION`). A lower epoch is still
    /// taken, with a warning, as Kafka takes it, so the state stays what the
    /// log says.
    pub fn apply_replicated(&mut self, batch: &ProducerBatch) {
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerStateEntry::new(batch.producer_id));
        if batch.producer_epoch < entry.producer_epoch {
            tracing::warn!(
                producer_id = batch.producer_id,
                epoch = batch.producer_epoch,
                current_epoch = entry.producer_epoch,
                offset = batch.first_offset,
                "replicated batch has an older producer epoch than the last seen"
            );
        }
        entry.add_data_batch(batch);
    }

    /// Whether the coordinator's marker for `producer_id` may be appended
    /// (Kafka's `appendEndTxnMarker` checks): a marker of an older producer
    /// epoch than the producer's is INVALID_PRODUCER_EPOCH, one from an older
    /// coordinator than the last marker's TRANSACTION_COORDINATOR_FENCED.
    pub fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
    ) -> Result<(), ProducerStateError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.producer_epoch {
            return Err(ProducerStateError::InvalidProducerEpoch {
                producer_id,
                epoch: producer_epoch,
                current_epoch: entry.producer_epoch,
            });
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(ProducerStateError::CoordinatorFenced {
                producer_id,
                coordinator_epoch: marker.coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Ends `producer_id`'s transaction here with a marker now in the log at
    /// `marker_offset`: checked by [`Self::check_marker`] on the leader, taken
    /// as written by a follower and on replay. The transaction's first offset
    /// is its first batch here, or the marker itself when it had none.
    pub fn complete_txn(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        marker_offset: i64,
    ) -> CompletedTxn {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerStateEntry::new(producer_id));
        let completed = CompletedTxn {
            producer_id,
            first_offset: entry.current_txn_first_offset.unwrap_or(marker_offset),
            last_offset: marker_offset,
            aborted: !marker.commit,
        };
        if producer_epoch != entry.producer_epoch {
            entry.batches.clear();
            entry.producer_epoch = producer_epoch;
        }
        entry.current_txn_first_offset = None;
        entry.coordinator_epoch = marker.coordinator_epoch;
        self.unstable
            .insert(completed.first_offset, completed.last_offset);
        self.map_end_offset = marker_offset + 1;
        completed
    }

    /// The first offset a read_committed consumer may not read past: the
    /// earliest first offset of a transaction still open, or completed by a
    /// marker at or above `high_watermark` (not yet replicated; Kafka's
    /// `firstUnstableOffset`). Completed transactions below the high
    /// watermark are forgotten here.
    pub fn first_unstable_offset(&self, high_watermark: i64) -> Option<i64> {
        let open = self
            .producers
            .values()
            .filter_map(|e| e.current_txn_first_offset)
            .min();
        let completing = self
            .unstable
            .iter()
            .find(|(_, last)| **last >= high_watermark)
            .map(|(first, _)| *first);
        open.into_iter().chain(completing).min()
    }

    /// Forgets completed transactions whose marker is below `high_watermark`:
    /// they bound the last stable offset no more.
    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        self.unstable.retain(|_, last| *last >= high_watermark);
    }

    /// Records that every batch below `end_offset` has been applied.
    pub fn set_map_end_offset(&mut self, end_offset: i64) {
        self.map_end_offset = end_offset;
    }

    /// Writes the state as the snapshot for the map end offset, unless one
    /// exists for that offset already (its content is the same: it describes
    /// the same log prefix), then deletes all but the newest
    /// [`SNAPSHOTS_RETAINED`].
    pub fn take_snapshot(&mut self) -> Result<(), StorageError> {
        let offset = self.map_end_offset;
        if !self.snapshots.contains(&offset) {
            let entries: Vec<SnapshotEntry> = self
                .producers
                .values()
                .map(ProducerStateEntry::to_snapshot)
                .collect();
            producer_snapshot::write(&self.dir, offset, &entries)?;
            self.snapshots.insert(offset);
        }
        while self.snapshots.len() > SNAPSHOTS_RETAINED {
            let oldest = *self.snapshots.first().expect("more than retained");
            self.delete_snapshot(oldest)?;
        }
        Ok(())
    }

    /// Kafka's `truncateAndReload`: deletes the snapshots past `log_end_offset`
    /// (they describe records no longer in the log), then loads the newest one
    /// left, deleting (with a warning naming the file) any that does not decode
    /// and trying the next. Returns the offset of the snapshot loaded, from
    /// which the caller must replay the log into [`Self::apply_replicated`];
    /// None when no snapshot is left, and the state is empty at
    /// `log_start_offset`.
    pub fn truncate_and_reload(
        &mut self,
        log_start_offset: i64,
        log_end_offset: i64,
    ) -> Result<Option<i64>, StorageError> {
        let stale: Vec<i64> = self
            .snapshots
            .range(log_end_offset.saturating_add(1)..)
            .copied()
            .collect();
        for offset in stale {
            self.delete_snapshot(offset)?;
        }
        self.producers.clear();
        self.unstable.clear();
        while let Some(&offset) = self.snapshots.last() {
            let path = self.dir.join(producer_snapshot::file_name(offset));
            match producer_snapshot::read(&path)? {
                Ok(entries) => {
                    self.producers = entries
                        .iter()
                        .map(|e| (e.producer_id, ProducerStateEntry::from_snapshot(e)))
                        .collect();
                    self.map_end_offset = offset;
                    tracing::debug!(file = %path.display(), producers = entries.len(), "loaded producer state");
                    return Ok(Some(offset));
                }
                Err(e) => {
                    tracing::warn!(
                        file = %path.display(),
                        error = %e,
                        "producer-state snapshot cannot be loaded; deleting it and \
                         rebuilding the producer state from the log"
                    );
                    self.delete_snapshot(offset)?;
                }
            }
        }
        self.map_end_offset = log_start_offset;
        Ok(None)
    }

    /// Kafka's `truncateFullyAndStartAt`: no producers, no snapshots.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        for snapshot in self.snapshot_offsets() {
            self.delete_snapshot(snapshot)?;
        }
        self.producers.clear();
        self.unstable.clear();
        self.map_end_offset = offset;
        Ok(())
    }

    fn delete_snapshot(&mut self, offset: i64) -> Result<(), StorageError> {
        self.snapshots.remove(&offset);
        let path = self.dir.join(producer_snapshot::file_name(offset));
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StorageError::io("delete snapshot", &path)(e)),
        }
    }
}

/// The epoch and sequence rules for one batch against the producer's entry as
/// it stands (`ProducerAppendInfo.checkProducerEpoch` and `checkSequence`).
fn check_batch(
    entry: &ProducerStateEntry,
    batch: &ProducerBatch,
) -> Result<(), ProducerStateError> {
    if batch.producer_epoch < entry.producer_epoch {
        return Err(ProducerStateError::InvalidProducerEpoch {
            producer_id: batch.producer_id,
            epoch: batch.producer_epoch,
            current_epoch: entry.producer_epoch,
        });
    }
    let out_of_order = || ProducerStateError::OutOfOrderSequence {
        producer_id: batch.producer_id,
        epoch: batch.producer_epoch,
        current_epoch: entry.producer_epoch,
        first_sequence: batch.first_sequence,
        last_sequence: entry.last_sequence(),
    };
    // A producer this partition has no record of may start anywhere: since
    // KIP-360 (Kafka 2.5) the broker no longer answers UNKNOWN_PRODUCER_ID, as
    // its records may simply have been deleted by retention.
    if entry.producer_epoch == NO_PRODUCER_EPOCH {
        return Ok(());
    }
    if batch.producer_epoch != entry.producer_epoch {
        // A bumped epoch (a new InitProducerId, or KIP-360's bump after an
        // error) restarts the sequence.
        return if batch.first_sequence == 0 {
            Ok(())
        } else {
            Err(out_of_order())
        };
    }
    // With no batch of this epoch on record, the last sequence is -1 and the
    // batch must start at 0.
    if in_sequence(entry.last_sequence(), batch.first_sequence) {
        Ok(())
    } else {
        Err(out_of_order())
    }
}

#[cfg(test)]
#[path = "producer_state_tests.rs"]
mod tests;
