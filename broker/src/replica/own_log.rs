//! A coordinator's read of an internal partition it has just become the
//! leader of: the log from its start to its end, record by record, with no
//! follower's fetch recorded (Kafka's GroupMetadataManager and
//! TransactionStateManager load their partitions so). The read stops, and
//! says so, when the broker stops leading the partition or leads it in a
//! later epoch meanwhile; what the records mean is the caller's.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::records::Record;

use super::manager::ReplicaManager;
use super::store::TopicPartition;
use crate::storage::record_batch;

/// Most bytes one read takes.
const READ_BYTES: usize = 1 << 20;

/// Why a read from the start ended before the log's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadStopped {
    #[error("no longer the leader: {0:?}")]
    NotLeader(ResponseError),
    #[error("overtaken: leading in epoch {now}, not {loading}")]
    Overtaken { loading: i32, now: i32 },
}

/// Reads `tp`'s log as its leader in `leader_epoch` from its start to its
/// end, handing each read's bytes to `on_read`, which answers the offset
/// after the last whole batch it took (see [`for_each_record`]).
pub fn read_from_start(
    replicas: &ReplicaManager,
    tp: &TopicPartition,
    leader_epoch: i32,
    mut on_read: impl FnMut(&Bytes) -> Option<i64>,
) -> Result<(), ReadStopped> {
    let mut offset = None;
    loop {
        let (read, epoch) = replicas
            .read_own_log(tp, offset.unwrap_or(0).max(0), READ_BYTES)
            .map_err(ReadStopped::NotLeader)?;
        if epoch != leader_epoch {
            return Err(ReadStopped::Overtaken {
                loading: leader_epoch,
                now: epoch,
            });
        }
        let start = *offset.get_or_insert(read.log_start_offset);
        if start < read.log_start_offset {
            offset = Some(read.log_start_offset);
            continue;
        }
        if start >= read.log_end_offset || read.records.is_empty() {
            return Ok(());
        }
        match on_read(&read.records) {
            Some(next) if next > start => offset = Some(next),
            _ => return Ok(()),
        }
    }
}

/// Hands each record of the whole data batches in `raw` to `on_record`, in
/// order; answers the offset after the last whole batch. Control batches
/// (transaction markers) are passed over; a batch that does not decode is
/// skipped and logged, as Kafka's loaders skip what they cannot read.
pub fn for_each_record(raw: &Bytes, on_record: impl FnMut(Record)) -> Option<i64> {
    for_each_record_and_marker(raw, false, on_record)
}

/// [`for_each_record`], with the markers' control records too when
/// `markers` (record.control set): a loader of transactional records (the
/// offsets topic's TxnOffsetCommits) learns from them how each ended.
pub fn for_each_record_and_marker(
    raw: &Bytes,
    markers: bool,
    mut on_record: impl FnMut(Record),
) -> Option<i64> {
    let mut next = None;
    let mut at = 0usize;
    while at < raw.len() {
        let Ok(size) = record_batch::batch_size(&raw[at..]) else {
            break;
        };
        if at + size > raw.len() {
            break;
        }
        let batch = raw.slice(at..at + size);
        at += size;
        let Ok(header) = record_batch::parse_header(&batch) else {
            break;
        };
        next = Some(header.next_offset());
        if header.is_control() && !markers {
            continue;
        }
        match record_batch::decode_records(batch, &header) {
            Ok(set) => set.records.into_iter().for_each(&mut on_record),
            Err(e) => tracing::warn!(%e, base_offset = header.base_offset, "batch skipped"),
        }
    }
    next
}
