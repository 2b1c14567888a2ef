//! What the data checkers share: which replica holds a partition's final log,
//! the unclean elections in etcd's timeline, and partition names as the
//! history writes them (`t-0`).

use std::collections::{BTreeMap, BTreeSet};

use crate::reader::{CompactRecord, ReplicaState};
use crate::timeline::{PartitionStateChange, Timeline};

use super::RunData;

/// Node name of a broker id, as the run directory and the history spell it.
pub(crate) fn node_name(id: impl std::fmt::Display) -> String {
    format!("b{id}")
}

/// Every partition any node holds a replica of, as (topic, partition).
pub(crate) fn partitions(run: &RunData) -> BTreeSet<(String, i32)> {
    run.replicas
        .values()
        .flat_map(|dir| dir.replicas.iter().map(|r| (r.topic.clone(), r.partition)))
        .collect()
}

/// Every node holding a replica of the partition, in node order.
pub(crate) fn holders<'a>(
    run: &'a RunData,
    topic: &str,
    partition: i32,
) -> Vec<(&'a str, &'a ReplicaState)> {
    let mut holders: Vec<(&str, &ReplicaState)> = run
        .replicas
        .iter()
        .filter_map(|(node, dir)| Some((node.as_str(), dir.replica(topic, partition)?)))
        .collect();
    holders.sort_by_key(|(node, _)| node_order(node));
    holders
}

fn node_order(node: &str) -> (u64, String) {
    let number = node
        .strip_prefix('b')
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    (number, node.to_owned())
}

/// The partition's states in etcd's timeline, in revision order.
pub(crate) fn states<'a>(
    timeline: &'a Timeline,
    topic: &str,
    partition: i32,
) -> Vec<&'a PartitionStateChange> {
    timeline
        .partition_states
        .iter()
        .filter(|s| s.topic == topic && i64::from(s.partition) == i64::from(partition))
        .collect()
}

/// States whose leader (≠ -1) was not in the previous state's ISR: an unclean
/// leader election. The first state has no previous one and is not counted.
pub(crate) fn unclean_elections<'a>(
    timeline: &'a Timeline,
    topic: &str,
    partition: i32,
) -> Vec<&'a PartitionStateChange> {
    states(timeline, topic, partition)
        .windows(2)
        .filter(|w| w[1].leader != -1 && !w[0].isr.contains(&w[1].leader))
        .map(|w| w[1])
        .collect()
}

/// A partition's final log and how it was chosen.
pub(crate) struct FinalLog<'a> {
    /// The node whose replica is the final log.
    pub node: &'a str,
    pub replica: &'a ReplicaState,
    /// Why this replica: `b1, the final leader (etcd revision 12)` or
    /// `every replica agrees`.
    pub chosen: String,
    /// Every node holding a replica of the partition.
    pub holders: Vec<(&'a str, &'a ReplicaState)>,
}

impl FinalLog<'_> {
    /// Value (as text) → the offsets it is at, over intact data batches.
    pub fn offsets_by_value(&self) -> BTreeMap<String, Vec<i64>> {
        offsets_by_value(self.replica)
    }
}

pub(crate) fn offsets_by_value(replica: &ReplicaState) -> BTreeMap<String, Vec<i64>> {
    let mut map: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for record in replica.compact().records {
        if let Some(value) = &record.value {
            map.entry(value.to_string())
                .or_default()
                .push(record.offset);
        }
    }
    map
}

/// The replica of the partition's final leader (the last state in etcd's
/// timeline); with no timeline, or no leader at the end, any replica when
/// they all hold the same records, and otherwise no final log (`Err` why).
pub(crate) fn final_log<'a>(
    run: &'a RunData,
    topic: &str,
    partition: i32,
) -> Result<FinalLog<'a>, String> {
    let holders = holders(run, topic, partition);
    if holders.is_empty() {
        return Err(format!("no node holds a replica of {topic}-{partition}"));
    }
    let last = run
        .timeline
        .as_ref()
        .and_then(|t| states(t, topic, partition).last().copied());
    if let Some(state) = last
        && state.leader != -1
    {
        let leader = node_name(state.leader);
        let Some((node, replica)) = holders.iter().find(|(node, _)| *node == leader) else {
            return Err(format!(
                "the final leader of {topic}-{partition}, {leader} (etcd revision {}), left no replica in the run directory",
                state.revision
            ));
        };
        return Ok(FinalLog {
            node,
            replica,
            chosen: format!(
                "{leader}, the final leader (etcd revision {})",
                state.revision
            ),
            holders,
        });
    }
    let why = match (&run.timeline, last) {
        (None, _) => "no timeline",
        (Some(_), None) => "the timeline has no state for it",
        (Some(_), Some(_)) => "it ended with no leader",
    };
    let records: Vec<Vec<CompactRecord>> = holders
        .iter()
        .map(|(_, replica)| replica.compact().records)
        .collect();
    if records.windows(2).all(|w| w[0] == w[1]) {
        let (node, replica) = holders[0];
        return Ok(FinalLog {
            node,
            replica,
            chosen: format!("every replica agrees ({why})"),
            holders,
        });
    }
    Err(format!(
        "no final log for {topic}-{partition}: {why}, and its replicas disagree"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(revision: i64, leader: i32, leader_epoch: i32, isr: &[i32]) -> PartitionStateChange {
        PartitionStateChange {
            revision,
            topic: "t".into(),
            partition: 0,
            leader,
            leader_epoch,
            isr: isr.to_vec(),
            controller_epoch: 1,
        }
    }

    #[test]
    fn an_unclean_election_is_a_leader_outside_the_previous_isr() {
        let mut other = state(3, 3, 1, &[3]);
        other.topic = "u".into();
        let timeline = Timeline {
            partition_states: vec![
                state(1, 1, 0, &[1, 2, 3]),
                other,
                state(4, 1, 0, &[1]),
                // No leader is not an election.
                state(5, -1, 0, &[1]),
                // b2 was not in [1]: unclean.
                state(6, 2, 1, &[2]),
                // b2 was in [2]: clean.
                state(7, 2, 2, &[2, 3]),
            ],
            controllers: vec![],
        };
        let unclean = unclean_elections(&timeline, "t", 0);
        assert_eq!(
            unclean.iter().map(|s| s.revision).collect::<Vec<_>>(),
            vec![6]
        );
        assert!(unclean_elections(&timeline, "u", 0).is_empty());
    }
}
