//! Replicas agree after heal: below the lowest log end offset of the replicas
//! compared, every replica holds the same records at the same offsets with the
//! same batch leader epochs. The members of the final ISR (etcd's last state
//! of the partition; every replica when the timeline has no state for it) are
//! compared with each other; each replica outside the final ISR is compared
//! with the final leader's log, up to the shorter of the two. A replica left
//! outside — stuck, never rejoined — is exactly where a divergence survives
//! the heal unrepaired, so it is not excused for having fallen out: a conflict
//! there is divergence, and one that merely lags is reported as behind, with
//! its log end and the leader's.

use std::collections::{BTreeMap, BTreeSet};

use crate::node::NodeId;
use crate::reader::{Payload, ReplicaState};

use super::CheckOutcome;
use super::evidence;
use super::final_log::FinalLog;
use super::{Anomaly, CheckResult, Checker, Details, Evidence, Need, RunIndex};
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "divergence";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "After the cluster heals and quiesces, the in-sync replicas of a partition hold \
            identical logs up to their common end: the same record (value, control or data) at \
            every offset, in a batch of the same partition leader epoch.",
        source: "Kafka documentation, Design §4.7 Replication (followers replicate the leader's log \
            in the same order, at the same offsets); KIP-101 \"Alter Replication Protocol to use \
            Leader Epoch rather than High Watermark for Truncation\" (its scenarios 1 and 2 are \
            replica divergence) and KIP-279 (divergence after fast leader fail-over).",
        not_checked: "Anything at or past the lowest log end offset of the replicas compared (a \
            lagging replica is not divergent; one outside the final ISR is counted and named as \
            behind). Replicas outside the final ISR when the partition's final log cannot be \
            chosen. Offsets below the highest log start (first segment base) of the replicas. \
            Keys, headers, timestamps and batch boundaries. Records in damaged batches count as \
            absent, so damage below the common end is reported as divergence; damage at the tail \
            only lowers that replica's log end.",
        needs: &[Need::ReplicaFiles],
        check,
    }
}

/// What a replica holds at one offset: batch epoch, control flag, value.
type Slot<'a> = (i32, bool, Option<&'a Payload>);

/// What `replica` holds at each offset in `from..to`, by offset, the later
/// of two records at one offset winning as a map insert would. A sorted
/// list, not a map: replicas hold millions of records, almost always
/// already in offset order.
fn slots(replica: &ReplicaState, from: i64, to: i64) -> Vec<(i64, Slot<'_>)> {
    let mut held: Vec<(i64, Slot<'_>)> = replica
        .records()
        .filter(|(_, r)| r.offset >= from && r.offset < to)
        .map(|(b, r)| {
            (
                r.offset,
                (b.partition_leader_epoch, b.is_control(), r.value.as_ref()),
            )
        })
        .collect();
    if !held.is_sorted_by(|a, b| a.0 < b.0) {
        // Stable, so of equal offsets the later record stays later.
        held.sort_by_key(|(offset, _)| *offset);
        held.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
    }
    held
}

fn describe(slot: Option<&Slot>) -> evidence::Slot {
    match slot {
        None => evidence::Slot::Nothing(evidence::NothingHeld::Nothing),
        Some(&(epoch, control, value)) => evidence::Slot::Record {
            control,
            epoch,
            value: value.cloned(),
        },
    }
}

fn short(slot: Option<&Slot>) -> String {
    match slot {
        None => "nothing".into(),
        Some((epoch, true, _)) => format!("a control record (epoch {epoch})"),
        Some((epoch, false, value)) => format!(
            "{} (epoch {epoch})",
            value.as_ref().map_or("null".into(), |v| v.to_string())
        ),
    }
}

/// Where replicas first differ: the offset, the common end, and what each
/// replica holds there.
type Divergence<'a> = (i64, i64, Vec<(NodeId, Option<Slot<'a>>)>);

/// The first offset below the common end where the replicas differ, or `None`.
fn first_divergence<'a>(replicas: &[(NodeId, &'a ReplicaState)]) -> Option<Divergence<'a>> {
    let end = replicas.iter().map(|(_, r)| r.log_end_offset).min()?;
    let start = replicas
        .iter()
        .map(|(_, r)| r.segments.first().map_or(0, |s| s.base_offset))
        .max()?;
    let held: Vec<Vec<(i64, Slot<'a>)>> =
        replicas.iter().map(|(_, r)| slots(r, start, end)).collect();
    // Every offset any replica holds, in order: a walk of each list at once.
    let mut next = vec![0usize; held.len()];
    let mut at: Vec<Option<&Slot>> = Vec::with_capacity(held.len());
    loop {
        let offset = held
            .iter()
            .zip(&next)
            .filter_map(|(h, &i)| h.get(i).map(|(o, _)| *o))
            .min()?;
        at.clear();
        for (h, i) in held.iter().zip(next.iter_mut()) {
            match h.get(*i) {
                Some((o, slot)) if *o == offset => {
                    *i += 1;
                    at.push(Some(slot));
                }
                _ => at.push(None),
            }
        }
        if at.windows(2).any(|w| w[0] != w[1]) {
            return Some((
                offset,
                end,
                replicas
                    .iter()
                    .zip(&at)
                    .map(|((node, _), slot)| (*node, slot.copied()))
                    .collect(),
            ));
        }
    }
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let partitions = run.partitions();
    let mut evidence = Vec::new();
    let mut compared = 0u64;
    let mut outside_compared = 0u64;
    let mut outside_unchecked = 0u64;
    // Replicas outside the final ISR that only lag: `b3 t-0 (LEO 4, leader's 9)`.
    let mut behind: Vec<String> = Vec::new();
    for partition in &partitions {
        let all = run.holders(partition);
        let isr: Option<BTreeSet<NodeId>> = run.timeline.as_ref().and_then(|t| {
            t.states_of(&partition.topic, partition.partition)
                .last()
                .map(|s| {
                    s.isr
                        .iter()
                        .filter_map(|&id| NodeId::from_broker_id(id))
                        .collect()
                })
        });
        let (chosen, outside): (Vec<(NodeId, &ReplicaState)>, Vec<_>) = all
            .iter()
            .partition(|(node, _)| isr.as_ref().is_none_or(|isr| isr.contains(node)));
        if !outside.is_empty() {
            match FinalLog::of(run, partition) {
                Ok(log) => {
                    let Some(final_node) = log.node else {
                        outside_unchecked += outside.len() as u64;
                        continue;
                    };
                    for &(node, replica) in outside.iter().filter(|(n, _)| *n != final_node) {
                        outside_compared += 1;
                        let pair = [(final_node, log.replica), (node, replica)];
                        if let Some((offset, end, held)) = first_divergence(&pair) {
                            evidence.push(divergence(
                                partition,
                                &pair,
                                (offset, end, held),
                                Some(format!(
                                    "{node}, outside the final ISR, against the final log ({})",
                                    log.chosen
                                )),
                            ));
                        } else if replica.log_end_offset < log.replica.log_end_offset {
                            behind.push(format!(
                                "{node} {partition} (LEO {}, the final log's {})",
                                replica.log_end_offset, log.replica.log_end_offset
                            ));
                        }
                    }
                }
                Err(_) => outside_unchecked += outside.len() as u64,
            }
        }
        if chosen.len() < 2 {
            continue;
        }
        compared += 1;
        if let Some(found) = first_divergence(&chosen) {
            evidence.push(divergence(partition, &chosen, found, None));
        }
    }
    let result = CheckResult::fold(
        NAME,
        evidence,
        |evidence| {
            let partitions: BTreeSet<&PartitionRef> = evidence
                .iter()
                .filter_map(|e| match &e.details {
                    Details::Divergence(d) => Some(&d.partition),
                    _ => None,
                })
                .collect();
            format!("{} partition(s) with diverging replicas", partitions.len())
        },
        partitions
            .is_empty()
            .then(|| "the run left no replica to compare".to_owned()),
        || {
            let agree = if compared == 0 {
                "no partition had two in-sync replicas to compare".to_owned()
            } else {
                format!("{compared} partition(s): replicas agree up to their common end")
            };
            if behind.is_empty() {
                agree
            } else {
                format!(
                    "{agree}; outside the final ISR and behind: {}",
                    behind.join(", ")
                )
            }
        },
    );
    Ok(result
        .with_count("partitions-compared", compared)
        .with_count("replicas-outside-final-isr", outside_compared)
        .with_count("replicas-outside-final-isr-behind", behind.len() as u64)
        .with_count("replicas-outside-final-isr-unchecked", outside_unchecked))
}

/// The evidence of one divergence among `replicas`; `against` says, for a
/// replica outside the final ISR, what it was compared with.
fn divergence(
    partition: &crate::topic_partition::PartitionRef,
    replicas: &[(NodeId, &ReplicaState)],
    (offset, end, held): Divergence,
    against: Option<String>,
) -> Evidence {
    let summary = held
        .iter()
        .map(|(node, slot)| format!("{node} holds {}", short(slot.as_ref())))
        .collect::<Vec<_>>()
        .join(", ");
    let holds: BTreeMap<NodeId, evidence::Slot> = held
        .iter()
        .map(|(node, slot)| (*node, describe(slot.as_ref())))
        .collect();
    let who = match &against {
        Some(against) => format!("{against}: "),
        None => String::new(),
    };
    Evidence::new(
        Anomaly::ReplicaDivergence,
        format!("{partition} diverges at offset {offset} (common end {end}): {who}{summary}"),
        evidence::Divergence {
            common_end: end,
            holds,
            offset,
            outside_final_isr: against.is_some().then_some(true),
            partition: partition.clone(),
            replicas: replicas.iter().map(|(n, _)| *n).collect(),
        },
    )
}
