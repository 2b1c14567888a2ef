//! The compact form of replica state, for checkers, reports and snapshots.
//!
//! Per replica: `(offset, epoch, value)` for every record of every intact
//! data batch, the leader-epoch file as `(epoch, start_offset)` pairs, the
//! high watermark, recovery point, log end offset and findings, and the
//! producer-state snapshots as `(offset, [producer id, epoch, last sequence,
//! last offset])` when there are any. Batch
//! boundaries, positions, keys, headers and timestamps are dropped: checkers
//! compare what a replica holds, not how it was framed. Control batches
//! (transaction markers) carry no user value and are left out; they still
//! count for the offset checks the reader makes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{DataDirState, Finding, Payload, ProducerSnapshot, ReplicaState};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactDataDir {
    pub clean_shutdown: bool,
    pub replicas: Vec<CompactReplica>,
    /// Damage in the data directory's own files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactReplica {
    pub topic: String,
    pub partition: i32,
    pub log_end_offset: i64,
    pub high_watermark: Option<i64>,
    pub recovery_point: Option<i64>,
    /// `(epoch, start_offset)`; `None` when the file is absent or malformed.
    pub leader_epochs: Option<Vec<(i32, i64)>>,
    pub records: Vec<CompactRecord>,
    /// Ordered by offset; absent when the replica has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub producer_snapshots: Vec<CompactProducerSnapshot>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
}

/// A producer-state snapshot without its file, size, timestamps or
/// transaction fields: what the producers' idempotence rests on, a few
/// integers per producer id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactProducerSnapshot {
    pub offset: i64,
    /// Whether Kafka would load it; a damaged one has no producers (its
    /// finding says why).
    pub intact: bool,
    pub producers: Vec<CompactProducer>,
}

/// One snapshot entry: serialises as
/// `[producer_id, producer_epoch, last_sequence, last_offset]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(i64, i16, i32, i64)", into = "(i64, i16, i32, i64)")]
pub struct CompactProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_offset: i64,
}

impl From<(i64, i16, i32, i64)> for CompactProducer {
    fn from(
        (producer_id, producer_epoch, last_sequence, last_offset): (i64, i16, i32, i64),
    ) -> Self {
        CompactProducer {
            producer_id,
            producer_epoch,
            last_sequence,
            last_offset,
        }
    }
}

impl From<CompactProducer> for (i64, i16, i32, i64) {
    fn from(producer: CompactProducer) -> Self {
        (
            producer.producer_id,
            producer.producer_epoch,
            producer.last_sequence,
            producer.last_offset,
        )
    }
}

/// One record: serialises as `[offset, epoch, value]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    from = "(i64, i32, Option<Payload>)",
    into = "(i64, i32, Option<Payload>)"
)]
pub struct CompactRecord {
    pub offset: i64,
    /// The partitionLeaderEpoch of the record's batch.
    pub epoch: i32,
    pub value: Option<Payload>,
}

impl From<(i64, i32, Option<Payload>)> for CompactRecord {
    fn from((offset, epoch, value): (i64, i32, Option<Payload>)) -> Self {
        CompactRecord {
            offset,
            epoch,
            value,
        }
    }
}

impl From<CompactRecord> for (i64, i32, Option<Payload>) {
    fn from(record: CompactRecord) -> Self {
        (record.offset, record.epoch, record.value)
    }
}

impl CompactReplica {
    /// Value (as text) → the offsets it is at, over intact data batches; null
    /// values are left out. Values are compared as the workload wrote them.
    pub fn offsets_by_value(&self) -> BTreeMap<String, Vec<i64>> {
        let mut map: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for record in &self.records {
            if let Some(value) = &record.value {
                map.entry(value.to_string())
                    .or_default()
                    .push(record.offset);
            }
        }
        map
    }
}

impl ReplicaState {
    pub fn compact(&self) -> CompactReplica {
        CompactReplica {
            topic: self.topic.clone(),
            partition: self.partition,
            log_end_offset: self.log_end_offset,
            high_watermark: self.high_watermark,
            recovery_point: self.recovery_point,
            leader_epochs: self.leader_epochs.as_ref().map(|entries| {
                entries
                    .iter()
                    .map(|entry| (entry.epoch, entry.start_offset))
                    .collect()
            }),
            records: self
                .records()
                .filter(|(batch, _)| !batch.is_control())
                .map(|(batch, record)| CompactRecord {
                    offset: record.offset,
                    epoch: batch.partition_leader_epoch,
                    value: record.value.clone(),
                })
                .collect(),
            producer_snapshots: self
                .producer_snapshots
                .iter()
                .map(ProducerSnapshot::compact)
                .collect(),
            findings: self.findings.clone(),
        }
    }
}

impl ProducerSnapshot {
    pub fn compact(&self) -> CompactProducerSnapshot {
        CompactProducerSnapshot {
            offset: self.offset,
            intact: self.intact,
            producers: self
                .entries
                .iter()
                .map(|entry| CompactProducer {
                    producer_id: entry.producer_id,
                    producer_epoch: entry.producer_epoch,
                    last_sequence: entry.last_sequence,
                    last_offset: entry.last_offset,
                })
                .collect(),
        }
    }
}

impl DataDirState {
    pub fn compact(&self) -> CompactDataDir {
        CompactDataDir {
            clean_shutdown: self.clean_shutdown,
            replicas: self.replicas.iter().map(ReplicaState::compact).collect(),
            findings: self.findings.clone(),
        }
    }
}
