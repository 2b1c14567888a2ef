//! Path assertions: proof that a run exercised what its scenario is about,
//! read from the typed history and etcd's timeline. A pass that never
//! exercised the fault proves nothing.

use crate::checker::RunData;
use crate::history::{OpType, Process};
use crate::node::NodeId;
use crate::observe::timeline::PartitionStateChange;
use crate::topic_partition::{PartitionRef, PartitionRefError};

use super::suite::PathAssertion;

/// What a run shows instead of what a path assertion asks for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("{acked} values acknowledged, wanted at least {wanted}")]
    TooFewAcked { acked: u64, wanted: u64 },
    #[error("{resent} idempotent sends acknowledged after a resend, wanted at least {wanted}")]
    TooFewResentAcked { resent: u64, wanted: u64 },
    #[error(
        "{reads} reads of a committed offset after an acknowledged commit, wanted at least {wanted}"
    )]
    TooFewCommittedReads { reads: u64, wanted: u64 },
    #[error("no {fault} fault completed")]
    FaultNotCompleted { fault: String },
    #[error("the run recorded no etcd timeline")]
    NoTimeline,
    /// The assertion names a partition that is not one.
    #[error(transparent)]
    Partition(#[from] PartitionRefError),
    #[error("etcd shows no ISR shrink of {partition}")]
    NoIsrShrink { partition: String },
    /// Leaders as `b1@0` (node, leader epoch), each change once.
    #[error("leaders of {partition} in etcd were {seen:?}, expected {expected:?}")]
    Leaders {
        partition: String,
        seen: Vec<String>,
        expected: Vec<String>,
    },
}

/// Ok reads of a committed offset of a (group, partition) that had an
/// acknowledged commit earlier in the history.
fn committed_reads_after_a_commit(run: &RunData) -> u64 {
    use crate::history::Body;
    let mut committed = std::collections::HashSet::new();
    let mut reads = 0;
    for op in &run.history {
        match &op.body {
            Body::Commit(c) if op.kind == OpType::Ok => {
                committed.insert((c.group.clone(), c.partition.clone()));
            }
            Body::Committed(c)
                if op.kind == OpType::Ok
                    && committed.contains(&(c.group.clone(), c.partition.clone())) =>
            {
                reads += 1;
            }
            _ => {}
        }
    }
    reads
}

/// Whether the run shows what `assertion` asks for; `Err` says what it shows
/// instead.
pub(super) fn check_path(assertion: &PathAssertion, run: &RunData) -> Result<(), PathError> {
    if let Some(n) = assertion.acked_at_least {
        let acked: u64 = run
            .history
            .iter()
            .filter_map(|op| op.acked_send())
            .map(|(send, _)| send.values.len() as u64)
            .sum();
        if acked < n {
            return Err(PathError::TooFewAcked { acked, wanted: n });
        }
    }
    if let Some(n) = assertion.resent_acked_at_least {
        let resent = run
            .history
            .iter()
            .filter_map(|op| op.acked_send())
            .filter(|(send, _)| {
                send.producer
                    .is_some_and(|p| p.attempts.is_some_and(|attempts| attempts > 1))
            })
            .count() as u64;
        if resent < n {
            return Err(PathError::TooFewResentAcked { resent, wanted: n });
        }
    }
    if let Some(n) = assertion.committed_reads_at_least {
        let reads = committed_reads_after_a_commit(run);
        if reads < n {
            return Err(PathError::TooFewCommittedReads { reads, wanted: n });
        }
    }
    if let Some(f) = &assertion.fault {
        // The nemesis records a fault that did its work as `info` with no error.
        let fired = run.history.iter().any(|op| {
            op.process == Process::Nemesis
                && op.kind == OpType::Info
                && op.error.is_none()
                && op.fault().is_some_and(|fault| fault.verb.name() == f)
        });
        if !fired {
            return Err(PathError::FaultNotCompleted { fault: f.clone() });
        }
    }
    let states = |partition: &str| -> Result<Vec<&PartitionStateChange>, PathError> {
        let timeline = run.timeline.as_ref().ok_or(PathError::NoTimeline)?;
        let partition: PartitionRef = partition.parse()?;
        Ok(timeline.states_of(&partition.topic, partition.partition))
    };
    if let Some(partition) = &assertion.isr_shrink {
        let states = states(partition)?;
        let shrank = states.windows(2).any(|w| w[1].isr.len() < w[0].isr.len());
        if !shrank {
            return Err(PathError::NoIsrShrink {
                partition: partition.clone(),
            });
        }
    }
    if let Some(leaders) = &assertion.leaders {
        let mut seen: Vec<String> = Vec::new();
        for state in states(&leaders.partition)? {
            let Some(leader) = NodeId::from_broker_id(state.leader) else {
                continue;
            };
            let pair = format!("{leader}@{}", state.leader_epoch);
            if seen.last() != Some(&pair) {
                seen.push(pair);
            }
        }
        if seen != leaders.sequence {
            return Err(PathError::Leaders {
                partition: leaders.partition.clone(),
                seen,
                expected: leaders.sequence.clone(),
            });
        }
    }
    Ok(())
}
