//! Whom a fault or a client op is aimed at, as a schedule writes it (`b2`,
//! `controller`, `leader of t-0`, `a follower of t-0`, `random minority`,
//! `b1,b3`, `coordinator of group g`, `coordinator of transactional id t`):
//! parsed here, resolved to nodes only when the op fires (the
//! nemesis, the workload). It names nothing else of the schedule, so every
//! other piece of it can name a target.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::node::{NodeId, NodeIdError};
use crate::topic_partition::{PartitionRef, PartitionRefError};

/// Whom a fault or a client op is aimed at; resolved to nodes when it fires.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Target {
    Node(NodeId),
    Controller,
    /// For client ops: the partition's current leader.
    Leader,
    LeaderOf(PartitionRef),
    AFollowerOf(PartitionRef),
    RandomMinority,
    /// Several named nodes at once, `b1,b3`: what `random minority` resolved
    /// to, written so in a campaign's realised schedule.
    Nodes(Vec<NodeId>),
    /// `coordinator of group G`: the leader of G's partition of
    /// `__consumer_offsets` (Kafka's `GroupMetadataManager.partitionFor`).
    CoordinatorOfGroup(String),
    /// `coordinator of transactional id T`: the leader of T's partition of
    /// `__transaction_state` (Kafka's `TransactionStateManager.partitionFor`).
    CoordinatorOfTxn(String),
}

crate::text_form::text_form!(Target);

/// Why a text is not a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// `leader of P` or `a follower of P` with a `P` that is not a partition.
    #[error(transparent)]
    Partition(#[from] PartitionRefError),
    /// A node name, or one of a list `b1,b3`, that is not one.
    #[error(transparent)]
    Node(#[from] NodeIdError),
    #[error(
        "{text:?} is not a target (b2, controller, leader, leader of t-0, a follower of t-0, random minority, b1,b3, coordinator of group g, coordinator of transactional id t)"
    )]
    NotATarget { text: String },
}

impl std::str::FromStr for Target {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Self, TargetError> {
        let words: Vec<&str> = s.split_whitespace().collect();
        Ok(match words.as_slice() {
            ["controller"] => Target::Controller,
            ["leader"] => Target::Leader,
            ["random", "minority"] => Target::RandomMinority,
            ["leader", "of", p] => Target::LeaderOf(p.parse()?),
            ["a", "follower", "of", p] => Target::AFollowerOf(p.parse()?),
            // A group or transactional id is the rest of the words, as one.
            ["coordinator", "of", "group", id @ ..] if !id.is_empty() => {
                Target::CoordinatorOfGroup(id.join(" "))
            }
            ["coordinator", "of", "transactional", "id", id @ ..] if !id.is_empty() => {
                Target::CoordinatorOfTxn(id.join(" "))
            }
            [node] if NodeId::is_name(node) => Target::Node(node.parse()?),
            [nodes] if nodes.contains(',') => {
                let mut named = nodes
                    .split(',')
                    .map(|n| n.parse::<NodeId>())
                    .collect::<Result<Vec<_>, _>>()?;
                named.sort_unstable();
                named.dedup();
                Target::Nodes(named)
            }
            _ => return Err(TargetError::NotATarget { text: s.to_owned() }),
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Node(n) => write!(f, "{n}"),
            Target::Controller => f.write_str("controller"),
            Target::Leader => f.write_str("leader"),
            Target::LeaderOf(p) => write!(f, "leader of {p}"),
            Target::AFollowerOf(p) => write!(f, "a follower of {p}"),
            Target::RandomMinority => f.write_str("random minority"),
            Target::Nodes(nodes) => {
                let names: Vec<String> = nodes.iter().map(NodeId::to_string).collect();
                f.write_str(&names.join(","))
            }
            Target::CoordinatorOfGroup(group) => write!(f, "coordinator of group {group}"),
            Target::CoordinatorOfTxn(id) => write!(f, "coordinator of transactional id {id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinators_are_named_by_group_or_transactional_id_and_read_back() {
        let group: Target = "coordinator of group orders-g".parse().unwrap();
        assert_eq!(group, Target::CoordinatorOfGroup("orders-g".into()));
        let txn: Target = "coordinator  of transactional id tx 1".parse().unwrap();
        assert_eq!(txn, Target::CoordinatorOfTxn("tx 1".into()));
        for target in [group, txn] {
            assert_eq!(target.to_string().parse::<Target>().unwrap(), target);
        }
        for bad in [
            "coordinator of group",
            "coordinator of transactional id",
            "coordinator",
        ] {
            assert!(
                matches!(bad.parse::<Target>(), Err(TargetError::NotATarget { .. })),
                "{bad}"
            );
        }
    }
}
