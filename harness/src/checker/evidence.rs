//! What a checker says it found, as data: an [`Anomaly`] kind, a line for a
//! person, and [`Details`] — one typed struct per kind, whose fields point at
//! history ops ([`OpRef`]s: a history index) and log records (a partition and
//! its offsets) by name and type. The report and the gate ask a piece of
//! evidence which ops and records it names ([`Details::ops`],
//! [`Details::records`]); nothing downstream reads its JSON.
//!
//! On disk (`results.json`) a piece of evidence is `{anomaly, summary,
//! details}` with the details' fields in name order, as they were when the
//! details were free-form JSON: every struct below lists its fields
//! alphabetically, and a test holds each to that.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::history::{OpType, Process, RecordValue};
use crate::node::NodeId;
use crate::reader::state_change::StateChange;
use crate::reader::{Finding, Payload};
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

pub use super::anomaly::Anomaly;
pub use database::{DatabaseDivergence, HeldRecord};
pub use direct::{AckBeforeIsrHeld, ElectionOutsideIsr, NoRecovery, ReadAboveWatermark};
pub use groups::{CommittedRegressed, ResumeSkip};
pub use liveness::{RestartFailed, StopKeptRegistration, Stuck, StuckGroup, StuckTopic};
pub use txn::{
    CycleEdge, DependencyKind, Fate, Hanging, TornTxn, TxnCycle, TxnRead, TxnRef, TxnWrite,
};

mod database;
mod direct;
mod groups;
mod liveness;
mod names;
mod refs;
mod txn;

pub use refs::OpRef;

/// One anomaly, minimal and concrete: enough to find it in the files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawEvidence")]
pub struct Evidence {
    pub anomaly: Anomaly,
    /// One line a person reads first, naming values, offsets and replicas.
    pub summary: String,
    /// The particulars, typed by kind.
    pub details: Details,
}

impl Evidence {
    pub fn new(anomaly: Anomaly, summary: impl Into<String>, details: impl Into<Details>) -> Self {
        Evidence {
            anomaly,
            summary: summary.into(),
            details: details.into(),
        }
    }
}

/// Evidence as it is read back: the details parsed by the kind's struct.
#[derive(Deserialize)]
struct RawEvidence {
    anomaly: Anomaly,
    summary: String,
    #[serde(default)]
    details: serde_json::Value,
}

impl TryFrom<RawEvidence> for Evidence {
    type Error = String;

    fn try_from(raw: RawEvidence) -> Result<Self, Self::Error> {
        let details = Details::parse(raw.anomaly, raw.details)
            .map_err(|e| format!("the details of a {} anomaly: {e}", raw.anomaly))?;
        Ok(Evidence {
            anomaly: raw.anomaly,
            summary: raw.summary,
            details,
        })
    }
}

/// Declares [`Details`] with a variant per struct, its `From`s, and how each
/// kind's details are parsed back, from one list.
macro_rules! details {
    ($( $variant:ident($ty:ident) for $($kind:ident)|+; )*) => {
        /// The particulars of one piece of evidence, one struct per kind (some
        /// kinds share one: the three allowed losses, the two poll skips).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum Details {
            $( $variant($ty), )*
        }

        $(
            impl From<$ty> for Details {
                fn from(details: $ty) -> Self {
                    Details::$variant(details)
                }
            }
        )*

        impl Details {
            /// `value` read as the struct `anomaly`'s details have.
            pub fn parse(
                anomaly: Anomaly,
                value: serde_json::Value,
            ) -> Result<Details, serde_json::Error> {
                Ok(match anomaly {
                    $( $(Anomaly::$kind)|+ => Details::$variant(serde_json::from_value(value)?), )*
                })
            }
        }
    };
}

details! {
    AckedWrite(AckedWrite) for LostAcksAllWriteExcused | LostAcks1Write | LostAcks0Write;
    LostWrite(LostWrite) for LostAcknowledgedWrite;
    OffsetChanged(OffsetChanged) for AcknowledgedOffsetChanged;
    Divergence(Divergence) for ReplicaDivergence;
    DatabaseDivergence(DatabaseDivergence) for DatabaseDivergence;
    EpochNotMonotonic(EpochNotMonotonic) for EpochFileNotMonotonic;
    EpochDisagrees(EpochDisagrees) for EpochFileDisagreesWithBatch;
    EpochNotAtBatchStart(EpochNotAtBatchStart) for EpochEntryNotAtBatchStart;
    EpochUnreadable(EpochUnreadable) for EpochFileUnreadable;
    LeadersInEtcd(LeadersInEtcd) for TwoLeadersInEtcd;
    LeadersApplied(LeadersApplied) for TwoLeadersApplied;
    WritersInOneEpoch(WritersInOneEpoch) for TwoWritersInOneEpoch;
    StaleEpochApplied(StaleEpochApplied) for StaleControllerEpochApplied | LeaderEpochRegressed;
    OutOfOrderApplied(OutOfOrderApplied) for DecisionOutOfOrder;
    EtcdEpochRegressed(EtcdEpochRegressed) for EtcdLeaderEpochRegressed;
    UncommittedApplied(UncommittedApplied) for UncommittedDecisionApplied;
    ConsumedRegressed(ConsumedRegressed) for ConsumedOffsetRegressed;
    WatermarkRegressed(WatermarkRegressed) for HighWatermarkRegressed;
    InconsistentOffsets(InconsistentOffsets) for InconsistentOffsets;
    NonmonotonicPoll(NonmonotonicPoll) for IntNonmonotonicPoll | NonmonotonicPoll;
    PollSkip(PollSkip) for PollSkip | IntPollSkip;
    TruncatedRead(TruncatedRead) for TruncatedRead;
    Duplicate(Duplicate) for Duplicate;
    IdempotentDuplicate(IdempotentDuplicate) for IdempotentDuplicate;
    Stuck(Stuck) for StuckPartition;
    AppWriteLost(AppWriteLost) for AppWriteLost;
    StuckGroup(StuckGroup) for StuckGroup;
    StuckTopic(StuckTopic) for StuckTopic;
    StopKeptRegistration(StopKeptRegistration) for StopKeptRegistration;
    Resurrected(Resurrected) for ResurrectedRecord;
    RestartFailed(RestartFailed) for RestartFailed;
    CommittedRegressed(CommittedRegressed) for CommittedOffsetRegressed | StaleCommittedRead;
    Unseen(Unseen) for Unseen;
    NonmonotonicSend(NonmonotonicSend) for NonmonotonicSend;
    ResumeSkip(ResumeSkip) for ResumeSkip;
    TxnRead(TxnRead) for AbortedRead | PrecommittedRead;
    TornTxn(TornTxn) for TornTransaction | AbortedCommitted;
    TxnCycle(TxnCycle) for WriteCycle | ReadCycle;
    Hanging(Hanging) for HangingTransaction;
    ElectionOutsideIsr(ElectionOutsideIsr) for ElectionOutsideIsr;
    NoRecovery(NoRecovery) for NoRecovery;
    ReadAboveWatermark(ReadAboveWatermark) for ReadAboveHighWatermark;
    AckBeforeIsrHeld(AckBeforeIsrHeld) for AckBeforeIsrHeld;
}

impl Details {
    /// The details as `results.json` writes them: for showing a person, and
    /// for tests that hold the on-disk form. Code that acts on evidence
    /// matches the typed variant instead.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("details serialize")
    }
}

/// A write the client saw acknowledged, as lost-write and offset-changed
/// name it; the ISR as broker ids, as etcd lists them. The details of an
/// allowed loss (acks=1, acks=0, an excused acks=all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AckedWrite {
    /// `None` for acks=0 (the broker names no offset).
    pub acked_offset: Option<i64>,
    pub acks: Acks,
    pub history_index: OpRef,
    pub isr: Option<Vec<u32>>,
    pub leader_epoch: Option<i32>,
    pub partition: PartitionRef,
    pub value: i64,
}

/// `lost-acknowledged-write`: the write, the final log it is missing from
/// and the replicas that lack it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LostWrite {
    pub acked_offset: Option<i64>,
    pub acks: Acks,
    /// Which replica's log was taken as final, and why.
    pub final_log: String,
    /// Damage the reader found in that replica (often why a value is missing).
    pub final_log_findings: usize,
    /// The broker holding it; absent for a system's database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_log_node: Option<NodeId>,
    pub history_index: OpRef,
    pub isr: Option<Vec<u32>>,
    pub lacking: Vec<NodeId>,
    pub leader_epoch: Option<i32>,
    pub partition: PartitionRef,
    pub value: i64,
}

/// `acknowledged-offset-changed`: the write, where the final log has it and
/// what the final log holds at the acknowledged offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffsetChanged {
    pub acked_offset: Option<i64>,
    pub acks: Acks,
    pub final_log: String,
    pub final_log_at_acked_offset: Option<EpochValue>,
    /// The broker holding it; absent for a system's database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_log_node: Option<NodeId>,
    pub found_at: Vec<i64>,
    pub history_index: OpRef,
    pub isr: Option<Vec<u32>>,
    pub leader_epoch: Option<i32>,
    pub partition: PartitionRef,
    pub value: i64,
}

/// A record's batch epoch and value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochValue {
    pub epoch: i32,
    pub value: Option<Payload>,
}

/// `replica-divergence`: the first offset where replicas part, below their
/// common end, and what each holds there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    pub common_end: i64,
    pub holds: BTreeMap<NodeId, Slot>,
    pub offset: i64,
    /// Present (true) when a replica outside the final ISR was compared with
    /// the final log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_final_isr: Option<bool>,
    pub partition: PartitionRef,
    pub replicas: Vec<NodeId>,
}

/// What one replica holds at an offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Slot {
    Record {
        control: bool,
        epoch: i32,
        value: Option<Payload>,
    },
    /// Written `"nothing"`.
    Nothing(NothingHeld),
}

/// The word `"nothing"`, as [`Slot::Nothing`] is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NothingHeld {
    #[serde(rename = "nothing")]
    Nothing,
}

/// `epoch-file-not-monotonic`: entry `entry` (0-based) and the one before,
/// each as `[epoch, start_offset]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochNotMonotonic {
    pub entry: usize,
    pub entry_value: (i32, i64),
    pub node: NodeId,
    pub partition: PartitionRef,
    pub previous: (i32, i64),
}

/// `epoch-file-disagrees-with-batch`: batches `first_base_offset..=
/// last_offset` carry `batch_epoch`, the file says `file_epoch` from the
/// entry at `entry_start_offset`; the whole file as `[epoch, start]` pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochDisagrees {
    pub batch_epoch: i32,
    pub batches: usize,
    pub entry_start_offset: Option<i64>,
    pub epoch_file: Option<Vec<(i64, i64)>>,
    pub file_epoch: Option<i32>,
    pub first_base_offset: i64,
    pub last_offset: i64,
    pub node: NodeId,
    pub partition: PartitionRef,
}

/// `epoch-entry-not-at-batch-start`: the entry as `[epoch, start_offset]`
/// and the batch it starts inside, if one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochNotAtBatchStart {
    pub entry: (i32, i64),
    pub inside_batch: Option<BatchSpan>,
    pub node: NodeId,
    pub partition: PartitionRef,
}

/// A batch's offsets and epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchSpan {
    pub base_offset: i64,
    pub epoch: i32,
    pub last_offset: i64,
}

/// `epoch-file-unreadable`: the reader's finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochUnreadable {
    pub finding: Finding,
    pub node: NodeId,
}

/// `two-leaders-in-etcd`: each leader etcd recorded in one leader epoch,
/// with the revisions that name it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeadersInEtcd {
    pub leader_epoch: i32,
    pub leaders: Vec<EtcdLeader>,
    pub partition: u32,
    pub topic: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EtcdLeader {
    pub leader: i32,
    pub revisions: Vec<i64>,
}

/// `two-leaders-applied`: each leader brokers applied in one leader epoch,
/// with the state-change log entries that applied it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeadersApplied {
    pub leader_epoch: i32,
    pub leaders: Vec<AppliedLeader>,
    pub partition: i32,
    pub topic: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedLeader {
    pub applied: Vec<AppliedBy>,
    pub leader: i32,
}

/// One state-change log entry (`entry`: its 0-based line) of `node`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedBy {
    pub controller_epoch: i32,
    pub controller_id: i32,
    pub entry: usize,
    pub node: NodeId,
    pub time_ms: u64,
}

/// `two-writers-in-one-epoch`: two replicas' different records under one
/// leader epoch, from `first_offset`, and how many offsets differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WritersInOneEpoch {
    pub differing_offsets: usize,
    pub first_offset: i64,
    pub leader_epoch: i32,
    pub partition: u32,
    pub replicas: Vec<HeldInBatch>,
    pub topic: String,
}

/// A record as one replica holds it, with its batch's file and position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldInBatch {
    pub batch_position: u64,
    pub file: String,
    pub node: NodeId,
    pub value: Option<Payload>,
}

/// A state-change log entry (`entry`: its 0-based line) of `node`, whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateChangeEntry {
    pub controller_epoch: i32,
    pub controller_id: i32,
    pub entry: usize,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub node: NodeId,
    pub partition: i32,
    pub request: String,
    pub time_ms: u64,
    pub topic: String,
}

impl StateChangeEntry {
    /// Entry `index` of `node`'s state-change log, as evidence names it.
    pub fn of(node: NodeId, index: usize, entry: &StateChange) -> Self {
        StateChangeEntry {
            controller_epoch: entry.controller_epoch,
            controller_id: entry.controller_id,
            entry: index,
            isr: entry.isr.clone(),
            leader: entry.leader,
            leader_epoch: entry.leader_epoch,
            node,
            partition: entry.partition,
            request: entry.request.clone(),
            time_ms: entry.time_ms,
            topic: entry.topic.clone(),
        }
    }
}

/// `stale-controller-epoch-applied` and `leader-epoch-regressed`: the first stale entry, the newer one
/// applied before it, and how many such entries followed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StaleEpochApplied {
    pub newer_applied_before: StateChangeEntry,
    pub node: NodeId,
    pub stale: StateChangeEntry,
    pub stale_entries: usize,
}

impl StaleEpochApplied {
    /// `node`'s stale entry, the newer one applied before it (each with its
    /// index in the log), and how many such entries there are.
    pub fn of(
        node: NodeId,
        (index, stale): (usize, &StateChange),
        (newer_index, newer): (usize, &StateChange),
        stale_entries: usize,
    ) -> Self {
        StaleEpochApplied {
            newer_applied_before: StateChangeEntry::of(node, newer_index, newer),
            node,
            stale: StateChangeEntry::of(node, index, stale),
            stale_entries,
        }
    }
}

/// `decision-out-of-order`: the entry, the revisions etcd recorded its state
/// at, and the entry applied before it whose state etcd recorded later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutOfOrderApplied {
    pub applied: StateChangeEntry,
    pub etcd_revisions: Vec<i64>,
    pub newer_applied_before: StateChangeEntry,
    pub newer_etcd_revisions: Vec<i64>,
}

/// `etcd-leader-epoch-regressed`: the first state etcd recorded below a
/// leader epoch it had recorded before, that newer state, and how many such
/// states the partition has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EtcdEpochRegressed {
    pub newer_recorded_before: EtcdState,
    pub partition: u32,
    pub regressed: EtcdState,
    pub states: usize,
    pub topic: String,
}

/// `uncommitted-decision-applied`: the entry, and what etcd did record for
/// its partition and leader epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UncommittedApplied {
    pub applied: StateChangeEntry,
    pub etcd_states_in_that_epoch: Vec<EtcdState>,
}

/// A partition state etcd recorded, at its revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EtcdState {
    pub controller_epoch: i32,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub revision: i64,
}

/// `consumed-offset-regressed`: a poll (history `index`) that returned
/// `offset` below its `from_offset`, and the highest its process had
/// consumed before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsumedRegressed {
    pub consumed_before: Option<i64>,
    pub from_offset: i64,
    pub index: OpRef,
    pub offset: i64,
    pub partition: PartitionRef,
    pub process: Process,
}

/// `high-watermark-regressed`: an earlier poll's and a later poll's high
/// watermark from one node, and the leader epochs it led in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatermarkRegressed {
    pub earlier: EarlierPoll,
    pub later: LaterPoll,
    pub leader_epochs_of_node: Option<BTreeSet<i32>>,
    pub node: NodeId,
    pub partition: PartitionRef,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierPoll {
    pub high_watermark: i64,
    pub index: OpRef,
    pub process: Process,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaterPoll {
    pub high_watermark: i64,
    pub index: OpRef,
    pub invoke_index: OpRef,
    pub process: Process,
}

/// `inconsistent-offsets`: each value seen at one offset, with the polls
/// and sends that saw it (history indices).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InconsistentOffsets {
    pub offset: i64,
    pub partition: PartitionRef,
    pub values: Vec<ValueSeen>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueSeen {
    pub polls: Vec<OpRef>,
    pub sends: Vec<OpRef>,
    pub value: RecordValue,
}

/// `int-nonmonotonic-poll`: a poll returned `offset` after `after`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NonmonotonicPoll {
    pub after: i64,
    pub index: OpRef,
    pub offset: i64,
    pub partition: PartitionRef,
    pub process: Process,
}

/// `poll-skip` / `int-poll-skip`: a poll went from `from_offset` (or the
/// record at `after`) to `offset`, skipping records; the first ten skipped
/// as `[offset, value]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PollSkip {
    pub after: Option<i64>,
    pub from_offset: i64,
    pub index: OpRef,
    pub offset: i64,
    pub partition: PartitionRef,
    pub process: Process,
    pub skipped: Vec<(i64, RecordValue)>,
    pub skipped_count: usize,
}

/// `truncated-read`: a value polls read at `offset`, and what each replica
/// holds there after the final heal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TruncatedRead {
    pub offset: i64,
    pub partition: PartitionRef,
    pub polls: Vec<OpRef>,
    pub replicas: BTreeMap<NodeId, HeldAfterHeal>,
    pub value: RecordValue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldAfterHeal {
    /// How many findings the reader had for the replica.
    pub findings: usize,
    pub log_end_offset: i64,
    pub value: Option<RecordValue>,
}

/// `duplicate`: a value at several offsets of one log (`log`: which replica).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Duplicate {
    pub log: String,
    pub offsets: Vec<i64>,
    pub partition: PartitionRef,
    pub value: String,
}

/// `idempotent-duplicate`: as [`Duplicate`], with every send of the value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdempotentDuplicate {
    pub log: String,
    pub offsets: Vec<i64>,
    pub partition: PartitionRef,
    pub sends: Vec<SendRef>,
    pub value: String,
}

/// One send of a value: its invoke, its completion (index and type) once it
/// had one, and the idempotent producer's stamp (with the value's sequence,
/// and the client's attempts when the completion counted them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<OpRef>,
    pub invoke_index: OpRef,
    pub process: Process,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer_epoch: Option<i16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer_id: Option<i64>,
    /// Present with a producer: `Some(None)` is written `null`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "present_or_null"
    )]
    pub sequence: Option<Option<i32>>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<OpType>,
}

/// An `Option<Option<T>>` field: absent, `null`, or a value.
mod present_or_null {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}

/// `app-write-lost`: an application's acks=all record not at the offset its
/// acknowledgement named, and what the final log holds there instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppWriteLost {
    pub acked_offset: i64,
    pub client_id: Option<String>,
    pub final_log: String,
    /// The kept form of the record the final log holds at the offset.
    pub final_log_held: Option<serde_json::Value>,
    /// The broker holding it; absent for a system's database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_log_node: Option<NodeId>,
    pub history_index: u64,
    pub isr: Option<Vec<u32>>,
    pub leader_epoch: Option<i32>,
    pub partition: PartitionRef,
    /// The record the application sent, in kept form.
    pub sent: serde_json::Value,
}

/// `resurrected-record`: a read of a topic's life that returned a record
/// acknowledged before that life's creation began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resurrected {
    /// The `create-topic` that began the read's life (its completion).
    pub created_index: u64,
    /// The read, and where it found the record.
    pub read_index: u64,
    pub read_life: u32,
    pub read_node: Option<NodeId>,
    pub read_offset: i64,
    /// The send's acknowledgement: history index, life, offset.
    pub sent_index: u64,
    pub sent_life: u32,
    pub sent_offset: Option<i64>,
    pub topic: String,
    pub value: i64,
}

/// `unseen`: an acknowledged write the final log holds that no poll
/// returned, and the final read that should have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unseen {
    pub final_high_watermark: i64,
    pub final_read_index: OpRef,
    pub write: AckedWrite,
}

/// `nonmonotonic-send`: an acks=all write acknowledged at an offset at or
/// below one acknowledged before it was sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NonmonotonicSend {
    pub earlier: AckedWrite,
    pub later: AckedWrite,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind's details round-trip through `results.json`'s form, with
    /// their fields in name order (as free-form JSON objects wrote them).
    fn assert_on_disk_form(evidence: &Evidence) {
        let details = serde_json::to_string_pretty(&evidence.details).unwrap();
        let sorted = serde_json::to_string_pretty(&evidence.details.json()).unwrap();
        assert_eq!(details, sorted, "fields out of name order");
        let text = serde_json::to_string_pretty(evidence).unwrap();
        let back: Evidence = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
    }

    /// Free-form JSON objects wrote their keys in name order (serde_json's
    /// map is sorted), and results.json must read as it did: so every struct
    /// here declares its fields in the order of their names on disk.
    #[test]
    fn every_details_struct_declares_its_fields_in_name_order() {
        let source = [
            include_str!("evidence.rs"),
            include_str!("evidence/database.rs"),
            include_str!("evidence/groups.rs"),
            include_str!("evidence/liveness.rs"),
            include_str!("evidence/txn.rs"),
        ]
        .concat();
        let mut structs = 0;
        for block in source.split("pub struct ").skip(1) {
            let name = block.split_whitespace().next().unwrap_or_default();
            // The wrapper keeps its own order: anomaly, summary, details.
            let Some(body) = block
                .split_once('{')
                .map(|(_, b)| b)
                .filter(|_| name != "Evidence")
            else {
                continue;
            };
            let body = &body[..body.find("\n}").unwrap_or(body.len())];
            let mut rename = None;
            let mut names = Vec::new();
            for line in body.lines().map(str::trim) {
                if let Some(at) = line.find("rename = \"") {
                    let rest = &line[at + 10..];
                    rename = rest.split('"').next().map(str::to_owned);
                }
                if let Some(field) = line.strip_prefix("pub ").and_then(|l| l.split_once(':')) {
                    names.push(rename.take().unwrap_or_else(|| field.0.to_owned()));
                }
            }
            let mut sorted = names.clone();
            sorted.sort();
            assert_eq!(names, sorted, "pub struct {name}");
            structs += 1;
        }
        assert!(structs >= 30, "found {structs} structs: the scan is broken");
    }

    #[test]
    fn details_of_the_wrong_kind_do_not_read_back() {
        let stuck = Evidence::new(
            Anomaly::StuckPartition,
            "t-0 stuck",
            Stuck {
                last_error: None,
                partition: PartitionRef::new("t", 0),
                window_ms: 5000,
            },
        );
        assert_on_disk_form(&stuck);
        let mut json = serde_json::to_value(&stuck).unwrap();
        json["anomaly"] = "replica-divergence".into();
        let error = serde_json::from_value::<Evidence>(json).unwrap_err();
        assert!(error.to_string().contains("replica-divergence"), "{error}");
    }
}
