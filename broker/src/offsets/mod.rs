//! Committed offsets: the group coordinator's half that lives in a log.
//!
//! Groups' committed offsets are records of an internal, replicated topic
//! (Kafka's `__consumer_offsets`, [`OFFSETS_TOPIC`]); a group belongs to the
//! partition [`partition_for`] names, and the leader of that partition is the
//! group's coordinator. A commit is appended to that partition through the
//! same replication path as a producer's batch and answered once the replicas
//! hold it as `offsets_commit_acks` asks; every fault the harness injects
//! reaches it. Offsets are served from memory: when this broker becomes the
//! leader of an offsets partition it reads the partition's log from its start
//! to its end ([`load`]) and answers COORDINATOR_LOAD_IN_PROGRESS until it
//! has; when it stops leading the partition it forgets it (NOT_COORDINATOR).
//! The harness's reader reads the same records from the segments on disk.

pub mod record;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::config::OffsetsLoad;
use crate::replica::manager::ReplicaManager;
use crate::replica::store::TopicPartition;
use crate::storage::record_batch;
pub use record::CommittedOffset;
use record::OffsetsRecord;

/// The internal topic every group's offsets are written to.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Most bytes one read of a load takes.
const LOAD_READ_BYTES: usize = 1 << 20;

/// The offsets partition of `group` among `partitions`: Kafka's
/// `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`, with Java's
/// `String.hashCode` over UTF-16 code units, so a group lands on the partition
/// it would on Kafka.
pub fn partition_for(group: &str, partitions: u32) -> i32 {
    crate::group::partition_for(group, partitions.max(1)) as i32
}

/// A group's committed offsets, by (topic, partition).
pub type GroupOffsets = BTreeMap<(String, i32), CommittedOffset>;

/// One offsets partition this broker leads.
#[derive(Debug)]
enum Coordinated {
    /// Its log is being read, in this leader epoch.
    Loading { leader_epoch: i32 },
    /// Read: every group's offsets, as of this leader epoch.
    Loaded {
        leader_epoch: i32,
        groups: BTreeMap<String, GroupOffsets>,
    },
}

/// Where a group's offsets stand on this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// This broker coordinates the group and has read its offsets.
    Ready,
    /// This broker coordinates it and is still reading its partition.
    Loading,
    /// Another broker coordinates it (or none does).
    NotCoordinator,
}

impl Standing {
    /// The error a request about the group gets, if any.
    pub fn error(self) -> Option<ResponseError> {
        match self {
            Standing::Ready => None,
            Standing::Loading => Some(ResponseError::CoordinatorLoadInProgress),
            Standing::NotCoordinator => Some(ResponseError::NotCoordinator),
        }
    }
}

/// The offsets partitions this broker leads and what it has read of them.
#[derive(Debug)]
pub struct OffsetsManager {
    partitions: u32,
    coordinated: Mutex<BTreeMap<i32, Coordinated>>,
}

impl OffsetsManager {
    pub fn new(partitions: u32) -> Self {
        OffsetsManager {
            partitions: partitions.max(1),
            coordinated: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<i32, Coordinated>> {
        self.coordinated.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many partitions the offsets topic has.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The offsets partition of `group`.
    pub fn partition_of(&self, group: &str) -> TopicPartition {
        TopicPartition {
            topic: OFFSETS_TOPIC.into(),
            partition: partition_for(group, self.partitions),
        }
    }

    pub fn standing(&self, group: &str) -> Standing {
        match self.lock().get(&partition_for(group, self.partitions)) {
            Some(Coordinated::Loaded { .. }) => Standing::Ready,
            Some(Coordinated::Loading { .. }) => Standing::Loading,
            None => Standing::NotCoordinator,
        }
    }

    /// This broker became the leader of offsets partition `partition` in
    /// `leader_epoch`: it reads the partition's log before it serves the
    /// groups there. Call [`load`] next (a task of its own).
    pub fn elected(&self, partition: i32, leader_epoch: i32) {
        self.lock()
            .insert(partition, Coordinated::Loading { leader_epoch });
    }

    /// This broker no longer leads offsets partition `partition`.
    pub fn resigned(&self, partition: i32) {
        self.lock().remove(&partition);
    }

    /// `group`'s committed offsets for `wanted` (every one it has when
    /// `None`), if this broker has them.
    pub fn fetch(
        &self,
        group: &str,
        wanted: Option<&[(String, i32)]>,
    ) -> Result<GroupOffsets, ResponseError> {
        let coordinated = self.lock();
        let Some(Coordinated::Loaded { groups, .. }) =
            coordinated.get(&partition_for(group, self.partitions))
        else {
            return Err(self.standing_locked(&coordinated, group));
        };
        let offsets = groups.get(group);
        Ok(match wanted {
            None => offsets.cloned().unwrap_or_default(),
            Some(wanted) => wanted
                .iter()
                .filter_map(|key| Some((key.clone(), offsets?.get(key)?.clone())))
                .collect(),
        })
    }

    fn standing_locked(
        &self,
        coordinated: &BTreeMap<i32, Coordinated>,
        group: &str,
    ) -> ResponseError {
        match coordinated.get(&partition_for(group, self.partitions)) {
            Some(Coordinated::Loading { .. }) => ResponseError::CoordinatorLoadInProgress,
            _ => ResponseError::NotCoordinator,
        }
    }

    /// Records `group`'s commits once its append is acknowledged, if this
    /// broker still coordinates the group in the epoch the commit was
    /// appended in.
    pub fn committed(&self, group: &str, leader_epoch: i32, offsets: GroupOffsets) {
        let mut coordinated = self.lock();
        if let Some(Coordinated::Loaded {
            leader_epoch: epoch,
            groups,
        }) = coordinated.get_mut(&partition_for(group, self.partitions))
            && *epoch == leader_epoch
        {
            groups.entry(group.to_owned()).or_default().extend(offsets);
        }
    }

    /// The loaded groups' names, for ListGroups.
    pub fn groups(&self) -> Vec<String> {
        self.lock()
            .values()
            .filter_map(|c| match c {
                Coordinated::Loaded { groups, .. } => Some(groups.keys().cloned()),
                Coordinated::Loading { .. } => None,
            })
            .flatten()
            .collect()
    }

    /// The leader epoch this broker coordinates `group` in, when it does.
    pub fn leader_epoch(&self, group: &str) -> Option<i32> {
        match self.lock().get(&partition_for(group, self.partitions))? {
            Coordinated::Loaded { leader_epoch, .. } => Some(*leader_epoch),
            Coordinated::Loading { .. } => None,
        }
    }

    fn finish(&self, partition: i32, leader_epoch: i32, groups: BTreeMap<String, GroupOffsets>) {
        let mut coordinated = self.lock();
        if let Some(state) = coordinated.get_mut(&partition)
            && matches!(state, Coordinated::Loading { leader_epoch: e } if *e == leader_epoch)
        {
            *state = Coordinated::Loaded {
                leader_epoch,
                groups,
            };
        }
    }
}

/// Reads offsets partition `partition`'s log, as its leader in
/// `leader_epoch`, from its start to its end, and serves its groups from
/// what it read. Stops without serving when the broker stops leading the
/// partition (or leads it in a later epoch) meanwhile. A record that cannot
/// be read is skipped and logged: the rest of the group's offsets still load,
/// as Kafka's loader skips what it does not know.
pub fn load(
    offsets: &Arc<OffsetsManager>,
    replicas: &ReplicaManager,
    partition: i32,
    leader_epoch: i32,
    how: OffsetsLoad,
) {
    let tp = TopicPartition {
        topic: OFFSETS_TOPIC.into(),
        partition,
    };
    let mut groups: BTreeMap<String, GroupOffsets> = BTreeMap::new();
    // KAFKA-5600: groups taken as loaded after the read they first appeared in.
    let mut settled: BTreeMap<String, GroupOffsets> = BTreeMap::new();
    let mut offset = None;
    let mut records_read = 0u64;
    loop {
        let (read, epoch) =
            match replicas.read_own_log(&tp, offset.unwrap_or(0).max(0), LOAD_READ_BYTES) {
                Ok(read) => read,
                Err(e) => {
                    tracing::info!(partition, ?e, "offsets load stopped: no longer the leader");
                    return;
                }
            };
        if epoch != leader_epoch {
            tracing::info!(partition, leader_epoch, epoch, "offsets load overtaken");
            return;
        }
        let start = *offset.get_or_insert(read.log_start_offset);
        if start < read.log_start_offset {
            offset = Some(read.log_start_offset);
            continue;
        }
        if start >= read.log_end_offset || read.records.is_empty() {
            break;
        }
        let next = apply_batches(&read.records, &mut groups, &mut records_read);
        if how == OffsetsLoad::Kafka5600 {
            for (group, offsets) in &groups {
                settled
                    .entry(group.clone())
                    .or_insert_with(|| offsets.clone());
            }
        }
        match next {
            Some(next) if next > start => offset = Some(next),
            _ => break,
        }
    }
    if how == OffsetsLoad::Kafka5600 {
        groups = settled;
    }
    tracing::info!(
        partition,
        leader_epoch,
        groups = groups.len(),
        records = records_read,
        "offsets partition loaded"
    );
    offsets.finish(partition, leader_epoch, groups);
}

/// Applies every batch in `raw` to `groups`; returns the offset after the
/// last whole batch.
fn apply_batches(
    raw: &Bytes,
    groups: &mut BTreeMap<String, GroupOffsets>,
    records_read: &mut u64,
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
        let set = match record_batch::decode_records(batch, &header) {
            Ok(set) => set,
            Err(e) => {
                tracing::warn!(%e, base_offset = header.base_offset, "offsets batch skipped");
                continue;
            }
        };
        for r in set.records {
            *records_read += 1;
            match record::parse(r.key.as_deref(), r.value.as_deref()) {
                Ok(OffsetsRecord::Offset {
                    group,
                    topic,
                    partition,
                    value,
                }) => {
                    let offsets = groups.entry(group).or_default();
                    match value {
                        Some(v) => {
                            offsets.insert((topic, partition), v);
                        }
                        None => {
                            offsets.remove(&(topic, partition));
                        }
                    }
                }
                Ok(OffsetsRecord::GroupMetadata { group }) => {
                    groups.entry(group).or_default();
                }
                Err(e) => tracing::warn!(%e, offset = r.offset, "offsets record skipped"),
            }
        }
    }
    next
}

/// One batch of `group`'s commits, as the coordinator appends it: one record
/// per partition, keyed so a compacted log keeps the last.
pub fn commit_batch(group: &str, offsets: &GroupOffsets, now_ms: i64) -> Bytes {
    let records: Vec<Record> = offsets
        .iter()
        .enumerate()
        .map(|(i, ((topic, partition), committed))| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: now_ms,
            key: Some(record::offset_key(group, topic, *partition)),
            value: Some(record::offset_value(committed)),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options)
        .expect("an uncompressed batch of offsets encodes");
    buf.freeze()
}

#[cfg(test)]
mod tests;
