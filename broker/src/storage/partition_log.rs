//! One partition's log: its segments, log end offset, high watermark, recovery
//! point and leader epoch cache.
//!
//! The log is a run of segments with no gaps, from the log start offset (the first
//! segment's base) to the log end offset (LEO). A leader append assigns offsets
//! from the LEO and stamps its epoch into each batch; a follower append keeps the
//! leader's offsets and epochs. Either way the stored bytes are the sender's, with
//! at most baseOffset and partitionLeaderEpoch patched. The log also owns the
//! partition's producer state (KIP-98): a leader append of an idempotent
//! producer's batches is checked against it first (a retry is answered with the
//! original offsets and not written again), every append updates it, and it is
//! rebuilt from its latest snapshot and the log after any truncation. The log
//! does not decide roles, advance the high watermark on its own, or talk to
//! peers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::checkpoint::{LEADER_EPOCH_CHECKPOINT, RecoveryPointFile, SharedCheckpoints};
use super::producer_state::{LeaderCheck, ProducerBatch, ProducerStateManager};
use super::record_batch::{
    self, BatchError, BatchHeader, Batches, HEADER_SIZE, ProducedError, RecordRules,
};
use super::recovery::{self, Truncation};
use super::segment::{BatchPosition, Segment};
use super::{LeaderEpochCache, LogConfig, ProducerStateRecovery, StorageError, TopicPartition};

mod log_start;
mod time_index;
mod txns;

pub use time_index::TimestampAndOffset;

/// What a follower's append or a replay tells the producer state, in log
/// order: a producer's data batch, or a transaction marker.
enum Replicated {
    Data(ProducerBatch),
    Marker(BatchHeader, super::txn::Marker),
}

/// Who a leader's append comes from (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: sequences checked, retries found.
    Client,
    /// A coordinator writing its own internal topic: epochs checked only.
    Coordinator,
}

/// What an append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogAppendInfo {
    /// Offset of the first record appended. For an empty append, the LEO (and
    /// `last_offset` is one less: nothing was written).
    pub first_offset: i64,
    pub last_offset: i64,
    pub record_count: u32,
    pub batch_count: u32,
    /// The append repeated a batch an idempotent producer already wrote: nothing
    /// was written, and the offsets are the original batch's (KIP-98).
    pub duplicate: bool,
}

#[derive(Debug)]
pub struct PartitionLog {
    topic_partition: TopicPartition,
    dir: PathBuf,
    config: LogConfig,
    /// Never empty; the last one is the active segment appends go to.
    segments: Vec<Segment>,
    /// The first offset a reader may ask for: the first segment's base, or
    /// above it once DeleteRecords moved it (KIP-107, `log_start.rs`).
    log_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    /// Every byte below this offset has been fsynced.
    recovery_point: i64,
    epoch_cache: LeaderEpochCache,
    last_flush: Instant,
    recovery_points: Arc<RecoveryPointFile>,
    log_starts: Arc<RecoveryPointFile>,
    recovery: Option<Truncation>,
    producer_state: ProducerStateManager,
    /// Every aborted transaction of the log's `.txnindex` files, in marker
    /// order: read once at open and kept as the files change, so a
    /// read_committed fetch (librdkafka's default) reads no file.
    aborted: Vec<super::txn::AbortedTxn>,
}

impl PartitionLog {
    /// Opens (recovering) or creates the log in `dir`. `recovery_point` and
    /// `high_watermark` come from the data dir's checkpoints, and so does the
    /// log start offset, from the log-start checkpoint in `files`.
    pub(crate) fn open(
        dir: &Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        recovery_point: i64,
        high_watermark: i64,
        files: SharedCheckpoints,
    ) -> Result<PartitionLog, StorageError> {
        let mut epoch_cache = LeaderEpochCache::open(&dir.join(LEADER_EPOCH_CHECKPOINT))?;
        let recovered = recovery::recover(dir, recovery_point, &mut epoch_cache)?;
        let first_base = recovered.segments[0].base_offset();
        let mut log = PartitionLog {
            topic_partition,
            dir: dir.to_path_buf(),
            config,
            segments: recovered.segments,
            log_start_offset: first_base,
            log_end_offset: recovered.log_end_offset,
            high_watermark: 0,
            // Recovery fsynced everything it validated.
            recovery_point: recovered.log_end_offset,
            epoch_cache,
            last_flush: Instant::now(),
            recovery_points: files.recovery_points,
            log_starts: files.log_starts,
            recovery: recovered.truncation,
            producer_state: ProducerStateManager::open(dir)?,
            aborted: Vec::new(),
        };
        log.load_txn_indexes()?;
        log.restore_log_start_offset()?;
        log.set_high_watermark(high_watermark);
        // Snapshots past the recovered end are deleted, the newest left loaded
        // and the log after it replayed (Kafka's `LogLoader` → `rebuildProducerState`).
        log.rebuild_producer_state()?;
        Ok(log)
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The size at which this log's segments roll from now on (the topic's
    /// `segment.bytes`, which may differ from the broker's and change).
    pub fn set_segment_bytes(&mut self, bytes: u64) {
        self.config.segment_bytes = bytes;
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Sets the high watermark, clamped to [log start, LEO]: a high watermark past
    /// the log end would claim records this replica does not have.
    pub fn set_high_watermark(&mut self, high_watermark: i64) {
        self.high_watermark = high_watermark
            .min(self.log_end_offset)
            .max(self.log_start_offset());
        self.producer_state.on_high_watermark(self.high_watermark);
    }

    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    pub fn leader_epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }

    pub fn leader_epoch_cache_mut(&mut self) -> &mut LeaderEpochCache {
        &mut self.epoch_cache
    }

    /// The idempotent producers' state as of the log end.
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }

    /// What recovery cut when this log was opened, if anything.
    pub fn recovery_truncation(&self) -> Option<&Truncation> {
        self.recovery.as_ref()
    }

    /// The segments' base offsets, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.iter().map(Segment::base_offset).collect()
    }

    /// Every batch's position, oldest first, for inspection and tests.
    pub fn batch_positions(&self) -> impl Iterator<Item = (&Path, &BatchPosition)> {
        self.segments
            .iter()
            .flat_map(|s| s.batches().iter().map(move |b| (s.path(), b)))
    }

    /// Appends producer batches as the leader in `leader_epoch`.
    ///
    /// Every batch is validated first (framing, magic 2, CRC, offsets, and a full
    /// decode of its records); if any fails nothing is written and the error says
    /// which batch. Batches with a producer id are then checked against the
    /// producer state: a retry of a batch in the log is answered with that
    /// batch's offsets and nothing is written (`duplicate`); a fenced epoch or a
    /// sequence out of order refuses the whole append. Then offsets are assigned
    /// from the LEO and each batch is stamped with the epoch, both patched in
    /// place.
    ///
    /// (Kafka 2.x assigns the epoch's start and may roll before it finds the
    /// duplicate; here a duplicate changes nothing at all.)
    pub fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, StorageError> {
        let rules = RecordRules::default();
        self.append_as_leader_from(records, leader_epoch, AppendOrigin::Client, &rules)
    }

    /// [`Self::append_as_leader`] of batches from `origin`, under the
    /// topic's `rules` (a batch they refuse is `RecordsRefused`): a
    /// coordinator's own batches have their producer epoch checked, not
    /// their sequences ([`ProducerStateManager::check_coordinator_append`]).
    pub fn append_as_leader_from(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
        origin: AppendOrigin,
        rules: &RecordRules,
    ) -> Result<LogAppendInfo, StorageError> {
        if leader_epoch < 0 {
            return Err(StorageError::InvalidEpochEntry {
                epoch: leader_epoch,
                start_offset: self.log_end_offset,
            });
        }
        let headers = record_batch::validate_produced_under(&records, rules).map_err(
            |(position, e)| match e {
                ProducedError::Corrupt(source) => corrupt((position, source)),
                ProducedError::Refused(source) => StorageError::RecordsRefused {
                    topic_partition: self.topic_partition.clone(),
                    position,
                    source,
                },
            },
        )?;
        if headers.is_empty() {
            return Ok(self.empty_append());
        }
        if let Some((position, _)) = headers.iter().find(|(_, h)| h.is_control()) {
            return Err(StorageError::ControlBatchProduced {
                topic_partition: self.topic_partition.clone(),
                position: *position,
            });
        }
        // The offsets each batch will get, as the loop below assigns them.
        let mut offset = self.log_end_offset;
        let producer_batches: Vec<ProducerBatch> = headers
            .iter()
            .filter_map(|(_, header)| {
                let first_offset = offset;
                offset += i64::from(header.last_offset_delta) + 1;
                ProducerBatch::from_header(header, first_offset)
            })
            .collect();
        let checked = match origin {
            AppendOrigin::Client => self.producer_state.check_leader_append(&producer_batches),
            AppendOrigin::Coordinator => self
                .producer_state
                .check_coordinator_append(&producer_batches)
                .map(LeaderCheck::Append),
        };
        let pending = match checked {
            Ok(LeaderCheck::Append(pending)) => pending,
            Ok(LeaderCheck::Duplicate(original)) => {
                return Ok(LogAppendInfo {
                    first_offset: original.first_offset(),
                    last_offset: original.last_offset,
                    record_count: 0,
                    batch_count: 0,
                    duplicate: true,
                });
            }
            Err(source) => {
                return Err(StorageError::ProducerState {
                    topic_partition: self.topic_partition.clone(),
                    source,
                });
            }
        };

        // The one copy on the leader path: the producer's buffer is shared and
        // immutable, the patched one is what goes to disk.
        let mut bytes = records.to_vec();
        let first_offset = self.log_end_offset;
        let mut next_offset = first_offset;
        let mut positions = Vec::with_capacity(headers.len());
        let mut record_count = 0u32;
        for (position, header) in &headers {
            let size = header.size_bytes();
            let batch = &mut bytes[*position..*position + size];
            record_batch::set_base_offset(batch, next_offset);
            record_batch::set_partition_leader_epoch(batch, leader_epoch);
            let last_offset = next_offset + i64::from(header.last_offset_delta);
            positions.push(BatchPosition {
                base_offset: next_offset,
                last_offset,
                position: *position as u64,
                size_bytes: size as u32,
                leader_epoch,
                max_timestamp: header.max_timestamp,
            });
            record_count = record_count.saturating_add(header.record_count as u32);
            next_offset = last_offset + 1;
        }

        // A no-op unless this is the epoch's first append (KIP-101).
        self.epoch_cache.assign(leader_epoch, first_offset)?;
        self.write(&bytes, positions, next_offset)?;
        // Only once written: a roll inside `write` snapshots the state as of
        // the old log end.
        self.producer_state.commit(pending, next_offset);
        Ok(LogAppendInfo {
            first_offset,
            last_offset: next_offset - 1,
            record_count,
            batch_count: headers.len() as u32,
            duplicate: false,
        })
    }

    /// Appends batches fetched from the leader, keeping their offsets and epochs.
    /// The first batch must start at the LEO and each next batch where the previous
    /// one ended. Batches are checked for framing and CRC, as Kafka's follower
    /// path does, not decoded.
    pub fn append_as_follower(&mut self, records: Bytes) -> Result<LogAppendInfo, StorageError> {
        self.append_fetched(records, false)
    }

    /// Appends fetched batches by Kafka 0.10's weaker rule, for
    /// `truncation = high-watermark`. In 0.10 `Log.append` (with
    /// `assignOffsets = false`) refused a message set only when its first
    /// offset was below the log end, and a compressed set's shallow offset was
    /// its *last* inner offset; a leader asked for an offset inside such a set
    /// sent the whole set. So a follower whose log end fell inside a
    /// compressed set on the leader appended all of it, records below its log
    /// end included, and its offsets went backwards (the case Kafka's
    /// `EpochDrivenReplicationProtocolAcceptanceTest.offsetsShouldNotGoBackwards`
    /// was written for, KAFKA-3919). Here a batch plays the compressed set: the
    /// first one need only end at or past the LEO; a gap is taken as well, as
    /// 0.10 took it. Each following batch must still continue the previous one.
    /// The LEO becomes the end of the last batch written. (0.10 kept
    /// uncompressed messages one per entry, so only a compressed set could
    /// start below the fetch offset; a v2 batch is whole whether compressed or
    /// not, and this rule treats every batch alike. The suite's scenario
    /// compresses, as Kafka's test did.)
    pub fn append_as_follower_unaligned(
        &mut self,
        records: Bytes,
    ) -> Result<LogAppendInfo, StorageError> {
        self.append_fetched(records, true)
    }

    fn append_fetched(
        &mut self,
        records: Bytes,
        unaligned_first: bool,
    ) -> Result<LogAppendInfo, StorageError> {
        let mut positions = Vec::new();
        let mut producer_batches = Vec::new();
        let mut epoch_starts: Vec<(i32, i64)> = Vec::new();
        let mut next_offset = self.log_end_offset;
        let mut record_count = 0u32;
        for item in Batches::new(&records) {
            let batch = item.map_err(corrupt)?;
            let header = batch.header;
            let first_accepted = unaligned_first
                && positions.is_empty()
                && header.last_offset() >= self.log_end_offset;
            if header.base_offset != next_offset && !first_accepted {
                if positions.is_empty() {
                    return Err(StorageError::UnexpectedAppendOffset {
                        topic_partition: self.topic_partition.clone(),
                        expected: next_offset,
                        actual: header.base_offset,
                    });
                }
                return Err(corrupt((
                    batch.position,
                    BatchError::UnexpectedBaseOffset {
                        expected: next_offset,
                        actual: header.base_offset,
                    },
                )));
            }
            // Batches written before any epoch existed carry -1 and claim none.
            let epoch = header.partition_leader_epoch;
            if epoch >= 0 && epoch_starts.last().is_none_or(|(e, _)| *e != epoch) {
                epoch_starts.push((epoch, header.base_offset));
            }
            positions.push(BatchPosition {
                base_offset: header.base_offset,
                last_offset: header.last_offset(),
                position: batch.position as u64,
                size_bytes: header.size_bytes() as u32,
                leader_epoch: epoch,
                max_timestamp: header.max_timestamp,
            });
            if header.is_control() {
                let marker = Self::marker_of(&records, batch.position, &header)?;
                producer_batches.push(Replicated::Marker(header, marker));
            } else if let Some(b) = ProducerBatch::from_header(&header, header.base_offset) {
                producer_batches.push(Replicated::Data(b));
            }
            record_count = record_count.saturating_add(header.record_count as u32);
            next_offset = header.next_offset();
        }
        if positions.is_empty() {
            return Ok(self.empty_append());
        }
        let first_offset = positions[0].base_offset;
        let batch_count = positions.len() as u32;
        for (epoch, start_offset) in epoch_starts {
            self.epoch_cache.assign(epoch, start_offset)?;
        }
        self.write(&records, positions, next_offset)?;
        // The leader judged these batches; a follower records them as they are.
        for event in producer_batches {
            match event {
                Replicated::Data(batch) => self.producer_state.apply_replicated(&batch),
                Replicated::Marker(header, marker) => {
                    let (pid, epoch) = (header.producer_id, header.producer_epoch);
                    self.take_marker(pid, epoch, marker, header.base_offset)?;
                }
            }
        }
        self.producer_state.set_map_end_offset(next_offset);
        Ok(LogAppendInfo {
            first_offset,
            last_offset: next_offset - 1,
            record_count,
            batch_count,
            duplicate: false,
        })
    }

    fn empty_append(&self) -> LogAppendInfo {
        LogAppendInfo {
            first_offset: self.log_end_offset,
            last_offset: self.log_end_offset - 1,
            record_count: 0,
            batch_count: 0,
            duplicate: false,
        }
    }

    /// Writes validated batches to the active segment (rolling first if they would
    /// overflow it) and applies the flush policy.
    fn write(
        &mut self,
        bytes: &[u8],
        positions: Vec<BatchPosition>,
        next_offset: i64,
    ) -> Result<(), StorageError> {
        let active = self.active();
        // Kafka rolls before an append that would take the segment past
        // segment.bytes; an empty segment takes any append, however large.
        if !active.is_empty()
            && active.size_bytes() + bytes.len() as u64 > self.config.segment_bytes
        {
            self.roll()?;
        }
        self.active_mut().append(bytes, positions)?;
        self.log_end_offset = next_offset;
        let unflushed = (self.log_end_offset - self.recovery_point) as u64;
        if unflushed >= self.config.flush_messages {
            self.flush()?;
        }
        Ok(())
    }

    /// Starts a new segment at the LEO. The old one is flushed first, as Kafka
    /// schedules a flush of every rolled segment, so only the active segment can
    /// hold unflushed bytes; and the producer state is snapshotted at the new
    /// segment's base, as Kafka's `roll` does, so a later rebuild replays at
    /// most the active segment.
    fn roll(&mut self) -> Result<(), StorageError> {
        self.flush()?;
        debug_assert_eq!(self.producer_state.map_end_offset(), self.log_end_offset);
        self.producer_state.take_snapshot()?;
        let segment = Segment::create(&self.dir, self.log_end_offset)?;
        self.segments.push(segment);
        Ok(())
    }

    fn active(&self) -> &Segment {
        self.segments.last().expect("a log always has a segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("a log always has a segment")
    }

    /// Reads whole batches starting with the one that contains `start_offset`,
    /// adding following batches of the same segment while they fit in
    /// `max_bytes`. The first batch is returned whatever its size so a consumer
    /// can always make progress (KIP-74). At the LEO the result is empty.
    pub fn read(&self, start_offset: i64, max_bytes: usize) -> Result<Bytes, StorageError> {
        self.read_batches(start_offset, max_bytes, true)
    }

    /// [`Self::read`], with the first batch returned over `max_bytes` only
    /// when `min_one_batch` (Kafka's `minOneMessage` in `Log.read`, KIP-74);
    /// without it a first batch larger than `max_bytes` reads as nothing.
    /// Kafka would hand back the first `max_bytes` of it, a partial batch the
    /// client throws away; whole batches or none come to the same for it.
    pub fn read_batches(
        &self,
        start_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Bytes, StorageError> {
        if start_offset < self.log_start_offset() || start_offset > self.log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                topic_partition: self.topic_partition.clone(),
                offset: start_offset,
                log_start_offset: self.log_start_offset(),
                log_end_offset: self.log_end_offset,
            });
        }
        let first_segment = self
            .segments
            .partition_point(|s| s.base_offset() <= start_offset)
            .saturating_sub(1);
        for segment in &self.segments[first_segment..] {
            let batches = segment.batches();
            let first = segment.batch_index_for(start_offset);
            let Some(head) = batches.get(first) else {
                continue;
            };
            let mut len = head.size_bytes as usize;
            if len > max_bytes && !min_one_batch {
                return Ok(Bytes::new());
            }
            for batch in &batches[first + 1..] {
                if len + batch.size_bytes as usize > max_bytes {
                    break;
                }
                len += batch.size_bytes as usize;
            }
            return Ok(Bytes::from(segment.read_at(head.position, len)?));
        }
        Ok(Bytes::new())
    }

    /// Truncates the log so it ends before `offset`, batch-aligned: a batch that
    /// contains `offset` is removed whole, so the new LEO is the base of that
    /// batch (Kafka instead sets its LEO to `offset` itself, which can leave it
    /// pointing inside a batch no longer there; we keep the LEO on a boundary).
    /// The epoch cache, high watermark and recovery point are cut to the new LEO,
    /// and the producer state rebuilt for it.
    /// Truncating below the log start empties the log and restarts it at `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        if offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                topic_partition: self.topic_partition.clone(),
                offset,
                log_start_offset: self.log_start_offset(),
                log_end_offset: self.log_end_offset,
            });
        }
        if offset >= self.log_end_offset {
            // No record goes, but an epoch entry at the log end does: a
            // leader records its epoch at election (KAFKA-7415, Kafka 2.1)
            // and may be deposed before appending anything; as a follower it
            // must drop that empty epoch, or it asks the new leader about it
            // again and again and never fetches (Kafka's Log.truncateTo
            // truncates the epoch cache from the log end in this case too).
            return self.epoch_cache.truncate_from_end(self.log_end_offset);
        }
        if offset < self.log_start_offset() {
            return self.truncate_fully_and_start_at(offset);
        }
        let mut removed = Vec::new();
        while self.active().base_offset() > offset {
            let segment = self
                .segments
                .pop()
                .expect("a segment starts at or below offset");
            removed.push(segment.base_offset());
            segment.delete()?;
        }
        self.active_mut().truncate_to(offset)?;
        self.truncate_txn_indexes(&removed, offset)?;
        super::checkpoint::sync_dir(&self.dir)?;
        self.log_end_offset = self.active().end_offset();
        self.after_truncation()
    }

    /// Removes every segment and restarts the log empty at `offset` (Kafka's
    /// `Log.truncateFullyAndStartAt`).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        let removed: Vec<i64> = self.segments.iter().map(Segment::base_offset).collect();
        for segment in self.segments.drain(..) {
            segment.delete()?;
        }
        self.truncate_txn_indexes(&removed, offset)?;
        self.segments.push(Segment::create(&self.dir, offset)?);
        self.log_end_offset = offset;
        // The first segment's base is the log start again: an entry above it
        // would move the start past the new records at the next open.
        self.log_start_offset = offset;
        self.log_starts.forget(&self.topic_partition)?;
        self.epoch_cache.clear()?;
        self.producer_state.truncate_fully_and_start_at(offset)?;
        self.after_truncation()
    }

    fn after_truncation(&mut self) -> Result<(), StorageError> {
        self.epoch_cache.truncate_from_end(self.log_end_offset)?;
        self.set_high_watermark(self.high_watermark);
        // The checkpoint must never name offsets that are no longer the bytes
        // that were fsynced: new appends could take their place unflushed.
        if self.recovery_point > self.log_end_offset {
            self.recovery_point = self.log_end_offset;
            self.recovery_points
                .record(&self.topic_partition, self.recovery_point)?;
        }
        self.rebuild_producer_state()
    }

    /// Makes the producer state what the log implies: the newest snapshot at or
    /// below the LEO (newer ones deleted, corrupt ones deleted with a warning),
    /// then every batch after it replayed from the segments (Kafka's
    /// `rebuildProducerState`), then a snapshot at the LEO so the next rebuild
    /// starts here. With no snapshot left the whole log is replayed — unless
    /// `producer_state_recovery = kafka-5435`, which starts empty instead.
    fn rebuild_producer_state(&mut self) -> Result<(), StorageError> {
        let loaded = self
            .producer_state
            .truncate_and_reload(self.log_start_offset(), self.log_end_offset)?;
        let from = match loaded {
            Some(snapshot_offset) => snapshot_offset,
            None if self.config.producer_state_recovery == ProducerStateRecovery::Kafka5435
                && self.log_end_offset > self.log_start_offset() =>
            {
                // KAFKA-5435 (Kafka 0.11.0.0 before its release): no snapshot
                // was read as "this log predates idempotence", and the broker
                // wrote an empty snapshot at the log end instead of reading
                // the log, losing every producer's sequences in it.
                tracing::warn!(
                    topic = %self.topic_partition.topic,
                    partition = self.topic_partition.partition,
                    log_end_offset = self.log_end_offset,
                    "no producer-state snapshot: starting with no producer state without \
                     reading the log (producer_state_recovery = kafka-5435)"
                );
                self.producer_state.set_map_end_offset(self.log_end_offset);
                return self.producer_state.take_snapshot();
            }
            None => self.log_start_offset(),
        };
        let mut header_buf = [0u8; HEADER_SIZE];
        for segment in self.segments.iter().filter(|s| s.end_offset() > from) {
            for batch in segment.batches().iter().filter(|b| b.last_offset >= from) {
                let read = segment.read_some_at(&mut header_buf, batch.position)?;
                let header: BatchHeader = record_batch::parse_header(&header_buf[..read])
                    .map_err(|e| corrupt((batch.position as usize, e)))?;
                if header.is_control() {
                    // Its abort, if it is one, is in the index already.
                    let bytes = Bytes::from(segment.read_at(batch.position, header.size_bytes())?);
                    let marker = Self::marker_of(&bytes, 0, &header)?;
                    let (pid, epoch) = (header.producer_id, header.producer_epoch);
                    self.producer_state
                        .complete_txn(pid, epoch, marker, batch.base_offset);
                } else if let Some(producer_batch) =
                    ProducerBatch::from_header(&header, batch.base_offset)
                {
                    self.producer_state.apply_replicated(&producer_batch);
                }
            }
        }
        self.producer_state.set_map_end_offset(self.log_end_offset);
        self.snapshot_producer_state()
    }

    /// Snapshots the producer state at the LEO (Kafka does at every clean
    /// shutdown), unless the log is empty: there the state is empty too, and
    /// the file would say nothing.
    pub fn snapshot_producer_state(&mut self) -> Result<(), StorageError> {
        if self.log_end_offset == self.log_start_offset()
            && self.producer_state.producers().next().is_none()
        {
            return Ok(());
        }
        self.producer_state.take_snapshot()
    }

    /// fsyncs every segment with bytes past the recovery point, then moves the
    /// recovery point to the LEO and rewrites the recovery-point checkpoint, so
    /// the checkpoint only ever names bytes known to be on disk.
    pub fn flush(&mut self) -> Result<(), StorageError> {
        if self.recovery_point >= self.log_end_offset {
            return Ok(());
        }
        for segment in &self.segments {
            if segment.end_offset() > self.recovery_point {
                segment.flush()?;
            }
        }
        self.recovery_point = self.log_end_offset;
        self.last_flush = Instant::now();
        self.recovery_points
            .record(&self.topic_partition, self.recovery_point)
    }

    /// Flushes when `flush_interval_ms` has passed since the last flush (never
    /// when it is 0), as Kafka's `LogManager.flushDirtyLogs` does for `flush.ms`.
    pub fn flush_if_due(&mut self, now: Instant) -> Result<(), StorageError> {
        if self.config.flush_interval_ms == 0 {
            return Ok(());
        }
        let interval = Duration::from_millis(self.config.flush_interval_ms);
        if now.saturating_duration_since(self.last_flush) >= interval {
            self.flush()?;
        }
        Ok(())
    }
}

fn corrupt((position, source): (usize, BatchError)) -> StorageError {
    StorageError::CorruptRecords { position, source }
}
