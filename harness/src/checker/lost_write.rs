//! Lost acknowledged writes, by DESIGN.md's rule ("Lost write, precisely"): a
//! value acknowledged with acks=all while the ISR was S is lost illegitimately
//! unless, after its acknowledgement, an unclean leader election happened or
//! every member of S lost unflushed bytes in a power-loss fault. Lost means
//! not in the partition's final log (see [`super::final_log`]). acks=1 and
//! acks=0 writes may be lost; they are counted, never invalid.
//!
//! The acknowledged values and the excuses are shared with the
//! offset-changed checker.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::history::{Op, OpType, Process, Verb};

use super::final_log::{
    FinalLog, final_log, node_name, offsets_by_value, states, unclean_elections,
};
use super::{CheckResult, Checker, Evidence, RunData};

pub const NAME: &str = "lost-write";

/// Anomalies reported one by one; the counts cover them all.
pub(crate) const EVIDENCE_MAX: usize = 50;

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A write acknowledged with acks=all is not lost while at least one replica of the \
            in-sync set it was acknowledged under stays alive: absent an unclean leader election \
            after the acknowledgement, or a power loss that took unflushed bytes from every member \
            of that ISR, the value is in the partition's final log.",
        source: "Kafka documentation, Design §4.7 Replication (\"a committed message will not be \
            lost, as long as there is at least one in sync replica alive\"; acks=all waits for the \
            full ISR; unclean.leader.election.enable trades this for availability); KIP-101 and \
            KIP-279 (leader-epoch truncation closes the ways a clean failover lost committed data); \
            DESIGN.md \"Lost write, precisely\".",
        not_checked: "Writes that ended info or fail (they may or may not have happened). Whether a \
            power loss is what actually removed the value (a power-loss op after the ack naming \
            every ISR member is an excuse; when the op records its cut, the cut must reach the \
            acked offset). acks=1 and acks=0 losses are only counted. A value's position (see \
            offset-changed) and duplicates (see duplicates). Writes whose ack recorded no ISR or \
            leader epoch, or partitions whose final log cannot be chosen, make the verdict \
            unknown rather than valid. Records in damaged (non-intact) batches count as absent. \
            The ISR and leader epoch are etcd's just after the ack, not at it: an election in \
            between makes the rule stricter (an unclean election at that very epoch does not \
            excuse).",
        check,
    }
}

/// How many replicas had to have a write before its ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acks {
    All,
    One,
    Zero,
}

impl Acks {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Acks::All => "all",
            Acks::One => "1",
            Acks::Zero => "0",
        }
    }
}

/// One value of a `send` that ended ok.
#[derive(Debug, Clone)]
pub(crate) struct AckedValue {
    /// The index of the `ok` completion.
    pub index: u64,
    pub partition: String,
    pub topic: String,
    pub partition_number: i32,
    pub value: i64,
    pub acks: Acks,
    /// `None` for acks=0 (the broker names no offset).
    pub offset: Option<i64>,
    /// The ISR etcd showed just after the ack.
    pub isr: Option<Vec<i64>>,
    pub leader_epoch: Option<i64>,
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
            self.acks.label(),
            self.isr
                .as_ref()
                .map_or("unknown".into(), |isr| format!("{isr:?}")),
            self.leader_epoch
                .map_or("unknown".into(), |e| e.to_string()),
        )
    }

    pub(crate) fn details(&self) -> Value {
        json!({
            "value": self.value,
            "partition": self.partition,
            "acked_offset": self.offset,
            "history_index": self.index,
            "acks": self.acks.label(),
            "isr": self.isr,
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
        let bad = |what: &str| format!("history index {}: send ok {what}", op.index);
        let acks = match send.acks {
            crate::schedule::Acks::All => Acks::All,
            crate::schedule::Acks::Leader => Acks::One,
            crate::schedule::Acks::None => Acks::Zero,
        };
        if let Some(offsets) = &ack.offsets
            && offsets.len() != send.values.len()
        {
            return Err(bad("has a different number of offsets and values"));
        }
        let isr: Option<Vec<i64>> = ack
            .isr
            .as_ref()
            .map(|isr| isr.iter().map(|&id| i64::from(id)).collect());
        let leader_epoch = ack.leader_epoch.map(i64::from);
        for (i, &value) in send.values.iter().enumerate() {
            acked.push(AckedValue {
                index: op.index,
                partition: send.partition.to_string(),
                topic: send.partition.topic.clone(),
                partition_number: send.partition.wire_partition(),
                value,
                acks,
                offset: ack.offsets.as_ref().map(|o| o[i]),
                isr: isr.clone(),
                leader_epoch,
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

/// Applies DESIGN.md's excuses to one acknowledged value.
pub(crate) fn judge(run: &RunData, acked: &AckedValue) -> Judgement {
    let (Some(isr), Some(leader_epoch)) = (&acked.isr, acked.leader_epoch) else {
        return Judgement::Undetermined("the ack recorded no ISR or leader epoch from etcd".into());
    };
    if isr.is_empty() {
        return Judgement::Undetermined("the ack recorded an empty ISR".into());
    }
    // A timeline with no state for the partition rules nothing out.
    let timeline = run
        .timeline
        .as_ref()
        .filter(|t| !states(t, &acked.topic, acked.partition_number).is_empty());
    if let Some(timeline) = timeline
        && let Some(election) = unclean_elections(timeline, &acked.topic, acked.partition_number)
            .into_iter()
            .find(|s| i64::from(s.leader_epoch) > leader_epoch)
    {
        return Judgement::Excused(format!(
            "unclean election of {} at leader epoch {} (etcd revision {})",
            node_name(election.leader),
            election.leader_epoch,
            election.revision
        ));
    }
    let lost = power_lost_nodes(run, acked);
    if isr.iter().all(|id| lost.contains_key(&node_name(id))) {
        let indices: BTreeSet<u64> = isr
            .iter()
            .filter_map(|id| lost.get(&node_name(id)).copied())
            .collect();
        return Judgement::Excused(format!(
            "power loss of every ISR member (history indices {indices:?})"
        ));
    }
    if timeline.is_none() {
        return Judgement::Undetermined(format!(
            "no timeline of {}: an unclean election after the ack cannot be ruled out",
            acked.partition
        ));
    }
    Judgement::NotExcused
}

/// Nodes that lost unflushed bytes of this value's partition in a power loss
/// after the ack → the history index of the first such fault. A power-loss op
/// that records its cut must have cut the replica back to or below the acked
/// offset; one that records no cut for the node counts on its name alone.
fn power_lost_nodes(run: &RunData, acked: &AckedValue) -> BTreeMap<String, u64> {
    let dir = format!("{}-{}", acked.topic, acked.partition_number);
    let mut lost = BTreeMap::new();
    for op in &run.history {
        let Some(fault) = op.fault() else {
            continue;
        };
        if op.process != Process::Nemesis
            || fault.verb != Verb::PowerLoss
            || op.kind == OpType::Invoke
            || op.error.is_some()
            || op.index <= acked.index
        {
            continue;
        }
        let Some(done) = &fault.done else {
            continue;
        };
        for node in &done.nodes {
            let cut = done.cut.as_ref().and_then(|cuts| {
                cuts.iter().find(|c| c.node == *node).map(|c| {
                    c.replicas()
                        .find(|r| r.replica == dir)
                        .map(|r| r.log_end_offset_after)
                })
            });
            let node = node.to_string();
            let reached = match (cut, acked.offset) {
                // No cut recorded for this node: its name is the evidence.
                (None, _) => true,
                // The node held no replica of the partition: nothing to lose.
                (Some(None), _) => false,
                (Some(Some(_)), None) => true,
                (Some(Some(end_after)), Some(offset)) => end_after <= offset,
            };
            if reached {
                lost.entry(node).or_insert(op.index);
            }
        }
    }
    lost
}

/// A final log with its value → offsets map and the values each holder has.
pub(crate) struct IndexedLog<'a> {
    pub log: FinalLog<'a>,
    pub by_value: BTreeMap<String, Vec<i64>>,
    /// Per holder of the partition: the values its replica holds.
    held: Vec<(&'a str, BTreeSet<String>)>,
}

impl IndexedLog<'_> {
    /// Nodes whose replica of the partition does not hold the value anywhere.
    pub(crate) fn lacking(&self, value: &str) -> Vec<String> {
        self.held
            .iter()
            .filter(|(_, values)| !values.contains(value))
            .map(|(node, _)| (*node).to_owned())
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
/// value it held back.
pub(crate) fn unknown_message(unknown: BTreeMap<String, String>) -> String {
    unknown
        .into_iter()
        .map(|(why, first)| format!("{why} (first: {first})"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Final logs per partition, chosen and indexed once.
pub(crate) struct FinalLogs<'a> {
    run: &'a RunData,
    logs: BTreeMap<String, Result<IndexedLog<'a>, String>>,
}

impl<'a> FinalLogs<'a> {
    pub(crate) fn new(run: &'a RunData) -> Self {
        FinalLogs {
            run,
            logs: BTreeMap::new(),
        }
    }

    /// The final log of the value's partition, indexed.
    pub(crate) fn get(&mut self, acked: &AckedValue) -> Result<&IndexedLog<'a>, &String> {
        let run = self.run;
        self.logs
            .entry(acked.partition.clone())
            .or_insert_with(|| {
                final_log(run, &acked.topic, acked.partition_number).map(|log| IndexedLog {
                    by_value: log.offsets_by_value(),
                    held: log
                        .holders
                        .iter()
                        .map(|(node, replica)| {
                            (*node, offsets_by_value(replica).into_keys().collect())
                        })
                        .collect(),
                    log,
                })
            })
            .as_ref()
    }
}

fn check(run: &RunData) -> Result<CheckResult, String> {
    let acked = acked_values(&run.history)?;
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
        let indexed = match logs.get(a) {
            Ok(found) => found,
            Err(why) => {
                *counts
                    .entry(match a.acks {
                        Acks::All => "unchecked-acks-all",
                        Acks::One => "unchecked-acks-1",
                        Acks::Zero => "unchecked-acks-0",
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
        if indexed.by_value.contains_key(&text) {
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
            Acks::One => {
                *counts.entry("lost-acks-1").or_default() += 1;
                report("lost-acks-1-write", "acks=1 waits for the leader alone");
            }
            Acks::Zero => {
                *counts.entry("lost-acks-0").or_default() += 1;
                report("lost-acks-0-write", "acks=0 waits for nothing");
            }
            Acks::All => match judge(run, a) {
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
                            lacking.join(", ")
                        ),
                        details,
                    });
                }
            },
        }
    }
    let mut result = if !evidence.is_empty() {
        CheckResult::invalid(
            NAME,
            format!(
                "{} acknowledged acks=all value(s) lost without excuse",
                counts.get("lost-acks-all").copied().unwrap_or(0)
            ),
            evidence,
        )
    } else if !unknown.is_empty() {
        CheckResult::unknown(NAME, unknown_message(unknown))
    } else {
        CheckResult::valid(
            NAME,
            format!(
                "{} acknowledged value(s) checked; no acks=all write lost without excuse{}",
                acked.len(),
                excused_by(&excuses)
            ),
        )
    };
    result.evidence.extend(reported);
    for (name, n) in counts {
        result = result.with_count(name, n);
    }
    Ok(result)
}
