//! The records of the internal offsets topic, in Kafka's on-disk format, so
//! the harness's reader (and Kafka's own tools) read committed offsets from
//! its segments as they read any partition.
//!
//! A record's key and value each start with an int16 schema version, then the
//! fields in order, strings as an int16 length and UTF-8 bytes (Kafka's
//! `OffsetCommitKey`, `OffsetCommitValue`, `GroupMetadataKey` message schemas
//! in `group-coordinator/src/main/resources/common/message/`):
//!
//! - key version 0 or 1, an offset commit: group, topic, partition (int32);
//!   key version 2, a group's metadata: group (its value is not read here:
//!   membership is not restored from the log, members rejoin);
//! - offset commit value version 0: offset, metadata, commit timestamp;
//!   version 1: … then an expire timestamp; version 2: as 0; version 3:
//!   offset, leader epoch (int32, KIP-320), metadata, commit timestamp;
//! - a record without a value (a tombstone) deletes the key's offset.
//!
//! This broker writes key version 1 and value version 3, as Kafka 2.1 to 3.x
//! do for a commit without a retention time.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// One committed offset of one partition for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// The leader epoch of the last record consumed, -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// A record of the offsets topic, as its key and value say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetsRecord {
    /// A commit (`Some`) or its deletion (`None`, a tombstone).
    Offset {
        group: String,
        topic: String,
        partition: i32,
        value: Option<CommittedOffset>,
    },
    /// A group's metadata record (or its tombstone): only its group is read.
    GroupMetadata { group: String },
}

/// Why a record of the offsets topic could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("offsets record without a key")]
    NoKey,
    #[error("offsets record key version {0} is not one this broker reads")]
    KeyVersion(i16),
    #[error("offset commit value version {0} is not one this broker reads")]
    ValueVersion(i16),
    #[error("offsets record cut short reading its {0}")]
    CutShort(&'static str),
    #[error("offsets record {0} is not UTF-8")]
    NotUtf8(&'static str),
}

/// The key of a commit of `topic`-`partition` by `group` (key version 1).
pub fn offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::with_capacity(12 + group.len() + topic.len());
    buf.put_i16(1);
    put_string(&mut buf, group);
    put_string(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

/// The value of a commit (value version 3).
pub fn offset_value(committed: &CommittedOffset) -> Bytes {
    let mut buf = BytesMut::with_capacity(24 + committed.metadata.len());
    buf.put_i16(3);
    buf.put_i64(committed.offset);
    buf.put_i32(committed.leader_epoch);
    put_string(&mut buf, &committed.metadata);
    buf.put_i64(committed.commit_timestamp_ms);
    buf.freeze()
}

fn put_string(buf: &mut BytesMut, s: &str) {
    // Group ids, topic names and commit metadata are far below i16::MAX bytes
    // (the request that carried them used the same length prefix).
    buf.put_i16(s.len().min(i16::MAX as usize) as i16);
    buf.put_slice(&s.as_bytes()[..s.len().min(i16::MAX as usize)]);
}

/// Reads one record of the offsets topic from its key and value.
pub fn parse(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<OffsetsRecord, RecordError> {
    let mut key = key.ok_or(RecordError::NoKey)?;
    let version = get_i16(&mut key, "key version")?;
    match version {
        0 | 1 => {
            let group = get_string(&mut key, "group")?;
            let topic = get_string(&mut key, "topic")?;
            let partition = get_i32(&mut key, "partition")?;
            let value = value.map(parse_offset_value).transpose()?;
            Ok(OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value,
            })
        }
        2 => Ok(OffsetsRecord::GroupMetadata {
            group: get_string(&mut key, "group")?,
        }),
        other => Err(RecordError::KeyVersion(other)),
    }
}

fn parse_offset_value(mut value: &[u8]) -> Result<CommittedOffset, RecordError> {
    let version = get_i16(&mut value, "value version")?;
    if !(0..=3).contains(&version) {
        return Err(RecordError::ValueVersion(version));
    }
    let offset = get_i64(&mut value, "offset")?;
    let leader_epoch = if version >= 3 {
        get_i32(&mut value, "leader epoch")?
    } else {
        -1
    };
    let metadata = get_string(&mut value, "metadata")?;
    let commit_timestamp_ms = get_i64(&mut value, "commit timestamp")?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

fn need(buf: &[u8], n: usize, what: &'static str) -> Result<(), RecordError> {
    if buf.len() < n {
        Err(RecordError::CutShort(what))
    } else {
        Ok(())
    }
}

fn get_i16(buf: &mut &[u8], what: &'static str) -> Result<i16, RecordError> {
    need(buf, 2, what)?;
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut &[u8], what: &'static str) -> Result<i32, RecordError> {
    need(buf, 4, what)?;
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut &[u8], what: &'static str) -> Result<i64, RecordError> {
    need(buf, 8, what)?;
    Ok(buf.get_i64())
}

fn get_string(buf: &mut &[u8], what: &'static str) -> Result<String, RecordError> {
    let len = get_i16(buf, what)?;
    // -1 is a null string; an offsets record's strings are never null, and a
    // null metadata reads as empty, as Kafka's `OffsetAndMetadata` keeps it.
    let len = usize::try_from(len).unwrap_or(0);
    need(buf, len, what)?;
    let text = std::str::from_utf8(&buf[..len]).map_err(|_| RecordError::NotUtf8(what))?;
    let text = text.to_owned();
    buf.advance(len);
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(offset: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: 4,
            metadata: "m".into(),
            commit_timestamp_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn a_commit_reads_back_as_written_byte_for_byte_in_kafkas_layout() {
        let key = offset_key("g", "t", 2);
        assert_eq!(
            key.as_ref(),
            [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2],
            "version 1, group, topic, partition"
        );
        let value = offset_value(&committed(17));
        assert_eq!(&value[..2], [0, 3], "value version 3");
        assert_eq!(&value[2..10], 17i64.to_be_bytes());
        assert_eq!(&value[10..14], 4i32.to_be_bytes());
        assert_eq!(
            parse(Some(&key), Some(&value)).unwrap(),
            OffsetsRecord::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 2,
                value: Some(committed(17)),
            }
        );
    }

    #[test]
    fn older_value_versions_and_tombstones_and_group_records_read() {
        // Version 1: offset, metadata, commit timestamp, expire timestamp.
        let mut v1 = BytesMut::new();
        v1.put_i16(1);
        v1.put_i64(9);
        put_string(&mut v1, "");
        v1.put_i64(5);
        v1.put_i64(6);
        let key = offset_key("g", "t", 0);
        match parse(Some(&key), Some(&v1)).unwrap() {
            OffsetsRecord::Offset { value: Some(v), .. } => {
                assert_eq!(
                    (v.offset, v.leader_epoch, v.commit_timestamp_ms),
                    (9, -1, 5)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(Some(&key), None).unwrap(),
            OffsetsRecord::Offset { value: None, .. }
        ));
        let mut group_key = BytesMut::new();
        group_key.put_i16(2);
        put_string(&mut group_key, "g");
        assert_eq!(
            parse(Some(&group_key), Some(b"anything")).unwrap(),
            OffsetsRecord::GroupMetadata { group: "g".into() }
        );
    }

    #[test]
    fn damaged_records_name_what_is_wrong() {
        assert_eq!(parse(None, None), Err(RecordError::NoKey));
        assert_eq!(parse(Some(&[0, 7]), None), Err(RecordError::KeyVersion(7)));
        let key = offset_key("g", "t", 0);
        assert_eq!(
            parse(Some(&key[..5]), None),
            Err(RecordError::CutShort("topic"))
        );
        assert_eq!(
            parse(Some(&key), Some(&[0, 9])),
            Err(RecordError::ValueVersion(9))
        );
        let value = offset_value(&committed(1));
        assert_eq!(
            parse(Some(&key), Some(&value[..12])),
            Err(RecordError::CutShort("leader epoch"))
        );
    }
}
