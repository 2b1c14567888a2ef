//! The application's transactions as history ops (app.rs has the rest): a
//! transactional id's requests, in the order the proxies passed them, are
//! strung into one `txn` op per transaction (history/txn_op.rs), as the
//! harness's own transactional producer writes them, so the transaction
//! checkers (checker/transactions.rs and the run index's txn_index.rs)
//! rule on the application's transactions as on the harness's.
//!
//! A transaction begins with the first AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit or transactional Produce of its transactional id after
//! the last one ended, and invokes when the proxy passed that request. Its
//! micro-ops are its Produce requests' records, one `send` per record whose
//! value is a decimal number (retries of a batch, known by their sequence
//! numbers, count once; other values are counted in `app`, unjudged), each
//! with the offset the answer gave it; its `group` and `offsets` are what
//! TxnOffsetCommit sent and the coordinator accepted (KIP-447). It ends
//! with EndTxn: `ok` once an EndTxn is answered without error, its intent
//! commit or abort by that request's flag, `commit_ns` when the first
//! EndTxn was passed, and `node` the coordinator the EndTxn went to. An
//! EndTxn answered with an error may be retried (Kafka's clients retry
//! CONCURRENT_TRANSACTIONS and a moved coordinator) or followed by an
//! abort; a transaction whose last EndTxn went unanswered or answered an
//! error, that a new InitProducerId or a next transaction ended before
//! then, or that no EndTxn ended, may or may not have committed: `info`,
//! completed at the end of the recordings.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::app_op::{AppOp, node_of, origin};
use crate::history::{Body, Intent, MicroOp, OpType, RecordValue, Txn, TxnProducer, TxnSend};
use crate::reader::app_frames::{Call, EndTxn, Exchange, Produce};
use crate::topic_partition::PartitionRef;

/// A transaction being strung together.
struct Building {
    invoke_ns: u64,
    app: Map<String, Value>,
    producer: Option<TxnProducer>,
    ops: Vec<MicroOp>,
    /// (partition, sequence) → its place in `ops`: a retried batch's
    /// records count once.
    sequenced: HashMap<(PartitionRef, i32), usize>,
    unjudged: usize,
    group: Option<String>,
    offsets: BTreeMap<PartitionRef, i64>,
    /// Once an EndTxn was passed: its flag, when the first was passed,
    /// the coordinator, and the last one's error (`None`: unanswered).
    end: Option<(Intent, u64, Option<crate::node::NodeId>, Option<i16>)>,
}

/// Every transactional id's transactions, as their requests come.
pub(super) struct AppTxns {
    /// The end of the recordings read (history clock).
    until_ns: u64,
    open: BTreeMap<String, Building>,
    /// The stamp each transactional id's last InitProducerId gave.
    producers: HashMap<String, TxnProducer>,
    done: Vec<AppOp>,
}

impl AppTxns {
    pub fn new(until_ns: u64) -> AppTxns {
        AppTxns {
            until_ns,
            open: BTreeMap::new(),
            producers: HashMap::new(),
            done: Vec::new(),
        }
    }

    /// Takes one exchange of the transaction APIs or a transactional
    /// Produce; anything else passes.
    pub fn take(&mut self, exchange: &Exchange, (invoke_ns, complete_ns): (u64, Option<u64>)) {
        match &exchange.call {
            Call::InitProducerId(init) => {
                let Some(id) = &init.transactional_id else {
                    return;
                };
                // A new incarnation: the coordinator ends whatever the last
                // one left open.
                self.close_info(id, "a new InitProducerId began before it ended");
                if let Some((0, stamp)) = init.answer {
                    let stamp = TxnProducer {
                        id: stamp.id,
                        epoch: stamp.epoch,
                    };
                    self.producers.insert(id.clone(), stamp);
                }
            }
            Call::AddPartitionsToTxn(add) => {
                self.building(&add.transactional_id, exchange, invoke_ns);
            }
            Call::AddOffsetsToTxn(add) => {
                let txn = self.building(&add.transactional_id, exchange, invoke_ns);
                txn.group = Some(add.group.clone());
            }
            Call::TxnOffsetCommit(commit) => {
                let txn = self.building(&commit.transactional_id, exchange, invoke_ns);
                txn.group = Some(commit.group.clone());
                for (topic, partition, offset, _) in
                    commit.partitions.iter().filter(|p| p.3 == Some(0))
                {
                    txn.offsets
                        .insert(PartitionRef::new(topic, *partition as u32), *offset);
                }
            }
            Call::Produce(produce) => {
                if let Some(id) = &produce.transactional_id {
                    let txn = self.building(id, exchange, invoke_ns);
                    add_sends(txn, produce);
                }
            }
            Call::EndTxn(end) => self.end(exchange, end, (invoke_ns, complete_ns)),
            _ => {}
        }
    }

    /// The open transaction of `id`, begun now if none is (or the open one
    /// already sent its EndTxn: the application moved on).
    fn building(&mut self, id: &str, exchange: &Exchange, invoke_ns: u64) -> &mut Building {
        if self.open.get(id).is_some_and(|t| t.end.is_some()) {
            self.close_info(id, "a next transaction began before an EndTxn was answered");
        }
        let producer = self.producers.get(id).copied();
        self.open.entry(id.to_owned()).or_insert_with(|| Building {
            invoke_ns,
            app: origin(exchange),
            producer,
            ops: Vec::new(),
            sequenced: HashMap::new(),
            unjudged: 0,
            group: None,
            offsets: BTreeMap::new(),
            end: None,
        })
    }

    /// An EndTxn: the transaction ends `ok` once one is answered without
    /// error; until then it stays open, as its client may retry.
    fn end(
        &mut self,
        exchange: &Exchange,
        end: &EndTxn,
        (invoke_ns, complete_ns): (u64, Option<u64>),
    ) {
        let id = &end.transactional_id;
        let Some(txn) = self.open.get_mut(id) else {
            // Nothing was begun: nothing to judge.
            return;
        };
        let intent = if end.committed {
            Intent::Commit
        } else {
            Intent::Abort
        };
        let first_ns = txn.end.map_or(invoke_ns, |(_, first, _, _)| first);
        txn.end = Some((intent, first_ns, node_of(&exchange.proxy), end.error_code));
        if let (Some(0), Some(at)) = (end.error_code, complete_ns) {
            let txn = self.open.remove(id).expect("just looked");
            self.done.push(finish(id, txn, Ok(at)));
        }
    }

    /// Ends `id`'s open transaction, if any, as `info`: `why`, and what
    /// its last EndTxn said.
    fn close_info(&mut self, id: &str, why: &str) {
        let Some(txn) = self.open.remove(id) else {
            return;
        };
        let why = match txn.end {
            None => format!("{why}; no EndTxn was recorded"),
            Some((_, _, _, None)) => format!("{why}; its EndTxn was never answered"),
            Some((_, _, _, Some(code))) => format!("{why}; its EndTxn answered error {code}"),
        };
        let until_ns = self.until_ns;
        self.done.push(finish(id, txn, Err((until_ns, why))));
    }

    /// Every transaction's op; those still open end `info` at the end of
    /// the recordings.
    pub fn finish(mut self) -> Vec<AppOp> {
        let open: Vec<String> = self.open.keys().cloned().collect();
        for id in open {
            self.close_info(&id, "the recordings ended");
        }
        self.done
    }
}

/// The records of a transactional Produce as the transaction's sends.
fn add_sends(txn: &mut Building, produce: &Produce) {
    for p in &produce.partitions {
        let partition = PartitionRef::new(&p.topic, p.partition as u32);
        for (i, value) in p.values.iter().enumerate() {
            let Some(value) = RecordValue::from_bytes(value.as_deref()).as_number() else {
                txn.unjudged += 1;
                continue;
            };
            let offset = match p.answer {
                Some((0, base)) => Some(Some(base + i as i64)),
                Some(_) => Some(None),
                None => None,
            };
            let send = TxnSend {
                partition: partition.clone(),
                value,
                offset,
            };
            let key = (partition.clone(), p.base_sequence.wrapping_add(i as i32));
            match txn.sequenced.get(&key) {
                // A retry: its answer stands if the first had none.
                Some(&at) => {
                    if let MicroOp::Send(first) = &mut txn.ops[at]
                        && first.acked_offset().is_none()
                        && send.acked_offset().is_some()
                    {
                        *first = send;
                    }
                }
                None => {
                    txn.sequenced.insert(key, txn.ops.len());
                    txn.ops.push(MicroOp::Send(send));
                }
            }
        }
    }
}

/// The op of `txn`: `ok` at the time an EndTxn was answered, else `info`
/// at the end of the recordings, with why.
fn finish(id: &str, txn: Building, ended: Result<u64, (u64, String)>) -> AppOp {
    let answered_ns = ended.as_ref().ok().copied();
    let (intent, commit_ns, node, _) = txn.end.unwrap_or((Intent::Commit, 0, None, None));
    let body = Txn {
        transactional_id: id.to_owned(),
        intent,
        ops: txn.ops,
        node,
        group: txn.group,
        offsets: if answered_ns.is_some() {
            txn.offsets
        } else {
            BTreeMap::new()
        },
        producer: txn.producer,
        commit_ns: txn.end.map(|_| commit_ns),
    };
    let mut asked = body.clone();
    asked.offsets = BTreeMap::new();
    asked.commit_ns = None;
    for op in &mut asked.ops {
        if let MicroOp::Send(send) = op {
            send.offset = None;
        }
    }
    let mut app = txn.app;
    if txn.unjudged > 0 {
        app.insert("unjudged_values".into(), json!(txn.unjudged));
    }
    let (kind, complete_ns, error) = match ended {
        Ok(at) => (OpType::Ok, at, None),
        Err((until_ns, why)) => (OpType::Info, until_ns.max(txn.invoke_ns), Some(why)),
    };
    AppOp {
        invoke_ns: txn.invoke_ns,
        complete_ns,
        connection: (format!("txn {id}"), 0),
        kind,
        body: Body::Txn(body),
        asked: Some(Body::Txn(asked)),
        error,
        app: Value::Object(app),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::reader::app_frames::{AddPartitions, ProducedPartition, Stamp, TxnOffsetCommit};

    const STAMP: Stamp = Stamp { id: 5, epoch: 0 };

    fn at(call: Call, request_ns: u64, response_ns: Option<u64>) -> Exchange {
        Exchange {
            proxy: "client-b2".into(),
            connection: 1,
            client_id: Some("app".into()),
            correlation_id: 1,
            request_ns,
            response_ns,
            call,
        }
    }

    fn add(id: &str) -> Call {
        Call::AddPartitionsToTxn(AddPartitions {
            transactional_id: id.into(),
            producer: STAMP,
            partitions: vec![("t".into(), 0, Some(0))],
        })
    }

    fn produce(id: &str, values: &[&str], sequence: i32, answer: Option<(i16, i64)>) -> Call {
        Call::Produce(Produce {
            acks: -1,
            transactional_id: Some(id.into()),
            partitions: vec![ProducedPartition {
                topic: "t".into(),
                partition: 0,
                values: values
                    .iter()
                    .map(|v| Some(Bytes::copy_from_slice(v.as_bytes())))
                    .collect(),
                producer_id: STAMP.id,
                producer_epoch: STAMP.epoch,
                base_sequence: sequence,
                transactional: true,
                answer,
            }],
        })
    }

    fn end(id: &str, committed: bool, error_code: Option<i16>) -> Call {
        Call::EndTxn(EndTxn {
            transactional_id: id.into(),
            producer: STAMP,
            committed,
            error_code,
        })
    }

    /// The exchanges' ops, each exchange's times as given (ns).
    fn ops(exchanges: &[Exchange]) -> Vec<AppOp> {
        let mut txns = AppTxns::new(1_000);
        for e in exchanges {
            txns.take(e, (e.request_ns, e.response_ns));
        }
        txns.finish()
    }

    fn txn(op: &AppOp) -> &Txn {
        let Body::Txn(txn) = &op.body else {
            panic!("not a txn")
        };
        txn
    }

    #[test]
    fn a_retried_end_and_a_retried_batch_make_one_transaction_each_and_the_rest_is_info() {
        let offsets = TxnOffsetCommit {
            transactional_id: "a".into(),
            producer: STAMP,
            group: "g".into(),
            generation: 3,
            partitions: vec![("in".into(), 0, 43, Some(0)), ("in".into(), 1, 9, Some(16))],
        };
        let exchanges = [
            at(add("a"), 10, Some(11)),
            // A batch sent twice (its first answer lost), and a text value.
            at(produce("a", &["1", "2", "x"], 0, None), 12, None),
            at(
                produce("a", &["1", "2", "x"], 0, Some((0, 40))),
                13,
                Some(14),
            ),
            at(Call::TxnOffsetCommit(offsets), 15, Some(16)),
            // CONCURRENT_TRANSACTIONS, retried; then answered.
            at(end("a", true, Some(51)), 20, Some(21)),
            at(end("a", true, Some(0)), 22, Some(23)),
            // An abort that answered, and one of another id never answered.
            at(add("a"), 30, Some(31)),
            at(produce("a", &["3"], 3, Some((0, 44))), 32, Some(33)),
            at(end("a", false, Some(0)), 34, Some(35)),
            at(add("b"), 40, Some(41)),
            at(produce("b", &["4"], 0, Some((0, 46))), 42, Some(43)),
            at(end("b", true, None), 44, None),
        ];
        let ops = ops(&exchanges);
        let [committed, aborted, open] = &ops[..] else {
            panic!("{} ops", ops.len())
        };
        assert_eq!(
            (committed.kind, committed.invoke_ns, committed.complete_ns),
            (OpType::Ok, 10, 23)
        );
        let first = txn(committed);
        assert_eq!((first.intent, first.commit_ns), (Intent::Commit, Some(20)));
        let sent: Vec<(i64, Option<i64>)> =
            first.sends().map(|s| (s.value, s.acked_offset())).collect();
        assert_eq!(sent, [(1, Some(40)), (2, Some(41))]);
        assert_eq!(committed.app["unjudged_values"], 2);
        assert_eq!(first.group.as_deref(), Some("g"));
        assert_eq!(
            first.offsets.iter().collect::<Vec<_>>(),
            [(&PartitionRef::new("in", 0), &43)]
        );
        let Some(Body::Txn(asked)) = &committed.asked else {
            panic!("no invoke body")
        };
        assert!(asked.offsets.is_empty() && asked.commit_ns.is_none());
        assert!(asked.sends().all(|s| s.offset.is_none()));
        assert_eq!(
            (aborted.kind, txn(aborted).intent),
            (OpType::Ok, Intent::Abort)
        );
        assert_eq!((open.kind, open.complete_ns), (OpType::Info, 1_000));
        assert!(
            open.error.as_deref().unwrap().contains("never answered"),
            "{:?}",
            open.error
        );
        assert!(txn(open).offsets.is_empty());
    }

    #[test]
    fn a_transaction_a_new_producer_or_a_next_transaction_cuts_short_is_info() {
        let init = |at_ns| {
            at(
                Call::InitProducerId(crate::reader::app_frames::InitProducerId {
                    transactional_id: Some("a".into()),
                    answer: Some((0, STAMP)),
                }),
                at_ns,
                Some(at_ns + 1),
            )
        };
        let exchanges = [
            init(1),
            at(add("a"), 10, Some(11)),
            // The producer restarted mid-transaction.
            init(12),
            at(add("a"), 20, Some(21)),
            // Its EndTxn failed; it moved on.
            at(end("a", true, Some(47)), 22, Some(23)),
            at(add("a"), 30, Some(31)),
            at(end("a", true, Some(0)), 32, Some(33)),
        ];
        let ops = ops(&exchanges);
        let kinds: Vec<(OpType, Option<TxnProducer>)> =
            ops.iter().map(|op| (op.kind, txn(op).producer)).collect();
        let stamp = Some(TxnProducer { id: 5, epoch: 0 });
        assert_eq!(
            kinds,
            [
                (OpType::Info, stamp),
                (OpType::Info, stamp),
                (OpType::Ok, stamp)
            ]
        );
        assert!(ops[1].error.as_deref().unwrap().contains("error 47"));
    }
}
