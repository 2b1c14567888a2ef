//! Lost acknowledged writes, by DESIGN.md's rule ("Lost write, precisely"): a
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
//! The acknowledged values and the excuses are shared with the
//! offset-changed checker.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::history::{Done, Op, OpType, Process, Verb};
use crate::node::NodeId;
use crate::observe::timeline::PartitionStateChange;
use crate::reader::ReplicaState;
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

use super::final_log::FinalLog;
use super::{CheckResult, Checker, Evidence, RunData};

pub const NAME: &str = "lost-write";

/// Anomalies reported one by one; the counts cover them all.
pub(crate) const EVIDENCE_MAX: usize = 50;

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
            DESIGN.md \"Lost write, precisely\".",
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
        check,
    }
}

/// One value of a `send` that ended ok.
#[derive(Debug, Clone)]
pub(crate) struct AckedValue {
    /// The index of the `ok` completion.
    pub index: u64,
    pub partition: PartitionRef,
    pub value: i64,
    pub acks: Acks,
    /// `None` for acks=0 (the broker names no offset).
    pub offset: Option<i64>,
    /// The ISR etcd showed just after the ack.
    pub isr: Option<Vec<NodeId>>,
    pub leader_epoch: Option<i32>,
}

impl AckedValue {
    pub(crate) fn describe(&self) -> String {
        format!(
            "value {} acked{} in {} (history index {}, acks={}, ISR {}, leader epoch {})",
            self.value,
            self.offset
                .map(|o| format!(" at offset {o}"))
                .unwrap_or_default(),
            self.partition,
            self.index,
            self.acks,
            self.isr
                .as_deref()
                .map_or("unknown".into(), |isr| format!("{:?}", NodeId::ids(isr))),
            self.leader_epoch
                .map_or("unknown".into(), |e| e.to_string()),
        )
    }

    /// The evidence's particulars; the ISR as broker ids, as etcd lists it.
    pub(crate) fn details(&self) -> Value {
        json!({
            "value": self.value,
            "partition": self.partition,
            "acked_offset": self.offset,
            "history_index": self.index,
            "acks": self.acks,
            "isr": self.isr.as_deref().map(NodeId::ids),
            "leader_epoch": self.leader_epoch,
        })
    }
}

/// Every value of every `send` that ended ok, in history order.
pub(crate) fn acked_values(history: &[Op]) -> Result<Vec<AckedValue>, String> {
    let mut acked = Vec::new();
    for op in history {
        if op.process == Process::Nemesis {
            continue;
        }
        let Some((send, ack)) = op.acked_send() else {
            continue;
        };
        if let Some(offsets) = &ack.offsets
            && offsets.len() != send.values.len()
        {
            return Err(format!(
                "history index {}: send ok has a different number of offsets and values",
                op.index
            ));
        }
        let isr: Option<Vec<NodeId>> = ack
            .isr
            .as_ref()
            .map(|isr| isr.iter().copied().map(NodeId::new).collect());
        for (i, &value) in send.values.iter().enumerate() {
            acked.push(AckedValue {
                index: op.index,
                partition: send.partition.clone(),
                value,
                acks: send.acks,
                offset: ack.offsets.as_ref().map(|o| o[i]),
                isr: isr.clone(),
                leader_epoch: ack.leader_epoch,
            });
        }
    }
    Ok(acked)
}

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
}

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
        let with_states = run.timeline.as_ref().map(|timeline| {
            for election in timeline.unclean_elections() {
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
        let disk_losses = run
            .history
            .iter()
            .filter(|op| {
                op.process == Process::Nemesis && op.kind != OpType::Invoke && op.error.is_none()
            })
            .filter_map(|op| {
                let fault = op.fault()?;
                let done = fault.done.as_ref()?;
                matches!(fault.verb, Verb::PowerLoss | Verb::TruncateLog)
                    .then_some((op.index, fault.verb, done))
            })
            .collect();
        let returns = run
            .history
            .iter()
            .filter(|op| {
                op.process == Process::Nemesis && op.kind != OpType::Invoke && op.error.is_none()
            })
            .filter_map(|op| {
                let fault = op.fault()?;
                let done = fault.done.as_ref()?;
                matches!(fault.verb, Verb::Restart | Verb::Start).then_some((op.index, done))
            })
            .flat_map(|(index, done)| {
                done.nodes
                    .iter()
                    .map(move |&node| (index, node, done.etcd_revision, done.started_time_ms))
            })
            .collect();
        Excuses {
            with_states,
            unclean,
            disk_losses,
            returns,
            state_changes: &run.state_changes,
            states,
        }
    }

    /// Applies DESIGN.md's excuses to one acknowledged value.
    pub(crate) fn judge(&self, acked: &AckedValue) -> Judgement {
        let (Some(isr), Some(leader_epoch)) = (&acked.isr, acked.leader_epoch) else {
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
    /// `offset` of `partition`, read by the poll at history index `index`
    /// while etcd named `leader_epoch` (`None`: unknown). As for an
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
            partition: partition.clone(),
            value: 0,
            acks: Acks::All,
            offset: Some(offset),
            isr: None,
            leader_epoch,
        };
        self.disk_loss(&read, &[]).is_some()
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

    /// Why disk faults after the ack excuse losing this value, if they do:
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
    fn disk_loss(&self, acked: &AckedValue, isr_at_ack: &[NodeId]) -> Option<String> {
        let after = self
            .disk_losses
            .partition_point(|(index, _, _)| *index <= acked.index);
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
        if let Some(faults) = lost_by_all(isr_at_ack, &lost) {
            let kinds: BTreeSet<&str> = faults.iter().map(|&(_, _, verb)| words(verb)).collect();
            let indices: BTreeSet<u64> = faults.iter().map(|&(_, index, _)| index).collect();
            let kinds: Vec<&str> = kinds.into_iter().collect();
            return Some(format!(
                "{} of every ISR member (history indices {indices:?})",
                kinds.join(" or ")
            ));
        }
        let states = self.states.get(&acked.partition)?;
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

/// A disk fault as the excuses word it.
fn words(verb: Verb) -> &'static str {
    match verb {
        Verb::PowerLoss => "power loss",
        other => other.name(),
    }
}

/// Whether disk-fault op `done` cut `node`'s copy of the value: a recorded
/// cut must have taken its replica back to or below the acked offset; a
/// node with no cut recorded counts on its name alone.
fn cuts_value(done: &Done, node: NodeId, acked: &AckedValue) -> bool {
    // Disk faults name the replica by its directory, which is the partition's name.
    let dir = acked.partition.to_string();
    let cut = done.cut.as_ref().and_then(|cuts| {
        cuts.iter().find(|c| c.node == node).map(|c| {
            c.replicas()
                .find(|r| r.replica == dir)
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

/// A replica's data records by value, each value as text the way the
/// workload wrote it (and as `Payload` prints it): one sorted list borrowed
/// from the replica rather than a map of owned strings, since a long run's
/// replica holds millions of records and only a few lookups ever miss.
pub(crate) struct ValueIndex<'a>(Vec<(Cow<'a, str>, i64)>);

impl<'a> ValueIndex<'a> {
    /// Intact data batches only, null values left out, as
    /// `CompactReplica::offsets_by_value` reads a replica.
    pub(crate) fn of(replica: &'a ReplicaState) -> ValueIndex<'a> {
        let mut entries: Vec<(Cow<'a, str>, i64)> = replica
            .records()
            .filter(|(batch, _)| !batch.is_control())
            .filter_map(|(_, record)| {
                let value = record.value.as_ref()?;
                // A padded value (`value_bytes`) is indexed by the value alone.
                let text = match value.as_str() {
                    Some(text) => Cow::Borrowed(crate::history::value_text(text)),
                    None => Cow::Owned(value.to_string()),
                };
                Some((text, record.offset))
            })
            .collect();
        // Stable, so one value's offsets stay in log order.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        ValueIndex(entries)
    }

    /// The offsets holding `value`, in log order.
    pub(crate) fn offsets<'s>(&'s self, value: &'s str) -> impl Iterator<Item = i64> + 's {
        let start = self.0.partition_point(|(v, _)| v.as_ref() < value);
        self.0[start..]
            .iter()
            .take_while(move |(v, _)| v.as_ref() == value)
            .map(|(_, offset)| *offset)
    }

    pub(crate) fn contains(&self, value: &str) -> bool {
        self.offsets(value).next().is_some()
    }

    /// Each value at two or more offsets, with those offsets in log order,
    /// in value order.
    pub(crate) fn repeated(&self) -> impl Iterator<Item = (&str, Vec<i64>)> + '_ {
        self.0
            .chunk_by(|a, b| a.0 == b.0)
            .filter(|group| group.len() > 1)
            .map(|group| {
                let offsets = group.iter().map(|(_, offset)| *offset).collect();
                (group[0].0.as_ref(), offsets)
            })
    }
}

/// A final log with its values indexed; what each holder has is indexed
/// only when a missing value needs naming where it is missing.
pub(crate) struct IndexedLog<'a> {
    pub log: FinalLog<'a>,
    pub by_value: ValueIndex<'a>,
    held: OnceCell<Vec<(NodeId, ValueIndex<'a>)>>,
}

impl IndexedLog<'_> {
    /// Nodes whose replica of the partition does not hold the value anywhere.
    pub(crate) fn lacking(&self, value: &str) -> Vec<NodeId> {
        self.held
            .get_or_init(|| {
                self.log
                    .holders
                    .iter()
                    .map(|(node, replica)| (*node, ValueIndex::of(replica)))
                    .collect()
            })
            .iter()
            .filter(|(_, values)| !values.contains(value))
            .map(|(node, _)| *node)
            .collect()
    }
}

/// `; excused by: …` naming each excuse used, or nothing.
pub(crate) fn excused_by(excuses: &BTreeSet<String>) -> String {
    if excuses.is_empty() {
        return String::new();
    }
    let named: Vec<&str> = excuses.iter().map(String::as_str).collect();
    format!("; excused by: {}", named.join(", "))
}

/// One line from each reason a value could not be judged, with the first
/// value it held back; `None` when every value was judged.
pub(crate) fn unknown_message(unknown: BTreeMap<String, String>) -> Option<String> {
    if unknown.is_empty() {
        return None;
    }
    Some(
        unknown
            .into_iter()
            .map(|(why, first)| format!("{why} (first: {first})"))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// Final logs per partition, chosen and indexed once.
pub(crate) struct FinalLogs<'a> {
    run: &'a RunData,
    logs: BTreeMap<PartitionRef, Result<IndexedLog<'a>, String>>,
}

impl<'a> FinalLogs<'a> {
    pub(crate) fn new(run: &'a RunData) -> Self {
        FinalLogs {
            run,
            logs: BTreeMap::new(),
        }
    }

    /// The final log of `partition`, indexed.
    pub(crate) fn get(&mut self, partition: &PartitionRef) -> Result<&IndexedLog<'a>, &String> {
        let run = self.run;
        self.logs
            .entry(partition.clone())
            .or_insert_with(|| {
                FinalLog::of(run, partition).map(|log| IndexedLog {
                    by_value: ValueIndex::of(log.replica),
                    held: OnceCell::new(),
                    log,
                })
            })
            .as_ref()
    }
}

fn check(run: &RunData) -> Result<CheckResult, String> {
    let acked = acked_values(&run.history)?;
    let excused_by_run = Excuses::of(run);
    let mut logs = FinalLogs::new(run);
    let mut evidence = Vec::new();
    // Legitimate losses, listed after any violation (they never make it invalid).
    let mut reported = Vec::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    // Why not → the first value it held back.
    let mut unknown: BTreeMap<String, String> = BTreeMap::new();
    let mut excuses: BTreeSet<String> = BTreeSet::new();
    for a in &acked {
        *counts.entry("acknowledged").or_default() += 1;
        let indexed = match logs.get(&a.partition) {
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
                    unknown.entry(why.clone()).or_insert_with(|| a.describe());
                }
                continue;
            }
        };
        let text = a.value.to_string();
        let log = &indexed.log;
        if indexed.by_value.contains(&text) {
            continue;
        }
        // Losses Kafka allows are reported by value too, not only counted.
        let mut report = |anomaly: &str, why: &str| {
            if reported.len() < EVIDENCE_MAX {
                reported.push(Evidence {
                    anomaly: anomaly.into(),
                    summary: format!(
                        "{} is not in the final log ({}): allowed, {why}",
                        a.describe(),
                        log.chosen
                    ),
                    details: a.details(),
                });
            }
        };
        match a.acks {
            Acks::Leader => {
                *counts.entry("lost-acks-1").or_default() += 1;
                report("lost-acks-1-write", "acks=1 waits for the leader alone");
            }
            Acks::None => {
                *counts.entry("lost-acks-0").or_default() += 1;
                report("lost-acks-0-write", "acks=0 waits for nothing");
            }
            Acks::All => match excused_by_run.judge(a) {
                Judgement::Excused(why) => {
                    *counts.entry("lost-acks-all-excused").or_default() += 1;
                    report("lost-acks-all-write-excused", &why);
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
                    let lacking = indexed.lacking(&text);
                    let mut details = a.details();
                    details["final_log"] = json!(log.chosen);
                    details["final_log_node"] = json!(log.node);
                    // Damage in the final log is often why a value is missing.
                    details["final_log_findings"] = json!(log.replica.findings.len());
                    details["lacking"] = json!(lacking);
                    evidence.push(Evidence {
                        anomaly: "lost-acknowledged-write".into(),
                        summary: format!(
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
                        details,
                    });
                }
            },
        }
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
                acked.len(),
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::observe::timeline::Timeline;

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
    fn an_unclean_election_is_a_leader_outside_the_previous_isr_of_that_partition() {
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
        let run = RunData {
            timeline: Some(timeline),
            ..RunData::default()
        };
        let excuses = Excuses::of(&run);
        let unclean: Vec<(NodeId, i64)> = excuses.unclean[&PartitionRef::new("t", 0)]
            .iter()
            .map(|(leader, s)| (*leader, s.revision))
            .collect();
        assert_eq!(unclean, vec![(NodeId::new(2), 6)]);
        assert!(!excuses.unclean.contains_key(&PartitionRef::new("u", 0)));
    }

    /// A disk fault (`verb`) of `node` at etcd revision `at`, cutting t-0
    /// back to offset `end_after`.
    pub(in crate::checker) fn disk_fault(
        verb: Verb,
        node: u32,
        index: u64,
        at: i64,
        end_after: i64,
    ) -> Op {
        use crate::history::{Aim, Body, FaultOp, NodeCut, ReplicaCut};
        use crate::schedule::Target;
        let node = NodeId::new(node);
        let replica = ReplicaCut {
            replica: "t-0".into(),
            log_end_offset_before: 4,
            log_end_offset_after: end_after,
            bytes_removed: 300,
            segments_deleted: Vec::new(),
        };
        let (cuts, cut) = if verb == Verb::PowerLoss {
            (Some(vec![replica]), None)
        } else {
            (None, Some(replica))
        };
        Op {
            index,
            time_ns: index,
            process: Process::Nemesis,
            kind: OpType::Info,
            body: Body::Fault(FaultOp {
                verb,
                aim: Aim::Target {
                    target: Target::Node(node),
                    id: None,
                    on_heal: None,
                },
                done: Some(Done {
                    nodes: vec![node],
                    healed: None,
                    blocked: None,
                    cut: Some(vec![NodeCut { node, cuts, cut }]),
                    etcd_revision: Some(at),
                    started_time_ms: None,
                }),
            }),
            error: None,
        }
    }

    fn acked_at_2_under(isr: &[u32]) -> AckedValue {
        AckedValue {
            index: 1,
            partition: PartitionRef::new("t", 0),
            value: 7,
            acks: Acks::All,
            offset: Some(2),
            isr: Some(isr.iter().map(|&n| NodeId::new(n)).collect()),
            leader_epoch: Some(0),
        }
    }

    fn judge(states: &[PartitionStateChange], faults: Vec<Op>, acked: &AckedValue) -> Judgement {
        let run = RunData {
            timeline: Some(Timeline {
                partition_states: states.to_vec(),
                controllers: vec![],
            }),
            history: faults,
            ..RunData::default()
        };
        Excuses::of(&run).judge(acked)
    }

    #[test]
    fn a_power_loss_of_the_isrs_only_member_excuses_what_only_it_held() {
        let states = [
            state(1, 1, 0, &[1, 2, 3]),
            state(4, 1, 0, &[1, 2]),
            state(6, 1, 0, &[1]),
        ];
        let acked = acked_at_2_under(&[1, 2, 3]);
        let at = |revision| {
            judge(
                &states,
                vec![disk_fault(Verb::PowerLoss, 1, 5, revision, 0)],
                &acked,
            )
        };
        // At revision 7 etcd named b1 the ISR's only member: excused.
        assert!(
            matches!(at(7), Judgement::Excused(ref why)
                if why.contains("power loss of b1 (history index 5), then etcd named the ISR [b1]")),
            "{:?}",
            at(7)
        );
        // At revision 5 b2 was still in the ISR (and held the value); at 6
        // etcd dropped it, leaving b1, which had lost it: excused from then.
        assert!(
            matches!(at(5), Judgement::Excused(ref why)
                if why.contains("then etcd named the ISR [b1] (etcd revision 6)")),
            "{:?}",
            at(5)
        );
        // Had the ISR kept b2 (it never shrank to [1]), nothing would excuse it.
        let kept = [state(1, 1, 0, &[1, 2, 3]), state(4, 1, 0, &[1, 2])];
        assert_eq!(
            judge(&kept, vec![disk_fault(Verb::PowerLoss, 1, 5, 5, 0)], &acked),
            Judgement::NotExcused
        );
    }

    #[test]
    fn a_truncated_log_excuses_like_a_power_loss_and_only_below_its_cut() {
        let states = [state(1, 1, 0, &[1, 2]), state(4, 1, 0, &[1])];
        let acked = acked_at_2_under(&[1, 2]);
        // b1, the only ISR member, cut back to offset 2: the value at 2 is gone.
        let cut_to = |end| {
            judge(
                &states,
                vec![disk_fault(Verb::TruncateLog, 1, 5, 6, end)],
                &acked,
            )
        };
        assert!(
            matches!(cut_to(2), Judgement::Excused(ref why)
                if why.starts_with("truncate-log of b1 (history index 5), then etcd named the ISR [b1]")),
            "{:?}",
            cut_to(2)
        );
        // A cut that kept offset 2 excuses nothing.
        assert_eq!(cut_to(3), Judgement::NotExcused);
    }

    #[test]
    fn a_later_isr_of_several_members_excuses_only_when_each_lost_the_value() {
        // Acked under [1, 2, 3]; b3 then left the ISR, holding the value.
        let states = [state(1, 1, 0, &[1, 2, 3]), state(4, 1, 0, &[1, 2])];
        let acked = acked_at_2_under(&[1, 2, 3]);
        let b1_lost = disk_fault(Verb::PowerLoss, 1, 5, 5, 0);
        // b1 lost it, b2 (still in the ISR) had not: not yet.
        assert_eq!(
            judge(&states, vec![b1_lost.clone()], &acked),
            Judgement::NotExcused
        );
        // Then b2's log was cut too, with etcd still naming [1, 2].
        let both = judge(
            &states,
            vec![b1_lost.clone(), disk_fault(Verb::TruncateLog, 2, 8, 6, 1)],
            &acked,
        );
        assert!(
            matches!(both, Judgement::Excused(ref why)
                if why == "power loss of b1 (history index 5), truncate-log of b2 (history index 8), \
                    then etcd named the ISR [b1, b2] (etcd revision 6)"),
            "{both:?}"
        );
        // Every member of the ISR at the ack lost it: worded as before.
        let all = judge(
            &[state(1, 1, 0, &[1, 2])],
            vec![
                disk_fault(Verb::PowerLoss, 1, 5, 5, 0),
                disk_fault(Verb::PowerLoss, 2, 6, 5, 0),
            ],
            &acked_at_2_under(&[1, 2]),
        );
        assert_eq!(
            all,
            Judgement::Excused("power loss of every ISR member (history indices {5, 6})".into())
        );
    }

    /// A restart of `node` at history `index`, etcd revision `at` read after.
    fn restart(node: u32, index: u64, at: i64) -> Op {
        use crate::history::{Aim, Body, FaultOp};
        use crate::schedule::Target;
        let node = NodeId::new(node);
        Op {
            index,
            time_ns: index,
            process: Process::Nemesis,
            kind: OpType::Info,
            body: Body::Fault(FaultOp {
                verb: Verb::Restart,
                aim: Aim::Target {
                    target: Target::Node(node),
                    id: None,
                    on_heal: None,
                },
                done: Some(Done {
                    nodes: vec![node],
                    etcd_revision: Some(at),
                    ..Done::default()
                }),
            }),
            error: None,
        }
    }

    #[test]
    fn a_replica_back_from_its_disk_fault_no_longer_counts_as_without_the_value() {
        // Acked under [1, 2]; b1 loses power (revision 5), b2 still in the ISR.
        // Later (revision 8) etcd names [1] alone.
        let states = [state(1, 1, 0, &[1, 2]), state(8, 1, 1, &[1])];
        let acked = acked_at_2_under(&[1, 2]);
        let lost = disk_fault(Verb::PowerLoss, 1, 5, 5, 0);
        // b1 never came back: the ISR [1] held the value nowhere. Excused.
        assert!(matches!(
            judge(&states, vec![lost.clone()], &acked),
            Judgement::Excused(_)
        ));
        // b1 restarted at revision 6, before etcd named it alone: from then it
        // could have fetched the value back from b2, and a broker that keeps
        // a bounced replica in the ISR without it is KIP-380's bug. Not excused.
        assert_eq!(
            judge(&states, vec![lost, restart(1, 6, 6)], &acked),
            Judgement::NotExcused
        );
    }

    #[test]
    fn a_restarted_replica_is_back_only_once_it_applied_a_decision_for_the_partition() {
        use crate::reader::state_change::StateChange;
        let states = [
            state(1, 1, 0, &[1, 2]),
            state(7, 2, 1, &[1, 2]),
            state(8, 2, 2, &[1]),
        ];
        let acked = acked_at_2_under(&[1, 2]);
        let lost = disk_fault(Verb::PowerLoss, 1, 5, 5, 0);
        let mut back = restart(1, 6, 6);
        if let crate::history::Body::Fault(f) = &mut back.body {
            f.done.as_mut().unwrap().started_time_ms = Some(1000);
        }
        let applied = |time_ms, leader_epoch| StateChange {
            time_ms,
            request: "LeaderAndIsr".into(),
            controller_id: 1,
            controller_epoch: 1,
            topic: "t".into(),
            partition: 0,
            leader: 2,
            leader_epoch,
            isr: vec![1, 2],
            outcome: "applied".into(),
            reason: None,
        };
        let judge_with = |changes: Vec<StateChange>| {
            let run = RunData {
                timeline: Some(Timeline {
                    partition_states: states.to_vec(),
                    controllers: vec![],
                }),
                history: vec![lost.clone(), back.clone()],
                state_changes: [(NodeId::new(1), changes)].into_iter().collect(),
                ..RunData::default()
            };
            Excuses::of(&run).judge(&acked)
        };
        // Restarted, and following b2 in epoch 1 (revision 7) before etcd
        // named it alone: it could hold the value again. Not excused.
        assert_eq!(
            judge_with(vec![applied(500, 0), applied(1500, 1)]),
            Judgement::NotExcused
        );
        // Restarted but never told to follow (only a decision from before its
        // restart): still without the value when the ISR was [1]. Excused.
        assert!(matches!(
            judge_with(vec![applied(500, 0)]),
            Judgement::Excused(_)
        ));
    }
}
