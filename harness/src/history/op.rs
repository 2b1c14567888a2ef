//! What one line of the history says, typed. A line is Jepsen's envelope
//! (`index, time_ns, process, type, f, value, error`); `f` and `type` decide
//! the shape of `value`, and that shape is [`Body`]:
//!
//! | f | process | invoke value | `ok` adds |
//! |---|---|---|---|
//! | `send` | client | [`Send`]: `{partition, values, acks, node}`, and from an idempotent producer `producer`: [`Idempotence`] `{id, epoch, base_sequence}` (its completion, whatever its type, adds `attempts`) | [`Acked`]: `offsets` (null under acks=0), and the `isr` and `leader_epoch` etcd showed just after the ack |
//! | `poll` | client | [`Poll`]: `{partition, from_offset, node}`, a subscribed consumer's `group`, the final read's `final_read`, `isolation` when given (absent: `read_uncommitted`) | [`Read`]: `records: [[offset, value]]`, `high_watermark` of the first fetch, `leader_epoch` from etcd just after |
//! | `commit` | client | [`Commit`]: `{group, partition, offset, node}`, a member's `generation` and `member` | nothing more |
//! | `committed` | client | [`Committed`]: `{group, partition, node}` | `offset` (-1: none), and the `leader` etcd names for the group's offsets partition just after |
//! | `rebalance` | client | [`Rebalance`]: `{group, topics, node}` | `generation`, `member`, `partitions` assigned |
//! | `client-crash` | client | [`ClientCrash`]: `{group}` | always `info`, nothing more |
//! | `txn` | client | [`Txn`]: `{transactional_id, intent, ops, node}` (intent `commit` or `abort`; up to 4 micro-ops `["send", "t-0", 17]`, `["poll", "t-1"]`), a subscribed consumer's `group` | each micro-op's result (`["send", "t-0", 17, 42]`: its offset or null; `["poll", "t-1", [[5, 3]]]`: what it read), and when known `producer` `{id, epoch}` and `commit_ns` (EndTxn sent, history clock); txn_op.rs has what each completion type means |
//! | `create-topic`, `life-send`, `life-read`, `delete-topic` | client | [`LifeOp`]: `{topic, life, node}`, a send's `value` (life_op.rs has the table) | a send's `offset`; a read's `records` and `high_watermark` |
//! | `stable-offsets` | the run | [`StableOffsets`]: `{partition, node}`, at a transactional run's end (stable_op.rs) | `last_stable_offset`, `high_watermark` |
//! | fault verbs (`crash`, `power-loss`, ...) | nemesis | [`Aim`]: the fault as written | [`Done`]: `nodes` it resolved to, and the `blocked` links or `cut` logs |
//!
//! A `fail` or `info` completion repeats its invoke's value and carries the
//! error. The JSON on disk is the format every earlier run wrote; [`Op`]
//! reads and writes exactly it, so a stored run checks the same way forever.
//! This file is the only place a history value is built or taken apart.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::fault_op::{Aim, Done, ExitedAtStart, FaultOp, NodeCut, ReplicaCut};
pub use super::group_op::{ClientCrash, Commit, Committed, Rebalance};
pub use super::life_op::{LifeOp, LifeStep};
pub use super::record_value::{PolledRecord, RecordValue, kept_form, padded, value_text};
pub use super::stable_op::StableOffsets;
pub use super::txn_op::{Intent, Isolation, MicroOp, Txn, TxnPoll, TxnProducer, TxnSend};
use super::{OpType, Process};
use crate::fault::Verb;
use crate::node::NodeId;
use crate::schedule::{Acks, PartitionRef};

/// One line of the history.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub index: u64,
    /// Nanoseconds since the run's history was opened (monotonic clock).
    pub time_ns: u64,
    pub process: Process,
    pub kind: OpType,
    pub body: Body,
    pub error: Option<String>,
}

impl Op {
    /// The operation's function as the history names it: `send`, `poll`,
    /// `crash`, `isolate`, ...
    pub fn f(&self) -> &str {
        self.body.f()
    }

    /// The op's `value` as the history file holds it: for tools and tests
    /// that speak the file format; checkers read the typed [`Body`].
    pub fn value(&self) -> Value {
        self.body.to_value(self.kind)
    }

    pub fn send(&self) -> Option<&Send> {
        match &self.body {
            Body::Send(send) => Some(send),
            _ => None,
        }
    }

    pub fn poll(&self) -> Option<&Poll> {
        match &self.body {
            Body::Poll(poll) => Some(poll),
            _ => None,
        }
    }

    pub fn txn(&self) -> Option<&Txn> {
        match &self.body {
            Body::Txn(txn) => Some(txn),
            _ => None,
        }
    }

    pub fn life(&self) -> Option<&LifeOp> {
        match &self.body {
            Body::Life(life) => Some(life),
            _ => None,
        }
    }

    pub fn fault(&self) -> Option<&FaultOp> {
        match &self.body {
            Body::Fault(fault) => Some(fault),
            _ => None,
        }
    }

    /// An acknowledged send: the send and what its ack said.
    pub fn acked_send(&self) -> Option<(&Send, &Acked)> {
        let send = self.send().filter(|_| self.kind == OpType::Ok)?;
        Some((send, send.acked.as_ref()?))
    }

    /// An ok poll: the poll and what it read.
    pub fn read(&self) -> Option<(&Poll, &Read)> {
        let poll = self.poll().filter(|_| self.kind == OpType::Ok)?;
        Some((poll, poll.read.as_ref()?))
    }
}

/// What an op did, by its `f`.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Send(Send),
    Poll(Poll),
    /// A group's offset commit of one partition ([groups]).
    Commit(Commit),
    /// A read of a group's committed offset of one partition.
    Committed(Committed),
    /// A subscribed consumer's round of group membership (JoinGroup and
    /// SyncGroup): one line of its rebalance log.
    Rebalance(Rebalance),
    /// A workload client crashed on purpose (always `info`): its
    /// connections dropped without a goodbye, its process retired.
    ClientCrash(ClientCrash),
    /// One transaction of sends and read_committed polls ([transactions]).
    Txn(Txn),
    /// A look at a partition's last stable offset at the run's end
    /// ([transactions], stable_op.rs).
    StableOffsets(StableOffsets),
    /// A step of the topic-lives workload (life_op.rs): a topic created,
    /// written, read or deleted. Boxed: a run has few of them.
    Life(Box<LifeOp>),
    /// Boxed: faults are a handful of a run's ops, and unboxed the
    /// largest variant sized every op of a million-op history (issue 22).
    Fault(Box<FaultOp>),
}

impl Body {
    pub fn f(&self) -> &str {
        match self {
            Body::Send(_) => "send",
            Body::Poll(_) => "poll",
            Body::Commit(_) => "commit",
            Body::Committed(_) => "committed",
            Body::Rebalance(_) => "rebalance",
            Body::ClientCrash(_) => "client-crash",
            Body::Txn(_) => "txn",
            Body::StableOffsets(_) => "stable-offsets",
            Body::Life(life) => life.step.f(),
            Body::Fault(fault) => fault.verb.name(),
        }
    }
}

/// A produce of `values` to one partition, one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Send {
    pub partition: PartitionRef,
    pub values: Vec<i64>,
    pub acks: Acks,
    /// The node it went to (`null`: no leader was known, and it failed).
    /// An idempotent send's retries may go elsewhere: this is the first.
    #[serde(default)]
    pub node: Option<NodeId>,
    /// Absent for a plain producer's send, so histories written before
    /// idempotence read, and are written, as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<Idempotence>,
    /// On an `ok` only.
    #[serde(skip)]
    pub acked: Option<Acked>,
    /// An application's send ([apps]): what its `app` object says of the
    /// records when their values are not numbers (session/app.rs writes
    /// it; read here, never written back).
    #[serde(default, skip_serializing)]
    pub app: Option<Box<AppSent>>,
}

/// The part of an application's `send` the `app-writes` checker reads: each
/// record's value in its kept form ([`super::record_value::kept_form`]) when
/// not every value is a number, and the offset its answer named for the
/// first.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AppSent {
    /// The application's client id, naming its op in evidence.
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub values: Vec<Value>,
    #[serde(default)]
    pub base_offset: Option<i64>,
}

/// An idempotent producer's stamp on a send (KIP-98): every batch of the
/// request carries the producer id and epoch, and the values' sequences
/// count on from `base_sequence` (value `i` has sequence `base_sequence + i`,
/// wrapping to 0 past `i32::MAX` as Kafka's do). Every attempt resends the
/// same stamp, so a leader holding the batch already answers with it rather
/// than append it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Idempotence {
    pub id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    /// On the completion: how many times the request was sent (1 when it
    /// was never retried, 0 when it never went out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
}

/// What an acknowledged send learned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Acked {
    /// The offset of each value, in order; `None` under acks=0, which
    /// answers none.
    #[serde(default)]
    pub offsets: Option<Vec<i64>>,
    /// The ISR etcd recorded just after the ack, as broker ids: the
    /// replicas the lost-write rule holds to account (GUARANTEES.md, "Excuses").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isr: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_epoch: Option<i32>,
}

/// A bounded read of one partition from an offset up to the high watermark
/// its first fetch saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Poll {
    pub partition: PartitionRef,
    pub from_offset: u64,
    #[serde(default)]
    pub node: Option<NodeId>,
    /// A subscribed consumer's poll: its group (the partition is one the
    /// group assigned it). Absent for a consumer that assigns its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The run's final read: a fresh consumer reading the partition from
    /// its beginning to its high watermark after the final heal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_read: bool,
    /// The consumer's isolation level, when the workload set one: absent
    /// in every history written before transactions, which read
    /// uncommitted (Kafka's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// On an `ok` only.
    #[serde(skip)]
    pub read: Option<Read>,
}

impl Poll {
    /// The invoke of a poll of `partition` from `from_offset` on `node`, by
    /// a consumer that assigns its own partitions.
    pub fn new(partition: PartitionRef, from_offset: u64, node: Option<NodeId>) -> Poll {
        Poll {
            partition,
            from_offset,
            node,
            group: None,
            final_read: false,
            isolation: None,
            read: None,
        }
    }

    /// Whether the consumer read committed data only (KIP-98's
    /// `isolation.level=read_committed`).
    pub fn read_committed(&self) -> bool {
        self.isolation == Some(Isolation::ReadCommitted)
    }
}

/// What an ok poll read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Read {
    pub records: Vec<PolledRecord>,
    pub high_watermark: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_epoch: Option<i32>,
    /// Records a fetch answer returned at or above the high watermark the
    /// same answer reported, as `[offset, high watermark]`: a leader gives
    /// clients only what is below it. The client leaves them out of
    /// `records`; they are kept here as the evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub above_high_watermark: Vec<(i64, i64)>,
}

impl Read {
    /// The offset after the last record read, if any was.
    pub fn next_offset(&self) -> Option<u64> {
        self.records
            .last()
            .and_then(|r| u64::try_from(r.offset()).ok())
            .map(|o| o + 1)
    }
}

/// A line as JSON has it, before its value is understood.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Line {
    pub index: u64,
    pub time_ns: u64,
    pub process: Process,
    #[serde(rename = "type")]
    pub kind: OpType,
    pub f: String,
    #[serde(default)]
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<&Op> for Line {
    fn from(op: &Op) -> Line {
        Line {
            index: op.index,
            time_ns: op.time_ns,
            process: op.process,
            kind: op.kind,
            f: op.f().to_owned(),
            value: op.body.to_value(op.kind),
            error: op.error.clone(),
        }
    }
}

/// Why a history line's `value` does not read as the body of an op with its
/// `f` and type.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Not the shape a `send`, a `poll` or a fault of this type has; the text
    /// is lowercased whole, the source's message included.
    #[error("{}", format!("{f} {kind:?} value: {source}").to_lowercase())]
    Shape {
        f: String,
        kind: OpType,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "f {f:?} is neither send, poll, commit, committed, rebalance, client-crash, txn, stable-offsets, a topic-lives step nor a fault verb"
    )]
    UnknownF { f: String },
}

impl TryFrom<Line> for Op {
    type Error = BodyError;
    fn try_from(line: Line) -> Result<Op, BodyError> {
        let body = Body::from_value(&line.f, line.kind, line.value)?;
        Ok(Op {
            index: line.index,
            time_ns: line.time_ns,
            process: line.process,
            kind: line.kind,
            body,
            error: line.error,
        })
    }
}

impl Serialize for Op {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Line::from(self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Op, D::Error> {
        let line = Line::deserialize(deserializer)?;
        Op::try_from(line).map_err(serde::de::Error::custom)
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("every body part serializes to a JSON object"),
    }
}

fn to_object(part: &impl Serialize) -> Map<String, Value> {
    object(serde_json::to_value(part).expect("history values always serialize"))
}

impl Op {
    /// The op as snapshot tests compare it: everything but its time, which
    /// varies between identical runs.
    pub fn normalized(&self) -> Value {
        let mut line = serde_json::json!({
            "index": self.index,
            "process": self.process.to_string(),
            "type": self.kind,
            "f": self.f(),
            "value": self.body.to_value(self.kind),
        });
        if let Some(error) = &self.error {
            line["error"] = Value::String(error.clone());
        }
        line
    }
}

impl Body {
    /// The op's `value` as the history writes it.
    pub fn to_value(&self, kind: OpType) -> Value {
        let map = match self {
            Body::Send(send) => {
                let mut map = to_object(send);
                if let (OpType::Ok, Some(acked)) = (kind, &send.acked) {
                    map.extend(to_object(acked));
                }
                map
            }
            Body::Poll(poll) => {
                let mut map = to_object(poll);
                if let (OpType::Ok, Some(read)) = (kind, &poll.read) {
                    map.extend(to_object(read));
                }
                map
            }
            Body::Commit(commit) => to_object(commit),
            Body::Committed(committed) => to_object(committed),
            Body::Rebalance(rebalance) => to_object(rebalance),
            Body::ClientCrash(crash) => to_object(crash),
            Body::Txn(txn) => to_object(txn),
            Body::StableOffsets(look) => to_object(look),
            Body::Life(life) => to_object(life),
            Body::Fault(fault) => {
                let mut map = to_object(&fault.aim);
                if let Some(done) = &fault.done {
                    map.extend(to_object(done));
                }
                map
            }
        };
        Value::Object(map)
    }

    /// Reads the `value` of an op with this `f` and type.
    pub fn from_value(f: &str, kind: OpType, value: Value) -> Result<Body, BodyError> {
        let bad = |source| BodyError::Shape {
            f: f.to_owned(),
            kind,
            source,
        };
        Ok(match f {
            "send" => {
                let mut send: Send = serde_json::from_value(value.clone()).map_err(bad)?;
                if kind == OpType::Ok {
                    send.acked = Some(serde_json::from_value(value).map_err(bad)?);
                }
                Body::Send(send)
            }
            "poll" => {
                let mut poll: Poll = serde_json::from_value(value.clone()).map_err(bad)?;
                if kind == OpType::Ok {
                    poll.read = Some(serde_json::from_value(value).map_err(bad)?);
                }
                Body::Poll(poll)
            }
            "commit" => Body::Commit(serde_json::from_value(value).map_err(bad)?),
            "committed" => Body::Committed(serde_json::from_value(value).map_err(bad)?),
            "rebalance" => Body::Rebalance(serde_json::from_value(value).map_err(bad)?),
            "client-crash" => Body::ClientCrash(serde_json::from_value(value).map_err(bad)?),
            "txn" => Body::Txn(serde_json::from_value(value).map_err(bad)?),
            "stable-offsets" => Body::StableOffsets(serde_json::from_value(value).map_err(bad)?),
            life if LifeStep::from_f(life).is_some() => {
                let mut op: LifeOp = serde_json::from_value(value).map_err(bad)?;
                op.step = LifeStep::from_f(life).expect("matched above");
                Body::Life(Box::new(op))
            }
            verb => {
                let verb = Verb::from_name(verb)
                    .ok_or_else(|| BodyError::UnknownF { f: verb.to_owned() })?;
                let aim: Aim = serde_json::from_value(value.clone()).map_err(bad)?;
                let done = match value.get("nodes") {
                    Some(_) => Some(serde_json::from_value(value).map_err(bad)?),
                    None => None,
                };
                Body::Fault(Box::new(FaultOp { verb, aim, done }))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_padded_value_reads_as_the_value_alone() {
        use super::padded;
        let text = padded(7, Some(16));
        assert_eq!(text, "7 ..............");
        assert_eq!(value_text(&text), "7");
        assert_eq!(
            RecordValue::from_bytes(Some(text.as_bytes())),
            RecordValue::Number(7)
        );
        // Too small a size, or none: the digits alone.
        assert_eq!(padded(1234, Some(3)), "1234");
        assert_eq!(padded(-5, None), "-5");
        // Only the workload's own padding is taken off.
        for other in ["7 abc", "7 ", " ...", "7  ..", "text"] {
            assert_eq!(value_text(other), other);
        }
    }

    use super::*;

    fn round_trip(line: &str) -> Op {
        let op: Op = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let again = serde_json::to_value(&op).unwrap();
        let original: Value = serde_json::from_str(line).unwrap();
        assert_eq!(again, original, "{line}");
        op
    }

    #[test]
    fn every_shape_the_runs_write_reads_and_writes_back_unchanged() {
        let send = round_trip(
            r#"{"index":1,"time_ns":5,"process":0,"type":"ok","f":"send","value":{"acks":"all","isr":[1,2],"leader_epoch":0,"node":"b1","offsets":[0],"partition":"t-0","values":[1]}}"#,
        );
        let (s, acked) = send.acked_send().unwrap();
        assert_eq!(
            (s.values.as_slice(), acked.offsets.as_deref()),
            (&[1][..], Some(&[0][..]))
        );
        round_trip(
            r#"{"index":1,"time_ns":5,"process":0,"type":"ok","f":"send","value":{"acks":"0","node":"b1","offsets":null,"partition":"t-0","values":[1]}}"#,
        );
        let idempotent = round_trip(
            r#"{"index":1,"time_ns":5,"process":0,"type":"ok","f":"send","value":{"acks":"all","node":"b1","offsets":[4,5],"partition":"t-0","producer":{"attempts":2,"base_sequence":7,"epoch":0,"id":4000},"values":[1,2]}}"#,
        );
        assert_eq!(
            idempotent.send().unwrap().producer,
            Some(Idempotence {
                id: 4000,
                epoch: 0,
                base_sequence: 7,
                attempts: Some(2),
            })
        );
        round_trip(
            r#"{"index":0,"time_ns":5,"process":0,"type":"invoke","f":"send","value":{"acks":"all","node":"b1","partition":"t-0","producer":{"base_sequence":7,"epoch":0,"id":4000},"values":[1,2]}}"#,
        );
        round_trip(
            r#"{"index":0,"time_ns":5,"process":3,"type":"fail","f":"send","value":{"acks":"1","node":null,"partition":"t-0","values":[1]},"error":"no leader to send to"}"#,
        );
        let poll = round_trip(
            r#"{"index":2,"time_ns":5,"process":1,"type":"ok","f":"poll","value":{"from_offset":0,"high_watermark":2,"leader_epoch":1,"node":"b2","partition":"t-0","records":[[0,1],[1,"x"],[2,null]]}}"#,
        );
        let (_, read) = poll.read().unwrap();
        assert_eq!(read.records[1].value(), &RecordValue::Text("x".into()));
        round_trip(
            r#"{"index":3,"time_ns":5,"process":"nemesis","type":"info","f":"one-way","value":{"blocked":["b2->b1"],"from":"b2","nodes":["b2","b1"],"to":"b1"}}"#,
        );
        round_trip(
            r#"{"index":3,"time_ns":5,"process":"nemesis","type":"invoke","f":"heal","value":{}}"#,
        );
        round_trip(
            r#"{"index":3,"time_ns":5,"process":"nemesis","type":"info","f":"heal","value":{"nodes":[]}}"#,
        );
        round_trip(
            r#"{"index":3,"time_ns":5,"process":"nemesis","type":"invoke","f":"truncate-log","value":{"by_bytes":17,"node":"b3","partition":"t-0","to_offset":null}}"#,
        );
        let cut = round_trip(
            r#"{"index":4,"time_ns":5,"process":"nemesis","type":"info","f":"power-loss","value":{"cut":[{"cuts":[{"bytes_removed":70,"log_end_offset_after":1,"log_end_offset_before":2,"replica":"t-0","segments_deleted":[]}],"node":"b1"}],"nodes":["b1"],"target":"leader of t-0"}}"#,
        );
        let done = cut.fault().unwrap().done.as_ref().unwrap();
        assert_eq!(done.cut.as_ref().unwrap()[0].replicas().count(), 1);
        round_trip(
            r#"{"index":4,"time_ns":5,"process":"nemesis","type":"info","f":"crash","value":{"target":"controller"},"error":"\"controller\" resolves to no node"}"#,
        );
    }

    #[test]
    fn txn_ops_and_a_polls_isolation_read_and_write_back_unchanged() {
        let invoke = round_trip(
            r#"{"index":0,"time_ns":5,"process":2,"type":"invoke","f":"txn","value":{"intent":"commit","node":"b2","ops":[["send","t-0",17],["poll","t-1"]],"transactional_id":"txn-2"}}"#,
        );
        let txn = invoke.txn().unwrap();
        assert_eq!((txn.intent, txn.ops.len()), (Intent::Commit, 2));
        assert_eq!(txn.sends().next().unwrap().offset, None);
        let ok = round_trip(
            r#"{"index":1,"time_ns":9,"process":2,"type":"ok","f":"txn","value":{"commit_ns":8,"group":"g","intent":"commit","node":"b2","ops":[["send","t-0",17,42],["send","t-0",18,null],["poll","t-1",[[5,3],[6,4]]]],"producer":{"epoch":1,"id":3000},"transactional_id":"txn-2"}}"#,
        );
        let txn = ok.txn().unwrap();
        let offsets: Vec<_> = txn.sends().map(|s| s.offset).collect();
        assert_eq!(offsets, vec![Some(Some(42)), Some(None)]);
        assert_eq!(
            txn.polls().next().unwrap().records.as_ref().unwrap().len(),
            2
        );
        assert_eq!(txn.producer, Some(TxnProducer { id: 3000, epoch: 1 }));
        round_trip(
            r#"{"index":1,"time_ns":9,"process":2,"type":"info","f":"txn","value":{"intent":"abort","node":null,"ops":[["send","t-0",17,42],["poll","t-1"]],"transactional_id":"txn-2"},"error":"timed out"}"#,
        );
        let poll = round_trip(
            r#"{"index":2,"time_ns":5,"process":1,"type":"ok","f":"poll","value":{"from_offset":0,"high_watermark":2,"isolation":"read_committed","node":"b2","partition":"t-0","records":[[0,1]]}}"#,
        );
        assert!(poll.poll().unwrap().read_committed());
        let old = round_trip(
            r#"{"index":2,"time_ns":5,"process":1,"type":"invoke","f":"poll","value":{"from_offset":0,"node":"b2","partition":"t-0"}}"#,
        );
        assert!(!old.poll().unwrap().read_committed());
        for bad in [
            r#"[["send","t-0"]]"#,
            r#"[["poll","t-0",[],1]]"#,
            r#"[["scan","t-0"]]"#,
        ] {
            let value =
                format!(r#"{{"intent":"commit","node":null,"ops":{bad},"transactional_id":"x"}}"#);
            let value: Value = serde_json::from_str(&value).unwrap();
            assert!(Body::from_value("txn", OpType::Ok, value).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_value_of_the_wrong_shape_names_its_f() {
        let bad = r#"{"index":0,"time_ns":0,"process":0,"type":"invoke","f":"send","value":[1]}"#;
        let e = serde_json::from_str::<Op>(bad).unwrap_err().to_string();
        assert!(e.contains("send"), "{e}");
        let bad =
            r#"{"index":0,"time_ns":0,"process":0,"type":"invoke","f":"frobnicate","value":{}}"#;
        let e = serde_json::from_str::<Op>(bad).unwrap_err().to_string();
        assert!(e.contains("frobnicate"), "{e}");
    }

    #[test]
    fn every_topic_lives_step_reads_and_writes_back_unchanged() {
        round_trip(
            r#"{"index":0,"time_ns":1,"process":4,"type":"ok","f":"create-topic","value":{"life":2,"node":"b1","topic":"epochal-lives"}}"#,
        );
        let send = round_trip(
            r#"{"index":1,"time_ns":2,"process":4,"type":"ok","f":"life-send","value":{"life":2,"node":"b2","offset":0,"topic":"epochal-lives","value":800001}}"#,
        );
        assert_eq!(
            send.life().map(|l| (l.step, l.value)),
            Some((LifeStep::Send, Some(800001)))
        );
        round_trip(
            r#"{"index":2,"time_ns":3,"process":4,"type":"ok","f":"life-read","value":{"high_watermark":1,"life":2,"node":"b2","records":[[0,800001]],"topic":"epochal-lives"}}"#,
        );
        round_trip(
            r#"{"index":3,"time_ns":4,"process":4,"type":"fail","f":"delete-topic","value":{"life":2,"node":null,"topic":"epochal-lives"},"error":"no node answered"}"#,
        );
    }

    #[test]
    fn a_body_error_keeps_what_serde_said_as_its_source() {
        use std::error::Error as _;
        let e = Body::from_value("send", OpType::Invoke, serde_json::json!([1])).unwrap_err();
        assert!(
            matches!(&e, BodyError::Shape { f, kind: OpType::Invoke, .. } if f == "send"),
            "{e:?}"
        );
        let source = e.source().expect("serde's error is the source").to_string();
        // The message is lowercased whole, as the history reader has always
        // printed it.
        assert_eq!(
            e.to_string(),
            format!("send invoke value: {source}").to_lowercase()
        );
        let e = Body::from_value("frobnicate", OpType::Invoke, serde_json::json!({})).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"f "frobnicate" is neither send, poll, commit, committed, rebalance, client-crash, txn, stable-offsets, a topic-lives step nor a fault verb"#
        );
    }

    #[test]
    fn a_look_reads_and_writes_back_unchanged_and_says_when_a_transaction_is_open() {
        let ok = serde_json::json!({
            "partition": "t-0", "node": "b2", "last_stable_offset": 20, "high_watermark": 57
        });
        let body = Body::from_value("stable-offsets", OpType::Ok, ok.clone()).unwrap();
        assert_eq!(body.f(), "stable-offsets");
        assert_eq!(body.to_value(OpType::Ok), ok);
        let Body::StableOffsets(look) = &body else {
            panic!("{body:?}")
        };
        assert_eq!(look.offsets(), Some((20, 57)));
        assert!(look.unstable());

        // The invoke carries neither offset, and a leaderless look names no node.
        let invoke = serde_json::json!({"partition": "t-1", "node": null});
        let body = Body::from_value("stable-offsets", OpType::Invoke, invoke.clone()).unwrap();
        assert_eq!(body.to_value(OpType::Invoke), invoke);
        let Body::StableOffsets(look) = body else {
            panic!()
        };
        assert_eq!(look.offsets(), None);
        assert!(!look.unstable());
    }
}
