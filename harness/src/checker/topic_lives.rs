//! A deleted topic's records are never its successor's (the topic-lives
//! workload, workload/lives.rs): one client creates a topic, writes to it,
//! reads it and deletes it, again and again under one name. A creation that
//! succeeded began a new life of the name, empty; so a read that began after
//! a `create-topic` was acknowledged must not return a record whose send
//! was acknowledged before that creation was sent — which is what a replica
//! that kept its log through the deletion serves, or a deletion that
//! completed before every replica had deleted (KIP-516's motivation: "a
//! deleted topic's stale log may be served as a new topic of the same
//! name").
//!
//! Only the ordering of acknowledgements in the history is used, not the
//! life numbers the client writes: the rule holds whoever created the topic
//! and however its lives are counted. A send whose outcome is unknown
//! (`info`) proves nothing (a request held in the network may land in a
//! later life, legitimately), nor does a creation whose outcome is unknown.

use std::collections::{BTreeMap, HashMap};

use super::evidence::Resurrected;
use super::index::{EVIDENCE_MAX, RunIndex};
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence};
use crate::history::{LifeOp, LifeStep, Op, OpType, Process, RecordValue};

pub const NAME: &str = "topic-lives";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A topic deleted and created again under its name begins empty: a read that \
            began after the creation was acknowledged returns no record whose write was \
            acknowledged before the creation was sent.",
        source: "Kafka documentation, topic deletion (`delete.topic.enable`; a deletion completes \
            once every replica has removed its log); KIP-4 (DeleteTopics answers once the topic is \
            gone); KIP-516 (topic ids, so a deleted topic's stale log is never taken for a new \
            topic of the same name).",
        not_checked: "Topics no topic-lives op touched. Writes whose outcome is unknown (`info`), \
            which may land later. Whether each life's acknowledged writes are all read back (the \
            lost-write rules judge the workload's own topics). Records that are not decimal \
            numbers. The client ops of a topic's earlier lives are set aside at load (counted as \
            `earlier-life-ops-set-aside`): no final log is left to judge them against.",
        needs: &[],
        check,
    }
}

/// Whether `op` is one this checker judges: any topic-lives op.
pub fn judges(op: &Op) -> bool {
    op.life().is_some()
}

/// An acknowledged send: where its value went.
struct Sent<'a> {
    op: &'a Op,
    life: &'a LifeOp,
}

/// An acknowledged creation: when it was sent and when answered.
#[derive(Clone, Copy)]
struct Created {
    invoked: u64,
    completed: u64,
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let mut invoked: HashMap<Process, u64> = HashMap::new();
    let mut sent: HashMap<(&str, i64), Sent> = HashMap::new();
    let mut created: BTreeMap<&str, Vec<Created>> = BTreeMap::new();
    let mut evidence = Vec::new();
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    for op in &run.history {
        if op.kind == OpType::Invoke {
            invoked.insert(op.process, op.index);
            continue;
        }
        let Some(life) = op.life().filter(|_| op.kind == OpType::Ok) else {
            continue;
        };
        let began = invoked.get(&op.process).copied().unwrap_or(op.index);
        match life.step {
            LifeStep::Create => {
                *counts.entry("lives").or_default() += 1;
                created.entry(&life.topic).or_default().push(Created {
                    invoked: began,
                    completed: op.index,
                });
            }
            LifeStep::Delete => *counts.entry("deletions").or_default() += 1,
            LifeStep::Send => {
                *counts.entry("writes").or_default() += 1;
                if let Some(value) = life.value {
                    sent.insert((&life.topic, value), Sent { op, life });
                }
            }
            LifeStep::Read => {
                *counts.entry("reads").or_default() += 1;
                // The last creation acknowledged before the read began.
                let Some(creation) = created
                    .get(life.topic.as_str())
                    .and_then(|c| c.iter().rev().find(|c| c.completed < began))
                else {
                    continue;
                };
                for record in life.records.iter().flatten() {
                    *counts.entry("records-read").or_default() += 1;
                    let RecordValue::Number(value) = record.value() else {
                        continue;
                    };
                    let Some(write) = sent.get(&(life.topic.as_str(), *value)) else {
                        continue;
                    };
                    if write.op.index >= creation.invoked {
                        continue;
                    }
                    *counts.entry("resurrected").or_default() += 1;
                    if evidence.len() < EVIDENCE_MAX {
                        evidence.push(resurrected((op, life), record.offset(), write, creation));
                    }
                }
            }
        }
    }
    let resurrected = counts.get("resurrected").copied().unwrap_or(0);
    let lives = counts.get("lives").copied().unwrap_or(0);
    let mut result = CheckResult::fold(
        NAME,
        evidence,
        |_| format!("{resurrected} record(s) of a deleted topic read in a later life"),
        None,
        || format!("no read returned a record from before its topic's creation ({lives} lives)"),
    );
    for (name, n) in counts {
        result = result.with_count(name, n);
    }
    if run.earlier_lives_ops > 0 {
        result = result.with_count("earlier-life-ops-set-aside", run.earlier_lives_ops);
    }
    Ok(result)
}

fn resurrected(
    (op, read): (&Op, &LifeOp),
    offset: i64,
    write: &Sent,
    creation: &Created,
) -> Evidence {
    let value = write.life.value.unwrap_or_default();
    Evidence::new(
        Anomaly::ResurrectedRecord,
        format!(
            "{} offset {offset}: the read at history index {} (life {}, from {}) returned {value}, \
             acknowledged at index {} in life {} (offset {}), before the creation acknowledged at \
             index {} was sent",
            read.topic,
            op.index,
            read.life,
            read.node.map_or("no node".to_owned(), |n| n.to_string()),
            write.op.index,
            write.life.life,
            write
                .life
                .offset
                .map_or("unknown".to_owned(), |o| o.to_string()),
            creation.completed,
        ),
        Resurrected {
            topic: read.topic.clone(),
            value,
            read_offset: offset,
            read_index: op.index,
            read_node: read.node,
            read_life: read.life,
            sent_index: write.op.index,
            sent_life: write.life.life,
            sent_offset: write.life.offset,
            created_index: creation.completed,
        },
    )
}

#[cfg(test)]
#[path = "topic_lives_tests.rs"]
mod tests;
