//! Transactions are atomic and read_committed readers see committed data
//! only (KIP-98), in Elle's terms (Kingsbury & Alvaro 2020; Adya's G1a):
//!
//! - `aborted-read`: a read_committed read (a transaction's poll, or a
//!   `poll` op with `isolation = read_committed`) returned a value that an
//!   aborted transaction (ok with intent abort) or a failed one wrote, that
//!   a plain send that failed wrote, or that the final log holds inside an
//!   aborted transaction.
//! - `precommitted-read`: a read_committed read returned a transaction's
//!   write and completed before that transaction's EndTxn was even sent
//!   (`commit_ns`), or returned a write the final log holds in a
//!   transaction no marker ended.
//! - `torn-transaction`: a committed transaction (EndTxn(commit) answered)
//!   some of whose writes the final log holds as committed while others are
//!   missing, aborted or still open.
//! - `aborted-committed`: a transaction that aborted (its abort answered)
//!   or failed (definitely not committed) some of whose writes the final log
//!   holds as committed — read or not, every read_committed consumer from
//!   then on returns them. KIP-890's motivation is one way there: a late
//!   produce of an aborted transaction appended into the producer's next
//!   transaction and committed with it; a coordinator that drops an abort
//!   marker and lets a later commit marker end the partition's transaction
//!   is another.
//!
//! The transactions, their reads and the final logs' outcomes are the run
//! index's (txn_index.rs), shared with the cycle and hanging checkers.

use std::collections::{BTreeMap, BTreeSet};

use super::evidence::{TornTxn, TxnRead, TxnWrite};
use super::excuses::Excuses;
use super::index::{EVIDENCE_MAX, RunIndex};
use super::txn_index::{Fate, LoggedValue, TxnView};
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence};
use crate::history::TxnSend;
use crate::reader::txn::TxnOutcome;

pub const NAME: &str = "transactions";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A transaction's writes become visible together or not at all: a \
            read_committed consumer never returns a write of a transaction that aborted or \
            failed, of a send that failed, or one the log holds inside an aborted transaction \
            (no aborted read, G1a), nor a write before its transaction's commit was asked for \
            (no precommitted read); a committed transaction's writes are all in the final \
            log as committed (no torn transaction), and an aborted or failed one's are none of \
            them (no aborted write committed).",
        source: "KIP-98 (transactional messaging: atomic writes across partitions, \
            isolation.level=read_committed returns only committed transactions' records, \
            aborted ones filtered by the aborted-transaction index); Kafka documentation, Design \
            §4.6 (exactly-once delivery); Adya's G1a and Elle (Kingsbury & Alvaro 2020) for the \
            anomalies; Jepsen's Redpanda 21.10.1 analysis (aborted reads) and KAFKA-17754 (a \
            delayed EndTxn: aborted reads, lost writes, torn transactions).",
        not_checked: "read_uncommitted polls (they may return any record). Reads of values no \
            transaction and no failed send wrote. A write read before its transaction's EndTxn \
            when the history does not record when EndTxn was sent (`commit_ns`). A transaction \
            that ended info (it may or may not have committed) is held to nothing but its log: \
            an aborted read of its writes is one the log holds aborted. A committed \
            transaction's write the log lacks after a disk fault or an unclean election that \
            may have taken it (lost-write's excuses, judged as for a read of it) is counted as \
            excused, and partitions without a final log make torn transactions unknown. Values \
            sent twice are credited to their first writer.",
        needs: &[],
        check,
    }
}

fn check(index: &RunIndex) -> CheckOutcome {
    let view = index.txns();
    let mut evidence = Vec::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut unknown: BTreeSet<String> = BTreeSet::new();
    reads(view, &mut evidence, &mut counts);
    torn(index, view, &mut evidence, &mut counts, &mut unknown);
    aborted_committed(view, &mut evidence, &mut counts);
    let committed = view
        .txns
        .iter()
        .filter(|t| t.fate == Fate::Committed)
        .count();
    let mut result = CheckResult::fold(
        NAME,
        evidence,
        super::anomalies_message,
        (!unknown.is_empty()).then(|| unknown.into_iter().collect::<Vec<_>>().join("; ")),
        || {
            format!(
                "{} transaction(s) ({committed} committed), {} read_committed read(s): no \
                 aborted or precommitted read, no torn transaction, no aborted write committed",
                view.txns.len(),
                view.reads.len()
            )
        },
    );
    result = result
        .with_count("transactions", view.txns.len() as u64)
        .with_count("committed", committed as u64)
        .with_count("read-committed-reads", view.reads.len() as u64);
    for (name, n) in counts {
        result = result.with_count(name, n);
    }
    Ok(result)
}

/// Aborted and precommitted reads, one piece of evidence per (read, value).
fn reads(view: &TxnView, evidence: &mut Vec<Evidence>, counts: &mut BTreeMap<&str, u64>) {
    for read in &view.reads {
        for record in read.records {
            let Some(value) = record.value().as_number() else {
                continue;
            };
            let offset = record.offset();
            let writer = view.writer(read.pid, value);
            let logged = view.logged(read.pid, value).ok().flatten();
            let log_outcome = logged.map(|l| l.outcome);
            let failed_send = view.failed_sends[read.pid].get(&value).copied();
            // A transaction reading its own writes is no exemption: its
            // read_committed consumer is not its producer (KIP-98).
            let aborted_by = match (writer, failed_send, log_outcome) {
                (Some(w), _, _) if w.fate.never_committed() => Some(format!(
                    "its writer {} {}",
                    w.describe(),
                    if w.fate == Fate::Aborted {
                        "aborted"
                    } else {
                        "failed"
                    }
                )),
                (_, Some(send), _) => {
                    Some(format!("the send of it at history index {send} failed"))
                }
                (_, _, Some(TxnOutcome::Aborted)) => {
                    Some("the final log holds it inside an aborted transaction".to_owned())
                }
                _ => None,
            };
            let precommitted_by = match (writer, log_outcome) {
                _ if aborted_by.is_some() => None,
                (Some(w), _)
                    if w.txn
                        .commit_ns
                        .is_some_and(|commit| read.completed_ns < commit) =>
                {
                    Some(format!(
                        "the read was over at {} ns, before its writer {} sent EndTxn at {} ns",
                        read.completed_ns,
                        w.describe(),
                        w.txn.commit_ns.unwrap_or_default()
                    ))
                }
                (_, Some(TxnOutcome::Open)) => {
                    Some("the final log holds it in a transaction no marker ended".to_owned())
                }
                _ => None,
            };
            let (anomaly, why) = match (aborted_by, precommitted_by) {
                (Some(why), _) => (Anomaly::AbortedRead, why),
                (None, Some(why)) => (Anomaly::PrecommittedRead, why),
                (None, None) => continue,
            };
            *counts.entry(anomaly.name()).or_default() += 1;
            if evidence.len() >= EVIDENCE_MAX {
                continue;
            }
            let reader = match read.txn {
                Some(place) => format!("transaction {}", view.txns[place].describe()),
                None => format!("poll at history index {}", read.index),
            };
            evidence.push(Evidence::new(
                anomaly,
                format!(
                    "{reader} read value {value} at offset {offset} of {} under read_committed: {why}",
                    read.partition
                ),
                TxnRead {
                    commit_ns: writer.and_then(|w| w.txn.commit_ns),
                    failed_send_index: failed_send,
                    log_outcome,
                    offset,
                    partition: read.partition.clone(),
                    read_completed_ns: read.completed_ns,
                    read_index: read.index,
                    value,
                    writer: writer.map(|w| w.details()),
                },
            ));
        }
    }
}

/// Committed transactions whose writes the final log holds committed only
/// in part.
fn torn(
    index: &RunIndex,
    view: &TxnView,
    evidence: &mut Vec<Evidence>,
    counts: &mut BTreeMap<&str, u64>,
    unknown: &mut BTreeSet<String>,
) {
    let excuses = Excuses::of(index.run);
    for t in view.txns.iter().filter(|t| t.fate == Fate::Committed) {
        let mut writes = Vec::new();
        let mut committed = 0usize;
        let mut undetermined = None;
        let mut excused = 0usize;
        for send in t.txn.sends() {
            let logged = match view
                .pid(&send.partition)
                .map(|pid| view.logged(pid, send.value))
            {
                None => None,
                Some(Ok(logged)) => logged,
                Some(Err(why)) => {
                    undetermined = Some(format!("{}: {why}", send.partition));
                    None
                }
            };
            let outcome = logged.map(|l| l.outcome);
            if outcome == Some(TxnOutcome::Committed) {
                committed += 1;
            } else if let Some(offset) = send.acked_offset()
                && excuses.excuses_read(t.invoke_index, &send.partition, offset, None)
            {
                // A disk fault or an unclean election after the
                // transaction that may have taken the write.
                excused += 1;
                committed += 1;
            }
            writes.push(write(send, logged));
        }
        if excused > 0 {
            *counts.entry("writes-lost-excused").or_default() += excused as u64;
        }
        if writes.is_empty() || committed == writes.len() {
            continue;
        }
        if let Some(why) = undetermined {
            unknown.insert(format!(
                "a committed transaction's write has no final log to be held against ({why}; \
                 first: {})",
                t.describe()
            ));
            continue;
        }
        *counts.entry("torn-transaction").or_default() += 1;
        if evidence.len() >= EVIDENCE_MAX {
            continue;
        }
        let missing: Vec<String> = writes
            .iter()
            .filter(|w| w.outcome != Some(TxnOutcome::Committed))
            .map(|w| {
                let how = match w.outcome {
                    None => "missing".to_owned(),
                    Some(outcome) => format!(
                        "{} at offset {}",
                        match outcome {
                            TxnOutcome::Aborted => "aborted",
                            TxnOutcome::Open => "open",
                            TxnOutcome::Committed => "committed",
                        },
                        w.offset.unwrap_or(-1)
                    ),
                };
                format!("{} in {} {how}", w.value, w.partition)
            })
            .collect();
        evidence.push(Evidence::new(
            Anomaly::TornTransaction,
            format!(
                "committed transaction {}: {} of its {} write(s) committed in the final log; {}",
                t.describe(),
                committed,
                writes.len(),
                missing.join(", ")
            ),
            TornTxn {
                txn: t.details(),
                writes,
            },
        ));
    }
}

/// Transactions that aborted or failed whose writes the final log holds as
/// committed, one piece of evidence per transaction.
fn aborted_committed(
    view: &TxnView,
    evidence: &mut Vec<Evidence>,
    counts: &mut BTreeMap<&str, u64>,
) {
    for t in view.txns.iter().filter(|t| t.fate.never_committed()) {
        let mut writes = Vec::new();
        let mut committed = Vec::new();
        for send in t.txn.sends() {
            let logged = view
                .pid(&send.partition)
                .and_then(|pid| view.logged(pid, send.value).ok().flatten());
            let outcome = logged.map(|l| l.outcome);
            if outcome == Some(TxnOutcome::Committed) {
                committed.push(format!(
                    "{} in {} at offset {}",
                    send.value,
                    send.partition,
                    logged.map_or(-1, |l| l.offset)
                ));
            }
            writes.push(write(send, logged));
        }
        if committed.is_empty() {
            continue;
        }
        *counts.entry(Anomaly::AbortedCommitted.name()).or_default() += 1;
        if evidence.len() >= EVIDENCE_MAX {
            continue;
        }
        evidence.push(Evidence::new(
            Anomaly::AbortedCommitted,
            format!(
                "transaction {}, never committed, has {} of its {} write(s) committed in the \
                 final log: {}",
                t.describe(),
                committed.len(),
                writes.len(),
                committed.join(", ")
            ),
            TornTxn {
                txn: t.details(),
                writes,
            },
        ));
    }
}

/// A transaction's send as evidence names it, with where and how the final
/// log holds its value (`logged`).
fn write(send: &TxnSend, logged: Option<LoggedValue>) -> TxnWrite {
    TxnWrite {
        acked_offset: send.acked_offset(),
        offset: logged.map(|l| l.offset),
        outcome: logged.map(|l| l.outcome),
        partition: send.partition.clone(),
        value: send.value,
    }
}
