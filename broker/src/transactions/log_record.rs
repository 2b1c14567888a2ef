//! The records of the transaction-state topic (`__transaction_state`), in
//! Kafka's `TransactionLogKey` / `TransactionLogValue` version 0 format, read
//! and written with own code:
//!
//! ```text
//! key:   version i16 = 0, transactional_id string (i16 length + UTF-8)
//! value: version i16 = 0, producer_id i64, producer_epoch i16,
//!        transaction_timeout_ms i32, transaction_status i8,
//!        transaction_partitions: i32 count (-1 = null) of
//!            { topic string, partition_ids: i32 count of i32 },
//!        transaction_last_update_timestamp_ms i64,
//!        transaction_start_timestamp_ms i64
//! ```
//!
//! A record whose value is null (a tombstone) removes the transactional id.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::state::{TxnMetadata, TxnStatus};

/// Why a transaction-state record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnRecordError {
    #[error("{what}: {needed} more bytes needed at byte {at}")]
    Short {
        what: &'static str,
        at: usize,
        needed: usize,
    },
    #[error("{what}: version {version} is not 0")]
    Version { what: &'static str, version: i16 },
    #[error("transactional id is not UTF-8")]
    NotUtf8,
    #[error("transaction status {0} is unknown")]
    Status(i8),
    #[error("negative length {0}")]
    Length(i32),
}

struct Reader<'a> {
    what: &'static str,
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TxnRecordError> {
        let out = self
            .buf
            .get(self.at..self.at + n)
            .ok_or_else(|| TxnRecordError::Short {
                what: self.what,
                at: self.at,
                needed: (self.at + n).saturating_sub(self.buf.len()),
            })?;
        self.at += n;
        Ok(out)
    }
    fn i8(&mut self) -> Result<i8, TxnRecordError> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i16(&mut self) -> Result<i16, TxnRecordError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, TxnRecordError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i64(&mut self) -> Result<i64, TxnRecordError> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn string(&mut self) -> Result<String, TxnRecordError> {
        let len = self.i16()?;
        if len < 0 {
            return Err(TxnRecordError::Length(i32::from(len)));
        }
        let bytes = self.take(len as usize)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| TxnRecordError::NotUtf8)
    }
    fn version(&mut self) -> Result<(), TxnRecordError> {
        match self.i16()? {
            0 => Ok(()),
            version => Err(TxnRecordError::Version {
                what: self.what,
                version,
            }),
        }
    }
}

fn put_string(out: &mut BytesMut, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    put_string(&mut out, transactional_id);
    out.freeze()
}

pub fn decode_key(key: &[u8]) -> Result<String, TxnRecordError> {
    let mut r = Reader {
        what: "transaction log key",
        buf: key,
        at: 0,
    };
    r.version()?;
    r.string()
}

pub fn encode_value(m: &TxnMetadata) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i64(m.producer_id);
    out.put_i16(m.producer_epoch);
    out.put_i32(m.timeout_ms);
    out.put_i8(m.status as i8);
    let mut by_topic: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &m.partitions {
        match by_topic.last_mut() {
            Some((t, ps)) if t == topic => ps.push(*partition),
            _ => by_topic.push((topic, vec![*partition])),
        }
    }
    out.put_i32(by_topic.len() as i32);
    for (topic, partitions) in by_topic {
        put_string(&mut out, topic);
        out.put_i32(partitions.len() as i32);
        for p in partitions {
            out.put_i32(p);
        }
    }
    out.put_i64(m.last_update_ms);
    out.put_i64(m.start_ms);
    out.freeze()
}

pub fn decode_value(value: &[u8]) -> Result<TxnMetadata, TxnRecordError> {
    let mut r = Reader {
        what: "transaction log value",
        buf: value,
        at: 0,
    };
    r.version()?;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let raw = r.i8()?;
    let status = TxnStatus::from_id(raw).ok_or(TxnRecordError::Status(raw))?;
    let mut partitions = BTreeSet::new();
    let topics = r.i32()?;
    for _ in 0..topics.max(0) {
        let topic = r.string()?;
        let count = r.i32()?;
        if count < 0 {
            return Err(TxnRecordError::Length(count));
        }
        for _ in 0..count {
            partitions.insert((topic.clone(), r.i32()?));
        }
    }
    Ok(TxnMetadata {
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update_ms: r.i64()?,
        start_ms: r.i64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_in_kafka_s_layout() {
        let m = TxnMetadata {
            producer_id: 1000,
            producer_epoch: 3,
            timeout_ms: 60_000,
            status: TxnStatus::Ongoing,
            partitions: [
                ("a".to_owned(), 0),
                ("a".to_owned(), 2),
                ("b".to_owned(), 1),
            ]
            .into(),
            last_update_ms: 5,
            start_ms: 4,
        };
        let value = encode_value(&m);
        // version, pid, epoch, timeout, status, 2 topics: "a" [0, 2], "b" [1], two timestamps.
        assert_eq!(
            value.len(),
            2 + 8 + 2 + 4 + 1 + 4 + (2 + 1 + 4 + 8) + (2 + 1 + 4 + 4) + 16
        );
        assert_eq!(decode_value(&value).unwrap(), m);
        assert_eq!(decode_key(&encode_key("tx-1")).unwrap(), "tx-1");
        assert!(matches!(
            decode_value(&value[..10]),
            Err(TxnRecordError::Short { .. })
        ));
        let mut bad = value.to_vec();
        bad[16] = 9;
        assert_eq!(decode_value(&bad), Err(TxnRecordError::Status(9)));
    }
}
