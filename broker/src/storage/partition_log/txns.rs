//! A partition log's transactions (KIP-98): markers appended by the leader
//! for the transaction coordinator and taken as replicated by followers and
//! on replay, the aborted-transaction index kept beside each segment, the
//! last stable offset, and the aborted transactions a read_committed fetch
//! is told about.

use bytes::Bytes;

use super::super::StorageError;
use super::super::producer_state::CompletedTxn;
use super::super::record_batch::{self, BatchHeader};
use super::super::segment::BatchPosition;
use super::super::txn::{self, AbortedTxn, Marker};
use super::{LogAppendInfo, PartitionLog, corrupt};

impl PartitionLog {
    /// The last stable offset (KIP-98): below the first offset of any
    /// transaction still open or not yet completed below the high watermark,
    /// and never above the high watermark. A read_committed consumer reads
    /// up to it.
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        self.producer_state
            .first_unstable_offset(hw)
            .map_or(hw, |first| first.min(hw))
    }

    /// Appends the marker that ends `producer_id`'s transaction, as the
    /// partition's leader in `leader_epoch` (WriteTxnMarkers). Refused, with
    /// nothing written, for an older producer epoch or coordinator epoch
    /// than the producer's last here.
    pub fn append_marker_as_leader(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, StorageError> {
        let producer_state_error = |source| StorageError::ProducerState {
            topic_partition: self.topic_partition.clone(),
            source,
        };
        self.producer_state
            .check_marker(producer_id, producer_epoch, marker)
            .map_err(producer_state_error)?;
        let mut bytes = txn::marker_batch(producer_id, producer_epoch, marker, now_ms).to_vec();
        let offset = self.log_end_offset;
        record_batch::set_base_offset(&mut bytes, offset);
        record_batch::set_partition_leader_epoch(&mut bytes, leader_epoch);
        let position = BatchPosition {
            base_offset: offset,
            last_offset: offset,
            position: 0,
            size_bytes: bytes.len() as u32,
            leader_epoch,
            max_timestamp: now_ms,
        };
        self.epoch_cache.assign(leader_epoch, offset)?;
        self.write(&bytes, vec![position], offset + 1)?;
        self.take_marker(producer_id, producer_epoch, marker, offset)?;
        Ok(LogAppendInfo {
            first_offset: offset,
            last_offset: offset,
            record_count: 1,
            batch_count: 1,
            duplicate: false,
        })
    }

    /// Takes a marker now in the log at `offset`: the producer's transaction
    /// completes, and an abort is added to the active segment's index.
    pub(super) fn take_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        offset: i64,
    ) -> Result<CompletedTxn, StorageError> {
        let completed =
            self.producer_state
                .complete_txn(producer_id, producer_epoch, marker, offset);
        if completed.aborted {
            let entry = AbortedTxn {
                producer_id,
                first_offset: completed.first_offset,
                last_offset: completed.last_offset,
                last_stable_offset: self.last_stable_offset(),
            };
            let path = txn::index_path(&self.dir, self.active().base_offset());
            txn::append(&path, &entry)?;
            self.aborted.push(entry);
        }
        Ok(completed)
    }

    /// The marker a control batch at `position` of `records` holds.
    pub(super) fn marker_of(
        records: &Bytes,
        position: usize,
        header: &BatchHeader,
    ) -> Result<Marker, StorageError> {
        let batch = records.slice(position..position + header.size_bytes());
        txn::parse_marker(batch, header).map_err(|e| {
            corrupt((
                position,
                record_batch::BatchError::Undecodable {
                    reason: e.to_string(),
                },
            ))
        })
    }

    /// The aborted transactions a read_committed fetch of
    /// `[from, upper)` must be told about: those whose marker is at or past
    /// `from` and whose first offset is below `upper` (Kafka's
    /// `collectAbortedTransactions`), from the entries kept in memory (in
    /// marker order, so those ending before `from` are skipped by search).
    pub fn aborted_txns(&self, from: i64, upper: i64) -> Result<Vec<AbortedTxn>, StorageError> {
        let first = self.aborted.partition_point(|t| t.last_offset < from);
        Ok(self.aborted[first..]
            .iter()
            .filter(|t| t.first_offset < upper)
            .copied()
            .collect())
    }

    /// Reads every segment's index once, at open, cutting any entry whose
    /// marker recovery removed from the log.
    pub(super) fn load_txn_indexes(&mut self) -> Result<(), StorageError> {
        self.truncate_txn_indexes(&[], self.log_end_offset)?;
        let mut aborted = Vec::new();
        for segment in &self.segments {
            aborted.extend(txn::read(&txn::index_path(
                &self.dir,
                segment.base_offset(),
            ))?);
        }
        self.aborted = aborted;
        Ok(())
    }

    /// Cuts the aborted-transaction indexes to a log truncated before
    /// `offset`: a removed segment's index goes with it, the remaining
    /// segments' forget transactions whose marker is gone.
    pub(super) fn truncate_txn_indexes(
        &mut self,
        removed: &[i64],
        offset: i64,
    ) -> Result<(), StorageError> {
        for base in removed {
            let path = txn::index_path(&self.dir, *base);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("delete txn index", &path)(e)),
            }
        }
        for segment in &self.segments {
            txn::truncate_to(&txn::index_path(&self.dir, segment.base_offset()), offset)?;
        }
        self.aborted.retain(|t| t.last_offset < offset);
        Ok(())
    }
}
