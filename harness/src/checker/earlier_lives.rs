//! Topics deleted and created again during a run (the topic-lives
//! workload's, or an application's through `epochal up`): several lives
//! under one name. What a run leaves of such a topic spans its lives in
//! some places and holds only its last in others, so at load
//! ([`set_aside`]):
//!
//! - etcd's timeline, the state-change logs and the replicas' recorded
//!   fetches span every life: a new life's leader epoch 0 after an old
//!   life's 3 would read as a decision going back, an old life's fetch past
//!   offset 500 as a follower holding a new life's offset 3. Those
//!   topics' entries are set aside.
//! - The replicas on disk, and the final read, hold the last life: they
//!   stay, and the client ops of that life are judged against them as any.
//! - The client ops of earlier lives (invoked before the last acknowledged
//!   creation was sent, or all of them when the last acknowledged step was a
//!   deletion) have no final log left to be judged against: they are set
//!   aside too, and counted (`RunData::earlier_lives_ops`). The
//!   `topic-lives` checker judges every life, from the history.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::history::{Body, LifeStep, MicroOp, Op, OpType, Process};
use crate::node::NodeId;
use crate::observe::timeline::Timeline;
use crate::reader::frames::Fetches;
use crate::reader::state_change::StateChange;

/// What a run's load holds that spans a topic's lives, and its history.
pub(super) struct Spanning<'a> {
    pub history: &'a mut Vec<Op>,
    pub state_changes: &'a mut BTreeMap<NodeId, Vec<StateChange>>,
    pub timeline: Option<&'a mut Timeline>,
    pub fetches: Option<&'a mut Fetches>,
}

/// Where each life topic's last life began: the index of the invoke of its
/// last acknowledged creation, or `None` when its last acknowledged step
/// was a deletion (no life is left).
fn last_lives(history: &[Op]) -> BTreeMap<String, Option<u64>> {
    let mut invoked: HashMap<Process, u64> = HashMap::new();
    let mut last: BTreeMap<String, Option<u64>> = BTreeMap::new();
    for op in history {
        if op.kind == OpType::Invoke {
            invoked.insert(op.process, op.index);
        }
        let Some(life) = op.life() else {
            continue;
        };
        let entry = last.entry(life.topic.clone()).or_insert(Some(0));
        match (op.kind, life.step) {
            (OpType::Ok, LifeStep::Create) => {
                *entry = Some(invoked.get(&op.process).copied().unwrap_or(op.index));
            }
            (OpType::Ok, LifeStep::Delete) => *entry = None,
            _ => {}
        }
    }
    last
}

/// The topics a client op acts on.
fn topics(op: &Op) -> Vec<&str> {
    match &op.body {
        Body::Send(s) => vec![s.partition.topic.as_str()],
        Body::Poll(p) => vec![p.partition.topic.as_str()],
        Body::Commit(c) => vec![c.partition.topic.as_str()],
        Body::Committed(c) => vec![c.partition.topic.as_str()],
        Body::StableOffsets(s) => vec![s.partition.topic.as_str()],
        Body::Rebalance(r) => r.topics.iter().map(String::as_str).collect(),
        Body::Txn(t) => t
            .ops
            .iter()
            .map(|m| match m {
                MicroOp::Send(s) => s.partition.topic.as_str(),
                MicroOp::Poll(p) => p.partition.topic.as_str(),
            })
            .chain(t.offsets.keys().map(|p| p.topic.as_str()))
            .collect(),
        Body::ClientCrash(_) | Body::Life(_) | Body::Fault(_) => Vec::new(),
    }
}

/// Sets aside what spans a life topic's lives, and the client ops of its
/// earlier lives (module doc); how many ops were set aside.
pub(super) fn set_aside(run: Spanning<'_>) -> u64 {
    let lives = last_lives(run.history);
    if lives.is_empty() {
        return 0;
    }
    let kept = |topic: &str| !lives.contains_key(topic);
    for entries in run.state_changes.values_mut() {
        entries.retain(|e| kept(&e.topic));
    }
    if let Some(timeline) = run.timeline {
        timeline.partition_states.retain(|s| kept(&s.topic));
    }
    if let Some(fetches) = run.fetches {
        fetches.by_replica.retain(|(_, topic, _), _| kept(topic));
    }
    // An op of an earlier life: one invoked before its topic's last life
    // began, or on a topic no life is left of. Its completion goes with it.
    let earlier = |op: &Op| {
        topics(op).into_iter().any(|t| match lives.get(t) {
            Some(Some(began)) => op.index < *began,
            Some(None) => true,
            None => false,
        })
    };
    let mut dropped: HashSet<Process> = HashSet::new();
    let mut set_aside = 0;
    run.history.retain(|op| {
        if op.kind == OpType::Invoke {
            if earlier(op) {
                dropped.insert(op.process);
                set_aside += 1;
                return false;
            }
            dropped.remove(&op.process);
            return true;
        }
        !dropped.remove(&op.process)
    });
    set_aside
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{LifeOp, Send};
    use crate::node::NodeId;
    use crate::schedule::{Acks, PartitionRef};

    fn op(index: u64, process: u64, kind: OpType, body: Body) -> Op {
        Op {
            index,
            time_ns: index,
            process: Process::Client(process),
            kind,
            body,
            error: None,
        }
    }

    fn life(step: LifeStep) -> Body {
        Body::Life(Box::new(LifeOp::new(step, "a", 1, Some(NodeId::new(1)))))
    }

    fn send(value: i64) -> Body {
        Body::Send(Send {
            partition: PartitionRef::new("a", 0),
            values: vec![value],
            acks: Acks::All,
            node: Some(NodeId::new(1)),
            producer: None,
            acked: None,
            app: None,
        })
    }

    fn history(steps: &[(u64, OpType, Body)]) -> Vec<Op> {
        steps
            .iter()
            .enumerate()
            .map(|(i, (p, k, b))| op(i as u64, *p, *k, b.clone()))
            .collect()
    }

    fn set_aside_in(history: &mut Vec<Op>) -> u64 {
        set_aside(Spanning {
            history,
            state_changes: &mut BTreeMap::new(),
            timeline: None,
            fetches: None,
        })
    }

    #[test]
    fn the_ops_of_earlier_lives_are_set_aside_and_the_last_lifes_kept() {
        let mut run = history(&[
            (0, OpType::Invoke, life(LifeStep::Create)),
            (0, OpType::Ok, life(LifeStep::Create)),
            (1, OpType::Invoke, send(1)),
            (0, OpType::Invoke, life(LifeStep::Delete)),
            (0, OpType::Ok, life(LifeStep::Delete)),
            // Answered after the deletion: still an op of the first life.
            (1, OpType::Info, send(1)),
            (0, OpType::Invoke, life(LifeStep::Create)),
            (0, OpType::Ok, life(LifeStep::Create)),
            (2, OpType::Invoke, send(2)),
            (2, OpType::Ok, send(2)),
        ]);
        assert_eq!(set_aside_in(&mut run), 1);
        let sends: Vec<u64> = run
            .iter()
            .filter(|o| o.send().is_some())
            .map(|o| o.index)
            .collect();
        assert_eq!(sends, [8, 9]);
    }

    #[test]
    fn a_topic_last_deleted_has_every_client_op_set_aside() {
        let mut run = history(&[
            (0, OpType::Invoke, life(LifeStep::Create)),
            (0, OpType::Ok, life(LifeStep::Create)),
            (1, OpType::Invoke, send(1)),
            (1, OpType::Ok, send(1)),
            (0, OpType::Invoke, life(LifeStep::Delete)),
            (0, OpType::Ok, life(LifeStep::Delete)),
        ]);
        assert_eq!(set_aside_in(&mut run), 1);
        assert!(run.iter().all(|o| o.life().is_some()));
    }
}
