//! The application's history: what the client links' recordings say an
//! `epochal up` user's own application did (reader/app_frames.rs decodes
//! them), as history ops the checkers read like the harness's own. A
//! Produce is a `send` per partition, a Fetch a `poll` per partition that
//! read something, an OffsetCommit a `commit` and an OffsetFetch a
//! `committed` per partition, an OffsetDelete or DeleteGroups a `commit` of
//! -1 marked `deleted` per partition it deleted (app_groups.rs), a
//! JoinGroup and its SyncGroup
//! a `rebalance` (app_members.rs), and a transactional id's transaction —
//! its AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
//! transactional Produce requests up to its EndTxn — one `txn`
//! (app_txns.rs), its records not `send`s; each op runs on a process of the application's (a
//! number, as every client process is, taken from the run's own count so
//! none is shared), one process per request in flight on a connection, and
//! its value carries an `app` object the checkers do not read: the client
//! id, the proxy and its connection id, the correlation id, and what the
//! op's own fields cannot hold (the transactional id, the producer's stamp,
//! the answer's base offset and error, the last stable offset, the records'
//! values when they are not numbers). An op invokes when the proxy passed
//! its request and completes when it passed the answer, on the history's
//! clock, and is merged among the run's ops by that time.
//!
//! What the checkers can rule on. They know a record by its value, as the
//! harness's workload writes them (decimal numbers): a produce whose values
//! are all decimal numbers is a `send` of them, acknowledged at the offsets
//! its answer's base offset gives; a produce of other values is a `send` of
//! no value, its values kept in `app` (`kept_form`: the text, or a hash of
//! each past 64 bytes, with the answer's base offset), and `app-writes`
//! (checker/app_writes.rs) holds each record to its offset and bytes. Reads
//! keep every value, as the harness's polls do. An acks=all write's ack records
//! the leader epoch of the first look at etcd begun after it (the session
//! samples etcd's view while it runs), as the harness's own sends record
//! the look they make just after their ack, and as its ISR the replicas in
//! the ISR of both that look and the one before the ack ([`stamp_isr`]). The application's
//! producers are not marked idempotent in `send` (its values need not be
//! unique, and the duplicates checker would take a repeated value for a
//! duplicate); their stamp is in `app`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::app_op::{AppOp, node_of, origin};
use crate::history::kafka_errors::{Outcome, produce_outcome};
use crate::history::{
    Acked, Body, Isolation, LifeStep, Op, OpType, Poll, PolledRecord, Process, Read, RecordValue,
    Send, kept_form,
};
use crate::node::NodeId;
use crate::observe::ClusterView;
use crate::reader::app_frames::{
    AppFrames, Call, Exchange, Fetch, FetchedPartition, Produce, ProducedPartition,
};
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

/// etcd's view as the session sampled it: (when the read began, on the
/// history's clock; what it saw), in time order.
pub type Samples = Vec<(u64, Arc<ClusterView>)>;

/// What the application did, counted for the closing summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppTally {
    /// Ops merged into the history, per `f` and completion type.
    pub ops: BTreeMap<(String, String), usize>,
    /// Client ids seen, and connections.
    pub clients: BTreeSet<String>,
    pub connections: usize,
    /// Fetch answers that read nothing: no op.
    pub empty_reads: usize,
    /// Sends whose values were not all numbers: no checker judges them.
    pub unjudged_sends: usize,
    /// Frames not decoded: how many, and the first few named.
    pub undecodable: u64,
    pub undecodable_named: Vec<String>,
    /// Frames the proxies dropped (their recorder fell behind).
    pub dropped: u64,
    /// Client links read.
    pub links: usize,
}

impl AppTally {
    /// Ops merged, completions only.
    pub fn completions(&self) -> usize {
        self.ops.values().sum()
    }
}

/// The history lines of `frames`' exchanges, and their tally. `opened_ms`
/// is when the history's clock read zero (wall clock, ms), `until_ns` the
/// end of the recordings read (history clock); `next_process` numbers the
/// application's processes.
pub fn app_lines(
    frames: &AppFrames,
    opened_ms: u64,
    until_ns: u64,
    samples: &Samples,
    next_process: &mut dyn FnMut() -> u64,
) -> (Vec<Value>, AppTally) {
    let clock = |wall_ns: u64| wall_ns.saturating_sub(opened_ms.saturating_mul(1_000_000));
    let mut tally = AppTally {
        undecodable: frames.undecodable_count,
        undecodable_named: frames.undecodable.iter().map(ToString::to_string).collect(),
        dropped: frames.dropped,
        links: frames.links.len(),
        ..AppTally::default()
    };
    let mut connections = BTreeSet::new();
    let mut ops = Vec::new();
    let mut lives = BTreeMap::new();
    let mut txns = super::app_txns::AppTxns::new(until_ns);
    let mut rounds = super::app_members::AppRebalances::new(until_ns);
    // Each group's partitions its commits and reads named so far: what a
    // DeleteGroups deletes.
    let mut known: BTreeMap<String, BTreeSet<PartitionRef>> = BTreeMap::new();
    for exchange in &frames.exchanges {
        connections.insert((exchange.proxy.clone(), exchange.connection));
        tally.clients.extend(exchange.client_id.clone());
        let invoke_ns = clock(exchange.request_ns).min(until_ns);
        let complete_ns = exchange.response_ns.map(clock).map(|t| t.max(invoke_ns));
        match &exchange.call {
            Call::Produce(produce) if produce.transactional_id.is_some() => {
                txns.take(exchange, (invoke_ns, complete_ns));
            }
            Call::Produce(produce) => {
                for p in &produce.partitions {
                    let op = send_op(exchange, produce, p, (invoke_ns, complete_ns), until_ns);
                    if matches!(&op.body, Body::Send(s) if s.values.is_empty()) {
                        tally.unjudged_sends += 1;
                    }
                    ops.push(op);
                }
            }
            Call::Fetch(fetch) => {
                let Some(complete_ns) = complete_ns else {
                    continue;
                };
                for p in &fetch.partitions {
                    match poll_op(exchange, fetch, p, (invoke_ns, complete_ns)) {
                        Some(op) => ops.push(op),
                        None => tally.empty_reads += 1,
                    }
                }
            }
            Call::OffsetCommit(commit) => {
                let group = known.entry(commit.group.clone()).or_default();
                for (topic, partition, ..) in &commit.partitions {
                    group.insert(PartitionRef::new(topic, *partition as u32));
                }
                ops.extend(super::app_groups::commit_ops(
                    exchange,
                    commit,
                    (invoke_ns, complete_ns),
                    until_ns,
                ));
            }
            Call::OffsetDeletion(deletion) => ops.extend(super::app_groups::deletion_ops(
                exchange,
                deletion,
                &known,
                (invoke_ns, complete_ns),
                until_ns,
            )),
            Call::OffsetFetch(fetch) => {
                for (group, topic, partition, ..) in &fetch.answered {
                    let group = known.entry(group.clone()).or_default();
                    group.insert(PartitionRef::new(topic, *partition as u32));
                }
                if let Some(complete_ns) = complete_ns {
                    ops.extend(super::app_groups::committed_ops(
                        exchange,
                        fetch,
                        (invoke_ns, complete_ns),
                    ));
                }
            }
            Call::InitProducerId(_)
            | Call::AddPartitionsToTxn(_)
            | Call::AddOffsetsToTxn(_)
            | Call::TxnOffsetCommit(_)
            | Call::EndTxn(_) => txns.take(exchange, (invoke_ns, complete_ns)),
            Call::JoinGroup(_) | Call::SyncGroup(_) => {
                rounds.take(exchange, (invoke_ns, complete_ns));
            }
            Call::CreateTopics(admin) | Call::DeleteTopics(admin) => {
                let step = match &exchange.call {
                    Call::CreateTopics(_) => LifeStep::Create,
                    _ => LifeStep::Delete,
                };
                ops.extend(super::app_topics::life_ops(
                    exchange,
                    admin,
                    step,
                    (invoke_ns, complete_ns),
                    until_ns,
                    &mut lives,
                ));
            }
        }
    }
    ops.extend(txns.finish());
    ops.extend(rounds.finish());
    tally.connections = connections.len();
    for op in &mut ops {
        stamp_isr(op, samples);
    }
    let lines = on_processes(ops, next_process);
    for line in &lines {
        if line["type"] != "invoke" {
            let key = (
                line["f"].as_str().unwrap_or_default().to_owned(),
                line["type"].as_str().unwrap_or_default().to_owned(),
            );
            *tally.ops.entry(key).or_default() += 1;
        }
    }
    (lines, tally)
}

fn acks_of(acks: i16) -> Acks {
    match acks {
        0 => Acks::None,
        1 => Acks::Leader,
        _ => Acks::All,
    }
}

/// One partition of a Produce as a `send`.
fn send_op(
    exchange: &Exchange,
    produce: &Produce,
    p: &ProducedPartition,
    (invoke_ns, complete_ns): (u64, Option<u64>),
    until_ns: u64,
) -> AppOp {
    let numbers: Option<Vec<i64>> = p
        .values
        .iter()
        .map(|v| RecordValue::from_bytes(v.as_deref()).as_number())
        .collect();
    let judged = numbers.is_some();
    let values = numbers.unwrap_or_default();
    let mut app = origin(exchange);
    app.insert("transactional_id".into(), json!(produce.transactional_id));
    if p.producer_id >= 0 {
        app.insert(
            "producer".into(),
            json!({"id": p.producer_id, "epoch": p.producer_epoch,
                   "base_sequence": p.base_sequence, "transactional": p.transactional}),
        );
    }
    if !judged {
        let shown: Vec<Value> = p.values.iter().map(|v| kept_form(v.as_deref())).collect();
        app.insert("values".into(), Value::Array(shown));
    }
    let mut send = Send {
        partition: PartitionRef::new(&p.topic, p.partition as u32),
        values,
        acks: acks_of(produce.acks),
        node: node_of(&exchange.proxy),
        producer: None,
        acked: None,
        app: None,
    };
    let (kind, complete_ns, error) = match (p.answer, complete_ns) {
        _ if produce.acks == 0 => {
            // Nothing answers acks=0: done once sent, no offsets known.
            send.acked = Some(Acked::default());
            (OpType::Ok, invoke_ns, None)
        }
        (Some((0, base)), Some(at)) => {
            app.insert("base_offset".into(), json!(base));
            let n = if judged { p.values.len() as i64 } else { 0 };
            send.acked = Some(Acked {
                offsets: Some((base..base + n).collect()),
                isr: None,
                leader_epoch: None,
            });
            (OpType::Ok, at, None)
        }
        (Some((code, _)), Some(at)) => {
            app.insert("error_code".into(), json!(code));
            let kind = match produce_outcome(code, produce.acks) {
                Outcome::Definite => OpType::Fail,
                Outcome::Indefinite => OpType::Info,
            };
            (kind, at, Some(format!("the broker answered error {code}")))
        }
        _ => (
            OpType::Info,
            until_ns.max(invoke_ns),
            Some("no answer recorded".to_owned()),
        ),
    };
    AppOp {
        invoke_ns,
        complete_ns,
        connection: (exchange.proxy.clone(), exchange.connection),
        kind,
        body: Body::Send(send),
        asked: None,
        error,
        app: Value::Object(app),
    }
}

/// One partition of an answered Fetch as a `poll`; `None` when it read
/// nothing and met no error.
fn poll_op(
    exchange: &Exchange,
    fetch: &Fetch,
    p: &FetchedPartition,
    (invoke_ns, complete_ns): (u64, u64),
) -> Option<AppOp> {
    let answer = p.answer.as_ref()?;
    if answer.error_code == 0 && answer.records.is_empty() {
        return None;
    }
    let mut app = origin(exchange);
    app.insert(
        "last_stable_offset".into(),
        json!(answer.last_stable_offset),
    );
    if !answer.aborted.is_empty() {
        // What the broker said of the aborted transactions the records
        // span: the consumer dropped their records by it.
        app.insert("aborted_transactions".into(), json!(answer.aborted));
    }
    let mut poll = Poll::new(
        PartitionRef::new(&p.topic, p.partition as u32),
        u64::try_from(p.fetch_offset).unwrap_or(0),
        node_of(&exchange.proxy),
    );
    poll.isolation = (fetch.isolation_level == 1).then_some(Isolation::ReadCommitted);
    let (kind, error) = if answer.error_code == 0 {
        let (records, above): (Vec<_>, Vec<_>) = answer
            .records
            .iter()
            .partition(|r| r.offset < answer.high_watermark);
        poll.read = Some(Read {
            records: records
                .iter()
                .map(|r| PolledRecord(r.offset, RecordValue::from_bytes(r.value.as_deref())))
                .collect(),
            high_watermark: answer.high_watermark,
            leader_epoch: None,
            above_high_watermark: above
                .iter()
                .map(|r| (r.offset, answer.high_watermark))
                .collect(),
        });
        (OpType::Ok, None)
    } else {
        app.insert("error_code".into(), json!(answer.error_code));
        let code = answer.error_code;
        (
            OpType::Fail,
            Some(format!("the broker answered error {code}")),
        )
    };
    Some(AppOp {
        invoke_ns,
        complete_ns,
        connection: (exchange.proxy.clone(), exchange.connection),
        kind,
        body: Body::Poll(poll),
        asked: None,
        error,
        app: Value::Object(app),
    })
}

/// An acknowledged send's ISR and leader epoch. The leader epoch is etcd's
/// from the first look begun after the ack, as the harness's own sends
/// record it. The ISR is the members in the ISR of both that look and the
/// last one begun before the ack: a look begun after the ack may show a
/// replica that joined the ISR only after it (the session looks every
/// [`SAMPLE_EVERY_MS`] ms, not at each ack), and the checkers would hold
/// it to account for a write acknowledged before it was in sync.
fn stamp_isr(op: &mut AppOp, samples: &Samples) {
    let Body::Send(send) = &mut op.body else {
        return;
    };
    let Some(acked) = send.acked.as_mut().filter(|_| op.kind == OpType::Ok) else {
        return;
    };
    if acked.offsets.is_none() {
        return;
    }
    let after = samples.partition_point(|(at, _)| *at < op.complete_ns);
    let Some(state) = samples
        .get(after)
        .and_then(|(_, view)| view.partition(&send.partition))
    else {
        return;
    };
    let mut isr = state.isr.clone();
    if let Some(before) = after
        .checked_sub(1)
        .and_then(|b| samples[b].1.partition(&send.partition))
    {
        isr.retain(|member| before.isr.contains(member));
    }
    acked.isr = Some(NodeId::ids(&isr));
    acked.leader_epoch = Some(state.leader_epoch);
}

/// How often the session looks at etcd while it runs (session/record.rs).
pub const SAMPLE_EVERY_MS: u64 = 100;

/// Puts each op on a process and writes its two lines: per connection, an
/// op takes the lowest-numbered process of the connection that is free when
/// it invokes (one whose op completed no later), else a new one; a process
/// whose op ended `info` is never used again, as Jepsen retires it.
fn on_processes(mut ops: Vec<AppOp>, next_process: &mut dyn FnMut() -> u64) -> Vec<Value> {
    ops.sort_by_key(|op| (op.invoke_ns, op.complete_ns));
    // Per connection: the processes in use (their op's completion), free.
    let mut busy: HashMap<(String, u64), Vec<(u64, u64)>> = HashMap::new();
    let mut free: HashMap<(String, u64), BTreeSet<u64>> = HashMap::new();
    let mut lines = Vec::with_capacity(ops.len() * 2);
    for op in ops {
        let in_use = busy.entry(op.connection.clone()).or_default();
        let idle = free.entry(op.connection.clone()).or_default();
        in_use.retain(|&(done_ns, process)| {
            let done = done_ns <= op.invoke_ns;
            if done {
                idle.insert(process);
            }
            !done
        });
        let process = idle.pop_first().unwrap_or_else(&mut *next_process);
        if op.kind != OpType::Info {
            in_use.push((op.complete_ns, process));
        }
        let mut invoke = to_line(&op, OpType::Invoke, op.invoke_ns, None, process);
        let mut asked = op.app.clone();
        if let Some(asked) = asked.as_object_mut() {
            for answered in ANSWERED {
                asked.remove(answered);
            }
        }
        invoke["value"]["app"] = asked;
        let mut done = to_line(&op, op.kind, op.complete_ns, op.error.clone(), process);
        done["value"]["app"] = op.app.clone();
        lines.push(invoke);
        lines.push(done);
    }
    lines
}

/// What `app` says of the answer, left off the invoke.
const ANSWERED: [&str; 4] = [
    "base_offset",
    "error_code",
    "last_stable_offset",
    "aborted_transactions",
];

/// One history line of `op` (its index is the merge's to give).
fn to_line(op: &AppOp, kind: OpType, time_ns: u64, error: Option<String>, process: u64) -> Value {
    let body = match (&op.asked, kind) {
        (Some(asked), OpType::Invoke) => asked.clone(),
        _ => op.body.clone(),
    };
    let op = Op {
        index: 0,
        time_ns,
        process: Process::Client(process),
        kind,
        body,
        error,
    };
    serde_json::to_value(&op).expect("an op serializes")
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::history::{HistoryWriter, read_history};
    use crate::reader::app_frames::{FetchAnswer, FetchedRecord};

    const MS: u64 = 1_000_000;

    fn produce(connection: u64, at: (u64, Option<u64>), values: &[&str], base: i64) -> Exchange {
        Exchange {
            proxy: "client-b2".into(),
            connection,
            client_id: Some("rdkafka".into()),
            correlation_id: 1,
            request_ns: at.0,
            response_ns: at.1,
            call: Call::Produce(Produce {
                acks: -1,
                transactional_id: None,
                partitions: vec![ProducedPartition {
                    topic: "t".into(),
                    partition: 0,
                    values: values
                        .iter()
                        .map(|v| Some(Bytes::copy_from_slice(v.as_bytes())))
                        .collect(),
                    producer_id: -1,
                    producer_epoch: -1,
                    base_sequence: -1,
                    transactional: false,
                    answer: at.1.map(|_| (0, base)),
                }],
            }),
        }
    }

    fn fetch(at: (u64, u64), from: i64, records: &[(i64, &str)], hw: i64) -> Exchange {
        Exchange {
            proxy: "client-b1".into(),
            connection: 9,
            client_id: Some("rdkafka".into()),
            correlation_id: 2,
            request_ns: at.0,
            response_ns: Some(at.1),
            call: Call::Fetch(Fetch {
                isolation_level: 0,
                partitions: vec![FetchedPartition {
                    topic: "t".into(),
                    topic_id: None,
                    partition: 0,
                    fetch_offset: from,
                    answer: Some(FetchAnswer {
                        error_code: 0,
                        high_watermark: hw,
                        last_stable_offset: hw,
                        aborted: Vec::new(),
                        records: records
                            .iter()
                            .map(|(o, v)| FetchedRecord {
                                offset: *o,
                                value: Some(Bytes::copy_from_slice(v.as_bytes())),
                            })
                            .collect(),
                    }),
                }],
            }),
        }
    }

    #[test]
    fn requests_in_flight_take_processes_of_their_own_and_merge_into_a_valid_history() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let mut writer = HistoryWriter::create(&path).unwrap();
        let opened = writer.opened_unix_ms();
        let wall = |ms: u64| (opened + ms) * MS;
        writer
            .append(
                Process::Nemesis,
                OpType::Invoke,
                Body::from_value("pause", OpType::Invoke, json!({"target": "b2"})).unwrap(),
                None,
            )
            .unwrap();
        let frames = AppFrames {
            exchanges: vec![
                // Two produces in flight at once on one connection, a third
                // after the first was answered, one never answered, and a
                // produce of text values.
                produce(1, (wall(1), Some(wall(5))), &["10", "11"], 0),
                produce(1, (wall(2), Some(wall(6))), &["12"], 2),
                produce(1, (wall(5), Some(wall(7))), &["13"], 3),
                produce(1, (wall(8), None), &["14"], 4),
                produce(2, (wall(8), Some(wall(9))), &["hello"], 5),
                // A read: the record past the high watermark is set apart.
                fetch((wall(3), wall(4)), 0, &[(0, "10"), (1, "11"), (2, "12")], 2),
                // A read of nothing: no op.
                fetch((wall(9), wall(10)), 2, &[], 2),
            ],
            links: vec!["client-b1.frames".into(), "client-b2.frames".into()],
            ..AppFrames::default()
        };
        let view = |isr: &[u32], leader_epoch| ClusterView {
            revision: 1,
            controller: None,
            brokers: BTreeSet::new(),
            partitions: [(
                PartitionRef::new("t", 0),
                crate::observe::PartitionView {
                    isr: isr.iter().copied().map(NodeId::new).collect(),
                    leader_epoch,
                    ..Default::default()
                },
            )]
            .into(),
        };
        // b3 leaves the ISR and b1 joins it around the first ack: only b2
        // was in it throughout.
        let samples = vec![
            (MS, Arc::new(view(&[2, 3], 3))),
            (6 * MS, Arc::new(view(&[1, 2], 4))),
        ];
        let mut next = 100;
        let (lines, tally) = app_lines(&frames, opened, 20 * MS, &samples, &mut || {
            next += 1;
            next
        });
        assert_eq!(tally.empty_reads, 1);
        assert_eq!(tally.unjudged_sends, 1);
        assert_eq!(tally.connections, 3);
        assert_eq!(tally.ops[&("send".to_owned(), "ok".to_owned())], 4);
        assert_eq!(tally.ops[&("send".to_owned(), "info".to_owned())], 1);
        assert_eq!(tally.ops[&("poll".to_owned(), "ok".to_owned())], 1);
        assert_eq!(writer.merge(lines).unwrap(), 13);
        let ops = read_history(&path).unwrap();
        // The fault, written first at about 0 ms, stays first.
        assert_eq!(ops[0].process, Process::Nemesis);
        let processes: Vec<_> = ops
            .iter()
            .filter(|op| op.kind == OpType::Invoke && op.f() == "send")
            .map(|op| op.process)
            .collect();
        // The third produce reuses the first's process (answered as it
        // went), the unanswered one too; the read and the other connection
        // take their own.
        assert_eq!(
            processes,
            [101, 102, 101, 104, 101].map(Process::Client).to_vec()
        );
        let (send, acked) = ops.iter().find_map(Op::acked_send).unwrap();
        assert_eq!(send.values, [10, 11]);
        assert_eq!(acked.offsets.as_deref(), Some(&[0, 1][..]));
        // The first look at etcd after the ack (at 5 ms) began at 6 ms: its
        // leader epoch, and the ISR members it shares with the look before.
        assert_eq!(
            (acked.isr.as_deref(), acked.leader_epoch),
            (Some(&[2][..]), Some(4))
        );
        let (_, read) = ops.iter().find_map(Op::read).unwrap();
        assert_eq!(read.records.len(), 2);
        assert_eq!(read.above_high_watermark, [(2, 2)]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""values":["hello"]"#), "{text}");
        assert!(text.contains(r#""client_id":"rdkafka""#), "{text}");
    }

    /// A real client's recording (tests/fixtures/app-txn: three
    /// transactions of confluent-kafka's producer, the second aborted, and
    /// a read_committed consumer of group app-txn-readers) as history lines.
    #[test]
    fn a_real_clients_recording_makes_its_transactions_and_its_round() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/app-txn");
        let frames = crate::reader::app_frames::read_app_frames(&dir, u64::MAX, None).unwrap();
        let mut next = 0;
        let (lines, tally) = app_lines(&frames, 0, u64::MAX / 2, &Vec::new(), &mut || {
            next += 1;
            next
        });
        let done = |f: &str, kind: &str| {
            lines
                .iter()
                .filter(|l| l["f"] == f && l["type"] == kind)
                .collect::<Vec<_>>()
        };
        // No transactional record is a plain send.
        assert!(done("send", "ok").is_empty(), "{tally:?}");
        let txns = done("txn", "ok");
        let ended: Vec<(&str, usize)> = txns
            .iter()
            .map(|t| {
                let ops = t["value"]["ops"].as_array().unwrap();
                assert!(ops.iter().all(|op| op[3].is_i64()), "{t}");
                (t["value"]["intent"].as_str().unwrap(), ops.len())
            })
            .collect();
        assert_eq!(ended, [("commit", 3), ("abort", 3), ("commit", 3)]);
        let [round] = &done("rebalance", "ok")[..] else {
            panic!("{tally:?}")
        };
        let round = &round["value"];
        assert_eq!(round["group"], "app-txn-readers");
        assert_eq!(round["topics"], json!(["t"]));
        assert_eq!(round["partitions"], json!(["t-0"]));
        assert_eq!(round["leader"], round["member"]);
        assert_eq!(
            (&round["generation"], &round["members"]),
            (&json!(1), &json!(1))
        );
        assert_eq!(round["app"]["protocol"], "range");
        // The first join, refused for a member id (KIP-394), fails.
        let refused = done("rebalance", "fail");
        assert!(
            refused
                .iter()
                .all(|r| r["error"] == "JoinGroup answered error 79"),
            "{refused:?}"
        );
        let polls = done("poll", "ok");
        assert!(
            polls
                .iter()
                .all(|p| p["value"]["isolation"] == "read_committed"),
            "{polls:?}"
        );
        // The answer listed the aborted transaction; the poll holds none of
        // its values, as the consumer read none.
        let read: Vec<i64> = polls
            .iter()
            .flat_map(|p| p["value"]["records"].as_array().unwrap().clone())
            .map(|r| r[1].as_i64().unwrap())
            .collect();
        assert_eq!(read, [1000, 1001, 1002, 1020, 1021, 1022]);
        assert!(
            polls
                .iter()
                .any(|p| p["value"]["app"]["aborted_transactions"]
                    .as_array()
                    .is_some_and(|a| a.len() == 1)),
            "{polls:?}"
        );
    }
}
