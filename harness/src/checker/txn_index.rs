//! The run's transactions ([transactions]) as the transaction checkers
//! share them, built once per check (`RunIndex::txns`): every `txn` op with
//! its outcome, who wrote each value a transaction sent, every read a
//! read_committed consumer made (a transaction's polls and `poll` ops with
//! `isolation = read_committed`), and, per partition, how the final log
//! ended each transactional record (`reader::txn`).
//!
//! Values are the workload's: each sent once, so a value names its writer
//! (Elle's "recoverability", Kingsbury & Alvaro 2020, §3). A value two
//! transactions sent is credited to the first.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::history::{Intent, OpType, Process, RecordValue, Txn};
use crate::reader::txn::{Transactions, TxnOutcome};
use crate::topic_partition::PartitionRef;

use super::NoFinalLog;
use super::RunData;
pub use super::evidence::Fate;

/// One `txn` op: its invoke, its completion (when it had one) and its body
/// as the completion gives it (with the micro-ops' results).
#[derive(Debug, Clone)]
pub(crate) struct TxnOp<'a> {
    pub invoke_index: u64,
    /// The completion's index and time; `None` when it never completed.
    pub completed: Option<(u64, u64)>,
    pub fate: Fate,
    pub txn: &'a Txn,
}

impl TxnOp<'_> {
    /// The history index that names it: its completion's, else its invoke's.
    pub(crate) fn index(&self) -> u64 {
        self.completed.map_or(self.invoke_index, |(index, _)| index)
    }

    /// The evidence's reference to it.
    pub(crate) fn details(&self) -> super::evidence::TxnRef {
        super::evidence::TxnRef {
            fate: self.fate,
            index: self.index(),
            invoke_index: self.invoke_index,
            transactional_id: self.txn.transactional_id.clone(),
        }
    }

    /// `txn-3 (history index 12, committed)`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} (history index {}, {})",
            self.txn.transactional_id,
            self.index(),
            self.fate.name()
        )
    }
}

/// A read a read_committed consumer made: by a transaction (`txn`: its
/// place in [`TxnView::txns`]) or by a `poll` op.
#[derive(Debug, Clone)]
pub(crate) struct CommittedRead<'a> {
    pub partition: &'a PartitionRef,
    /// The partition's place in [`TxnView::partitions`].
    pub pid: usize,
    pub records: &'a [crate::history::PolledRecord],
    /// The history index of the op that read (a txn's completion, a poll's ok).
    pub index: u64,
    /// When that op completed (ns, history clock): the read was over by then.
    pub completed_ns: u64,
    pub txn: Option<usize>,
}

/// A transactional value as the final log holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoggedValue {
    pub offset: i64,
    pub outcome: TxnOutcome,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// A multiply-rotate hasher for integer keys (FxHash's shape): the
/// views below are keyed by workload values, millions of lookups a long
/// run, and std's SipHash was most of their cost.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by integers, hashed by [`IntHasher`].
pub(crate) type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// The run's transactions (see the module doc). Partitions are numbered by
/// their place in `partitions`; the per-partition views are indexed so.
pub(crate) struct TxnView<'a> {
    pub txns: Vec<TxnOp<'a>>,
    /// Every partition a replica holds or an op named, sorted (internal
    /// topics left out).
    pub partitions: Vec<PartitionRef>,
    /// Per partition: value → (writer's place in `txns`, the send's offset
    /// as its produce response gave it).
    pub writers: Vec<IntMap<i64, (usize, Option<i64>)>>,
    pub reads: Vec<CommittedRead<'a>>,
    /// Per partition: value → the history index of a plain send of it
    /// that ended `fail` (definitely not written).
    pub failed_sends: Vec<IntMap<i64, u64>>,
    /// Per partition: its final log's transactional data values and its
    /// transactions (markers included), or why it has no final log.
    pub logs: Vec<Result<LoggedTxns, NoFinalLog>>,
    /// The time of the history's last op (ns): the run's end.
    pub end_ns: u64,
}

/// One partition's final log, as the transaction checkers read it.
pub(crate) struct LoggedTxns {
    /// Transactional data values → where the log holds them and how their
    /// transaction ended (the first place, for a value held twice).
    pub values: IntMap<i64, LoggedValue>,
    pub transactions: Transactions,
}

/// Whether a run has anything the transaction checkers judge: a `txn` op,
/// a read_committed poll, or a transactional batch in a replica or the
/// final read. They are listed only then.
pub fn in_run(run: &RunData) -> bool {
    run.history
        .iter()
        .any(|op| op.txn().is_some() || op.poll().is_some_and(|p| p.read_committed()))
        || run
            .replicas
            .values()
            .chain(run.final_read.iter().map(|r| &r.data))
            .flat_map(|dir| &dir.replicas)
            .any(|replica| replica.batches().any(|b| b.is_transactional()))
}

impl<'a> TxnView<'a> {
    /// Built from `run` and each partition's final log (`final_log`: the
    /// replica taken as final, or why there is none).
    pub(crate) fn of(
        run: &'a RunData,
        final_log: impl Fn(&PartitionRef) -> Result<&'a crate::reader::ReplicaState, NoFinalLog>,
    ) -> TxnView<'a> {
        let mut txns: Vec<TxnOp<'a>> = Vec::new();
        let mut reads = Vec::new();
        let mut failed: Vec<(&PartitionRef, i64, u64)> = Vec::new();
        // Each process's op in flight: its invoke's index and time, and for
        // a txn its place in `txns`.
        let mut open: HashMap<Process, (u64, u64, Option<usize>)> = HashMap::new();
        for op in &run.history {
            if op.kind == OpType::Invoke {
                let place = op.txn().map(|txn| {
                    txns.push(TxnOp {
                        invoke_index: op.index,
                        completed: None,
                        fate: Fate::Indeterminate,
                        txn,
                    });
                    txns.len() - 1
                });
                open.insert(op.process, (op.index, op.time_ns, place));
                continue;
            }
            let invoked = open.remove(&op.process);
            if let Some(txn) = op.txn() {
                let Some((_, _, Some(place))) = invoked else {
                    continue;
                };
                let t = &mut txns[place];
                t.completed = Some((op.index, op.time_ns));
                t.txn = txn;
                t.fate = match (op.kind, txn.intent) {
                    (OpType::Ok, Intent::Commit) => Fate::Committed,
                    (OpType::Ok, Intent::Abort) => Fate::Aborted,
                    (OpType::Fail, _) => Fate::Failed,
                    _ => Fate::Indeterminate,
                };
                for poll in txn.polls() {
                    if let Some(records) = &poll.records {
                        reads.push(CommittedRead {
                            partition: &poll.partition,
                            pid: 0,
                            records,
                            index: op.index,
                            completed_ns: op.time_ns,
                            txn: Some(place),
                        });
                    }
                }
            } else if let Some((poll, read)) = op.read() {
                if poll.read_committed() {
                    reads.push(CommittedRead {
                        partition: &poll.partition,
                        pid: 0,
                        records: &read.records,
                        index: op.index,
                        completed_ns: op.time_ns,
                        txn: None,
                    });
                }
            } else if op.kind == OpType::Fail
                && let Some(send) = op.send()
            {
                for &value in &send.values {
                    failed.push((&send.partition, value, op.index));
                }
            }
        }
        let mut named: BTreeSet<&PartitionRef> = txns
            .iter()
            .flat_map(|t| t.txn.ops.iter())
            .map(|op| match op {
                crate::history::MicroOp::Send(send) => &send.partition,
                crate::history::MicroOp::Poll(poll) => &poll.partition,
            })
            .collect();
        named.extend(reads.iter().map(|r| r.partition));
        named.extend(failed.iter().map(|f| f.0));
        let mut partitions: BTreeSet<PartitionRef> = run.partitions();
        partitions.extend(named.into_iter().cloned());
        let partitions: Vec<PartitionRef> = partitions
            .into_iter()
            .filter(|p| !p.topic.starts_with("__"))
            .collect();
        let id = |p: &PartitionRef| partitions.binary_search(p).ok();
        let mut writers: Vec<IntMap<i64, (usize, Option<i64>)>> =
            vec![IntMap::default(); partitions.len()];
        for (place, t) in txns.iter().enumerate() {
            for send in t.txn.sends() {
                if let Some(pid) = id(&send.partition) {
                    writers[pid]
                        .entry(send.value)
                        .or_insert((place, send.acked_offset()));
                }
            }
        }
        let mut failed_sends: Vec<IntMap<i64, u64>> = vec![IntMap::default(); partitions.len()];
        for (partition, value, index) in failed {
            if let Some(pid) = id(partition) {
                failed_sends[pid].entry(value).or_insert(index);
            }
        }
        // Reads of internal topics are no reads of the workload's values.
        reads.retain_mut(|read| match id(read.partition) {
            Some(pid) => {
                read.pid = pid;
                true
            }
            None => false,
        });
        let logs = partitions
            .iter()
            .map(|partition| final_log(partition).map(LoggedTxns::of))
            .collect();
        TxnView {
            txns,
            partitions,
            writers,
            reads,
            failed_sends,
            logs,
            end_ns: run.history.last().map_or(0, |op| op.time_ns),
        }
    }

    /// `partition`'s place in [`TxnView::partitions`].
    pub(crate) fn pid(&self, partition: &PartitionRef) -> Option<usize> {
        self.partitions.binary_search(partition).ok()
    }

    /// The writer of `value` in partition `pid`, if a transaction sent it.
    pub(crate) fn writer(&self, pid: usize, value: i64) -> Option<&TxnOp<'a>> {
        self.writers[pid]
            .get(&value)
            .map(|&(place, _)| &self.txns[place])
    }

    /// How the final log of partition `pid` holds `value`: `Ok(None)` when
    /// the log lacks it, `Err` when the partition has no final log.
    pub(crate) fn logged(
        &self,
        pid: usize,
        value: i64,
    ) -> Result<Option<LoggedValue>, &NoFinalLog> {
        match &self.logs[pid] {
            Ok(log) => Ok(log.values.get(&value).copied()),
            Err(why) => Err(why),
        }
    }
}

impl LoggedTxns {
    fn of(replica: &crate::reader::ReplicaState) -> LoggedTxns {
        let transactions = replica.transactions();
        let mut values = IntMap::default();
        if !transactions.is_empty() {
            for (batch, record) in replica.records() {
                if batch.is_control() || !batch.is_transactional() {
                    continue;
                }
                let Some(value) = record
                    .value
                    .as_ref()
                    .map(|v| RecordValue::from_bytes(Some(v.as_bytes())))
                    .and_then(|v| v.as_number())
                else {
                    continue;
                };
                let Some(outcome) = transactions.outcome_at(record.offset) else {
                    continue;
                };
                values.entry(value).or_insert(LoggedValue {
                    offset: record.offset,
                    outcome,
                    producer_id: batch.producer_id,
                    producer_epoch: batch.producer_epoch,
                });
            }
        }
        LoggedTxns {
            values,
            transactions,
        }
    }
}
