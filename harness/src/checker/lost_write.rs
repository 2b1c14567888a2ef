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

use std::collections::{BTreeMap, BTreeSet};

use crate::node::NodeId;
use crate::schedule::Acks;

use super::CheckOutcome;
use super::evidence::{AckedWrite, LostWrite};
use super::excuses::{Excuses, Judgement};
use super::final_log::FinalLog;
use super::index::{AckedValue, EVIDENCE_MAX, RunIndex, excused_by, unknown_message};
use super::{Anomaly, CheckResult, Checker, Evidence};

pub const NAME: &str = "lost-write";

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

fn check(index: &RunIndex) -> CheckOutcome {
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
        let indexed = match index.final_log(&a.partition) {
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
                        "{} is not in the final log ({}): allowed, {why}",
                        a.describe(),
                        log.chosen
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
                    let lacking = indexed.lacking(a.value);
                    evidence.push(Evidence::new(
                        Anomaly::LostAcknowledgedWrite,
                        format!(
                            "{} is not in the final log ({}); missing on {}; no unclean election \
                             after the ack and no power loss of its whole ISR",
                            a.describe(),
                            log.chosen,
                            lacking
                                .iter()
                                .map(NodeId::to_string)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        lost(&a, log, lacking),
                    ));
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
            format!(
                "{} acknowledged value(s) checked; no acks=all write lost without excuse{}",
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
