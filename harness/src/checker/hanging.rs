//! Hanging transactions: the last stable offset's liveness (KIP-98,
//! KIP-890). A read_committed consumer reads a partition only up to its
//! first transaction no marker has ended; the coordinator ends every
//! transaction it knows of, at the latest by aborting it once the
//! transaction timeout passes. A transaction the coordinator never heard of
//! — a produce that arrived after its transaction aborted, the pre-KIP-890
//! bug (KAFKA-14402) — is ended by nobody, and holds every read_committed
//! consumer at its first offset for good.
//!
//! So: a partition whose final log holds a transactional batch with no
//! marker of its producer after it, once every `txn` op of that producer
//! has finished at least the transaction timeout before the run's end
//! (its last op), hangs. One whose producer's last op ended within the
//! timeout may still be aborted: unknown, never valid. A transactional
//! run's end waits out the timeout and the coordinator's abort scan unless
//! every last stable offset meets its high watermark first, and records its
//! last look at each (`stable-offsets`, run/stable.rs): the evidence names
//! it, the offset a read_committed consumer was held at.

use std::collections::BTreeMap;

use super::evidence::Hanging;
use super::index::{EVIDENCE_MAX, RunIndex};
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence, RunData};
use crate::history::{Body, OpType};
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "hanging-transactions";

/// Kafka's default `transaction.timeout.ms` (the producer's; the
/// coordinator aborts a transaction open longer): what a run that does not
/// record its own is held to.
pub const TRANSACTION_TIMEOUT_MS_DEFAULT: u64 = 60_000;

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "Every transaction a partition's log holds is ended by a marker once its \
            producer is done with it: none stays open past the transaction timeout after its \
            producer's last transactional op, so the last stable offset, and every \
            read_committed consumer, moves on.",
        source: "KIP-98 (the coordinator aborts a transaction open longer than \
            transaction.timeout.ms; the last stable offset bounds read_committed fetches); \
            KIP-890 and KAFKA-14402 (a late produce after an abort started a transaction no \
            coordinator knew of, and the LSO hung; fixed in 3.6.0).",
        not_checked: "Transactions whose producer's last op ended within the transaction \
            timeout of the run's end (unknown: the coordinator may yet abort them), or whose \
            producer id no op of the history recorded (unknown). The timeout is Kafka's default \
            (60 s) unless the run records another. Partitions without a final log.",
        needs: &[],
        check,
    }
}

/// The transaction timeout a run's producers were given, in ms, and where
/// that figure comes from.
pub fn transaction_timeout_ms(run: &RunData) -> (u64, &'static str) {
    match &run.schedule {
        // The harness's transactional producers asked for the schedule's.
        Some(schedule) if run.history.iter().any(|op| op.f() == "txn") => (
            u64::try_from(schedule.workload.transaction_timeout().as_millis()).unwrap_or(u64::MAX),
            "the schedule's transaction_timeout_ms",
        ),
        _ => (
            TRANSACTION_TIMEOUT_MS_DEFAULT,
            "Kafka's default transaction.timeout.ms",
        ),
    }
}

fn check(index: &RunIndex) -> CheckOutcome {
    let view = index.txns();
    let (timeout_ms, timeout_from) = transaction_timeout_ms(index.run);
    let timeout_ns = timeout_ms.saturating_mul(1_000_000);
    // Each producer id's last txn op: its history index and when it ended.
    let mut last_op: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    for t in &view.txns {
        let Some(producer) = t.txn.producer else {
            continue;
        };
        // One never completed has not finished: it counts as ending now.
        let ended = t.completed.map_or(view.end_ns, |(_, ns)| ns);
        let entry = last_op.entry(producer.id).or_insert((t.index(), ended));
        if ended >= entry.1 {
            *entry = (t.index(), ended);
        }
    }
    // Each partition's last answered look at its last stable offset (the
    // run's end, in a transactional run): its history index and the offset.
    let mut looks: BTreeMap<&PartitionRef, (u64, i64)> = BTreeMap::new();
    for op in &index.run.history {
        if let (OpType::Ok, Body::StableOffsets(look)) = (op.kind, &op.body)
            && let Some((lso, _)) = look.offsets()
        {
            looks.insert(&look.partition, (op.index, lso));
        }
    }
    let mut evidence = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    let mut open = 0u64;
    let logs = || {
        view.partitions
            .iter()
            .zip(&view.logs)
            .filter_map(|(partition, log)| Some((partition, log.as_ref().ok()?)))
    };
    for (partition, log) in logs() {
        for txn in log.transactions.open() {
            open += 1;
            let last = last_op.get(&txn.producer_id).copied();
            let hung =
                last.is_some_and(|(_, ended)| view.end_ns.saturating_sub(ended) >= timeout_ns);
            if !hung {
                if unknown.len() < EVIDENCE_MAX {
                    unknown.push(match last {
                        Some((op, ended)) => format!(
                            "{partition} holds producer {}'s transaction open from offset {}, \
                             and its last op (history index {op}) ended {} ms before the run's \
                             end, within the {timeout_ms} ms timeout ({timeout_from})",
                            txn.producer_id,
                            txn.first_offset,
                            view.end_ns.saturating_sub(ended) / 1_000_000
                        ),
                        None => format!(
                            "{partition} holds producer {}'s transaction open from offset {}, \
                             a producer no op of the history names",
                            txn.producer_id, txn.first_offset
                        ),
                    });
                }
                continue;
            }
            if evidence.len() >= EVIDENCE_MAX {
                continue;
            }
            let look = looks.get(partition).copied();
            let seen = match look {
                Some((op, lso)) => format!(
                    "; the run's last look (history index {op}) read the last stable offset {lso}"
                ),
                None => String::new(),
            };
            evidence.push(Evidence::new(
                Anomaly::HangingTransaction,
                format!(
                    "{partition} holds producer {} (epoch {})'s transaction open from offset {} \
                     with no marker after it; its last op{} ended {} ms before the run's end, \
                     past the {timeout_ms} ms transaction timeout ({timeout_from}): the last \
                     stable offset is stuck at {}{seen}",
                    txn.producer_id,
                    txn.producer_epoch,
                    txn.first_offset,
                    last.map(|(op, _)| format!(" (history index {op})"))
                        .unwrap_or_default(),
                    last.map_or(0, |(_, ended)| view.end_ns.saturating_sub(ended)
                        / 1_000_000),
                    txn.first_offset
                ),
                Hanging {
                    first_offset: txn.first_offset,
                    last_look: look.map(|(op, _)| op),
                    last_stable_offset: look.map(|(_, lso)| lso),
                    last_op: last.map(|(op, _)| op),
                    last_op_ended_ns: last.map(|(_, ended)| ended),
                    partition: partition.clone(),
                    producer_epoch: txn.producer_epoch,
                    producer_id: txn.producer_id,
                    run_end_ns: view.end_ns,
                    timeout_ms,
                },
            ));
        }
    }
    let transactions: usize = logs().map(|(_, l)| l.transactions.txns.len()).sum();
    let result = CheckResult::fold(
        NAME,
        evidence,
        |found| {
            format!(
                "{} hanging transaction(s): the last stable offset is stuck",
                found.len()
            )
        },
        (!unknown.is_empty()).then(|| unknown.join("; ")),
        || {
            format!(
                "{transactions} transaction(s) in {} final log(s), every one ended by a marker",
                logs().count()
            )
        },
    );
    Ok(result
        .with_count("logged-transactions", transactions as u64)
        .with_count("open", open))
}
