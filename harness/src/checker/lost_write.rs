//! Lost acknowledged writes, by GUARANTEES.md's lost-write rule ("Excuses"): a
//! value acknowledged with acks=all while the ISR was S is lost illegitimately
//! unless, after its acknowledgement, an unclean leader election happened or
//! every member of S lost it in disk faults (power loss, truncate-log) — or
//! the ISR *as it stood later* did: at a disk fault's revision (etcd read just
//! after its cut) or any later partition state, etcd names an ISR every
//! member of which had lost the value in disk faults since the ack (a dead
//! sole ISR member stays the ISR; an ISR that held the value nowhere is past
//! Kafka's promise — no loss while an in-sync replica survives). Lost means not in the
//! partition's final log (see [`super::final_log`]). acks=1 and acks=0 writes
//! may be lost; they are counted, never invalid.
//!
//! The acknowledged values and final logs come from the run's index
//! (`super::index`), the excuses from `super::excuses`: both shared with
//! the offset-changed and consumer checkers.
//!
//! Its database twin, `database-lost-write`, holds the same writes against
//! a system's database as read after the run (`[final_state] database`):
//! for a system whose brokers keep their durable state there, a write the
//! database lacks is lost however the brokers answered.

use std::collections::{BTreeMap, BTreeSet};

use crate::node::NodeId;
use crate::schedule::Acks;

use super::CheckOutcome;
use super::evidence::{AckedWrite, LostWrite};
use super::excuses::{Excuses, Judgement};
use super::final_log::FinalLog;
use super::index::{
    AckedValue, EVIDENCE_MAX, IndexedLog, LogOf, RunIndex, excused_by, unknown_message,
};
use super::{Anomaly, CheckResult, Checker, Evidence, Need};

pub const NAME: &str = "lost-write";
pub const DATABASE_NAME: &str = "database-lost-write";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A write acknowledged with acks=all is not lost while at least one replica of the \
            in-sync set it was acknowledged under stays alive: absent an unclean leader election \
            after the acknowledgement, or disk faults (power loss, truncate-log) that took it from \
            every member of that ISR or of the ISR as it last stood, the value is in the \
            partition's final log.",
        source: "Kafka documentation, Design §4.7 Replication (\"a committed message will not be \
            lost, as long as there is at least one in sync replica alive\"; acks=all waits for the \
            full ISR; unclean.leader.election.enable trades this for availability); KIP-101 and \
            KIP-279 (leader-epoch truncation closes the ways a clean failover lost committed data); \
            GUARANTEES.md, \"Excuses\".",
        not_checked: "Writes that ended info or fail (they may or may not have happened). Whether a \
            disk fault is what actually removed the value (a power-loss or truncate-log op after \
            the ack naming every ISR member is an excuse; when the op records its cut, the cut \
            must reach the acked offset), and whether a node that lost it fetched it back before \
            the last ISR member lost it too. acks=1 and acks=0 losses are only counted. A value's position (see \
            offset-changed) and duplicates (see duplicates). Writes whose ack recorded no ISR or \
            leader epoch, or partitions whose final log cannot be chosen, make the verdict \
            unknown rather than valid. Records in damaged (non-intact) batches count as absent. \
            The ISR and leader epoch are etcd's just after the ack, not at it: an election in \
            between makes the rule stricter (an unclean election at that very epoch does not \
            excuse).",
        needs: &[],
        check,
    }
}

/// `lost-write` over a system's database in place of the final log.
pub fn database_checker() -> Checker {
    Checker {
        name: DATABASE_NAME,
        guarantee: "A write acknowledged with acks=all is in the system's database as the harness \
            reads it after the run, by its own client and not through a broker: for a system \
            whose brokers keep their durable state in a database, the database is where an \
            acknowledged write must survive (excuses as lost-write's).",
        source: "Kafka documentation, Design §4.7 Replication (a committed message will not be \
            lost); the system's own claim that a broker acknowledges a write once its storage \
            engine committed it (systems/tansu.toml, systems/nisshi.toml); GUARANTEES.md, \
            \"A system's database\".",
        not_checked: "As lost-write's. Besides: records of internal topics (`__` prefix), and \
            headers (the database's read leaves them out). A database that could not be read \
            makes the verdict unknown with the read's error (database/database.json).",
        needs: &[Need::Database],
        check: |index| check_against(index, LogOf::Database),
    }
}

fn check(index: &RunIndex) -> CheckOutcome {
    check_against(index, LogOf::Final)
}

/// Every acknowledged value held against `of`, each partition's final log
/// or its database.
fn check_against(index: &RunIndex, of: LogOf) -> CheckOutcome {
    let run = index.run;
    let acked = index.acked_sends().values()?;
    let excused_by_run = Excuses::of(run);
    let mut acked_count = 0usize;
    let mut evidence = Vec::new();
    // Legitimate losses, listed after any violation (they never make it invalid).
    let mut reported = Vec::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    // Why not → the first value it held back.
    let mut unknown: BTreeMap<String, String> = BTreeMap::new();
    let mut excuses: BTreeSet<String> = BTreeSet::new();
    for a in acked {
        // Counted here, entered in `counts` at the end: a map entry a value
        // costs more than the lookup below.
        acked_count += 1;
        let indexed = match index.log(of, &a.partition) {
            Ok(found) => found,
            Err(why) => {
                *counts
                    .entry(match a.acks {
                        Acks::All => "unchecked-acks-all",
                        Acks::Leader => "unchecked-acks-1",
                        Acks::None => "unchecked-acks-0",
                    })
                    .or_default() += 1;
                if a.acks == Acks::All {
                    unknown
                        .entry(why.to_string())
                        .or_insert_with(|| a.describe());
                }
                continue;
            }
        };
        let log = &indexed.log;
        if indexed.by_value.contains(a.value) {
            continue;
        }
        // Losses Kafka allows are reported by value too, not only counted.
        let mut report = |anomaly: Anomaly, why: &str| {
            if reported.len() < EVIDENCE_MAX {
                reported.push(Evidence::new(
                    anomaly,
                    format!(
                        "{} is not in {}: allowed, {why}",
                        a.describe(),
                        of.place(log)
                    ),
                    a.details(),
                ));
            }
        };
        match a.acks {
            Acks::Leader => {
                *counts.entry("lost-acks-1").or_default() += 1;
                report(Anomaly::LostAcks1Write, "acks=1 waits for the leader alone");
            }
            Acks::None => {
                *counts.entry("lost-acks-0").or_default() += 1;
                report(Anomaly::LostAcks0Write, "acks=0 waits for nothing");
            }
            Acks::All => match excused_by_run.judge(&a) {
                Judgement::Excused(why) => {
                    *counts.entry("lost-acks-all-excused").or_default() += 1;
                    report(Anomaly::LostAcksAllWriteExcused, &why);
                    excuses.insert(why);
                }
                Judgement::Undetermined(why) => {
                    *counts.entry("lost-acks-all-undetermined").or_default() += 1;
                    unknown.entry(why).or_insert_with(|| a.describe());
                }
                Judgement::NotExcused => {
                    *counts.entry("lost-acks-all").or_default() += 1;
                    if evidence.len() >= EVIDENCE_MAX {
                        continue;
                    }
                    evidence.push(unexcused(&a, indexed, of));
                }
            },
        }
    }
    if acked_count > 0 {
        counts.insert("acknowledged", acked_count as u64);
    }
    let lost = counts.get("lost-acks-all").copied().unwrap_or(0);
    let mut result = CheckResult::fold(
        NAME,
        evidence,
        |_| format!("{lost} acknowledged acks=all value(s) lost without excuse"),
        unknown_message(unknown),
        || {
            let against = match of {
                LogOf::Final => String::new(),
                LogOf::Database => " against the system's database".to_owned(),
            };
            format!(
                "{} acknowledged value(s) checked{against}; no acks=all write lost without \
                 excuse{}",
                acked_count,
                excused_by(&excuses)
            )
        },
    );
    result.evidence.extend(reported);
    for (name, n) in counts {
        result = result.with_count(name, n);
    }
    Ok(result)
}

/// The evidence of an acks=all value `of` lacks with no excuse: where it is
/// missing (the final log's replicas that lack it, or what the database
/// holds at its acknowledged offset).
fn unexcused(a: &AckedValue<'_>, indexed: &IndexedLog<'_>, of: LogOf) -> Evidence {
    let log = &indexed.log;
    let lacking = indexed.lacking(a.value);
    let missing_on = match of {
        LogOf::Final => format!(
            "; missing on {}",
            lacking
                .iter()
                .map(NodeId::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        LogOf::Database => held_at(log, a.offset),
    };
    Evidence::new(
        Anomaly::LostAcknowledgedWrite,
        format!(
            "{} is not in {}{missing_on}; no unclean election after the ack and no power loss \
             of its whole ISR",
            a.describe(),
            of.place(log),
        ),
        lost(a, log, lacking),
    )
}

/// `; it holds X at offset o`: what the database holds where the value was
/// acknowledged (a row changed after its acknowledgement shows here).
fn held_at(log: &FinalLog<'_>, offset: Option<i64>) -> String {
    let Some(offset) = offset else {
        return String::new();
    };
    let held = log
        .replica
        .records()
        .find(|(_, r)| r.offset == offset)
        .map_or("nothing".to_owned(), |(_, r)| {
            r.value
                .as_ref()
                .map_or("a null value".to_owned(), ToString::to_string)
        });
    format!("; it holds {held} at offset {offset}")
}

/// The particulars of an unexcused loss: the write, the final log it is
/// missing from and the replicas that lack it.
fn lost(a: &AckedValue<'_>, log: &FinalLog<'_>, lacking: Vec<NodeId>) -> LostWrite {
    let AckedWrite {
        acked_offset,
        acks,
        history_index,
        isr,
        leader_epoch,
        partition,
        value,
    } = a.details();
    LostWrite {
        acked_offset,
        acks,
        final_log: log.chosen.clone(),
        // Damage in the final log is often why a value is missing.
        final_log_findings: log.replica.findings.len(),
        final_log_node: log.node,
        history_index,
        isr,
        lacking,
        leader_epoch,
        partition,
        value,
    }
}
