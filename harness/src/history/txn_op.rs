//! The history's transactions ([transactions]): a `txn` op is one
//! transactional producer's transaction (KIP-98) of up to four micro-ops —
//! sends, and polls by a read_committed consumer inside it — meant to commit
//! or to abort; op.rs reads and writes it as the body of its line, and a
//! poll's read isolation as [`Isolation`].
//!
//! A micro-op is a JSON array, as Jepsen's transactional workloads write
//! them: `["send", "t-0", 17]` and `["poll", "t-1"]` on the invoke, and with
//! its result once known, `["send", "t-0", 17, 42]` (the offset the send got,
//! `null` when the produce response named none) and `["poll", "t-1", [[5, 3],
//! [6, 4]]]` (offset and value pairs read). A `fail` or `info` repeats the
//! invoke with whatever results were known.
//!
//! What the completion type means (the checkers rely on it): `ok` with
//! intent `commit` — EndTxn(commit) was answered without error, the
//! transaction committed; `ok` with intent `abort` — the abort was answered,
//! the transaction definitely aborted (its polls are still real reads);
//! `fail` — definitely not committed (it failed before EndTxn(commit), or
//! EndTxn answered a definite error such as a fenced epoch, and the
//! transaction aborts): no read_committed reader may ever see its writes;
//! `info` — it may or may not have committed.
//!
//! A subscribed consumer's transaction (Jepsen's read-process-write, KIP-447)
//! names its `group` on the invoke and, on its completion, the `offsets` it
//! sent to the transaction: `{"t-0": 43}`. They are the group's committed
//! offsets once the transaction commits, and never if it aborts or fails.

use std::collections::BTreeMap;

use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::record_value::PolledRecord;
use crate::node::NodeId;
use crate::topic_partition::PartitionRef;

/// One transaction: its producer's `transactional_id`, whether it was meant
/// to commit or abort, its micro-ops in order, the coordinator it went to
/// (`node`), and for a subscribed consumer's transaction the `group` whose
/// offsets were sent to it (KIP-447's AddOffsetsToTxn and TxnOffsetCommit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Txn {
    pub transactional_id: String,
    pub intent: Intent,
    pub ops: Vec<MicroOp>,
    /// The transaction coordinator (`null`: none was found).
    #[serde(default)]
    pub node: Option<NodeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// A subscribed consumer's transaction, on its completion: the offsets
    /// (the next record to consume, per partition) TxnOffsetCommit sent to
    /// the transaction as `group`'s (KIP-447). They become the group's
    /// committed offsets if and only if the transaction commits. Empty (and
    /// not written) when none were sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub offsets: BTreeMap<PartitionRef, i64>,
    /// When known: the producer id and epoch InitProducerId gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<TxnProducer>,
    /// When known: the time EndTxn was sent, ns on the history's clock
    /// (each op's `time_ns`). A read that completed before it cannot have
    /// read a committed write of this transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_ns: Option<u64>,
}

impl Txn {
    /// The sends of the transaction, in order.
    pub fn sends(&self) -> impl Iterator<Item = &TxnSend> {
        self.ops.iter().filter_map(|op| match op {
            MicroOp::Send(send) => Some(send),
            MicroOp::Poll(_) => None,
        })
    }

    /// The polls of the transaction, in order.
    pub fn polls(&self) -> impl Iterator<Item = &TxnPoll> {
        self.ops.iter().filter_map(|op| match op {
            MicroOp::Poll(poll) => Some(poll),
            MicroOp::Send(_) => None,
        })
    }
}

/// What a transaction was meant to end with: EndTxn's `committed` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Intent {
    Commit,
    Abort,
}

/// A transactional producer's id and epoch (KIP-98: the epoch fences the
/// producer's older incarnations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TxnProducer {
    pub id: i64,
    pub epoch: i16,
}

/// One micro-op of a transaction (see the module doc for its array form).
#[derive(Debug, Clone, PartialEq)]
pub enum MicroOp {
    Send(TxnSend),
    Poll(TxnPoll),
}

/// A send of one value to one partition inside the transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnSend {
    pub partition: PartitionRef,
    pub value: i64,
    /// `None` while no produce response is known (the array's three
    /// elements); `Some(None)`: answered with no offset (a fourth element
    /// `null`); `Some(Some(o))`: answered at offset `o`.
    pub offset: Option<Option<i64>>,
}

impl TxnSend {
    /// The offset the produce response gave, if it gave one.
    pub fn acked_offset(&self) -> Option<i64> {
        self.offset.flatten()
    }
}

/// A read_committed poll of one partition inside the transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnPoll {
    pub partition: PartitionRef,
    /// `None` while the poll had no answer; the records read otherwise.
    pub records: Option<Vec<PolledRecord>>,
}

/// A consumer's read isolation (KIP-98's `isolation.level`). Written on a
/// `poll` only when given: every history before transactions read
/// uncommitted and says nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    ReadUncommitted,
    ReadCommitted,
}

impl Serialize for MicroOp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            MicroOp::Send(send) => {
                let len = 3 + usize::from(send.offset.is_some());
                let mut seq = serializer.serialize_seq(Some(len))?;
                seq.serialize_element("send")?;
                seq.serialize_element(&send.partition)?;
                seq.serialize_element(&send.value)?;
                if let Some(offset) = &send.offset {
                    seq.serialize_element(offset)?;
                }
                seq.end()
            }
            MicroOp::Poll(poll) => {
                let len = 2 + usize::from(poll.records.is_some());
                let mut seq = serializer.serialize_seq(Some(len))?;
                seq.serialize_element("poll")?;
                seq.serialize_element(&poll.partition)?;
                if let Some(records) = &poll.records {
                    seq.serialize_element(records)?;
                }
                seq.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for MicroOp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(MicroOpVisitor)
    }
}

struct MicroOpVisitor;

impl<'de> Visitor<'de> for MicroOpVisitor {
    type Value = MicroOp;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(
            r#"a micro-op: ["send", partition, value(, offset)] or ["poll", partition(, records)]"#,
        )
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MicroOp, A::Error> {
        let f: String = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let partition: PartitionRef = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        let op = match f.as_str() {
            "send" => {
                let value: i64 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(2, &self))?;
                let offset: Option<Option<i64>> = seq.next_element()?;
                MicroOp::Send(TxnSend {
                    partition,
                    value,
                    offset,
                })
            }
            "poll" => {
                let records: Option<Vec<PolledRecord>> = seq.next_element()?;
                MicroOp::Poll(TxnPoll { partition, records })
            }
            other => {
                return Err(de::Error::invalid_value(
                    de::Unexpected::Str(other),
                    &"\"send\" or \"poll\"",
                ));
            }
        };
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(
                "a micro-op has more elements than its kind",
            ));
        }
        Ok(op)
    }
}
