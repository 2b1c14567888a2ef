//! Offsets sent to transactions (KIP-98's `sendOffsetsToTransaction`,
//! KIP-447): a consumer's offsets that a transaction's TxnOffsetCommit
//! wrote become its group's committed offsets if and only if the
//! transaction commits. A group's committed offset that only transactions
//! that aborted or failed ever sent — no plain commit of it, no transaction
//! that committed or may have — must never be what the group's committed
//! offset is: not in any read of it (`committed`; reported as
//! `aborted-read`, Adya's G1a on the group's offset, the evidence's
//! `value` the offset read and `offset` it too) and not in the final log of
//! the offsets topic (`aborted-committed`, the offsets partition's record
//! named). A transaction that committed is held to the other half by
//! committed.rs: its offsets are a floor for every stable read begun after
//! its completion (KIP-447's `require_stable`).
//!
//! What this does not judge: an offset also sent by a transaction that
//! ended info or a plain commit that did not fail (either may have set it);
//! an aborted transaction's offset read before the transaction was invoked
//! (the same offset sent again later by an aborted transaction, with none
//! between, is the case that matters, and it is judged).

use std::collections::{BTreeMap, BTreeSet};

use super::super::evidence::{TornTxn, TxnRead, TxnWrite};
use super::super::index::{EVIDENCE_MAX, RunIndex};
use super::super::txn_index::TxnOp;
use super::super::{Anomaly, CheckResult, Evidence};
use crate::history::{Body, OpType};
use crate::reader::offsets_topic::offset_commits;
use crate::reader::txn::TxnOutcome;
use crate::topic_partition::{OFFSETS_TOPIC, PartitionRef};

/// (group, partition, committed offset).
type Key = (String, PartitionRef, i64);

/// What the rule saw: reads and final offsets judged, and how many of
/// each held an offset only aborted or failed transactions sent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counted {
    pub txn_offsets: u64,
    pub reads: u64,
    pub aborted_reads: u64,
    pub finals: u64,
    pub aborted_finals: u64,
}

/// What a valid verdict's message says of transactions' offsets (nothing
/// when no transaction sent any).
pub(super) fn valid_part(txns: &Counted) -> String {
    if txns.txn_offsets == 0 {
        return String::new();
    }
    format!(
        "; {} offset(s) sent to transactions, none only by aborted ones read ({}) or final ({})",
        txns.txn_offsets, txns.reads, txns.finals
    )
}

/// `result` with the counts of transactions' offsets, when there were any.
pub(super) fn with_counts(result: CheckResult, txns: &Counted) -> CheckResult {
    if txns.txn_offsets == 0 {
        return result;
    }
    result
        .with_count("txn-offsets", txns.txn_offsets)
        .with_count("aborted-offsets-read", txns.aborted_reads)
        .with_count("aborted-offsets-final", txns.aborted_finals)
}

/// The offsets only never-committed transactions sent (no committed or
/// undecided transaction, no plain commit that may have landed sent them),
/// each with the first such transaction; every transaction's offsets counted.
fn never_committed<'a>(run: &'a RunIndex, counted: &mut Counted) -> BTreeMap<Key, &'a TxnOp<'a>> {
    let mut never: BTreeMap<Key, &TxnOp> = BTreeMap::new();
    let mut may: BTreeSet<Key> = BTreeSet::new();
    for t in &run.txns().txns {
        let Some(group) = &t.txn.group else { continue };
        for (partition, &offset) in &t.txn.offsets {
            counted.txn_offsets += 1;
            let key = (group.clone(), partition.clone(), offset);
            if t.fate.never_committed() {
                never.entry(key).or_insert(t);
            } else {
                may.insert(key);
            }
        }
    }
    for op in &run.run.history {
        if let Body::Commit(c) = &op.body
            && op.kind != OpType::Fail
        {
            may.insert((c.group.clone(), c.partition.clone(), c.offset));
        }
    }
    never.retain(|key, _| !may.contains(key));
    never
}

/// Judges every read and every final committed offset of a group whose
/// offsets a transaction sent; evidence (at most [`EVIDENCE_MAX`]) to
/// `evidence`.
pub(super) fn check(run: &RunIndex, evidence: &mut Vec<Evidence>) -> Counted {
    let mut counted = Counted::default();
    let view = run.txns();
    let never = never_committed(run, &mut counted);
    let groups: BTreeSet<&String> = view
        .txns
        .iter()
        .filter_map(|t| t.txn.group.as_ref())
        .collect();
    for op in &run.run.history {
        let Body::Committed(c) = &op.body else {
            continue;
        };
        if op.kind != OpType::Ok || !groups.contains(&c.group) {
            continue;
        }
        let Some(offset) = c.offset else { continue };
        counted.reads += 1;
        let key = (c.group.clone(), c.partition.clone(), offset);
        let Some(writer) = never.get(&key) else {
            continue;
        };
        counted.aborted_reads += 1;
        if evidence.len() >= EVIDENCE_MAX {
            continue;
        }
        evidence.push(Evidence::new(
            Anomaly::AbortedRead,
            format!(
                "a read of group {}'s committed offset of {} (history index {}) answered {offset}, \
                 an offset only transactions that never committed sent: first {}",
                c.group,
                c.partition,
                op.index,
                writer.describe()
            ),
            TxnRead {
                commit_ns: writer.txn.commit_ns,
                failed_send_index: None,
                log_outcome: None,
                offset,
                partition: c.partition.clone(),
                read_completed_ns: op.time_ns,
                read_index: op.index,
                value: offset,
                writer: Some(writer.details()),
            },
        ));
    }
    for partition in run.run.partitions() {
        if partition.topic != OFFSETS_TOPIC {
            continue;
        }
        let Ok(log) = run.final_log(&partition) else {
            continue;
        };
        // The last record of each (group, partition) is its final offset.
        let Ok(commits) = offset_commits(log.log.replica) else {
            continue;
        };
        let mut last: BTreeMap<(String, PartitionRef), (i64, Option<i64>)> = BTreeMap::new();
        for r in commits {
            if !groups.contains(&r.group) {
                continue;
            }
            let Ok(p) = u32::try_from(r.partition) else {
                continue;
            };
            last.insert(
                (r.group, PartitionRef::new(r.topic, p)),
                (r.log_offset, r.committed),
            );
        }
        for ((group, consumed), (log_offset, committed)) in last {
            let Some(offset) = committed else { continue };
            counted.finals += 1;
            let Some(writer) = never.get(&(group.clone(), consumed.clone(), offset)) else {
                continue;
            };
            counted.aborted_finals += 1;
            if evidence.len() >= EVIDENCE_MAX {
                continue;
            }
            evidence.push(Evidence::new(
                Anomaly::AbortedCommitted,
                format!(
                    "group {group}'s final committed offset of {consumed} is {offset} ({partition} \
                     at offset {log_offset}, {}), an offset only transactions that never \
                     committed sent: first {}",
                    log.log.chosen,
                    writer.describe()
                ),
                TornTxn {
                    txn: writer.details(),
                    writes: vec![TxnWrite {
                        acked_offset: None,
                        offset: Some(log_offset),
                        outcome: Some(TxnOutcome::Committed),
                        partition: partition.clone(),
                        value: offset,
                    }],
                },
            ));
        }
    }
    counted
}
