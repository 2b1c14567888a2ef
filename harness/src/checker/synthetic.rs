//! A synthetic run, built in memory: the checkers' input shaped like a run
//! with background load (producers and consumers over a few partitions,
//! acks=all, a crash or a power loss of a partition's leader now and then)
//! without a cluster, so tests and the checker bench share one generator and
//! can make it as large as they like. It owns nothing on disk and must never
//! produce a run the checkers would skip: every checker is valid on it, and
//! [`SyntheticSpec::drop_acked_value`] makes lost-write invalid.
//!
//! The model is deliberately simple where the checkers do not look: every
//! replica is in sync when a client op completes (a fault fires only between
//! ops, and the node it hits is back before the next op), so each replica's
//! final log is the partition's log, batch for batch.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::history::{
    Acked, Body, Op, OpType, Poll, PolledRecord, Process, Read, RecordValue, Send,
};
use crate::node::NodeId;
use crate::observe::timeline::{ControllerChange, PartitionStateChange, Timeline};
use crate::reader::frames::Fetches;
use crate::reader::state_change::StateChange;
use crate::reader::{
    Batch, Codec, DataDirState, EpochEntry, OffsetEntry, Payload, Record, ReplicaState, Segment,
};
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

use super::RunData;

mod faults;
mod subscribers;
mod transactions;
mod txn_ops;

use subscribers::NO_VALUE;

pub use transactions::TXN_PRODUCER_ID_BASE;

/// What to generate. [`SyntheticSpec::with_ops`] gives the shape the bench
/// and the tests use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticSpec {
    /// History ops to write (a few more when the last ops in flight finish).
    pub ops: usize,
    pub topic: String,
    pub partitions: u32,
    /// Brokers; each holds a replica of every partition.
    pub brokers: u32,
    pub producers: u64,
    pub consumers: u64,
    pub values_per_send: usize,
    /// Records one poll returns at most, as the workload's bounded polls do.
    pub poll_records_max: usize,
    /// Crashes and power losses of a partition's leader, spread evenly over
    /// the history; the middle one is a power loss.
    pub faults: usize,
    /// Every n-th send ends `info` (a timeout), half of them appended anyway;
    /// 0: none do.
    pub info_send_every: u64,
    /// A new segment starts after this many records, so replicas have several.
    pub segment_records_max: usize,
    /// Seeds the choice of which client acts next.
    pub seed: u64,
    /// Remove one acknowledged value from every replica: a lost write, for
    /// the test that the checkers do not skip what this generates.
    pub drop_acked_value: bool,
    /// Consumers subscribed as one group, each assigned one partition
    /// (subscribers.rs), committing after each poll.
    pub subscribers: u64,
    /// End with a final read of every partition from offset 0.
    pub final_read: bool,
    /// Transactional producers ([transactions], transactions.rs): each runs
    /// `txn` ops of two sends and a read_committed poll, committed or
    /// aborted; with any, every other plain consumer reads committed.
    pub transactors: u64,
    /// Every n-th transaction aborts (0: none do).
    pub txn_abort_every: u64,
}

impl SyntheticSpec {
    /// Three brokers, three partitions, six producers sending three values
    /// each and two consumers, six faults: about `ops` history ops and one
    /// record a replica per op.
    pub fn with_ops(ops: usize) -> SyntheticSpec {
        SyntheticSpec {
            ops,
            topic: "t".into(),
            partitions: 3,
            brokers: 3,
            producers: 6,
            consumers: 2,
            values_per_send: 3,
            poll_records_max: 64,
            faults: 6,
            info_send_every: 101,
            segment_records_max: 100_000,
            seed: 1,
            drop_acked_value: false,
            subscribers: 2,
            final_read: true,
            transactors: 0,
            txn_abort_every: 4,
        }
    }

    /// [`SyntheticSpec::with_ops`] with three transactional producers: about
    /// a fifth of the ops are `txn` ops (a million ops hold about 100 000
    /// transactions), every fourth aborted.
    pub fn with_transactions(ops: usize) -> SyntheticSpec {
        SyntheticSpec {
            transactors: 3,
            ..SyntheticSpec::with_ops(ops)
        }
    }
}

/// The first value sent; values count up from here, each sent once.
pub const FIRST_VALUE: i64 = 1_000_000;

/// Builds the run `spec` describes: a valid history, every broker's replicas
/// holding exactly what was appended, state-change logs and etcd's timeline.
pub fn synthetic_run(spec: &SyntheticSpec) -> RunData {
    assert!(
        spec.brokers >= 2
            && spec.partitions >= 1
            && spec.producers + spec.consumers + spec.subscribers + spec.transactors >= 1,
        "a synthetic run needs two brokers, a partition and a client: {spec:?}"
    );
    let mut g = Generator::new(spec);
    while g.history.len() < spec.ops {
        if g.faults_fired < spec.faults && g.history.len() >= g.fault_at(g.faults_fired) {
            g.drain();
            g.fault(g.faults_fired);
            g.faults_fired += 1;
            continue;
        }
        let slot = g.rng.below(g.clients.len() as u64) as usize;
        if g.clients[slot].pending.is_some() {
            g.complete(slot);
        } else {
            g.invoke(slot);
        }
    }
    g.drain();
    if spec.final_read {
        g.final_reads();
    }
    g.finish()
}

/// What a batch appended holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchKind {
    Plain,
    /// A transaction's data (KIP-98).
    Transactional {
        producer_id: i64,
    },
    /// The marker that ends `producer_id`'s transaction on the partition.
    Marker {
        producer_id: i64,
        commit: bool,
    },
}

/// splitmix64: enough randomness to interleave clients, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Producer,
    /// Index into `Generator::positions`.
    Consumer(usize),
    /// Index into `Generator::subscribers`.
    Subscriber(usize),
    /// Index into the transactors (transactions.rs).
    Transactor(usize),
}

struct Client {
    process: u64,
    role: Role,
    /// The invoke in flight, to repeat in its completion.
    pending: Option<Body>,
}

/// One partition as the cluster holds it: the log every replica shares.
struct PartitionLog {
    partition: PartitionRef,
    leader: NodeId,
    leader_epoch: i32,
    isr: Vec<NodeId>,
    /// Value at each offset (offsets start at 0 and are contiguous);
    /// [`NO_VALUE`] at a transaction marker's.
    values: Vec<i64>,
    segments: Vec<Segment>,
    segment_records: usize,
    epochs: Vec<EpochEntry>,
}

impl PartitionLog {
    fn log_end_offset(&self) -> i64 {
        self.values.len() as i64
    }
}

/// What the subscribers see of each partition.
fn views(logs: &[PartitionLog]) -> Vec<subscribers::LogView<'_>> {
    logs.iter()
        .map(|log| subscribers::LogView {
            partition: &log.partition,
            leader: log.leader,
            leader_epoch: log.leader_epoch,
            values: &log.values,
        })
        .collect()
}

struct Generator<'a> {
    spec: &'a SyntheticSpec,
    rng: Rng,
    history: Vec<Op>,
    clients: Vec<Client>,
    next_process: u64,
    /// Per consumer, per partition: the next offset to poll from.
    positions: Vec<Vec<u64>>,
    /// Per consumer: the partition it polls next.
    next_partition: Vec<u32>,
    subscribers: subscribers::Subscribers,
    transactors: transactions::Transactors,
    next_value: i64,
    sends_completed: u64,
    faults_fired: usize,
    logs: Vec<PartitionLog>,
    brokers: Vec<NodeId>,
    controller: NodeId,
    controller_epoch: i32,
    revision: i64,
    timeline: Timeline,
    state_changes: BTreeMap<NodeId, Vec<StateChange>>,
    /// The followers' fetches a proxy would have recorded: each ISR member
    /// fetching past a write before it is acknowledged.
    fetches: Fetches,
}

impl<'a> Generator<'a> {
    fn new(spec: &'a SyntheticSpec) -> Generator<'a> {
        let brokers: Vec<NodeId> = NodeId::all(spec.brokers).collect();
        let mut clients: Vec<Client> = (0..spec.producers)
            .map(|p| Client {
                process: p,
                role: Role::Producer,
                pending: None,
            })
            .collect();
        clients.extend((0..spec.consumers).map(|c| Client {
            process: spec.producers + c,
            role: Role::Consumer(c as usize),
            pending: None,
        }));
        clients.extend((0..spec.subscribers).map(|s| Client {
            process: spec.producers + spec.consumers + s,
            role: Role::Subscriber(s as usize),
            pending: None,
        }));
        clients.extend((0..spec.transactors).map(|t| Client {
            process: spec.producers + spec.consumers + spec.subscribers + t,
            role: Role::Transactor(t as usize),
            pending: None,
        }));
        let logs = (0..spec.partitions)
            .map(|p| PartitionLog {
                partition: PartitionRef::new(&spec.topic, p),
                leader: brokers[p as usize % brokers.len()],
                leader_epoch: 0,
                isr: brokers.clone(),
                values: Vec::new(),
                segments: Vec::new(),
                segment_records: 0,
                epochs: Vec::new(),
            })
            .collect();
        let mut g = Generator {
            spec,
            rng: Rng(spec.seed),
            history: Vec::with_capacity(spec.ops + 64),
            next_process: spec.producers + spec.consumers + spec.subscribers + spec.transactors,
            subscribers: subscribers::Subscribers::new(
                spec.subscribers,
                spec.partitions,
                spec.poll_records_max,
            ),
            transactors: transactions::Transactors::new(
                spec.transactors,
                spec.partitions,
                spec.txn_abort_every,
            ),
            positions: vec![vec![0; spec.partitions as usize]; spec.consumers as usize],
            next_partition: (0..spec.consumers)
                .map(|c| (c % u64::from(spec.partitions)) as u32)
                .collect(),
            clients,
            next_value: FIRST_VALUE,
            sends_completed: 0,
            faults_fired: 0,
            logs,
            controller: brokers[0],
            controller_epoch: 1,
            revision: 1,
            timeline: Timeline::default(),
            state_changes: brokers.iter().map(|&b| (b, Vec::new())).collect(),
            fetches: Fetches::default(),
            brokers,
        };
        g.revision += 1;
        g.timeline.controllers.push(ControllerChange {
            revision: g.revision,
            broker_id: Some(g.controller.broker_id()),
            epoch: Some(g.controller_epoch),
        });
        let everyone = g.brokers.clone();
        for p in 0..g.logs.len() {
            g.publish(p, &everyone);
        }
        g
    }

    /// When fault `k` fires: evenly spaced, none at the very start or end.
    fn fault_at(&self, k: usize) -> usize {
        (k + 1) * self.spec.ops / (self.spec.faults + 1)
    }

    fn push(&mut self, process: Process, kind: OpType, body: Body, error: Option<String>) {
        let index = self.history.len() as u64;
        self.history.push(Op {
            index,
            // 50 µs an op: about the rate the issue asks the workload for.
            time_ns: index * 50_000,
            process,
            kind,
            body,
            error,
        });
    }

    fn invoke(&mut self, slot: usize) {
        let (role, process) = (self.clients[slot].role, self.clients[slot].process);
        let body = match role {
            Role::Producer => {
                let p = self.rng.below(u64::from(self.spec.partitions)) as usize;
                let values: Vec<i64> = (0..self.spec.values_per_send as i64)
                    .map(|i| self.next_value + i)
                    .collect();
                self.next_value += values.len() as i64;
                Body::Send(Send {
                    partition: self.logs[p].partition.clone(),
                    values,
                    acks: Acks::All,
                    node: Some(self.logs[p].leader),
                    producer: None,
                    acked: None,
                    app: None,
                })
            }
            Role::Subscriber(s) => self.subscribers.invoke(s, &self.views()),
            Role::Transactor(t) => self.txn_invoke(t),
            Role::Consumer(c) => {
                let p = self.next_partition[c] as usize;
                self.next_partition[c] = (self.next_partition[c] + 1) % self.spec.partitions;
                let mut poll = Poll::new(
                    self.logs[p].partition.clone(),
                    self.positions[c][p],
                    Some(self.logs[p].leader),
                );
                if self.reads_committed(c) {
                    poll.isolation = Some(crate::history::Isolation::ReadCommitted);
                }
                Body::Poll(poll)
            }
        };
        let process = Process::Client(process);
        self.clients[slot].pending = Some(body.clone());
        self.push(process, OpType::Invoke, body, None);
    }

    fn complete(&mut self, slot: usize) {
        let Some(body) = self.clients[slot].pending.take() else {
            return;
        };
        let process = Process::Client(self.clients[slot].process);
        if let Role::Subscriber(s) = self.clients[slot].role {
            let done = self.subscribers.complete(s, body, &views(&self.logs));
            self.push(process, OpType::Ok, done, None);
            return;
        }
        if let Role::Transactor(t) = self.clients[slot].role {
            let done = self.txn_complete(t);
            self.push(process, OpType::Ok, done, None);
            return;
        }
        match body {
            Body::Send(mut send) => {
                let p = send.partition.partition as usize;
                self.sends_completed += 1;
                let every = self.spec.info_send_every;
                if every > 0 && self.sends_completed.is_multiple_of(every) {
                    // A timeout after the leader appended, or before: the
                    // client cannot tell, and neither may the checkers.
                    if (self.sends_completed / every).is_multiple_of(2) {
                        self.append(p, &send.values);
                    }
                    self.push(
                        process,
                        OpType::Info,
                        Body::Send(send),
                        Some("REQUEST_TIMED_OUT".into()),
                    );
                    // Jepsen's rule: a process whose op ended info never
                    // invokes again; its worker goes on as a new process.
                    self.clients[slot].process = self.next_process;
                    self.next_process += 1;
                    return;
                }
                let offsets = self.append(p, &send.values);
                let log = &self.logs[p];
                // The ack's time, on the history's clock opened at 0.
                let now = self.history.len() as u64 * 50_000;
                for member in log.isr.iter().filter(|&&m| Some(m) != send.node) {
                    self.fetches
                        .by_replica
                        .entry((member.broker_id(), log.partition.topic.clone(), p as i32))
                        .or_default()
                        .push((now, offsets.last().map_or(0, |o| o + 1)));
                }
                send.acked = Some(Acked {
                    offsets: Some(offsets),
                    isr: Some(log.isr.iter().map(|n| n.id()).collect()),
                    leader_epoch: Some(log.leader_epoch),
                });
                self.push(process, OpType::Ok, Body::Send(send), None);
            }
            Body::Poll(mut poll) => {
                let Role::Consumer(c) = self.clients[slot].role else {
                    unreachable!("only consumers poll")
                };
                let p = poll.partition.partition as usize;
                let from = poll.from_offset as usize;
                let (records, end) = if poll.read_committed() {
                    self.read_committed(p, from, self.spec.poll_records_max)
                } else {
                    let log = &self.logs[p];
                    let end = (from + self.spec.poll_records_max).min(log.values.len());
                    let records = (from..end)
                        .filter(|&o| log.values[o] != NO_VALUE)
                        .map(|o| PolledRecord(o as i64, RecordValue::Number(log.values[o])))
                        .collect();
                    (records, end)
                };
                let log = &self.logs[p];
                poll.read = Some(Read {
                    records,
                    high_watermark: log.log_end_offset(),
                    leader_epoch: Some(log.leader_epoch),
                    above_high_watermark: Vec::new(),
                });
                self.positions[c][p] = end as u64;
                self.push(process, OpType::Ok, Body::Poll(poll), None);
            }
            Body::Fault(_) => unreachable!("clients do not fire faults"),
            Body::Commit(_)
            | Body::Committed(_)
            | Body::Rebalance(_)
            | Body::ClientCrash(_)
            | Body::Txn(_)
            | Body::StableOffsets(_)
            | Body::Life(_) => {
                unreachable!("synthetic clients do not commit")
            }
        }
    }

    /// What the subscribers see of each partition.
    fn views(&self) -> Vec<subscribers::LogView<'_>> {
        views(&self.logs)
    }

    /// A fresh consumer reads every partition from offset 0 to its end.
    fn final_reads(&mut self) {
        let process = Process::Client(self.next_process);
        self.next_process += 1;
        let reads: Vec<(Body, Body)> = self.views().iter().map(subscribers::final_read).collect();
        for (invoke, ok) in reads {
            self.push(process, OpType::Invoke, invoke, None);
            self.push(process, OpType::Ok, ok, None);
        }
    }

    /// Completes every op in flight, so a fault lands between client ops.
    fn drain(&mut self) {
        for slot in 0..self.clients.len() {
            self.complete(slot);
        }
    }

    /// Appends one plain batch to partition `p`'s log in the current leader
    /// epoch; the offsets it got.
    fn append(&mut self, p: usize, values: &[i64]) -> Vec<i64> {
        self.append_batch(p, values, BatchKind::Plain)
    }

    /// Appends one batch of `kind` to partition `p`'s log in the current
    /// leader epoch (a marker's `values` are ignored: it holds one control
    /// record); the offsets it got.
    fn append_batch(&mut self, p: usize, values: &[i64], kind: BatchKind) -> Vec<i64> {
        let marker = match kind {
            BatchKind::Marker { .. } => Some([NO_VALUE]),
            _ => None,
        };
        let values: &[i64] = marker.as_ref().map_or(values, |m| &m[..]);
        let log = &mut self.logs[p];
        let base = log.log_end_offset();
        // The cache gains an epoch with the first batch written in it, as a
        // follower's does (LeaderEpochFileCache.assign on append).
        if log.epochs.last().map(|e| e.epoch) != Some(log.leader_epoch) {
            log.epochs.push(EpochEntry {
                epoch: log.leader_epoch,
                start_offset: base,
            });
        }
        if log.segments.is_empty() || log.segment_records >= self.spec.segment_records_max {
            log.segments.push(Segment {
                file: PathBuf::from(format!("{}/{base:020}.log", log.partition)),
                base_offset: base,
                size_bytes: 0,
                batches: Vec::new(),
            });
            log.segment_records = 0;
        }
        let timestamp = (self.history.len() as i64) * 50;
        let records: Vec<Record> = match kind {
            // KIP-98's EndTransactionMarker: key (version 0, type 1 commit or
            // 0 abort), value (version 0, coordinator epoch 0).
            BatchKind::Marker { commit, .. } => vec![Record {
                offset: base,
                timestamp,
                key: Some(Payload::from(vec![0, 0, 0, u8::from(commit)])),
                value: Some(Payload::from(vec![0, 0, 0, 0, 0, 0])),
                headers: Box::default(),
            }],
            _ => values
                .iter()
                .enumerate()
                .map(|(i, value)| Record {
                    offset: base + i as i64,
                    timestamp,
                    key: None,
                    value: Some(Payload::from(value.to_string().into_bytes())),
                    headers: Box::default(),
                })
                .collect(),
        };
        let (attributes, producer_id, producer_epoch, base_sequence) = match kind {
            BatchKind::Plain => (0, -1, -1, -1),
            // Attributes bit 4: transactional; bit 5: control.
            BatchKind::Transactional { producer_id } => (0x10, producer_id, 0, 0),
            BatchKind::Marker { producer_id, .. } => (0x30, producer_id, 0, -1),
        };
        // Sizes as the v2 format would frame them (a 61-byte header, about
        // eight bytes of framing a record); no checker reads them.
        let size_bytes = 61
            + records
                .iter()
                .map(|r| 8 + r.value.as_ref().map_or(0, Payload::len) as u64)
                .sum::<u64>();
        let segment = log.segments.last_mut().expect("a segment was made above");
        let last = base + values.len() as i64 - 1;
        // One shared path per segment, as the reader makes them.
        let file = match segment.batches.last() {
            Some(batch) => batch.file.clone(),
            None => std::sync::Arc::from(segment.file.as_path()),
        };
        segment.batches.push(Batch {
            file,
            position: segment.size_bytes,
            size_bytes,
            base_offset: base,
            last_offset: last,
            partition_leader_epoch: log.leader_epoch,
            magic: 2,
            crc: 0,
            crc_valid: true,
            attributes,
            codec: Codec::None,
            first_timestamp: timestamp,
            max_timestamp: timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count: values.len() as i32,
            intact: true,
            records,
        });
        segment.size_bytes += size_bytes;
        log.segment_records += values.len();
        log.values.extend_from_slice(values);
        (base..=last).collect()
    }

    /// Whether plain consumer `c` reads committed data only: every other
    /// one, in a run with transactions.
    fn reads_committed(&self, c: usize) -> bool {
        self.spec.transactors > 0 && c % 2 == 1
    }

    /// Records partition `p`'s current state in etcd's timeline and in the
    /// state-change log of each broker in `to` (the ones up to hear it).
    fn publish(&mut self, p: usize, to: &[NodeId]) {
        self.revision += 1;
        let log = &self.logs[p];
        let isr: Vec<i32> = log.isr.iter().map(|n| n.broker_id()).collect();
        self.timeline.partition_states.push(PartitionStateChange {
            revision: self.revision,
            topic: log.partition.topic.clone(),
            partition: log.partition.partition,
            leader: log.leader.broker_id(),
            leader_epoch: log.leader_epoch,
            isr: isr.clone(),
            controller_epoch: self.controller_epoch,
        });
        let time_ms = self.history.len() as u64 / 20;
        for node in to {
            self.state_changes
                .get_mut(node)
                .expect("every broker has a log")
                .push(StateChange {
                    time_ms,
                    request: "LeaderAndIsr".into(),
                    controller_id: self.controller.broker_id(),
                    controller_epoch: self.controller_epoch,
                    topic: log.partition.topic.clone(),
                    partition: log.partition.wire_partition(),
                    leader: log.leader.broker_id(),
                    leader_epoch: log.leader_epoch,
                    isr: isr.clone(),
                    outcome: "applied".into(),
                    reason: None,
                });
        }
    }

    fn finish(mut self) -> RunData {
        if self.spec.drop_acked_value {
            self.drop_one_acked_value();
        }
        let high_watermarks: Vec<OffsetEntry> = self
            .logs
            .iter()
            .map(|log| OffsetEntry {
                topic: log.partition.topic.clone(),
                partition: log.partition.wire_partition(),
                offset: log.log_end_offset(),
            })
            .collect();
        let replicas_of = |logs: &[PartitionLog]| -> Vec<ReplicaState> {
            logs.iter()
                .map(|log| ReplicaState {
                    topic: log.partition.topic.clone(),
                    partition: log.partition.wire_partition(),
                    dir: PathBuf::from(log.partition.to_string()),
                    segments: log.segments.clone(),
                    leader_epochs: Some(log.epochs.clone()),
                    producer_snapshots: Vec::new(),
                    high_watermark: Some(log.log_end_offset()),
                    recovery_point: Some(log.log_end_offset()),
                    log_end_offset: log.log_end_offset(),
                    findings: Vec::new(),
                })
                .collect()
        };
        let replicas = self
            .brokers
            .iter()
            .map(|&node| {
                let dir = DataDirState {
                    path: PathBuf::from(format!("synthetic/nodes/{node}/data")),
                    replicas: replicas_of(&self.logs),
                    high_watermarks: Some(high_watermarks.clone()),
                    recovery_points: Some(high_watermarks.clone()),
                    clean_shutdown: true,
                    findings: Vec::new(),
                };
                (node, dir)
            })
            .collect();
        RunData {
            dir: PathBuf::from("synthetic"),
            schedule: None,
            history: self.history,
            replicas,
            state_changes: self.state_changes,
            timeline: Some(self.timeline),
            fetches: Some(self.fetches),
            history_opened_unix_ms: Some(0),
            earlier_lives_ops: 0,
            ..RunData::default()
        }
    }

    /// Takes the first value of the acknowledged send nearest the middle of
    /// the history out of the partition's log, on every replica alike.
    fn drop_one_acked_value(&mut self) {
        let middle = self.history.len() / 2;
        let Some((partition, value)) = self.history[middle..]
            .iter()
            .find_map(|op| Some((op.acked_send()?.0.partition.partition, op.send()?.values[0])))
        else {
            return;
        };
        let payload = Payload::from(value.to_string().into_bytes());
        for segment in &mut self.logs[partition as usize].segments {
            for batch in &mut segment.batches {
                let before = batch.records.len();
                batch.records.retain(|r| r.value.as_ref() != Some(&payload));
                batch.records_count -= (before - batch.records.len()) as i32;
            }
        }
    }
}
