//! What a log keeps of transactions (KIP-98), in Kafka's formats: the
//! control batch a transaction's marker is (`EndTransactionMarker`), and the
//! aborted-transaction index beside each segment (`<base>.txnindex`,
//! Kafka's `TransactionIndex`), which read_committed fetches consult to tell
//! a consumer which producers' records to drop.
//!
//! A control batch has the transactional (bit 4) and control (bit 5)
//! attributes and one record whose key is `version i16 = 0, type i16`
//! (0 abort, 1 commit) and whose value is `version i16 = 0,
//! coordinatorEpoch i32` (`ControlRecordType`, `EndTransactionMarker`).
//!
//! A `.txnindex` file is a run of 34-byte entries, one per aborted
//! transaction completed in that segment: `version i16 = 0, producerId i64,
//! firstOffset i64, lastOffset i64, lastStableOffset i64` (`AbortedTxn`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::StorageError;
use super::record_batch::{self, BatchError, BatchHeader};

/// Attributes bit 4: the batch belongs to a transaction.
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
/// Attributes bit 5: the batch is a control batch (a transaction marker).
pub const CONTROL_FLAG: i16 = 0x20;

impl BatchHeader {
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }
}

/// A transaction marker: how the producer's transaction ended here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// Why a control batch is not a transaction marker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    #[error("control batch: {0}")]
    Batch(#[from] BatchError),
    #[error("control batch holds {0} records, a marker is one")]
    RecordCount(usize),
    #[error("control record {0} is not a transaction marker")]
    NotMarker(&'static str),
}

/// The control batch that ends `producer_id`'s transaction (epoch
/// `producer_epoch`) on a partition; its offset and leader epoch are the
/// append's to set.
pub fn marker_batch(producer_id: i64, producer_epoch: i16, marker: Marker, now_ms: i64) -> Bytes {
    let mut key = BytesMut::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&i16::from(marker.commit).to_be_bytes());
    let mut value = BytesMut::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now_ms,
        key: Some(key.freeze()),
        value: Some(value.freeze()),
        headers: IndexMap::new(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &[record], &options)
        .expect("one uncompressed control record encodes");
    buf.freeze()
}

/// The marker a control batch (`batch`, exactly one batch) holds.
pub fn parse_marker(batch: Bytes, header: &BatchHeader) -> Result<Marker, MarkerError> {
    let set = record_batch::decode_records(batch, header)?;
    let [record] = set.records.as_slice() else {
        return Err(MarkerError::RecordCount(set.records.len()));
    };
    let key = record
        .key
        .as_deref()
        .ok_or(MarkerError::NotMarker("key null"))?;
    let value = record
        .value
        .as_deref()
        .ok_or(MarkerError::NotMarker("value null"))?;
    if key.len() < 4 || value.len() < 6 {
        return Err(MarkerError::NotMarker("too short"));
    }
    let kind = i16::from_be_bytes([key[2], key[3]]);
    let commit = match kind {
        0 => false,
        1 => true,
        _ => return Err(MarkerError::NotMarker("of an unknown type")),
    };
    Ok(Marker {
        commit,
        coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    })
}

/// One aborted transaction: `producer_id`'s records from `first_offset` to
/// its abort marker at `last_offset`; `last_stable_offset` is the log's LSO
/// when it was aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

const ENTRY_SIZE: usize = 34;

impl AbortedTxn {
    fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut out = [0u8; ENTRY_SIZE];
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    fn decode(b: &[u8]) -> AbortedTxn {
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        }
    }
}

/// `<dir>/<base offset, 20 digits>.txnindex`, as Kafka names it.
pub fn index_path(dir: &Path, segment_base: i64) -> PathBuf {
    dir.join(format!("{segment_base:020}.txnindex"))
}

/// Appends one entry to a segment's index, creating the file.
pub fn append(path: &Path, entry: &AbortedTxn) -> Result<(), StorageError> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(StorageError::io("open txn index", path))?;
    file.write_all(&entry.encode())
        .and_then(|()| file.sync_data())
        .map_err(StorageError::io("append to txn index", path))
}

/// Every entry of a segment's index; none when it has no file. A torn last
/// entry (a crash mid-append) is dropped, as Kafka's sanity check drops it.
pub fn read(path: &Path) -> Result<Vec<AbortedTxn>, StorageError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(StorageError::io("read txn index", path)(e)),
    };
    Ok(bytes
        .chunks_exact(ENTRY_SIZE)
        .map(AbortedTxn::decode)
        .collect())
}

/// Drops the entries of transactions whose marker is at or past `offset`
/// (the log was truncated there), rewriting the file.
pub fn truncate_to(path: &Path, offset: i64) -> Result<(), StorageError> {
    let entries = read(path)?;
    let kept: Vec<AbortedTxn> = entries
        .iter()
        .copied()
        .filter(|e| e.last_offset < offset)
        .collect();
    if kept.len() == entries.len() {
        return Ok(());
    }
    let mut file = File::create(path).map_err(StorageError::io("rewrite txn index", path))?;
    for e in &kept {
        file.write_all(&e.encode())
            .map_err(StorageError::io("rewrite txn index", path))?;
    }
    file.sync_data()
        .map_err(StorageError::io("rewrite txn index", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_batch_is_a_control_batch_that_reads_back() {
        for commit in [true, false] {
            let marker = Marker {
                commit,
                coordinator_epoch: 7,
            };
            let batch = marker_batch(42, 3, marker, 1_000);
            let header = record_batch::validate(&batch).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!((header.producer_id, header.producer_epoch), (42, 3));
            assert_eq!(parse_marker(batch, &header).unwrap(), marker);
        }
    }

    #[test]
    fn the_index_keeps_kafka_s_34_byte_entries_and_truncates_by_marker_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = index_path(dir.path(), 0);
        assert_eq!(read(&path).unwrap(), vec![]);
        let a = AbortedTxn {
            producer_id: 1,
            first_offset: 0,
            last_offset: 4,
            last_stable_offset: 0,
        };
        let b = AbortedTxn {
            producer_id: 2,
            first_offset: 3,
            last_offset: 9,
            last_stable_offset: 5,
        };
        append(&path, &a).unwrap();
        append(&path, &b).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 68);
        assert_eq!(read(&path).unwrap(), vec![a, b]);
        truncate_to(&path, 9).unwrap();
        assert_eq!(read(&path).unwrap(), vec![a]);
        assert!(path.ends_with("00000000000000000000.txnindex"));
    }
}
