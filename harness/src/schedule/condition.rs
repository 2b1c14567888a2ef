//! What an `await` step waits for, written as a short sentence
//! (`leader of t-0 is b2`, `b1 not in ISR of t-0`, `HW of b2 for t-0 >= 3`).
//! Each is observed over direct connections no fault touches; this file only
//! parses and prints them, so a saved schedule reads as it was written.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::model::PartitionRef;
use crate::node::{NodeId, NodeIdError};
use crate::topic_partition::PartitionRefError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Condition {
    LeaderIs {
        partition: PartitionRef,
        node: NodeId,
    },
    InIsr {
        node: NodeId,
        partition: PartitionRef,
        member: bool,
    },
    /// High watermark (`Offset::Hw`) or log end offset of `node`'s replica
    /// compared with `value` (`>=`, `<=` or `==`).
    OffsetIs {
        offset: Offset,
        node: NodeId,
        partition: PartitionRef,
        compare: Compare,
        value: u64,
    },
    /// etcd records no leader for the partition (-1, or no state yet).
    NoLeader {
        partition: PartitionRef,
    },
    /// `node`'s `leader-epoch-checkpoint` for the partition holds exactly
    /// these `(epoch, start offset)` entries, in order.
    EpochCheckpointIs {
        node: NodeId,
        partition: PartitionRef,
        entries: Vec<(i32, i64)>,
    },
    ControllerIs {
        node: NodeId,
        is: bool,
    },
    /// `node`'s checkpoint file for the partition holds exactly `value`.
    CheckpointIs {
        checkpoint: Checkpoint,
        node: NodeId,
        partition: PartitionRef,
        value: u64,
    },
    /// `node`'s state-change log, since its latest start, shows a LeaderAndIsr
    /// for the partition with this leader epoch, or with any (`None`): the
    /// node has been told its role again after a restart, whichever epoch the
    /// controller's decision carried (a setting that fences the restarted
    /// node bumps it, one that does not keeps it).
    AppliedLeaderAndIsr {
        node: NodeId,
        partition: PartitionRef,
        leader_epoch: Option<u32>,
    },
    /// The node's process is stopped (state T), e.g. at a `stop` failpoint.
    Stopped {
        node: NodeId,
    },
    /// The background producers had `more` sends acknowledged since the
    /// await began: the cluster is taking writes again. Counted by the
    /// workload itself, not observed.
    Acknowledged {
        more: u64,
    },
    /// The background consumers had `more` commits acknowledged since the
    /// await began ([groups]): the group is consuming again. Counted by the
    /// workload itself.
    CommitsAcknowledged {
        more: u64,
    },
    /// Time passes: a delay the schedule keeps, not a state awaited. A
    /// campaign's realised schedule writes the gap between two faults so
    /// when the cluster acknowledged too few writes to measure it by.
    Elapsed {
        ms: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offset {
    Hw,
    Leo,
}

/// How an offset is compared in an await.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    AtLeast,
    AtMost,
    Equal,
}

impl Compare {
    pub fn holds(self, seen: u64, value: u64) -> bool {
        match self {
            Compare::AtLeast => seen >= value,
            Compare::AtMost => seen <= value,
            Compare::Equal => seen == value,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Compare::AtLeast => ">=",
            Compare::AtMost => "<=",
            Compare::Equal => "==",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpoint {
    /// `replication-offset-checkpoint`.
    Hw,
    /// `recovery-point-offset-checkpoint`.
    RecoveryPoint,
}

const FORMS: &str = "leader of P is X | P has no leader | X in ISR of P | X not in ISR of P | \
HW of X for P >= N (or <=, ==) | LEO of X for P >= N (or <=, ==) | controller is X | controller is not X | \
checkpoint hw of X for P is N | checkpoint recovery-point of X for P is N | \
leader-epoch-checkpoint of X for P is [(E,O),...] | X applied LeaderAndIsr for P [with leader epoch E] | \
X is stopped | N more writes acknowledged | N more commits acknowledged | N ms pass";

/// Why a text is not a condition: each names the word and the condition it
/// is in, as a schedule's author wrote them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    /// A partition (`P` in the forms) that is not one.
    #[error(transparent)]
    Partition(#[from] PartitionRefError),
    #[error("{word:?} in {condition:?} is not a node name like \"b1\"")]
    Node {
        word: String,
        condition: String,
        #[source]
        source: NodeIdError,
    },
    #[error("{word:?} in {condition:?} is not a number")]
    Number {
        word: String,
        condition: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("{word:?} in {condition:?} is not a leader epoch")]
    LeaderEpoch {
        word: String,
        condition: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("{text:?} in {condition:?} is not a list of (epoch,offset) like [(0,0),(1,3)]")]
    EpochEntries { text: String, condition: String },
    #[error("{condition:?} is not a condition; one of: {FORMS}")]
    NotACondition { condition: String },
}

/// `[(0,0),(1,3)]` (spaces allowed anywhere) → its entries.
fn epoch_entries(text: &str, s: &str) -> Result<Vec<(i32, i64)>, ConditionError> {
    let bad = || ConditionError::EpochEntries {
        text: text.to_owned(),
        condition: s.to_owned(),
    };
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let inner = compact
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(bad)?;
    if inner.is_empty() {
        return Ok(Vec::new());
    }
    let inner = inner
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(bad)?;
    inner
        .split("),(")
        .map(|pair| {
            let (e, o) = pair.split_once(',').ok_or_else(bad)?;
            Ok((e.parse().map_err(|_| bad())?, o.parse().map_err(|_| bad())?))
        })
        .collect()
}

/// The words of one condition, each parsed with an error that names the word
/// and the condition it is in.
struct Words<'a> {
    condition: &'a str,
}

impl Words<'_> {
    /// A node name, `b1`.
    fn node(&self, w: &str) -> Result<NodeId, ConditionError> {
        w.parse::<NodeId>().map_err(|source| ConditionError::Node {
            word: w.to_owned(),
            condition: self.condition.to_owned(),
            source,
        })
    }

    /// A count, an offset or a duration.
    fn number(&self, w: &str) -> Result<u64, ConditionError> {
        w.parse::<u64>().map_err(|source| ConditionError::Number {
            word: w.to_owned(),
            condition: self.condition.to_owned(),
            source,
        })
    }

    /// A leader epoch, as a LeaderAndIsr names it.
    fn leader_epoch(&self, w: &str) -> Result<u32, ConditionError> {
        w.parse().map_err(|source| ConditionError::LeaderEpoch {
            word: w.to_owned(),
            condition: self.condition.to_owned(),
            source,
        })
    }
}

impl std::str::FromStr for Condition {
    type Err = ConditionError;
    fn from_str(s: &str) -> Result<Self, ConditionError> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let word = Words { condition: s };
        let node = |w: &str| word.node(w);
        let number = |w: &str| word.number(w);
        Ok(match words.as_slice() {
            ["leader", "of", p, "is", x] => Condition::LeaderIs {
                partition: p.parse()?,
                node: node(x)?,
            },
            [x, "in", "ISR", "of", p] => Condition::InIsr {
                node: node(x)?,
                partition: p.parse()?,
                member: true,
            },
            [x, "not", "in", "ISR", "of", p] => Condition::InIsr {
                node: node(x)?,
                partition: p.parse()?,
                member: false,
            },
            [
                o @ ("HW" | "LEO"),
                "of",
                x,
                "for",
                p,
                c @ (">=" | "<=" | "=="),
                n,
            ] => Condition::OffsetIs {
                offset: if *o == "HW" { Offset::Hw } else { Offset::Leo },
                node: node(x)?,
                partition: p.parse()?,
                compare: match *c {
                    ">=" => Compare::AtLeast,
                    "<=" => Compare::AtMost,
                    _ => Compare::Equal,
                },
                value: number(n)?,
            },
            [p, "has", "no", "leader"] => Condition::NoLeader {
                partition: p.parse()?,
            },
            [
                "leader-epoch-checkpoint",
                "of",
                x,
                "for",
                p,
                "is",
                rest @ ..,
            ] if !rest.is_empty() => Condition::EpochCheckpointIs {
                node: node(x)?,
                partition: p.parse()?,
                entries: epoch_entries(&rest.join(" "), s)?,
            },
            ["controller", "is", x] => Condition::ControllerIs {
                node: node(x)?,
                is: true,
            },
            ["controller", "is", "not", x] => Condition::ControllerIs {
                node: node(x)?,
                is: false,
            },
            [
                "checkpoint",
                c @ ("hw" | "recovery-point"),
                "of",
                x,
                "for",
                p,
                "is",
                n,
            ] => Condition::CheckpointIs {
                checkpoint: if *c == "hw" {
                    Checkpoint::Hw
                } else {
                    Checkpoint::RecoveryPoint
                },
                node: node(x)?,
                partition: p.parse()?,
                value: number(n)?,
            },
            [
                x,
                "applied",
                "LeaderAndIsr",
                "for",
                p,
                "with",
                "leader",
                "epoch",
                e,
            ] => Condition::AppliedLeaderAndIsr {
                node: node(x)?,
                partition: p.parse()?,
                leader_epoch: Some(word.leader_epoch(e)?),
            },
            [x, "applied", "LeaderAndIsr", "for", p] => Condition::AppliedLeaderAndIsr {
                node: node(x)?,
                partition: p.parse()?,
                leader_epoch: None,
            },
            [x, "is", "stopped"] => Condition::Stopped { node: node(x)? },
            [n, "more", "writes", "acknowledged"] => Condition::Acknowledged { more: number(n)? },
            [n, "more", "commits", "acknowledged"] => {
                Condition::CommitsAcknowledged { more: number(n)? }
            }
            [n, "ms", "pass"] => Condition::Elapsed { ms: number(n)? },
            _ => {
                return Err(ConditionError::NotACondition {
                    condition: s.to_owned(),
                });
            }
        })
    }
}

crate::text_form::text_form!(Condition);

impl Condition {
    /// The node names and partitions it mentions, for validation.
    pub fn nodes_and_partition(&self) -> (Option<NodeId>, Option<&PartitionRef>) {
        match self {
            Condition::LeaderIs { partition, node }
            | Condition::InIsr {
                node, partition, ..
            }
            | Condition::OffsetIs {
                node, partition, ..
            }
            | Condition::EpochCheckpointIs {
                node, partition, ..
            }
            | Condition::CheckpointIs {
                node, partition, ..
            }
            | Condition::AppliedLeaderAndIsr {
                node, partition, ..
            } => (Some(*node), Some(partition)),
            Condition::ControllerIs { node, .. } | Condition::Stopped { node } => {
                (Some(*node), None)
            }
            Condition::NoLeader { partition } => (None, Some(partition)),
            Condition::Acknowledged { .. }
            | Condition::CommitsAcknowledged { .. }
            | Condition::Elapsed { .. } => (None, None),
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::LeaderIs { partition, node } => write!(f, "leader of {partition} is {node}"),
            Condition::InIsr {
                node,
                partition,
                member,
            } => {
                let not = if *member { "" } else { "not " };
                write!(f, "{node} {not}in ISR of {partition}")
            }
            Condition::OffsetIs {
                offset,
                node,
                partition,
                compare,
                value,
            } => {
                let o = match offset {
                    Offset::Hw => "HW",
                    Offset::Leo => "LEO",
                };
                write!(
                    f,
                    "{o} of {node} for {partition} {} {value}",
                    compare.symbol()
                )
            }
            Condition::NoLeader { partition } => write!(f, "{partition} has no leader"),
            Condition::EpochCheckpointIs {
                node,
                partition,
                entries,
            } => {
                let list: Vec<String> = entries.iter().map(|(e, o)| format!("({e},{o})")).collect();
                write!(
                    f,
                    "leader-epoch-checkpoint of {node} for {partition} is [{}]",
                    list.join(",")
                )
            }
            Condition::ControllerIs { node, is } => {
                let not = if *is { "" } else { "not " };
                write!(f, "controller is {not}{node}")
            }
            Condition::CheckpointIs {
                checkpoint,
                node,
                partition,
                value,
            } => {
                let c = match checkpoint {
                    Checkpoint::Hw => "hw",
                    Checkpoint::RecoveryPoint => "recovery-point",
                };
                write!(f, "checkpoint {c} of {node} for {partition} is {value}")
            }
            Condition::AppliedLeaderAndIsr {
                node,
                partition,
                leader_epoch,
            } => {
                write!(f, "{node} applied LeaderAndIsr for {partition}")?;
                match leader_epoch {
                    Some(e) => write!(f, " with leader epoch {e}"),
                    None => Ok(()),
                }
            }
            Condition::Stopped { node } => write!(f, "{node} is stopped"),
            Condition::Acknowledged { more } => write!(f, "{more} more writes acknowledged"),
            Condition::CommitsAcknowledged { more } => {
                write!(f, "{more} more commits acknowledged")
            }
            Condition::Elapsed { ms } => write!(f, "{ms} ms pass"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_prints_as_it_parses() {
        for s in [
            "leader of t-0 is b2",
            "b1 in ISR of t-0",
            "b1 not in ISR of a-b-3",
            "HW of b2 for t-0 >= 3",
            "LEO of b1 for t-1 >= 10",
            "HW of b3 for t-0 == 0",
            "LEO of b2 for t-0 <= 4",
            "t-0 has no leader",
            "leader-epoch-checkpoint of b1 for t-0 is [(0,0),(1,3)]",
            "leader-epoch-checkpoint of b1 for t-0 is []",
            "controller is b1",
            "controller is not b1",
            "checkpoint hw of b1 for t-0 is 4",
            "checkpoint recovery-point of b3 for t-0 is 0",
            "b2 applied LeaderAndIsr for t-0 with leader epoch 2",
            "b2 applied LeaderAndIsr for t-0",
            "b2 is stopped",
        ] {
            let c: Condition = s.parse().unwrap();
            assert_eq!(c.to_string(), s);
        }
    }

    #[test]
    fn malformed_conditions_say_what_is_wrong() {
        let error = |s: &str| s.parse::<Condition>().unwrap_err();
        let short = error("leader of t-0 is");
        assert!(
            matches!(&short, ConditionError::NotACondition { condition } if condition == "leader of t-0 is"),
            "{short:?}"
        );
        assert!(short.to_string().contains("not a condition"), "{short}");
        let node = error("leader of t-0 is x2");
        assert!(
            matches!(&node, ConditionError::Node { word, .. } if word == "x2"),
            "{node:?}"
        );
        assert_eq!(
            node.to_string(),
            r#""x2" in "leader of t-0 is x2" is not a node name like "b1""#
        );
        let number = error("HW of b1 for t-0 >= many");
        assert!(
            matches!(&number, ConditionError::Number { word, .. } if word == "many"),
            "{number:?}"
        );
        assert!(number.to_string().contains("number"), "{number}");
        let spaced: Condition = "leader-epoch-checkpoint of b1 for t-0 is [(0, 0), (2, 5)]"
            .parse()
            .unwrap();
        assert_eq!(
            spaced.to_string(),
            "leader-epoch-checkpoint of b1 for t-0 is [(0,0),(2,5)]"
        );
        let entries = error("leader-epoch-checkpoint of b1 for t-0 is (0,0)");
        assert!(
            matches!(&entries, ConditionError::EpochEntries { text, .. } if text == "(0,0)"),
            "{entries:?}"
        );
        assert!(entries.to_string().contains("(epoch,offset)"), "{entries}");
        assert!(matches!(
            error("HW of b1 for t-0 > 3"),
            ConditionError::NotACondition { .. }
        ));
        let partition = error("leader of t is b1");
        assert_eq!(
            partition,
            ConditionError::Partition(PartitionRefError { text: "t".into() })
        );
        assert!(partition.to_string().contains("partition"), "{partition}");
    }
}
