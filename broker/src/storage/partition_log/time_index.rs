//! A partition log's lookups by timestamp, for ListOffsets (KIP-79's
//! offsetsForTimes and KIP-734's max timestamp). Kafka keeps a sparse
//! `.timeindex` file per segment; this broker keeps every batch's max
//! timestamp in the segment's in-memory batch index instead (rebuilt by
//! recovery with the rest of it), so a lookup scans that index — no disk
//! read — and then reads the one batch it lands on to find the record.
//! Cost: one pass over the batch index (a few dozen bytes a batch, in
//! memory) and one batch read and walked, decompressed if need be.

use bytes::Bytes;

use super::super::StorageError;
use super::super::record_batch::{self, parse_header};
use super::super::segment::{BatchPosition, Segment};
use super::{PartitionLog, corrupt};

/// A record found by timestamp: its timestamp, offset and the leader epoch
/// of its batch (-1 if the batch carries none), as Kafka's
/// `TimestampAndOffset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: i32,
}

impl PartitionLog {
    /// The first record, in offset order, whose timestamp is at or after
    /// `target`; `None` when no record is (Kafka's
    /// `LogSegment.findOffsetByTimestamp`: the first batch whose max
    /// timestamp reaches `target`, then the first record of it that does).
    /// Records below the log start (DeleteRecords, KIP-107) are not found,
    /// as Kafka passes the log start offset to that lookup.
    pub fn offset_for_timestamp(
        &self,
        target: i64,
    ) -> Result<Option<TimestampAndOffset>, StorageError> {
        let start = self.log_start_offset;
        for segment in &self.segments {
            for batch in segment.batches().iter().filter(|b| b.last_offset >= start) {
                if batch.max_timestamp < target {
                    continue;
                }
                // A header's max timestamp is what its producer wrote; a
                // batch whose records fall short of it is passed over.
                let found = record_times(segment, batch)?
                    .find(|r| r.offset >= start && r.timestamp >= target);
                if found.is_some() {
                    return Ok(found);
                }
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp, the first such in offset order
    /// (ListOffsets' -3, KIP-734), of the batches at or past the log start;
    /// `None` for an empty log.
    pub fn max_timestamp_record(&self) -> Result<Option<TimestampAndOffset>, StorageError> {
        let start = self.log_start_offset;
        let mut max: Option<(&Segment, &BatchPosition)> = None;
        for segment in &self.segments {
            for batch in segment.batches().iter().filter(|b| b.last_offset >= start) {
                if max.is_none_or(|(_, b)| batch.max_timestamp > b.max_timestamp) {
                    max = Some((segment, batch));
                }
            }
        }
        let Some((segment, batch)) = max else {
            return Ok(None);
        };
        let mut records: Vec<TimestampAndOffset> = record_times(segment, batch)?
            .filter(|r| r.offset >= start)
            .collect();
        let latest = records.iter().map(|r| r.timestamp).max();
        records.retain(|r| Some(r.timestamp) == latest);
        Ok(records.first().copied())
    }
}

/// Every record of `batch` with its timestamp, in offset order.
fn record_times(
    segment: &Segment,
    batch: &BatchPosition,
) -> Result<impl Iterator<Item = TimestampAndOffset>, StorageError> {
    let bytes = Bytes::from(segment.read_at(batch.position, batch.size_bytes as usize)?);
    let header = parse_header(&bytes).map_err(|e| corrupt((0, e)))?;
    let times = record_batch::record_timestamps(&bytes, &header).map_err(|e| corrupt((0, e)))?;
    let (base, leader_epoch) = (batch.base_offset, batch.leader_epoch);
    Ok(times
        .into_iter()
        .enumerate()
        .map(move |(i, timestamp)| TimestampAndOffset {
            timestamp,
            offset: base + i as i64,
            leader_epoch,
        }))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::Compression;

    use super::super::super::record_batch::test_writer::{TestRecord, write_batch};
    use super::*;
    use crate::storage::{LogConfig, LogManager, TopicPartition};

    fn at(timestamps: &[i64], compression: Compression) -> Bytes {
        let records: Vec<TestRecord> = timestamps
            .iter()
            .map(|t| TestRecord::keyed(*t, "k", "v"))
            .collect();
        write_batch(&records, compression)
    }

    /// Offsets 0-2 at 100, 300, 200; 3-4 at 400, 500 (gzip); 5 at 450.
    fn filled(log: &mut PartitionLog) {
        for batch in [
            at(&[100, 300, 200], Compression::None),
            at(&[400, 500], Compression::Gzip),
            at(&[450], Compression::None),
        ] {
            log.append_as_leader(batch, 3).expect("appended");
        }
    }

    fn found(timestamp: i64, offset: i64) -> Option<TimestampAndOffset> {
        Some(TimestampAndOffset {
            timestamp,
            offset,
            leader_epoch: 3,
        })
    }

    #[test]
    fn a_timestamp_finds_the_first_record_at_or_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let log = logs.get_or_create(&TopicPartition::new("t", 0)).unwrap();
        assert_eq!(log.offset_for_timestamp(0).unwrap(), None);
        assert_eq!(log.max_timestamp_record().unwrap(), None);
        filled(log);
        let lookup = |t| log.offset_for_timestamp(t).unwrap();
        assert_eq!(lookup(0), found(100, 0));
        assert_eq!(lookup(100), found(100, 0));
        // Inside the first batch: the first record in offset order that
        // reaches it, not the closest timestamp.
        assert_eq!(lookup(150), found(300, 1));
        assert_eq!(lookup(301), found(400, 3));
        // Inside a compressed batch.
        assert_eq!(lookup(401), found(500, 4));
        assert_eq!(lookup(501), None);
        // KIP-734: the largest timestamp, in the compressed batch.
        assert_eq!(log.max_timestamp_record().unwrap(), found(500, 4));
    }

    #[test]
    fn records_below_the_log_start_are_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let log = logs.get_or_create(&TopicPartition::new("t", 0)).unwrap();
        filled(log);
        log.set_high_watermark(6);
        // Inside the first batch, and then past the compressed one.
        log.increment_log_start_offset(2).unwrap();
        assert_eq!(log.offset_for_timestamp(0).unwrap(), found(200, 2));
        assert_eq!(log.max_timestamp_record().unwrap(), found(500, 4));
        log.increment_log_start_offset(5).unwrap();
        assert_eq!(log.offset_for_timestamp(0).unwrap(), found(450, 5));
        assert_eq!(log.max_timestamp_record().unwrap(), found(450, 5));
    }
}
