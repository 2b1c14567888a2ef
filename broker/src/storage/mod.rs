//! The broker's storage, in Kafka's on-disk format.
//!
//! A data directory holds one directory per partition (`<topic>-<partition>/`) with
//! its `<20-digit base offset>.log` segments of record batches v2, its
//! `leader-epoch-checkpoint` and its `<20-digit offset>.snapshot` producer-state
//! snapshots (KIP-98), plus the data-dir-wide `replication-offset-checkpoint`
//! (high watermarks), `recovery-point-offset-checkpoint` and `.kafka_cleanshutdown`
//! marker. [`LogManager`] owns the directory; [`PartitionLog`] owns one partition.
//! The storage never interprets records beyond what Kafka's log layer does: it keeps
//! batches as they were sent and patches only baseOffset and partitionLeaderEpoch.
//!
//! Nothing here knows about replication roles or the network; the server decides
//! who is leader and calls `append_as_leader` or `append_as_follower` accordingly.

pub mod checkpoint;
pub mod leader_epoch_cache;
pub mod log_manager;
pub mod partition_log;
pub mod producer_snapshot;
pub mod producer_state;
pub mod record_batch;
pub mod recovery;
pub mod segment;
pub mod txn;

use std::fmt;
use std::io;
use std::path::PathBuf;

pub use crate::config::ProducerStateRecovery;

pub use checkpoint::{CheckpointError, EpochEntry};
pub use leader_epoch_cache::{EpochAnswerRule, EpochEndOffset, LeaderEpochCache};
pub use log_manager::LogManager;
pub use partition_log::{LogAppendInfo, PartitionLog};
pub use producer_state::{ProducerStateError, ProducerStateManager};
pub use record_batch::BatchError;

/// Kafka's limit on topic name length (`Topic.MAX_NAME_LENGTH`).
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Why a topic name is refused: Kafka's rule (`Topic.validate`). The Display
/// text is what a CreateTopics client reads as its error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTopicName {
    /// Empty, `.` or `..`.
    #[error("topic name {name:?} is not allowed")]
    Reserved { name: String },
    #[error("topic name is longer than {MAX_TOPIC_NAME_LEN} characters")]
    TooLong { len: usize },
    #[error(
        "topic name {name:?} contains {found:?}; allowed are ASCII alphanumerics, '.', '_' and '-'"
    )]
    IllegalCharacter { name: String, found: char },
}

/// Why a partition cannot be a directory of the data dir (see
/// [`TopicPartition::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPartition {
    #[error(transparent)]
    Topic(#[from] InvalidTopicName),
    #[error("partition {partition} of {topic:?} is negative")]
    Negative { topic: String, partition: i32 },
}

/// Kafka's topic name rule (`org.apache.kafka.common.internals.Topic.validate`).
pub fn validate_topic_name(name: &str) -> Result<(), InvalidTopicName> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(InvalidTopicName::Reserved { name: name.into() });
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(InvalidTopicName::TooLong { len: name.len() });
    }
    if let Some(found) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(InvalidTopicName::IllegalCharacter {
            name: name.into(),
            found,
        });
    }
    Ok(())
}

/// A topic and partition number: the key of every per-partition structure.
///
/// Ordered by topic then partition so checkpoint files list entries in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// Whether this names a partition the broker may keep on disk: a topic
    /// name Kafka accepts (`Topic.validate`: 1 to 249 of ASCII alphanumerics,
    /// `.`, `_` and `-`, and not `.` or `..`) and a partition number >= 0. The
    /// directory name is built from it, so a name with `/` or `..` would
    /// otherwise reach outside the data directory (a LeaderAndIsr for
    /// `../../x` did, before this check).
    pub fn validate(&self) -> Result<(), InvalidPartition> {
        validate_topic_name(&self.topic)?;
        if self.partition < 0 {
            return Err(InvalidPartition::Negative {
                topic: self.topic.clone(),
                partition: self.partition,
            });
        }
        Ok(())
    }

    /// The partition's directory name, `<topic>-<partition>`, as Kafka names it.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a partition directory name. Topic names may contain `-`, so the
    /// partition number is whatever follows the last one (as Kafka's
    /// `Log.parseTopicPartitionName` does).
    pub fn parse_dir_name(name: &str) -> Option<TopicPartition> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty()
            || partition.is_empty()
            || !partition.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let number: i32 = partition.parse().ok()?;
        // Only the canonical spelling: "t-01" would alias "t-0"'s sibling "t-1".
        if number.to_string() != partition {
            return None;
        }
        Some(TopicPartition::new(topic, number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dir_names_split_at_the_last_dash() {
        let parse = TopicPartition::parse_dir_name;
        assert_eq!(parse("t-0"), Some(TopicPartition::new("t", 0)));
        assert_eq!(
            parse("my-topic-12"),
            Some(TopicPartition::new("my-topic", 12))
        );
        for bad in ["t", "t-", "-0", "t-x", "t-01", "t-+1", "t-99999999999"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(
            TopicPartition::new("my-topic", 12).dir_name(),
            "my-topic-12"
        );
    }

    /// What a CreateTopics client reads as the error message, and a
    /// LeaderAndIsr's state-change.log as the reason.
    #[test]
    fn refused_topic_names_and_partitions_say_why() {
        let refused = |name: &str| validate_topic_name(name).unwrap_err().to_string();
        assert_eq!(refused(".."), r#"topic name ".." is not allowed"#);
        assert_eq!(
            refused(&"x".repeat(250)),
            "topic name is longer than 249 characters"
        );
        assert_eq!(
            refused("a/b"),
            r#"topic name "a/b" contains '/'; allowed are ASCII alphanumerics, '.', '_' and '-'"#
        );
        assert!(validate_topic_name("orders-1.v2_x").is_ok());
        assert_eq!(
            TopicPartition::new("t", -1).validate(),
            Err(InvalidPartition::Negative {
                topic: "t".into(),
                partition: -1
            })
        );
        assert_eq!(
            TopicPartition::new("t", -1)
                .validate()
                .unwrap_err()
                .to_string(),
            r#"partition -1 of "t" is negative"#
        );
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Per-log settings, named after Kafka's `segment.bytes`, `flush.messages` and
/// `flush.ms`, and which release's producer-state recovery to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// A segment rolls when the next append would take it past this size.
    pub segment_bytes: u64,
    /// fsync once this many messages are unflushed; 1 fsyncs every append,
    /// `u64::MAX` never flushes by count (Kafka's default).
    pub flush_messages: u64,
    /// fsync when this long has passed since the last flush, checked by
    /// [`LogManager::flush_if_due`]; 0 never flushes by time.
    pub flush_interval_ms: u64,
    /// What a log with no producer-state snapshot at or below its end does
    /// (`--producer-state-recovery`; the KAFKA-5435 flaw on request).
    pub producer_state_recovery: ProducerStateRecovery,
}

impl Default for LogConfig {
    /// Kafka's defaults: 1 GiB segments and flushing left to the OS page cache.
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            flush_messages: u64::MAX,
            flush_interval_ms: 0,
            producer_state_recovery: ProducerStateRecovery::Current,
        }
    }
}

/// Everything the storage can fail with. Variants carry the values a test or the
/// server needs to act on (the server maps [`StorageError::CorruptRecords`] to
/// `CORRUPT_MESSAGE` and [`StorageError::OffsetOutOfRange`] to
/// `OFFSET_OUT_OF_RANGE`).
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A producer sent a control batch, which only a transaction coordinator's
    /// markers may be (Kafka's `LogValidator` refuses it: INVALID_RECORD).
    #[error("{topic_partition}: a control batch at byte {position} of a produce request")]
    ControlBatchProduced {
        topic_partition: TopicPartition,
        position: usize,
    },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A batch handed to an append failed validation; nothing of that append was
    /// written. `position` is the batch's byte position in the appended buffer.
    #[error("corrupt record batch at byte {position} of the appended records: {source}")]
    CorruptRecords {
        position: usize,
        #[source]
        source: BatchError,
    },
    #[error(
        "offset {offset} is out of range [{log_start_offset}, {log_end_offset}] of {topic_partition}"
    )]
    OffsetOutOfRange {
        topic_partition: TopicPartition,
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// A follower append whose batches do not continue the log exactly (Kafka's
    /// `UnexpectedAppendOffsetException` covers the first batch of this case).
    #[error("{topic_partition}: follower batch starts at offset {actual}, expected {expected}")]
    UnexpectedAppendOffset {
        topic_partition: TopicPartition,
        expected: i64,
        actual: i64,
    },
    /// Kafka's cache rejects negative epochs and offsets outright.
    #[error("invalid leader epoch entry (epoch {epoch}, start offset {start_offset})")]
    InvalidEpochEntry { epoch: i32, start_offset: i64 },
    /// A directory in the data dir that is not `<topic>-<partition>`.
    #[error("{path}: not a <topic>-<partition> directory")]
    InvalidPartitionDir { path: PathBuf },
    /// A partition whose name cannot be a directory of the data dir (see
    /// [`TopicPartition::validate`]); nothing was created.
    #[error("invalid partition {topic:?}-{partition}: {reason}")]
    InvalidTopicPartition {
        topic: String,
        partition: i32,
        #[source]
        reason: InvalidPartition,
    },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A leader append refused by the idempotent producer's epoch and sequence
    /// rules (KIP-98); nothing of that append was written.
    #[error("{topic_partition}: {source}")]
    ProducerState {
        topic_partition: TopicPartition,
        #[source]
        source: ProducerStateError,
    },
    /// A leader append of sound batches that the topic's configs refuse
    /// (`record_batch::RecordRules`: MESSAGE_TOO_LARGE or INVALID_RECORD);
    /// nothing of that append was written.
    #[error("{topic_partition}: batch at byte {position} of the appended records: {source}")]
    RecordsRefused {
        topic_partition: TopicPartition,
        position: usize,
        #[source]
        source: record_batch::RuleViolation,
    },
}

impl StorageError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| StorageError::Io { op, path, source }
    }
}
