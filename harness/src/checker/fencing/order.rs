//! Rules 3 and 4 of the fencing checker: each broker applies a partition's
//! leadership decisions in the order they were made. A controller sends one
//! broker its decisions in order on one connection, and a broker ignores a
//! LeaderAndIsr whose leader epoch is below the one it holds (Kafka's
//! ReplicaManager.becomeLeaderOrFollower), so an older decision reaching a
//! broker late — a stale controller's held request, a retry on a second
//! connection — changes nothing. Where that rule slips, the broker takes a
//! role it already left; the final state may hide it (the next decision puts
//! it right), so the check reads every applied decision, not the end.

use std::collections::BTreeMap;

use crate::checker::evidence::{
    EtcdEpochRegressed, EtcdState, OutOfOrderApplied, StaleEpochApplied, StateChangeEntry,
};
use crate::checker::{Anomaly, Evidence};
use crate::node::NodeId;
use crate::observe::timeline::PartitionStateChange;
use crate::observe::timeline::Timeline;
use crate::reader::state_change::StateChange;

/// A partition state as etcd and a state-change entry both name it: topic,
/// partition, leader, leader epoch and the ISR as a set.
type StateKey = (String, i64, i32, i32, Vec<i32>);

fn state_key(topic: &str, partition: i64, leader: i32, epoch: i32, isr: &[i32]) -> StateKey {
    let mut isr = isr.to_vec();
    isr.sort_unstable();
    (topic.to_owned(), partition, leader, epoch, isr)
}

/// A state-change entry and its index in its broker's log.
type Indexed<'a> = (usize, &'a StateChange);

/// A broker's applied LeaderAndIsr entries for one partition, with their
/// indexes in its state-change log.
fn applied_by_partition(
    entries: &[StateChange],
) -> BTreeMap<(&str, i32), Vec<(usize, &StateChange)>> {
    let mut by_partition: BTreeMap<(&str, i32), Vec<(usize, &StateChange)>> = BTreeMap::new();
    for (index, entry) in entries.iter().enumerate() {
        if entry.request == "LeaderAndIsr" && entry.applied() {
            by_partition
                .entry((entry.topic.as_str(), entry.partition))
                .or_default()
                .push((index, entry));
        }
    }
    by_partition
}

/// Rule 3: along one broker's log, an applied LeaderAndIsr for a partition
/// whose leader epoch is below one the broker applied for it before. One
/// evidence per (broker, partition), naming the first such entry, the newer
/// one before it, and how many entries went back.
pub(super) fn leader_epochs_regressed(logs: &BTreeMap<NodeId, Vec<StateChange>>) -> Vec<Evidence> {
    let mut evidence = Vec::new();
    for (&node, entries) in logs {
        for ((topic, partition), applied) in applied_by_partition(entries) {
            let mut newest: Option<(usize, &StateChange)> = None;
            let mut first: Option<(Indexed, Indexed)> = None;
            let mut count = 0;
            for &(index, entry) in &applied {
                match newest {
                    Some(newer) if entry.leader_epoch < newer.1.leader_epoch => {
                        count += 1;
                        first.get_or_insert(((index, entry), newer));
                    }
                    _ => newest = Some((index, entry)),
                }
            }
            let Some(((index, entry), (newer_index, newer))) = first else {
                continue;
            };
            evidence.push(Evidence {
                anomaly: Anomaly::LeaderEpochRegressed,
                summary: format!(
                    "{node} applied LeaderAndIsr for {topic}-{partition} at leader epoch {} \
                     (leader {}, controller {} epoch {}) after applying leader epoch {} \
                     ({count} such entries)",
                    entry.leader_epoch,
                    entry.leader,
                    entry.controller_id,
                    entry.controller_epoch,
                    newer.leader_epoch,
                ),
                details: StaleEpochApplied::of(node, (index, entry), (newer_index, newer), count)
                    .into(),
            });
        }
    }
    evidence
}

/// Rule 4: along one broker's log, an applied LeaderAndIsr whose state
/// (leader, leader epoch, ISR) etcd recorded only at revisions before the
/// first revision of a state the broker applied earlier for the partition:
/// a decision taken before one already applied. A state etcd recorded more
/// than once (an ISR that shrank and grew back) counts as its latest
/// recording, and the earlier decision as its first, so only an order etcd
/// proves is flagged. States etcd never recorded are rule 2's; leader epochs
/// going back are rule 3's and not repeated here.
pub(super) fn decisions_out_of_order(
    logs: &BTreeMap<NodeId, Vec<StateChange>>,
    timeline: &Timeline,
) -> Vec<Evidence> {
    let mut recorded: BTreeMap<StateKey, Vec<i64>> = BTreeMap::new();
    for state in &timeline.partition_states {
        let key = state_key(
            &state.topic,
            i64::from(state.partition),
            state.leader,
            state.leader_epoch,
            &state.isr,
        );
        recorded.entry(key).or_default().push(state.revision);
    }
    let revisions_of = |entry: &StateChange| -> Option<Vec<i64>> {
        let key = state_key(
            &entry.topic,
            i64::from(entry.partition),
            entry.leader,
            entry.leader_epoch,
            &entry.isr,
        );
        recorded.get(&key).cloned()
    };
    let mut evidence = Vec::new();
    for (&node, entries) in logs {
        for (_, applied) in applied_by_partition(entries) {
            // The applied entry whose state etcd first recorded latest.
            let mut newest: Option<(usize, &StateChange, i64)> = None;
            for &(index, entry) in &applied {
                let Some(revisions) = revisions_of(entry) else {
                    continue;
                };
                let (first, last) = (revisions[0], revisions[revisions.len() - 1]);
                match newest {
                    Some((newer_index, newer, newer_first))
                        if last < newer_first && entry.leader_epoch == newer.leader_epoch =>
                    {
                        evidence.push(out_of_order(
                            node,
                            (index, entry),
                            &revisions,
                            (newer_index, newer),
                            revisions_of(newer),
                        ));
                        break;
                    }
                    Some((_, _, newer_first)) if first <= newer_first => {}
                    _ => newest = Some((index, entry, first)),
                }
            }
        }
    }
    evidence
}

fn out_of_order(
    node: NodeId,
    (index, entry): (usize, &StateChange),
    revisions: &[i64],
    (newer_index, newer): (usize, &StateChange),
    newer_revisions: Option<Vec<i64>>,
) -> Evidence {
    Evidence {
        anomaly: Anomaly::DecisionOutOfOrder,
        summary: format!(
            "{node} applied LeaderAndIsr for {}-{} (leader {}, leader epoch {}, ISR {:?}), \
             which etcd recorded at revisions {revisions:?}, after applying ISR {:?} of the \
             same epoch, which etcd recorded later",
            entry.topic, entry.partition, entry.leader, entry.leader_epoch, entry.isr, newer.isr,
        ),
        details: OutOfOrderApplied {
            applied: StateChangeEntry::of(node, index, entry),
            etcd_revisions: revisions.to_vec(),
            newer_applied_before: StateChangeEntry::of(node, newer_index, newer),
            newer_etcd_revisions: newer_revisions.unwrap_or_default(),
        }
        .into(),
    }
}

/// Rule 5: etcd records a partition state whose leader epoch is below one it
/// recorded for the partition before: a leader or controller wrote with an
/// epoch it had been told was over. One evidence per partition, naming the
/// first such state and the newer one before it. A state of epoch 0 is left
/// out: it is what a topic deleted and created again starts with, and the
/// timeline does not record deletions.
pub(super) fn etcd_epochs_regressed(timeline: &Timeline) -> Vec<Evidence> {
    let mut newest: BTreeMap<(&str, u32), &PartitionStateChange> = BTreeMap::new();
    let mut found: BTreeMap<(&str, u32), (&PartitionStateChange, &PartitionStateChange, usize)> =
        BTreeMap::new();
    for state in &timeline.partition_states {
        let key = (state.topic.as_str(), state.partition);
        match newest.get(&key) {
            Some(newer) if state.leader_epoch < newer.leader_epoch && state.leader_epoch > 0 => {
                found
                    .entry(key)
                    .and_modify(|(_, _, count)| *count += 1)
                    .or_insert((state, newer, 1));
            }
            Some(newer) if state.leader_epoch < newer.leader_epoch => {}
            _ => {
                newest.insert(key, state);
            }
        }
    }
    let etcd = |s: &PartitionStateChange| EtcdState {
        controller_epoch: s.controller_epoch,
        isr: s.isr.clone(),
        leader: s.leader,
        leader_epoch: s.leader_epoch,
        revision: s.revision,
    };
    found
        .into_values()
        .map(|(state, newer, count)| Evidence {
            anomaly: Anomaly::EtcdLeaderEpochRegressed,
            summary: format!(
                "etcd recorded {}-{} at leader epoch {} (leader {}, ISR {:?}) after leader \
                 epoch {} ({count} such states)",
                state.topic,
                state.partition,
                state.leader_epoch,
                state.leader,
                state.isr,
                newer.leader_epoch,
            ),
            details: EtcdEpochRegressed {
                newer_recorded_before: etcd(newer),
                partition: state.partition,
                regressed: etcd(state),
                states: count,
                topic: state.topic.clone(),
            }
            .into(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::timeline::PartitionStateChange;

    fn applied(epoch: i32, isr: &[i32]) -> StateChange {
        StateChange::of_t0(1, epoch, isr)
    }

    fn state(revision: i64, epoch: i32, isr: &[i32]) -> PartitionStateChange {
        PartitionStateChange::of_t0(revision, 1, epoch, isr)
    }

    #[test]
    fn a_leader_epoch_going_back_on_one_broker_is_named_once_per_partition() {
        let mut rejected = applied(1, &[1]);
        rejected.outcome = "rejected".into();
        let mut other_partition = applied(0, &[1]);
        other_partition.partition = 1;
        let mut logs = BTreeMap::new();
        logs.insert(
            NodeId::new(3),
            vec![
                applied(1, &[1]),
                applied(2, &[1]),
                rejected,
                other_partition,
                applied(2, &[1, 2]),
            ],
        );
        // The same epoch again (a session change's resend) and a rejected
        // older one are not a regression; another partition's is its own.
        assert!(leader_epochs_regressed(&logs).is_empty());
        let log = logs.get_mut(&NodeId::new(3)).unwrap();
        log.push(applied(1, &[1]));
        log.push(applied(0, &[1]));
        let evidence = leader_epochs_regressed(&logs);
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        let json = evidence[0].details.json();
        assert_eq!(json["stale"]["entry"], 5);
        assert_eq!(json["newer_applied_before"]["entry"], 4);
        assert_eq!(json["stale_entries"], 2);
        // Another broker that only ever saw epoch 1 went back on nothing.
        logs.insert(NodeId::new(2), vec![applied(1, &[1])]);
        assert_eq!(leader_epochs_regressed(&logs).len(), 1);
    }

    #[test]
    fn an_isr_etcd_replaced_applied_after_its_successor_is_out_of_order_unless_etcd_recorded_it_again()
     {
        let timeline = Timeline {
            partition_states: vec![
                state(10, 1, &[1, 2, 3]),
                state(12, 1, &[1, 2]),
                state(14, 1, &[1, 2, 3]),
                state(20, 2, &[1]),
            ],
            controllers: vec![],
            registrations: Vec::new(),
        };
        let mut logs = BTreeMap::new();
        // [1,2,3] again after [1,2]: etcd recorded it again at 14, in order.
        logs.insert(
            NodeId::new(1),
            vec![
                applied(1, &[1, 2]),
                applied(1, &[3, 2, 1]),
                applied(2, &[1]),
            ],
        );
        assert!(decisions_out_of_order(&logs, &timeline).is_empty());
        let timeline = Timeline {
            partition_states: timeline.partition_states[..2].to_vec(),
            ..timeline
        };
        let evidence = decisions_out_of_order(&logs, &timeline);
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        let json = evidence[0].details.json();
        assert_eq!(json["applied"]["entry"], 1);
        assert_eq!(json["etcd_revisions"], serde_json::json!([10]));
        assert_eq!(json["newer_etcd_revisions"], serde_json::json!([12]));
    }

    #[test]
    fn etcd_recording_a_lower_leader_epoch_for_a_partition_is_named_once_unless_it_is_a_new_topic_s_0()
     {
        let mut timeline = Timeline {
            partition_states: vec![
                state(10, 1, &[1, 2]),
                state(12, 2, &[1]),
                state(14, 0, &[1]),
            ],
            controllers: vec![],
            registrations: Vec::new(),
        };
        assert!(etcd_epochs_regressed(&timeline).is_empty());
        timeline.partition_states.push(state(16, 1, &[1, 2]));
        timeline.partition_states.push(state(18, 1, &[1]));
        let evidence = etcd_epochs_regressed(&timeline);
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        let json = evidence[0].details.json();
        assert_eq!(json["regressed"]["revision"], 16);
        assert_eq!(json["newer_recorded_before"]["revision"], 12);
        assert_eq!(json["states"], 2);
    }
}
