//! Committed offsets as a replica of the offsets topic (`__consumer_offsets`)
//! holds them on disk, decoded from Kafka's record schemas rather than from
//! what any client was told: the final state of a group's commits.
//!
//! Kafka's `OffsetCommitKey` / `OffsetCommitValue` message schemas
//! (`group-coordinator/src/main/resources/common/message/`): a key starts
//! with an int16 version; versions 0 and 1 are an offset commit (group,
//! topic, partition as int32), version 2 a group's metadata, version 3 (KIP-848)
//! a consumer group's records. Strings are an int16 length and UTF-8. A commit's
//! value starts with its own int16 version and then the committed offset
//! (int64) in every version 0..=4, which is all this reads; a record without a
//! value is a tombstone (the commit deleted, by expiry or DeleteOffsets).

use super::ReplicaState;
use super::txn::TxnOutcome;

/// One offset commit record of the offsets topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRecord {
    /// Where the record sits in the offsets partition's log.
    pub log_offset: i64,
    pub group: String,
    pub topic: String,
    pub partition: i32,
    /// The committed offset; `None` for a tombstone.
    pub committed: Option<i64>,
}

/// A record of the offsets topic that is not one Kafka's schemas describe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{topic}-{partition} offset {log_offset}: {problem}")]
pub struct OffsetsRecordError {
    pub topic: String,
    pub partition: i32,
    pub log_offset: i64,
    #[source]
    pub problem: OffsetsRecordProblem,
}

/// What is wrong with one record of the offsets topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OffsetsRecordProblem {
    #[error("a record without a key")]
    NoKey,
    #[error("key version {0}")]
    KeyVersion(i16),
    #[error("commit value version {0}")]
    ValueVersion(i16),
    /// The record ends before the named field does.
    #[error("{0} cut short")]
    CutShort(&'static str),
}

/// Every offset commit in `replica`'s intact batches, in log order. Group
/// metadata records are skipped; a record no Kafka schema describes is an
/// error naming its place in the log.
pub fn offset_commits(
    replica: &ReplicaState,
) -> Result<Vec<OffsetCommitRecord>, OffsetsRecordError> {
    let mut commits = Vec::new();
    // A transaction's markers (control batches) are not commits; the
    // commits a TxnOffsetCommit wrote count once their transaction committed.
    let transactions = replica.transactions();
    for (batch, record) in replica.records() {
        let committed =
            || transactions.outcome_at(batch.base_offset) == Some(TxnOutcome::Committed);
        if batch.is_control() || (batch.is_transactional() && !committed()) {
            continue;
        }
        let parsed = parse_commit(
            record.key.as_ref().map(|k| k.as_bytes()),
            record.value.as_ref().map(|v| v.as_bytes()),
        )
        .map_err(|problem| OffsetsRecordError {
            topic: replica.topic.clone(),
            partition: replica.partition,
            log_offset: record.offset,
            problem,
        })?;
        if let Some((group, topic, partition, committed)) = parsed {
            commits.push(OffsetCommitRecord {
                log_offset: record.offset,
                group,
                topic,
                partition,
                committed,
            });
        }
    }
    Ok(commits)
}

/// A commit's group, topic, partition and offset (`None` for a tombstone);
/// `Ok(None)` for a record of another kind.
type Commit = (String, String, i32, Option<i64>);

fn parse_commit(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<Option<Commit>, OffsetsRecordProblem> {
    use OffsetsRecordProblem::{CutShort, KeyVersion, NoKey, ValueVersion};
    let mut key = key.ok_or(NoKey)?;
    match take_i16(&mut key).ok_or(CutShort("key version"))? {
        0 | 1 => {}
        2 | 3 => return Ok(None),
        other => return Err(KeyVersion(other)),
    }
    let group = take_string(&mut key).ok_or(CutShort("commit key's group"))?;
    let topic = take_string(&mut key).ok_or(CutShort("commit key's topic"))?;
    let partition = take_i32(&mut key).ok_or(CutShort("commit key's partition"))?;
    let committed = match value {
        None => None,
        Some(mut value) => {
            let version = take_i16(&mut value).ok_or(CutShort("commit value version"))?;
            if !(0..=4).contains(&version) {
                return Err(ValueVersion(version));
            }
            Some(take_i64(&mut value).ok_or(CutShort("commit value's offset"))?)
        }
    };
    Ok(Some((group, topic, partition, committed)))
}

fn take<const N: usize>(buf: &mut &[u8]) -> Option<[u8; N]> {
    let (head, rest) = buf.split_first_chunk::<N>()?;
    *buf = rest;
    Some(*head)
}

fn take_i16(buf: &mut &[u8]) -> Option<i16> {
    take::<2>(buf).map(i16::from_be_bytes)
}

fn take_i32(buf: &mut &[u8]) -> Option<i32> {
    take::<4>(buf).map(i32::from_be_bytes)
}

fn take_i64(buf: &mut &[u8]) -> Option<i64> {
    take::<8>(buf).map(i64::from_be_bytes)
}

fn take_string(buf: &mut &[u8]) -> Option<String> {
    let len = usize::try_from(take_i16(buf)?).ok()?;
    if buf.len() < len {
        return None;
    }
    let (text, rest) = buf.split_at(len);
    *buf = rest;
    String::from_utf8(text.to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(version: i16, group: &str, topic: &str, partition: i32) -> Vec<u8> {
        let mut k = version.to_be_bytes().to_vec();
        for s in [group, topic] {
            k.extend((s.len() as i16).to_be_bytes());
            k.extend(s.as_bytes());
        }
        k.extend(partition.to_be_bytes());
        k
    }

    #[test]
    fn a_commit_a_tombstone_and_group_metadata_read_as_kafka_writes_them() {
        // Value version 3 (KIP-320): offset, leader epoch, metadata, timestamp.
        let mut value = 3i16.to_be_bytes().to_vec();
        value.extend(42i64.to_be_bytes());
        value.extend(7i32.to_be_bytes());
        value.extend(0i16.to_be_bytes());
        value.extend(1_700_000_000_000i64.to_be_bytes());
        let k = key(1, "g", "t", 2);
        assert_eq!(
            parse_commit(Some(&k), Some(&value)),
            Ok(Some(("g".into(), "t".into(), 2, Some(42))))
        );
        assert_eq!(
            parse_commit(Some(&k), None),
            Ok(Some(("g".into(), "t".into(), 2, None)))
        );
        let metadata = [0u8, 2, 0, 1, b'g'];
        assert_eq!(parse_commit(Some(&metadata), Some(&[0, 3])), Ok(None));
    }

    #[test]
    fn what_no_schema_describes_is_an_error_saying_what() {
        use OffsetsRecordProblem::{CutShort, KeyVersion, NoKey};
        assert_eq!(parse_commit(None, None), Err(NoKey));
        assert_eq!(
            parse_commit(Some(&key(9, "g", "t", 0)), None),
            Err(KeyVersion(9))
        );
        let k = key(1, "g", "t", 0);
        assert_eq!(
            parse_commit(Some(&k[..k.len() - 2]), None),
            Err(CutShort("commit key's partition"))
        );
        assert_eq!(
            parse_commit(Some(&k), Some(&[0, 3, 0, 0])),
            Err(CutShort("commit value's offset"))
        );
        assert_eq!(
            KeyVersion(9).to_string(),
            "key version 9",
            "the problem reads as a sentence in the error naming the record"
        );
    }
}
