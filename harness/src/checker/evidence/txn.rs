//! The transaction anomalies' evidence ([transactions]): what a `txn` op's
//! completion says of its fate, the reads, writes, cycles and open
//! transactions the transaction checkers name. Declared as evidence.rs's
//! other details are (fields in name order, as results.json has them).

use serde::{Deserialize, Serialize};

use super::refs::OpRef;

use crate::reader::txn::TxnOutcome;
use crate::topic_partition::PartitionRef;

/// What a transaction op's completion says of its fate (txn_op.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fate {
    /// `ok`, intent commit: EndTxn(commit) answered without error.
    Committed,
    /// `ok`, intent abort: the abort was answered.
    Aborted,
    /// `fail`: definitely not committed.
    Failed,
    /// `info`, or never completed: may or may not have committed.
    Indeterminate,
}

impl Fate {
    pub fn name(self) -> &'static str {
        match self {
            Fate::Committed => "committed",
            Fate::Aborted => "aborted",
            Fate::Failed => "failed",
            Fate::Indeterminate => "indeterminate",
        }
    }

    /// Whether the transaction definitely did not commit.
    pub(crate) fn never_committed(self) -> bool {
        matches!(self, Fate::Aborted | Fate::Failed)
    }
}

/// A transaction op, as transaction evidence names it: its completion's
/// history index (its invoke's, if it never completed), its invoke's, its
/// transactional id and what its completion says of its fate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxnRef {
    pub fate: Fate,
    pub index: OpRef,
    pub invoke_index: OpRef,
    pub transactional_id: String,
}

/// `aborted-read` / `precommitted-read`: a read_committed read (history
/// `read_index`, over by `read_completed_ns`) of `value` at `offset`; its
/// writer (a transaction, with when its EndTxn was sent, or a plain send
/// that failed) and how the final log holds the value (`null`: it lacks it,
/// or holds it outside a transaction).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxnRead {
    pub commit_ns: Option<u64>,
    pub failed_send_index: Option<OpRef>,
    pub log_outcome: Option<TxnOutcome>,
    pub offset: i64,
    pub partition: PartitionRef,
    pub read_completed_ns: u64,
    pub read_index: OpRef,
    pub value: i64,
    pub writer: Option<TxnRef>,
}

/// `torn-transaction`: a committed transaction and each of its writes as
/// the final log holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TornTxn {
    pub txn: TxnRef,
    pub writes: Vec<TxnWrite>,
}

/// One write of a transaction: the offset its produce response gave, and
/// where and how the final log holds it (`outcome` null: missing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxnWrite {
    pub acked_offset: Option<i64>,
    pub offset: Option<i64>,
    pub outcome: Option<TxnOutcome>,
    pub partition: PartitionRef,
    pub value: i64,
}

/// `write-cycle` / `read-cycle`: one cycle of dependencies among committed
/// transactions (`ops`: their history indices, in cycle order), each edge
/// with why it exists, and the size of the strongly connected component it
/// was found in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxnCycle {
    pub component_size: usize,
    pub edges: Vec<CycleEdge>,
    pub ops: Vec<OpRef>,
}

/// A dependency between two transactions (Adya; Elle, Kingsbury & Alvaro
/// 2020): `ww` — `from` wrote `value` at `offset` of `partition` and `to`
/// wrote the next transactional record there (`then_offset`,
/// `then_value`); `wr` — `to` read `value`, which `from` wrote at `offset`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleEdge {
    pub from: OpRef,
    pub kind: DependencyKind,
    pub offset: i64,
    pub partition: PartitionRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_offset: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_value: Option<i64>,
    pub to: OpRef,
    pub value: i64,
}

/// Write-write or write-read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DependencyKind {
    Ww,
    Wr,
}

/// `hanging-transaction`: the open transaction (its producer and first
/// offset), the last history op of its producer and when it ended, the
/// run's end and the transaction timeout held against them; and the run's
/// last look at the partition's last stable offset, when it took one
/// (`stable-offsets`: its op, and the offset it answered).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hanging {
    pub first_offset: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_look: Option<OpRef>,
    pub last_op: Option<OpRef>,
    pub last_op_ended_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stable_offset: Option<i64>,
    pub partition: PartitionRef,
    pub producer_epoch: i16,
    pub producer_id: i64,
    pub run_end_ns: u64,
    pub timeout_ms: u64,
}
