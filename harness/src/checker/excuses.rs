//! What can excuse losing an acknowledged write (GUARANTEES.md,
//! "Excuses"): an unclean election after the ack, or disk faults (power
//! loss, truncate-log) that took the value from every member of the ISR at
//! the ack, or of the ISR etcd named at some later moment while the replicas
//! that lost it had not come back. Judged per acknowledged value by the
//! lost-write, offset-changed and consumer checkers, and per read by the
//! consumer checker.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Done, Op, OpType, Process, Verb};
use crate::node::NodeId;
use crate::observe::timeline::PartitionStateChange;
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

use super::RunData;
use super::index::AckedValue;

mod read_after_loss;

/// Whether losing (or moving) an acks=all write is excused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Judgement {
    /// An unclean election after the ack, or a power loss of the whole ISR.
    Excused(String),
    NotExcused,
    /// Cannot tell; why.
    Undetermined(String),
}

/// What can excuse losing an acks=all write, indexed once per run so that
/// judging each acknowledged value costs only the few faults and elections
/// after it, not a pass over the whole history and timeline: the history can
/// hold a million ops, and every checker that judges values judges them all.
pub(crate) struct Excuses<'a> {
    /// Whether the system may elect uncleanly at all (its system file's
    /// claims): with no elections of its own, no loss is excused by one.
    unclean_elections: bool,
    /// Partitions etcd's timeline has a state for; `None`: no timeline.
    with_states: Option<BTreeSet<PartitionRef>>,
    /// Per partition, its unclean elections (the broker elected and the
    /// state), in revision order.
    unclean: BTreeMap<PartitionRef, Vec<(NodeId, &'a PartitionStateChange)>>,
    /// Disk faults (power loss, truncate-log) that completed, as (history
    /// index, verb, what they did), in history order.
    disk_losses: Vec<(u64, Verb, &'a Done)>,
    /// Restarts and starts that completed, as (history index, node, etcd
    /// revision read just after, wall-clock start), in history order: a node
    /// that lost a value in a disk fault counts as without it only until it
    /// is back.
    returns: Vec<(u64, NodeId, Option<i64>, Option<u64>)>,
    /// Each node's state-change log: when a returned node first applied a
    /// decision for a partition.
    state_changes: &'a BTreeMap<NodeId, Vec<crate::reader::state_change::StateChange>>,
    /// Per partition, etcd's states in revision order (to read the ISR a
    /// power loss left).
    states: BTreeMap<PartitionRef, Vec<&'a PartitionStateChange>>,
    /// What [`Excuses::disk_loss`] found, by what it depends on: the
    /// partition, the first disk fault after the ack, which of that fault's
    /// and the later ones' cuts took the value (a bit each), and the ISR at
    /// the ack. The consumer checker judges every acknowledged value, and
    /// all those acked between the same two faults under one ISR share one
    /// answer.
    /// A short list, searched without making a key: there are few such
    /// combinations (and past `DISK_LOSSES_FOUND_MAX` each is worked out).
    disk_losses_found: RefCell<Vec<DiskLossFound>>,
}

/// (partition, first fault after the ack, cuts, ISR at the ack, what was found).
type DiskLossFound = (PartitionRef, usize, u64, Vec<NodeId>, Option<String>);

const DISK_LOSSES_FOUND_MAX: usize = 256;

impl<'a> Excuses<'a> {
    pub(crate) fn of(run: &'a RunData) -> Excuses<'a> {
        let mut unclean: BTreeMap<PartitionRef, Vec<_>> = BTreeMap::new();
        let mut states: BTreeMap<PartitionRef, Vec<&PartitionStateChange>> = BTreeMap::new();
        if let Some(timeline) = &run.timeline {
            for s in &timeline.partition_states {
                states
                    .entry(PartitionRef::new(&s.topic, s.partition))
                    .or_default()
                    .push(s);
            }
            for list in states.values_mut() {
                list.sort_by_key(|s| s.revision);
            }
        }
        let off = super::elections::unclean_election_off(run);
        let with_states = run.timeline.as_ref().map(|timeline| {
            // Only an election that earned its excuse (elections.rs) grants it.
            for election in timeline.unclean_elections() {
                if super::elections::unearned(timeline, &election, off.as_ref()).is_some() {
                    continue;
                }
                let elected = election.elected;
                if let Some(leader) = NodeId::from_broker_id(elected.leader) {
                    unclean
                        .entry(PartitionRef::new(&elected.topic, elected.partition))
                        .or_default()
                        .push((leader, elected));
                }
            }
            timeline
                .partition_states
                .iter()
                .map(|s| PartitionRef::new(&s.topic, s.partition))
                .collect()
        });
        let disk_losses = completed_faults(&run.history)
            .filter(|(_, verb, _)| verb.spec().excuse.is_some())
            .collect();
        let returns = completed_faults(&run.history)
            .filter(|(_, verb, _)| matches!(verb, Verb::Restart | Verb::Start))
            .flat_map(|(index, _, done)| {
                done.nodes
                    .iter()
                    .map(move |&node| (index, node, done.etcd_revision, done.started_time_ms))
            })
            .collect();
        Excuses {
            unclean_elections: run.claims.unclean_elections,
            with_states,
            unclean,
            disk_losses,
            returns,
            state_changes: &run.state_changes,
            states,
            disk_losses_found: RefCell::new(Vec::new()),
        }
    }

    /// Applies GUARANTEES.md's excuses to one acknowledged value.
    pub(crate) fn judge(&self, acked: &AckedValue) -> Judgement {
        // A system with no elections of its own (and so no timeline of
        // them): only a disk fault that cut the value from every replica the
        // ack named can excuse losing it.
        if !self.unclean_elections && self.with_states.is_none() {
            if let Some(isr) = acked.isr.filter(|isr| !isr.is_empty())
                && let Some(why) = self.disk_loss(acked, isr)
            {
                return Judgement::Excused(why);
            }
            return Judgement::NotExcused;
        }
        let (Some(isr), Some(leader_epoch)) = (acked.isr, acked.leader_epoch) else {
            return Judgement::Undetermined(
                "the ack recorded no ISR or leader epoch from etcd".into(),
            );
        };
        if isr.is_empty() {
            return Judgement::Undetermined("the ack recorded an empty ISR".into());
        }
        let partition = &acked.partition;
        // A timeline with no state for the partition rules nothing out.
        let timeline = self
            .with_states
            .as_ref()
            .is_some_and(|states| states.contains(partition));
        if let Some((leader, election)) = self
            .unclean
            .get(partition)
            .into_iter()
            .flatten()
            .find(|(_, elected)| elected.leader_epoch > leader_epoch)
        {
            return Judgement::Excused(format!(
                "unclean election of {leader} at leader epoch {} (etcd revision {})",
                election.leader_epoch, election.revision
            ));
        }
        if let Some(why) = self.disk_loss(acked, isr) {
            return Judgement::Excused(why);
        }
        if !timeline {
            return Judgement::Undetermined(format!(
                "no timeline of {partition}: an unclean election after the ack cannot be ruled out"
            ));
        }
        Judgement::NotExcused
    }

    /// Whether losing a record a poll read is excused: the record at
    /// `offset` of `partition`, read by the poll invoked at history index
    /// `index` (the read may have been served at any moment after the
    /// invoke, so a fault that completed before the poll did may still have
    /// followed it) while etcd named `leader_epoch` (`None`: unknown). As for an
    /// acknowledged write: an unclean election in a later epoch, or disk
    /// faults after the read that took it from every member of the ISR as it
    /// last stood. A consumer may have read a committed record that such a
    /// fault then removed, and the offset then holds another record.
    pub(crate) fn excuses_read(
        &self,
        index: u64,
        partition: &PartitionRef,
        offset: i64,
        leader_epoch: Option<i32>,
    ) -> bool {
        if let Some(epoch) = leader_epoch
            && self
                .unclean
                .get(partition)
                .into_iter()
                .flatten()
                .any(|(_, elected)| elected.leader_epoch > epoch)
        {
            return true;
        }
        let read = AckedValue {
            index,
            invoked: index,
            partition: std::borrow::Cow::Borrowed(partition),
            value: 0,
            acks: Acks::All,
            offset: Some(offset),
            isr: None,
            leader_epoch,
        };
        self.disk_loss(&read, &[]).is_some()
            || leader_epoch.is_some_and(|epoch| self.read_before_isr_lost_it(&read, epoch))
    }

    /// Whether losing a commit acknowledged at history index `index` is
    /// excused ([groups]): the commit is a record of the group's offsets
    /// partition `partition`, held to the same rule as an acknowledged
    /// write — disk faults after the ack that took the partition from every
    /// member of its ISR as it last stood, or an unclean election of it.
    /// The client knows neither the commit's offset in that log nor the ISR
    /// it was acknowledged under, so any recorded cut of the partition's
    /// replica counts as taking it, and an unclean election of the partition
    /// anywhere in the run excuses (both lenient, never stricter than the
    /// rule for writes).
    pub(crate) fn excuses_lost_commit(
        &self,
        index: u64,
        partition: &PartitionRef,
    ) -> Option<String> {
        if let Some((leader, election)) = self.unclean.get(partition).and_then(|l| l.first()) {
            return Some(format!(
                "unclean election of {leader} for {partition} at leader epoch {} (etcd revision {})",
                election.leader_epoch, election.revision
            ));
        }
        let commit = AckedValue {
            index,
            invoked: index,
            partition: std::borrow::Cow::Borrowed(partition),
            value: 0,
            acks: Acks::All,
            offset: None,
            isr: None,
            leader_epoch: None,
        };
        self.disk_loss(&commit, &[])
    }

    /// The etcd revision from which `node`, cut (for `partition`) by the
    /// fault at history `index` (recorded at `revision`), was back and could
    /// hold the value again: the partition state of the first decision for
    /// the partition it applied after its next restart or start (its
    /// state-change log), no earlier than the revision read when it started.
    /// `None`: it never came back, or never applied a decision for the
    /// partition since — as if it were still down. A return that recorded no
    /// start time (a history written before returns recorded theirs) is
    /// placed just after the latest revision a disk fault recorded before it
    /// in the history: the node was still out then.
    fn back(
        &self,
        node: NodeId,
        partition: &PartitionRef,
        index: u64,
        revision: i64,
    ) -> Option<i64> {
        let after = self.returns.partition_point(|&(i, ..)| i <= index);
        let &(returned, _, read_at_start, started) = self.returns[after..]
            .iter()
            .find(|&&(_, n, ..)| n == node)?;
        let Some(started) = started else {
            let before = self
                .disk_losses
                .iter()
                .take_while(|&&(i, _, _)| i < returned)
                .filter_map(|&(_, _, done)| done.etcd_revision)
                .max()
                .unwrap_or(revision);
            return Some(before.max(revision) + 1);
        };
        let applied = self.state_changes.get(&node)?.iter().find(|c| {
            c.time_ms >= started
                && c.request == "LeaderAndIsr"
                && c.outcome == "applied"
                && c.topic == partition.topic
                && u32::try_from(c.partition).ok() == Some(partition.partition)
        })?;
        // The partition state that carried that decision's epoch.
        let states = self.states.get(partition)?;
        let carried = states
            .iter()
            .find(|s| s.leader_epoch >= applied.leader_epoch)
            .map_or(i64::MAX, |s| s.revision);
        Some(carried.max(read_at_start.unwrap_or(revision + 1)))
    }

    /// Why disk faults after the ack (its invoke: [`AckedValue::invoked`])
    /// excuse losing this value, if they do:
    /// every member of the ISR at the ack lost it in them, or, at some
    /// moment after the first of them, the ISR etcd held then consisted only
    /// of replicas that had lost it in such faults. The moments are each
    /// fault's recorded revision (read just after its cut) and each later
    /// partition state; a node counts as having lost the value from its
    /// fault's revision until it is back (restarted or started: from then it
    /// may have fetched the value again, and an ISR that still names it says
    /// it did — or the broker kept a bounced replica in the ISR, the bug
    /// KIP-380 fixed). Once the ISR holds no copy, Kafka's promise — no
    /// loss while an in-sync replica survives — no longer covers the value,
    /// whichever replica is elected next (an out-of-ISR replica that still
    /// holds it is not electable without an unclean election).
    ///
    /// Not seen: a node that fetched the value back from another replica
    /// before that replica lost it too (this may excuse a loss the refetched
    /// copy should have prevented; the final log then usually holds the
    /// value), and whether each ISR shrink was itself legitimate.
    /// `isr_at_ack` as broker ids, as the history records it (made into
    /// nodes only past the common case, no disk fault after the ack).
    fn disk_loss(&self, acked: &AckedValue, isr_at_ack: &[u32]) -> Option<String> {
        let after = self
            .disk_losses
            .partition_point(|(index, _, _)| *index <= acked.invoked);
        let mut cuts = 0u64;
        let mut pairs = 0u32;
        for &(_, _, done) in &self.disk_losses[after..] {
            for &node in &done.nodes {
                if pairs < u64::BITS && cuts_value(done, node, acked) {
                    cuts |= 1 << pairs;
                }
                pairs += 1;
            }
        }
        let isr_at_ack =
            || -> Vec<NodeId> { isr_at_ack.iter().copied().map(NodeId::new).collect() };
        if pairs > u64::BITS {
            return self.disk_loss_after(acked, &isr_at_ack(), after);
        }
        // No fault after the ack took the value from anyone: nothing excuses.
        if cuts == 0 {
            return None;
        }
        let isr_at_ack = isr_at_ack();
        let partition: &PartitionRef = &acked.partition;
        if let Some(found) = self.disk_losses_found.borrow().iter().find(|found| {
            found.1 == after && found.2 == cuts && found.0 == *partition && found.3 == isr_at_ack
        }) {
            return found.4.clone();
        }
        let found = self.disk_loss_after(acked, &isr_at_ack, after);
        let mut known = self.disk_losses_found.borrow_mut();
        if known.len() < DISK_LOSSES_FOUND_MAX {
            known.push((partition.clone(), after, cuts, isr_at_ack, found.clone()));
        }
        found
    }

    /// [`Excuses::disk_loss`], the disk faults from `after` on.
    fn disk_loss_after(
        &self,
        acked: &AckedValue,
        isr_at_ack: &[NodeId],
        after: usize,
    ) -> Option<String> {
        let faults = &self.disk_losses[after..];
        // Node → (history index, verb) of the first fault that cut the value.
        let mut lost: BTreeMap<NodeId, (u64, Verb)> = BTreeMap::new();
        // The same cuts by the etcd revision each fault recorded, each with
        // the revision from which the node was back (`None`: never).
        let mut by_revision: Vec<(i64, Option<i64>, NodeId, u64, Verb)> = Vec::new();
        for &(index, verb, done) in faults {
            for &node in &done.nodes {
                if cuts_value(done, node, acked) {
                    lost.entry(node).or_insert((index, verb));
                    if let Some(revision) = done.etcd_revision {
                        by_revision.push((
                            revision,
                            self.back(node, &acked.partition, index, revision),
                            node,
                            index,
                            verb,
                        ));
                    }
                }
            }
        }
        // Whether every cut is placed in etcd's order, so that the ISR at
        // the ack can be judged moment by moment like any later ISR: a
        // member that lost the value and was back before the last member
        // lost it may have fetched it again, and then the ISR never lost
        // every copy. Without that order (a system etcd does not observe),
        // every member having lost it at some point after the ack excuses.
        let cut_count: usize = lost_cuts(faults, acked);
        let states = self.states.get(&acked.partition);
        let timed = cut_count == by_revision.len() && states.is_some();
        if !timed && let Some(faults) = lost_by_all(isr_at_ack, &lost) {
            return Some(every_member(&faults));
        }
        let states = states?;
        by_revision.sort_by_key(|&(revision, ..)| revision);
        let first = by_revision.first()?.0;
        // The state in force at the first fault's revision, and every later one.
        let from = states
            .partition_point(|s| s.revision <= first)
            .saturating_sub(1);
        let mut moments: Vec<i64> = by_revision.iter().map(|&(r, ..)| r).collect();
        moments.extend(
            states[from..]
                .iter()
                .map(|s| s.revision)
                .filter(|&r| r > first),
        );
        moments.sort_unstable();
        moments.dedup();
        for moment in moments {
            // Nodes without the value at this moment: cut at or before it,
            // and not back since.
            let mut lost_then: BTreeMap<NodeId, (u64, Verb)> = BTreeMap::new();
            for &(revision, back, node, index, verb) in &by_revision {
                if revision <= moment && back.is_none_or(|back| moment < back) {
                    lost_then.entry(node).or_insert((index, verb));
                }
            }
            if let Some(faults) = lost_by_all(isr_at_ack, &lost_then) {
                return Some(every_member(&faults));
            }
            let at = states.partition_point(|s| s.revision <= moment);
            let Some(state) = at.checked_sub(1).and_then(|at| states.get(at)) else {
                continue;
            };
            let Some(isr) = state
                .isr
                .iter()
                .map(|&b| NodeId::from_broker_id(b))
                .collect::<Option<Vec<NodeId>>>()
            else {
                continue;
            };
            if let Some(faults) = lost_by_all(&isr, &lost_then) {
                let faults: Vec<String> = faults
                    .iter()
                    .map(|(node, index, verb)| {
                        format!("{} of {node} (history index {index})", words(*verb))
                    })
                    .collect();
                let isr: Vec<String> = isr.iter().map(|n| n.to_string()).collect();
                return Some(format!(
                    "{}, then etcd named the ISR [{}] (etcd revision {moment})",
                    faults.join(", "),
                    isr.join(", ")
                ));
            }
        }
        None
    }
}

/// How many (fault, node) cuts among `faults` took the value.
fn lost_cuts(faults: &[(u64, Verb, &Done)], acked: &AckedValue) -> usize {
    faults
        .iter()
        .map(|&(_, _, done)| {
            done.nodes
                .iter()
                .filter(|&&node| cuts_value(done, node, acked))
                .count()
        })
        .sum()
}

/// The excuse of faults that took the value from every member of the ISR at
/// the ack, as (node, history index, verb) per member.
fn every_member(faults: &[(NodeId, u64, Verb)]) -> String {
    let kinds: BTreeSet<&str> = faults.iter().map(|&(_, _, verb)| words(verb)).collect();
    let indices: BTreeSet<u64> = faults.iter().map(|&(_, index, _)| index).collect();
    let kinds: Vec<&str> = kinds.into_iter().collect();
    format!(
        "{} of every ISR member (history indices {indices:?})",
        kinds.join(" or ")
    )
}

/// The fault that cut the value from each node of `isr` — (node, history
/// index, verb) — when every one of them lost it; `None` when one did not,
/// or the ISR is empty.
fn lost_by_all(
    isr: &[NodeId],
    lost: &BTreeMap<NodeId, (u64, Verb)>,
) -> Option<Vec<(NodeId, u64, Verb)>> {
    if isr.is_empty() {
        return None;
    }
    isr.iter()
        .map(|&node| lost.get(&node).map(|&(index, verb)| (node, index, verb)))
        .collect()
}

/// The nemesis ops that completed without error, with what they did, in
/// history order: (history index, verb, what it did).
fn completed_faults(history: &[Op]) -> impl Iterator<Item = (u64, Verb, &Done)> {
    history
        .iter()
        .filter(|op| {
            op.process == Process::Nemesis && op.kind != OpType::Invoke && op.error.is_none()
        })
        .filter_map(|op| {
            let fault = op.fault()?;
            Some((op.index, fault.verb, fault.done.as_ref()?))
        })
}

/// A disk fault as the excuses word it.
fn words(verb: Verb) -> &'static str {
    verb.spec().excuse.unwrap_or(verb.name())
}

/// Whether disk-fault op `done` cut `node`'s copy of the value: a recorded
/// cut must have taken its replica back to or below the acked offset; a
/// node with no cut recorded counts on its name alone.
fn cuts_value(done: &Done, node: NodeId, acked: &AckedValue) -> bool {
    // Disk faults name the replica by its directory, which is the partition's
    // name (`t-0`), compared without spelling it out for every value.
    let partition = &acked.partition;
    let names_partition = |dir: &str| {
        dir.strip_prefix(partition.topic.as_str())
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|number| {
                number.bytes().all(|b| b.is_ascii_digit())
                    && (number.len() == 1 || !number.starts_with('0'))
                    && number.parse::<u32>() == Ok(partition.partition)
            })
    };
    let cut = done.cut.as_ref().and_then(|cuts| {
        cuts.iter().find(|c| c.node == node).map(|c| {
            c.replicas()
                .find(|r| names_partition(&r.replica))
                .map(|r| r.log_end_offset_after)
        })
    });
    match (cut, acked.offset) {
        // No cut recorded for this node: its name is the evidence.
        (None, _) => true,
        // The node held no replica of the partition: nothing to lose.
        (Some(None), _) => false,
        (Some(Some(_)), None) => true,
        (Some(Some(end_after)), Some(offset)) => end_after <= offset,
    }
}

#[cfg(test)]
pub(super) mod tests;
