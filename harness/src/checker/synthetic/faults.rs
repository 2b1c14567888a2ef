//! The synthetic run's faults: a partition's leader crashes (or loses
//! power) between client ops, a clean election moves its partitions, and it
//! restarts in sync before the next op.

use super::Generator;
use crate::history::{Aim, Body, Done, FaultOp, NodeCut, OpType, Process, ReplicaCut, Verb};
use crate::node::NodeId;
use crate::observe::timeline::ControllerChange;
use crate::schedule::Target;
use crate::topic_partition::PartitionRef;

impl Generator<'_> {
    /// Fault `k`: the leader of partition `k mod partitions` crashes (or, for
    /// the middle fault, loses power) and restarts. Its partitions move to the
    /// next broker in a clean election (the ISR was everyone), leader epoch
    /// up by one; the controller moves too when it was the one hit.
    pub(super) fn fault(&mut self, k: usize) {
        let p = k % self.logs.len();
        let partition = self.logs[p].partition.clone();
        let node = self.logs[p].leader;
        let verb = if k == self.spec.faults / 2 {
            Verb::PowerLoss
        } else {
            Verb::Crash
        };
        self.record_fault(verb, node, partition);
        self.elect_without(node);
        self.restart(node);
    }

    /// Records the crash or power loss of `node`, aimed at the leader of
    /// `partition`, on the nemesis process.
    fn record_fault(&mut self, verb: Verb, node: NodeId, partition: PartitionRef) {
        let aim = Aim::Target {
            target: Target::LeaderOf(partition),
            id: None,
            on_heal: None,
        };
        let invoke = FaultOp {
            verb,
            aim: aim.clone(),
            done: None,
        };
        self.push(
            Process::Nemesis,
            OpType::Invoke,
            Body::Fault(Box::new(invoke)),
            None,
        );
        let cut = (verb == Verb::PowerLoss).then(|| self.power_loss_cut(node));
        let done = FaultOp {
            verb,
            aim,
            done: Some(Done {
                nodes: vec![node],
                healed: None,
                blocked: None,
                cut,
                etcd_revision: None,
                started_time_ms: None,
                exited: None,
                registered_after_stop: None,
            }),
        };
        self.push(
            Process::Nemesis,
            OpType::Info,
            Body::Fault(Box::new(done)),
            None,
        );
    }

    /// What a power loss of `node` cuts: the last few records of each
    /// replica (unflushed), which it fetches again from the new leaders
    /// after its restart.
    fn power_loss_cut(&self, node: NodeId) -> Vec<NodeCut> {
        let cuts = self
            .logs
            .iter()
            .map(|log| {
                let before = log.log_end_offset();
                let after = (before - 3).max(0);
                ReplicaCut {
                    replica: log.partition.to_string(),
                    log_end_offset_before: before,
                    log_end_offset_after: after,
                    bytes_removed: (before - after) as u64 * 15,
                    segments_deleted: Vec::new(),
                }
            })
            .collect();
        vec![NodeCut {
            node,
            cuts: Some(cuts),
            cut: None,
        }]
    }

    /// With `node` down: the controller moves off it, each partition it led
    /// moves to the next broker with its leader epoch up by one, and every
    /// ISR shrinks to the brokers still up.
    fn elect_without(&mut self, node: NodeId) {
        let up: Vec<NodeId> = self
            .brokers
            .iter()
            .copied()
            .filter(|&b| b != node)
            .collect();
        if self.controller == node {
            self.controller = up[0];
            self.controller_epoch += 1;
            self.revision += 1;
            self.timeline.controllers.push(ControllerChange {
                revision: self.revision,
                broker_id: Some(self.controller.broker_id()),
                epoch: Some(self.controller_epoch),
            });
        }
        for q in 0..self.logs.len() {
            let log = &mut self.logs[q];
            if log.leader == node {
                let next = self.brokers[(self.brokers.iter().position(|&b| b == node).unwrap()
                    + 1)
                    % self.brokers.len()];
                log.leader = next;
                log.leader_epoch += 1;
            }
            log.isr = up.clone();
            self.publish(q, &up);
        }
    }

    /// Records `node`'s restart on the nemesis process; every ISR grows back
    /// to all the brokers.
    fn restart(&mut self, node: NodeId) {
        let restart = |done| FaultOp {
            verb: Verb::Restart,
            aim: Aim::Target {
                target: Target::Node(node),
                id: None,
                on_heal: None,
            },
            done,
        };
        self.push(
            Process::Nemesis,
            OpType::Invoke,
            Body::Fault(Box::new(restart(None))),
            None,
        );
        self.push(
            Process::Nemesis,
            OpType::Info,
            Body::Fault(Box::new(restart(Some(Done {
                nodes: vec![node],
                healed: None,
                blocked: None,
                cut: None,
                etcd_revision: None,
                started_time_ms: None,
                exited: None,
                registered_after_stop: None,
            })))),
            None,
        );
        let everyone = self.brokers.clone();
        for q in 0..self.logs.len() {
            self.logs[q].isr = everyone.clone();
            self.publish(q, &everyone);
        }
    }
}
