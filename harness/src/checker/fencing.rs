//! Stale controllers are fenced. Since KAFKA-532 every controller decision
//! carries the controller epoch, and a broker rejects a decision whose epoch is
//! below the newest it has seen (STALE_CONTROLLER_EPOCH), so a controller that
//! was paused or cut off and resumes cannot undo its successor's decisions.
//! This checker reads what each broker applied, from its state-change log, and
//! etcd's timeline of what controllers committed. A rejected entry is the fence
//! working and is never evidence.

mod order;

use std::collections::{BTreeMap, BTreeSet};

use super::CheckOutcome;
use super::evidence::{EtcdState, StaleEpochApplied, StateChangeEntry, UncommittedApplied};
use super::{Anomaly, CheckResult, Checker, Evidence, Need, RunIndex};
use crate::node::NodeId;
use crate::observe::timeline::Timeline;
use crate::reader::state_change::StateChange;

pub const NAME: &str = "stale-controller-fenced";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "No broker applies a decision from a stale controller: (1) no applied \
            LeaderAndIsr, UpdateMetadata or StopReplica carries a controller epoch lower than \
            one the same broker applied earlier in its state-change log; (2) every applied \
            LeaderAndIsr names a (leader, leader epoch) that etcd recorded for that \
            partition — a decision no controller committed is what a stale controller sends. \
            Nor a stale decision of any controller: (3) a partition's leader epoch never goes \
            back along one broker's applied LeaderAndIsr; (4) no broker applies a partition \
            state (leader, epoch, ISR) that etcd recorded only before one it applied earlier; \
            (5) etcd never records a partition state whose leader epoch is below one it \
            recorded for the partition before.",
        source: "KAFKA-532 (Multiple controllers can co-exist during soft failures): the \
            controller epoch, StaleControllerEpochCode, and the broker's \
            `if (request.controllerEpoch < controllerEpoch)` rejection of LeaderAndIsr, \
            UpdateMetadata and StopReplica; LeaderElectionTest.\
            testLeaderElectionWithStaleControllerEpoch; broker/README.md, \
            \"Controller-epoch fencing\".",
        not_checked: "Rule 1 compares each broker only with itself, along its whole log: \
            across a restart too, where Kafka's broker forgets its controller epoch (a stale \
            decision applied after a restart is flagged, as it is still stale), but a broker \
            that never saw the newer epoch before the stale decision arrived cannot be caught \
            by rule 1 (rule 2 may catch it). Rule 2 matches only (partition, leader, leader \
            epoch), not the ISR or the controller epoch; a stale controller that still \
            managed to write its decision to etcd (KAFKA-532's per-path check lets it, for \
            a partition the new controller never touched) passes rule 2 and is caught only \
            by rule 1. Rule 2 does not read UpdateMetadata or StopReplica. Decisions a \
            broker received but did not log (a crash mid-write) are not seen. Rule 1 needs \
            the state-change logs; rule 2 needs them and etcd's timeline — without the \
            timeline, rule 2 is skipped and the verdict is at best unknown. Rules 3 and 4 \
            read applied LeaderAndIsr only (UpdateMetadata is a cache, not a role); rule 4 \
            compares states within one leader epoch (rule 3 has the rest), counts a state \
            etcd recorded twice as its latest recording, and skips states etcd never \
            recorded (rule 2's); it needs etcd's timeline. Rule 5 leaves out states of \
            leader epoch 0 (a topic created again starts there, and deletions are not in \
            the timeline).",
        needs: &[Need::EtcdTimeline, Need::StateChangeLog],
        check,
    }
}

pub fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    if run.state_changes.is_empty() {
        return Ok(CheckResult::unknown(
            NAME,
            "no state-change logs: both rules read what brokers applied, and there is nothing",
        ));
    }
    let mut evidence = stale_epochs_applied(&run.state_changes);
    evidence.extend(order::leader_epochs_regressed(&run.state_changes));
    if let Some(timeline) = &run.timeline {
        evidence.extend(uncommitted_decisions_applied(&run.state_changes, timeline));
        evidence.extend(order::decisions_out_of_order(&run.state_changes, timeline));
        evidence.extend(order::etcd_epochs_regressed(timeline));
    }
    let applied = run
        .state_changes
        .values()
        .flatten()
        .filter(|entry| entry.applied())
        .count() as u64;
    let rejected = run
        .state_changes
        .values()
        .flatten()
        .filter(|entry| !entry.applied())
        .count() as u64;
    let result = CheckResult::fold(
        NAME,
        evidence,
        |evidence| {
            format!(
                "{} stale or uncommitted controller decisions applied",
                evidence.len()
            )
        },
        run.timeline.is_none().then(|| {
            "rule 1 (controller epochs never go backwards in a broker's applied decisions) \
             holds; rule 2 (every applied LeaderAndIsr was committed in etcd) needs etcd's \
             timeline, which the run did not record"
                .to_owned()
        }),
        || {
            "no broker applied a decision with a stale controller epoch or one etcd never \
             recorded"
                .to_owned()
        },
    );
    Ok(result
        .with_count("applied", applied)
        .with_count("rejected", rejected))
}

/// Rule 1: along each broker's log, an applied entry whose controller epoch is
/// below the highest applied before it. One evidence per (broker, stale
/// controller, stale epoch, newer epoch), naming the first such entry.
fn stale_epochs_applied(logs: &BTreeMap<NodeId, Vec<StateChange>>) -> Vec<Evidence> {
    let mut evidence = Vec::new();
    for (&node, entries) in logs {
        let mut newest: Option<(usize, &StateChange)> = None;
        let mut found: BTreeMap<(i32, i32, i32), (usize, usize, usize)> = BTreeMap::new();
        for (index, entry) in entries.iter().enumerate() {
            if !entry.applied() {
                continue;
            }
            match newest {
                Some((newer_index, newer)) if entry.controller_epoch < newer.controller_epoch => {
                    found
                        .entry((
                            entry.controller_id,
                            entry.controller_epoch,
                            newer.controller_epoch,
                        ))
                        .and_modify(|(_, _, count)| *count += 1)
                        .or_insert((index, newer_index, 1));
                }
                Some((_, newer)) if entry.controller_epoch == newer.controller_epoch => {}
                _ => newest = Some((index, entry)),
            }
        }
        for ((_, stale_epoch, newer_epoch), (index, newer_index, count)) in found {
            let (entry, newer) = (&entries[index], &entries[newer_index]);
            evidence.push(Evidence {
                anomaly: Anomaly::StaleControllerEpochApplied,
                summary: format!(
                    "{node} applied {} for {}-{} (leader {}, leader epoch {}) from controller \
                     {} at controller epoch {stale_epoch} after applying controller epoch \
                     {newer_epoch} ({count} such entries)",
                    entry.request,
                    entry.topic,
                    entry.partition,
                    entry.leader,
                    entry.leader_epoch,
                    entry.controller_id
                ),
                details: StaleEpochApplied::of(node, (index, entry), (newer_index, newer), count)
                    .into(),
            });
        }
    }
    evidence
}

/// Rule 2: an applied LeaderAndIsr whose (leader, leader epoch) etcd never
/// recorded for its partition. The evidence shows what etcd did record for
/// that partition and leader epoch, with revisions.
fn uncommitted_decisions_applied(
    logs: &BTreeMap<NodeId, Vec<StateChange>>,
    timeline: &Timeline,
) -> Vec<Evidence> {
    let committed: BTreeSet<(&str, i64, i32, i32)> = timeline
        .partition_states
        .iter()
        .map(|s| {
            (
                s.topic.as_str(),
                i64::from(s.partition),
                s.leader,
                s.leader_epoch,
            )
        })
        .collect();
    let mut evidence = Vec::new();
    for (&node, entries) in logs {
        for (index, entry) in entries.iter().enumerate() {
            if entry.request != "LeaderAndIsr" || !entry.applied() {
                continue;
            }
            let key = (
                entry.topic.as_str(),
                i64::from(entry.partition),
                entry.leader,
                entry.leader_epoch,
            );
            if committed.contains(&key) {
                continue;
            }
            let recorded: Vec<EtcdState> = timeline
                .partition_states
                .iter()
                .filter(|s| {
                    s.topic == entry.topic
                        && i64::from(s.partition) == i64::from(entry.partition)
                        && s.leader_epoch == entry.leader_epoch
                })
                .map(|s| EtcdState {
                    controller_epoch: s.controller_epoch,
                    isr: s.isr.clone(),
                    leader: s.leader,
                    leader_epoch: s.leader_epoch,
                    revision: s.revision,
                })
                .collect();
            evidence.push(Evidence {
                anomaly: Anomaly::UncommittedDecisionApplied,
                summary: format!(
                    "{node} applied LeaderAndIsr for {}-{} naming leader {} at leader epoch {} \
                     (controller {}, controller epoch {}), which etcd never recorded{}",
                    entry.topic,
                    entry.partition,
                    entry.leader,
                    entry.leader_epoch,
                    entry.controller_id,
                    entry.controller_epoch,
                    match recorded.first() {
                        Some(first) => format!(
                            "; etcd's leader for that epoch: {} (revision {})",
                            first.leader, first.revision
                        ),
                        None => String::new(),
                    }
                ),
                details: UncommittedApplied {
                    applied: StateChangeEntry::of(node, index, entry),
                    etcd_states_in_that_epoch: recorded,
                }
                .into(),
            });
        }
    }
    evidence
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::RunData;
    use crate::checker::Verdict;
    use crate::observe::timeline::PartitionStateChange;

    fn entry(request: &str, controller_epoch: i32, leader: i32, epoch: i32) -> StateChange {
        StateChange {
            time_ms: 1,
            request: request.into(),
            controller_id: controller_epoch,
            controller_epoch,
            topic: "t".into(),
            partition: 0,
            leader,
            leader_epoch: epoch,
            isr: vec![leader],
            outcome: "applied".into(),
            reason: None,
        }
    }

    #[test]
    fn fencing_rule_1_flags_a_lower_epoch_applied_after_a_higher_one_not_a_rejected_one() {
        let mut logs = BTreeMap::new();
        let mut fenced = entry("LeaderAndIsr", 1, 1, 1);
        fenced.outcome = "rejected".into();
        logs.insert(
            NodeId::new(1),
            vec![
                entry("LeaderAndIsr", 1, 1, 0),
                entry("UpdateMetadata", 2, 2, 1),
                fenced,
                entry("LeaderAndIsr", 2, 2, 1),
            ],
        );
        // Another broker applying epoch 1 after b1 saw 2 is not b1's history.
        logs.insert(NodeId::new(2), vec![entry("LeaderAndIsr", 1, 1, 0)]);
        assert!(stale_epochs_applied(&logs).is_empty());
        logs.get_mut(&NodeId::new(1))
            .unwrap()
            .push(entry("StopReplica", 1, 1, 1));
        let evidence = stale_epochs_applied(&logs);
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        assert_eq!(evidence[0].details.json()["stale"]["entry"], 4);
        assert_eq!(
            evidence[0].details.json()["newer_applied_before"]["entry"],
            1
        );
    }

    #[test]
    fn fencing_checker_without_timeline_is_unknown_naming_rule_2() {
        let mut run = RunData::default();
        run.state_changes
            .insert(NodeId::new(1), vec![entry("LeaderAndIsr", 1, 1, 0)]);
        let result = checker().check_run(&run).unwrap();
        assert_eq!(result.verdict, Verdict::Unknown);
        assert!(result.message.contains("rule 2"), "{}", result.message);
        run.timeline = Some(Timeline {
            partition_states: vec![PartitionStateChange {
                revision: 5,
                topic: "t".into(),
                partition: 0,
                leader: 1,
                leader_epoch: 0,
                isr: vec![1],
                controller_epoch: 1,
            }],
            controllers: vec![],
            registrations: Vec::new(),
        });
        assert_eq!(checker().check_run(&run).unwrap().verdict, Verdict::Valid);
        assert_eq!(
            checker().check_run(&RunData::default()).unwrap().verdict,
            Verdict::Unknown
        );
    }
}
