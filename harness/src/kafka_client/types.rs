//! What the client's calls take and answer: records and options to produce,
//! fetched records, offsets, metadata. Plain data; the calls are in calls.rs.

use bytes::Bytes;
use kafka_protocol::records::Compression as WireCompression;

/// A record batch's compression codec (attributes bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    pub(super) fn wire(self) -> WireCompression {
        match self {
            Compression::None => WireCompression::None,
            Compression::Gzip => WireCompression::Gzip,
            Compression::Snappy => WireCompression::Snappy,
            Compression::Lz4 => WireCompression::Lz4,
            Compression::Zstd => WireCompression::Zstd,
        }
    }
}

/// One value to produce, with an optional key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRecord {
    pub key: Option<Bytes>,
    pub value: Bytes,
}

impl ProduceRecord {
    pub fn value(value: impl Into<Bytes>) -> ProduceRecord {
        ProduceRecord {
            key: None,
            value: value.into(),
        }
    }

    pub fn keyed(key: impl Into<Bytes>, value: impl Into<Bytes>) -> ProduceRecord {
        ProduceRecord {
            key: Some(key.into()),
            value: value.into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProduceOptions {
    /// 0, 1 or -1 (all), as Kafka's producer `acks`.
    pub acks: i16,
    /// Records are cut into batches of at most this many, all sent in one
    /// request; at least 1.
    pub records_per_batch: usize,
    pub compression: Compression,
    /// The broker's own wait for acks=all (the request's `timeout_ms`).
    pub timeout_ms: i32,
}

impl Default for ProduceOptions {
    fn default() -> Self {
        ProduceOptions {
            acks: -1,
            records_per_batch: 1,
            compression: Compression::None,
            timeout_ms: 10_000,
        }
    }
}

/// A producer id and epoch handed out by InitProducerId (KIP-98): who an
/// idempotent producer is to the brokers. Kafka's `ProducerIdAndEpoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// What an idempotent producer stamps on one produce: its id and epoch and
/// the sequence of the first record. Every record counts on from it, across
/// the `records_per_batch` batches of the request, so each batch's base
/// sequence follows the last one's (Kafka's sequences are per partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStamp {
    pub producer: ProducerIdAndEpoch,
    pub base_sequence: i32,
}

/// `sequence + increment` as Kafka counts sequences
/// (`DefaultRecordBatch.incrementSequence`): past `i32::MAX` they wrap to 0,
/// not to a negative number.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// A produce the broker accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Produced {
    /// The offset of the first record; -1 for acks=0, which gets no answer.
    pub base_offset: i64,
}

#[derive(Debug, Clone)]
pub struct FetchOptions {
    pub max_bytes: i32,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            max_bytes: 1 << 20,
            max_wait_ms: 100,
            min_bytes: 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// One fetch's answer for one partition: records at or above the fetch offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub high_watermark: i64,
    pub records: Vec<FetchedRecord>,
}

/// One fetch's answer for one partition, undecoded: the `records` bytes as
/// the broker sent them (record batches back to back; the first may start
/// below the fetch offset, the last may be cut short by `max_bytes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRaw {
    pub high_watermark: i64,
    /// The partition's log start offset as the broker answered it (-1 when
    /// it does not say).
    pub log_start_offset: i64,
    pub records: Bytes,
}

/// ListOffsets' two lookups this client makes (no timestamps: no time index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    /// The log end for the broker, which for a client is the high watermark.
    Latest,
}

/// One replica's own high watermark and log end offset, as the replica itself
/// reports them (leader or follower), read with the debugging replica id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaOffsets {
    pub high_watermark: i64,
    pub log_end_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataBroker {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataPartition {
    pub partition: i32,
    pub error_code: i16,
    /// -1 when the partition has no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataTopic {
    pub name: String,
    pub error_code: i16,
    pub partitions: Vec<MetadataPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub brokers: Vec<MetadataBroker>,
    pub controller_id: i32,
    pub topics: Vec<MetadataTopic>,
}

impl Metadata {
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&MetadataPartition> {
        self.topics
            .iter()
            .find(|t| t.name == topic)?
            .partitions
            .iter()
            .find(|p| p.partition == partition)
    }
}
