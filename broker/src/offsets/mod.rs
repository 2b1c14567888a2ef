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

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::records::Record;

use crate::config::OffsetsLoad;
use crate::replica::manager::ReplicaManager;
use crate::replica::own_log;
use crate::replica::store::TopicPartition;
use crate::storage::record_batch;
pub use record::CommittedOffset;
use record::OffsetsRecord;

/// The internal topic every group's offsets are written to.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

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
        /// Transactional commits (TxnOffsetCommit) not yet ended, by
        /// producer id: they join `groups` when the producer's commit marker
        /// reaches this partition and are dropped on its abort (KIP-98).
        pending: Pending,
    },
}

/// Transactional offset commits awaiting their marker: producer id → group
/// → offsets.
pub type Pending = BTreeMap<i64, BTreeMap<String, GroupOffsets>>;

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
            ..
        }) = coordinated.get_mut(&partition_for(group, self.partitions))
            && *epoch == leader_epoch
        {
            groups.entry(group.to_owned()).or_default().extend(offsets);
        }
    }

    /// Records `producer_id`'s transactional commit of `group`'s offsets
    /// once its append is acknowledged: pending until the transaction's
    /// marker ([`Self::complete_txn`]).
    pub fn txn_committed(
        &self,
        group: &str,
        leader_epoch: i32,
        producer_id: i64,
        offsets: GroupOffsets,
    ) {
        let mut coordinated = self.lock();
        if let Some(Coordinated::Loaded {
            leader_epoch: epoch,
            pending,
            ..
        }) = coordinated.get_mut(&partition_for(group, self.partitions))
            && *epoch == leader_epoch
        {
            pending
                .entry(producer_id)
                .or_default()
                .entry(group.to_owned())
                .or_default()
                .extend(offsets);
        }
    }

    /// `producer_id`'s transaction ended on offsets partition `partition`
    /// (its marker is written): its pending commits become the groups'
    /// offsets on a commit and are dropped on an abort (Kafka's
    /// `GroupMetadataManager.handleTxnCompletion`).
    pub fn complete_txn(&self, partition: i32, producer_id: i64, commit: bool) {
        let mut coordinated = self.lock();
        if let Some(Coordinated::Loaded {
            groups, pending, ..
        }) = coordinated.get_mut(&partition)
        {
            end_pending(groups, pending, producer_id, commit);
        }
    }

    /// Whether a transaction has commits of `group`'s `wanted` partitions
    /// (every partition when `None`) not yet ended: KIP-447's
    /// `require_stable` OffsetFetch is answered UNSTABLE_OFFSET_COMMIT then.
    pub fn has_pending(&self, group: &str, wanted: Option<&[(String, i32)]>) -> bool {
        let coordinated = self.lock();
        let Some(Coordinated::Loaded { pending, .. }) =
            coordinated.get(&partition_for(group, self.partitions))
        else {
            return false;
        };
        pending
            .values()
            .filter_map(|g| g.get(group))
            .any(|offsets| match wanted {
                None => !offsets.is_empty(),
                Some(keys) => keys.iter().any(|k| offsets.contains_key(k)),
            })
    }

    /// Forgets `group`'s offsets of `keys` (every one, and the group, when
    /// `None`) once their tombstones are acknowledged, if this broker still
    /// coordinates the group in the epoch they were appended in
    /// (DeleteGroups, OffsetDelete).
    pub fn deleted(&self, group: &str, leader_epoch: i32, keys: Option<&[(String, i32)]>) {
        let mut coordinated = self.lock();
        if let Some(Coordinated::Loaded {
            leader_epoch: epoch,
            groups,
            ..
        }) = coordinated.get_mut(&partition_for(group, self.partitions))
            && *epoch == leader_epoch
        {
            match keys {
                None => {
                    groups.remove(group);
                }
                Some(keys) => {
                    if let Some(offsets) = groups.get_mut(group) {
                        for key in keys {
                            offsets.remove(key);
                        }
                    }
                }
            }
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

    fn finish(
        &self,
        partition: i32,
        leader_epoch: i32,
        groups: BTreeMap<String, GroupOffsets>,
        pending: Pending,
    ) {
        let mut coordinated = self.lock();
        if let Some(state) = coordinated.get_mut(&partition)
            && matches!(state, Coordinated::Loading { leader_epoch: e } if *e == leader_epoch)
        {
            *state = Coordinated::Loaded {
                leader_epoch,
                groups,
                pending,
            };
        }
    }
}

/// Ends `producer_id`'s pending commits: into `groups` on a commit.
fn end_pending(
    groups: &mut BTreeMap<String, GroupOffsets>,
    pending: &mut Pending,
    producer_id: i64,
    commit: bool,
) {
    let Some(ended) = pending.remove(&producer_id) else {
        return;
    };
    if commit {
        for (group, offsets) in ended {
            groups.entry(group).or_default().extend(offsets);
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
    let mut pending = Pending::new();
    // KAFKA-5600: groups taken as loaded after the read they first appeared in.
    let mut settled: BTreeMap<String, GroupOffsets> = BTreeMap::new();
    let mut records_read = 0u64;
    let read = own_log::read_from_start(replicas, &tp, leader_epoch, |raw| {
        let next = own_log::for_each_record_and_marker(raw, true, |r| {
            records_read += 1;
            if r.control {
                // A transaction's marker ends its producer's pending commits.
                if let Some(commit) = marker_commits(&r) {
                    end_pending(&mut groups, &mut pending, r.producer_id, commit);
                }
            } else if r.transactional {
                let producer = pending.entry(r.producer_id).or_default();
                let mut staged = BTreeMap::new();
                apply_record(r, &mut staged);
                for (group, offsets) in staged {
                    producer.entry(group).or_default().extend(offsets);
                }
            } else {
                apply_record(r, &mut groups);
            }
        });
        if how == OffsetsLoad::Kafka5600 {
            for (group, offsets) in &groups {
                settled
                    .entry(group.clone())
                    .or_insert_with(|| offsets.clone());
            }
        }
        next
    });
    if let Err(e) = read {
        tracing::info!(partition, %e, "offsets load stopped");
        return;
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
    offsets.finish(partition, leader_epoch, groups, pending);
}

/// Whether a control record is a commit marker (`Some(true)`) or an abort
/// (`Some(false)`): its key is a version and a type, 1 commit, 0 abort
/// (KIP-98's `ControlRecordType`).
fn marker_commits(r: &Record) -> Option<bool> {
    let key = r.key.as_deref().filter(|k| k.len() >= 4)?;
    match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// Applies one record of an offsets partition to `groups`.
fn apply_record(r: Record, groups: &mut BTreeMap<String, GroupOffsets>) {
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

/// One batch of `group`'s commits, as the coordinator appends it: one record
/// per partition, keyed so a compacted log keeps the last.
pub fn commit_batch(group: &str, offsets: &GroupOffsets, now_ms: i64) -> Bytes {
    record_batch::plain_batch(commit_entries(group, offsets), now_ms)
}

/// [`commit_batch`] of a transactional commit (TxnOffsetCommit): the batch
/// is `producer`'s and transactional, so the transaction's marker on this
/// partition ends it as it ends the producer's data (KIP-98).
pub fn txn_commit_batch(
    group: &str,
    offsets: &GroupOffsets,
    now_ms: i64,
    producer: (i64, i16),
) -> Bytes {
    record_batch::transactional_batch(commit_entries(group, offsets), now_ms, producer)
}

/// One batch of tombstones for `group`'s offsets of `keys`: a record per
/// partition with its commit's key and no value, so a reader (this
/// broker's [`load`] on a coordinator move, or compaction) drops the offset.
pub fn tombstone_batch(group: &str, keys: &[(String, i32)], now_ms: i64) -> Bytes {
    let entries = keys
        .iter()
        .map(|(topic, partition)| (Some(record::offset_key(group, topic, *partition)), None))
        .collect();
    record_batch::plain_batch(entries, now_ms)
}

fn commit_entries(group: &str, offsets: &GroupOffsets) -> Vec<(Option<Bytes>, Option<Bytes>)> {
    offsets
        .iter()
        .map(|((topic, partition), committed)| {
            (
                Some(record::offset_key(group, topic, *partition)),
                Some(record::offset_value(committed)),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
