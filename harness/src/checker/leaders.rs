//! One leader per leader epoch. A leader epoch names one leadership of a
//! partition: the controller picks one leader and bumps the epoch, and the
//! leader stamps every batch it appends with it (KIP-101). Two leaders in one
//! epoch break the premise truncation rests on — that an epoch's records came
//! from one log — so followers can keep records the leader never had. This
//! checker looks for it three ways, each from evidence the brokers cannot
//! rewrite after the fact: etcd's timeline, the brokers' state-change logs,
//! and the batches on every replica's disk.

use std::collections::{BTreeMap, BTreeSet};

use super::CheckOutcome;
use super::evidence::{
    AppliedBy, AppliedLeader, EtcdLeader, HeldInBatch, LeadersApplied, LeadersInEtcd,
    WritersInOneEpoch,
};
use super::{Anomaly, CheckResult, Checker, Evidence, Need, RunIndex};
use crate::node::NodeId;
use crate::observe::timeline::Timeline;
use crate::reader::state_change::StateChange;
use crate::reader::{Batch, DataDirState, Payload, ReplicaState};
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "one-leader-per-epoch";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A partition has at most one leader per leader epoch: (a) etcd never \
            records two different leaders for one (partition, leader epoch); (b) no two \
            applied LeaderAndIsr decisions, on any brokers, name different leaders for one \
            (partition, leader epoch); (c) no two replicas hold different values at one \
            offset in batches stamped with the same partition leader epoch (two brokers \
            appended as leader in one epoch).",
        source: "KIP-101 (Alter Replication Protocol to use Leader Epoch rather than High \
            Watermark for Truncation): the leader epoch is assigned by the controller and \
            stamped by the leader on every batch (partitionLeaderEpoch); Kafka \
            documentation, Replication (\"each partition in Kafka has a single leader and \
            zero or more followers\"); \
            GUARANTEES.md (one leader per epoch).",
        not_checked: "Leaderless states (leader -1) are not leaders. Rule (b) reads only \
            applied LeaderAndIsr entries (UpdateMetadata and rejected entries are not \
            leadership). Rule (c) compares record values only (not keys, headers or \
            timestamps), only intact batches, and only offsets two replicas both still \
            hold: a second leader whose records were all truncated away leaves no trace \
            on disk. Two leaders that wrote the same values at the same offsets are not \
            told apart. Whether a leader acted after losing leadership in a *later* epoch \
            is not this checker's question (see the fencing checker). Each rule is \
            skipped, and the verdict at best unknown, when its input is missing: (a) \
            without etcd's timeline, (b) without state-change logs, (c) without replicas.",
        needs: &[Need::ReplicaFiles, Need::EtcdTimeline, Need::StateChangeLog],
        check,
    }
}

pub fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let mut evidence = Vec::new();
    let mut skipped = Vec::new();
    match &run.timeline {
        Some(timeline) => evidence.extend(etcd_leaders(timeline)),
        None => skipped.push("(a) needs etcd's timeline, which the run did not record"),
    }
    if run.state_changes.is_empty() {
        skipped.push("(b) needs the brokers' state-change logs; there are none");
    } else {
        evidence.extend(applied_leaders(&run.state_changes));
    }
    if run.replicas.is_empty() {
        skipped.push("(c) needs the replicas' data directories; there are none");
    } else {
        evidence.extend(replica_writers(&run.replicas));
    }
    let applied = run
        .state_changes
        .values()
        .flatten()
        .filter(|entry| is_applied_leader_and_isr(entry))
        .count() as u64;
    let states = run
        .timeline
        .as_ref()
        .map_or(0, |t| t.partition_states.len() as u64);
    let result = CheckResult::fold(
        NAME,
        evidence,
        |evidence| {
            format!(
                "{} (partition, leader epoch) pairs with two leaders",
                evidence.len()
            )
        },
        (!skipped.is_empty()).then(|| {
            format!(
                "no two leaders found in what was checked, but rule {}",
                skipped.join("; rule ")
            )
        }),
        || {
            "one leader per (partition, leader epoch) in etcd, in the applied decisions \
             and on disk"
                .to_owned()
        },
    );
    Ok(result
        .with_count("etcd-partition-states", states)
        .with_count("applied-leader-and-isr", applied))
}

fn is_applied_leader_and_isr(entry: &StateChange) -> bool {
    entry.request == "LeaderAndIsr" && entry.applied()
}

/// Rule (a): every state key write with a leader, grouped by (partition,
/// leader epoch); more than one leader in a group is evidence.
fn etcd_leaders(timeline: &Timeline) -> Vec<Evidence> {
    let mut groups: BTreeMap<(&str, u32, i32), BTreeMap<i32, Vec<i64>>> = BTreeMap::new();
    for state in timeline.partition_states.iter().filter(|s| s.leader != -1) {
        groups
            .entry((&state.topic, state.partition, state.leader_epoch))
            .or_default()
            .entry(state.leader)
            .or_default()
            .push(state.revision);
    }
    groups
        .into_iter()
        .filter(|(_, leaders)| leaders.len() > 1)
        .map(|((topic, partition, epoch), leaders)| {
            let named: Vec<String> = leaders
                .iter()
                .map(|(leader, revisions)| format!("{leader} (revisions {revisions:?})"))
                .collect();
            Evidence {
                anomaly: Anomaly::TwoLeadersInEtcd,
                summary: format!(
                    "{topic}-{partition} leader epoch {epoch}: etcd recorded leaders {}",
                    named.join(" and ")
                ),
                details: LeadersInEtcd {
                    leader_epoch: epoch,
                    leaders: leaders
                        .into_iter()
                        .map(|(leader, revisions)| EtcdLeader { leader, revisions })
                        .collect(),
                    partition,
                    topic: topic.to_owned(),
                }
                .into(),
            }
        })
        .collect()
}

/// Rule (b): applied LeaderAndIsr entries of every broker, grouped by
/// (partition, leader epoch); more than one leader in a group is evidence.
fn applied_leaders(logs: &BTreeMap<NodeId, Vec<StateChange>>) -> Vec<Evidence> {
    type Seen<'a> = Vec<(NodeId, usize, &'a StateChange)>;
    let mut groups: BTreeMap<(&str, i32, i32), BTreeMap<i32, Seen<'_>>> = BTreeMap::new();
    for (&node, entries) in logs {
        for (index, entry) in entries.iter().enumerate() {
            if !is_applied_leader_and_isr(entry) || entry.leader == -1 {
                continue;
            }
            groups
                .entry((&entry.topic, entry.partition, entry.leader_epoch))
                .or_default()
                .entry(entry.leader)
                .or_default()
                .push((node, index, entry));
        }
    }
    groups
        .into_iter()
        .filter(|(_, leaders)| leaders.len() > 1)
        .map(|((topic, partition, epoch), leaders)| {
            let named: Vec<String> = leaders
                .iter()
                .map(|(leader, seen)| {
                    let nodes: BTreeSet<NodeId> = seen.iter().map(|(node, _, _)| *node).collect();
                    let nodes: Vec<String> = nodes.iter().map(NodeId::to_string).collect();
                    format!("{leader} (applied by {})", nodes.join(", "))
                })
                .collect();
            Evidence {
                anomaly: Anomaly::TwoLeadersApplied,
                summary: format!(
                    "{topic}-{partition} leader epoch {epoch}: brokers applied LeaderAndIsr \
                     naming leaders {}",
                    named.join(" and ")
                ),
                details: LeadersApplied {
                    leader_epoch: epoch,
                    leaders: leaders
                        .iter()
                        .map(|(&leader, seen)| AppliedLeader {
                            applied: seen
                                .iter()
                                .map(|&(node, entry, state)| AppliedBy {
                                    controller_epoch: state.controller_epoch,
                                    controller_id: state.controller_id,
                                    entry,
                                    node,
                                    time_ms: state.time_ms,
                                })
                                .collect(),
                            leader,
                        })
                        .collect(),
                    partition,
                    topic: topic.to_owned(),
                }
                .into(),
            }
        })
        .collect()
}

/// One record as one replica holds it; the batch names its file and position
/// should it be evidence.
#[derive(Clone, Copy)]
struct Held<'a> {
    node: NodeId,
    epoch: i32,
    value: Option<&'a Payload>,
    batch: &'a Batch,
}

/// (partition, epoch, node a, node b) → (first offset, count, its two holdings).
type Found<'a> =
    BTreeMap<(&'a PartitionRef, i32, NodeId, NodeId), (i64, usize, Held<'a>, Held<'a>)>;

/// Every pair of holdings of one offset, in the order given, that disagree
/// within one epoch.
fn differing<'a>(
    partition: &'a PartitionRef,
    offset: i64,
    group: &[Held<'a>],
    found: &mut Found<'a>,
) {
    for (i, a) in group.iter().enumerate() {
        for b in &group[i + 1..] {
            if a.epoch != b.epoch || a.value == b.value || a.node == b.node {
                continue;
            }
            let (a, b) = if a.node < b.node { (a, b) } else { (b, a) };
            found
                .entry((partition, a.epoch, a.node, b.node))
                .and_modify(|(_, count, _, _)| *count += 1)
                .or_insert((offset, 1, *a, *b));
        }
    }
}

/// A replica's records, in log order, each with its offset.
fn held_records(node: NodeId, replica: &ReplicaState) -> impl Iterator<Item = (i64, Held<'_>)> {
    replica.records().map(move |(batch, record)| {
        let held = Held {
            node,
            epoch: batch.partition_leader_epoch,
            value: record.value.as_ref(),
            batch,
        };
        (record.offset, held)
    })
}

/// Rule (c): for every offset two replicas both hold in batches of the same
/// partition leader epoch, the values must be equal. One evidence per
/// (partition, epoch, pair of replicas), naming the first differing offset.
fn replica_writers<'a>(replicas: &'a BTreeMap<NodeId, DataDirState>) -> Vec<Evidence> {
    // Per partition, its replicas in node order.
    let mut holders: BTreeMap<PartitionRef, Vec<(NodeId, &'a ReplicaState)>> = BTreeMap::new();
    for (&node, dir) in replicas {
        for replica in &dir.replicas {
            holders
                .entry(replica.partition_ref())
                .or_default()
                .push((node, replica));
        }
    }
    let mut found: Found<'_> = BTreeMap::new();
    for (partition, holders) in &holders {
        let records = |&(node, replica): &(NodeId, &'a ReplicaState)| held_records(node, replica);
        // Every record grouped by offset: within an offset, node order then
        // log order. Replicas in offset order (the rule) are walked side by
        // side, holding nothing but one offset's records: they hold millions.
        let in_order = holders
            .iter()
            .all(|(_, replica)| replica.records().map(|(_, r)| r.offset).is_sorted());
        if in_order {
            let mut walks: Vec<_> = holders.iter().map(|h| records(h).peekable()).collect();
            let mut group = Vec::new();
            while let Some(offset) = walks
                .iter_mut()
                .filter_map(|w| w.peek().map(|(offset, _)| *offset))
                .min()
            {
                group.clear();
                for walk in &mut walks {
                    while let Some((_, held)) = walk.next_if(|(o, _)| *o == offset) {
                        group.push(held);
                    }
                }
                differing(partition, offset, &group, &mut found);
            }
            continue;
        }
        // Otherwise one list, with a stable sort.
        let mut by_offset: Vec<(i64, Held<'_>)> = holders.iter().flat_map(records).collect();
        by_offset.sort_by_key(|(offset, _)| *offset);
        for group in by_offset.chunk_by(|a, b| a.0 == b.0) {
            let held: Vec<Held<'_>> = group.iter().map(|(_, held)| *held).collect();
            differing(partition, group[0].0, &held, &mut found);
        }
    }
    let shown = |value: Option<&Payload>| value.map_or("null".to_owned(), |v| v.to_string());
    found
        .into_iter()
        .map(
            |((partition, epoch, _, _), (offset, count, a, b))| Evidence {
                anomaly: Anomaly::TwoWritersInOneEpoch,
                summary: format!(
                    "{partition} offset {offset}, leader epoch {epoch}: {} holds {}, \
                     {} holds {} ({count} offsets differ in this epoch)",
                    a.node,
                    shown(a.value),
                    b.node,
                    shown(b.value)
                ),
                details: WritersInOneEpoch {
                    differing_offsets: count,
                    first_offset: offset,
                    leader_epoch: epoch,
                    partition: partition.partition,
                    replicas: [a, b]
                        .iter()
                        .map(|held| HeldInBatch {
                            batch_position: held.batch.position,
                            file: held.batch.file.display().to_string(),
                            node: held.node,
                            value: held.value.cloned(),
                        })
                        .collect(),
                    topic: partition.topic.clone(),
                }
                .into(),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::RunData;
    use crate::checker::Verdict;
    use crate::observe::timeline::PartitionStateChange;

    fn state(revision: i64, leader: i32, epoch: i32) -> PartitionStateChange {
        PartitionStateChange::of_t0(revision, leader, epoch, &[1, 2, 3])
    }

    fn applied(leader: i32, epoch: i32) -> StateChange {
        StateChange::of_t0(leader, epoch, &[1, 2])
    }

    #[test]
    fn leader_rule_a_flags_two_leaders_in_one_epoch_in_etcd_but_not_leaderless_states() {
        let clean = Timeline {
            partition_states: vec![
                state(2, 1, 0),
                state(3, 1, 0),
                state(4, -1, 0),
                state(5, 2, 1),
            ],
            controllers: vec![],
            registrations: Vec::new(),
        };
        assert!(etcd_leaders(&clean).is_empty());
        let mut two = clean.clone();
        two.partition_states.push(state(6, 3, 1));
        let evidence = etcd_leaders(&two);
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        assert_eq!(evidence[0].details.json()["leader_epoch"], 1);
        assert!(
            evidence[0].summary.contains("2 (revisions [5])"),
            "{}",
            evidence[0].summary
        );
        assert!(
            evidence[0].summary.contains("3 (revisions [6])"),
            "{}",
            evidence[0].summary
        );
    }

    #[test]
    fn leader_rule_b_flags_applied_decisions_only() {
        let mut logs = BTreeMap::new();
        logs.insert(NodeId::new(1), vec![applied(1, 0), applied(2, 1)]);
        let mut rejected = applied(3, 1);
        rejected.outcome = "rejected".into();
        let mut metadata = applied(3, 1);
        metadata.request = "UpdateMetadata".into();
        logs.insert(NodeId::new(2), vec![applied(2, 1), rejected, metadata]);
        assert!(applied_leaders(&logs).is_empty());
        logs.get_mut(&NodeId::new(2)).unwrap().push(applied(3, 1));
        let evidence = applied_leaders(&logs);
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        assert!(
            evidence[0]
                .summary
                .contains("2 (applied by b1, b2) and 3 (applied by b2)"),
            "{}",
            evidence[0].summary
        );
    }

    #[test]
    fn leader_checker_is_unknown_when_a_rule_lacks_its_input() {
        let run = RunData::default();
        let result = checker().check_run(&run).unwrap();
        assert_eq!(result.verdict, Verdict::Unknown);
        assert!(
            result.message.contains("(a) needs etcd's timeline"),
            "{}",
            result.message
        );
        // Invalid wins over a skipped rule.
        let mut run = RunData::default();
        run.state_changes
            .insert(NodeId::new(1), vec![applied(1, 0), applied(2, 0)]);
        assert_eq!(checker().check_run(&run).unwrap().verdict, Verdict::Invalid);
    }
}
