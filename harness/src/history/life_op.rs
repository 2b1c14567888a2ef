//! The history's topic-lives ops (`[workload.background] lives`): one
//! client creates a topic, writes to it, reads it back and deletes it, again
//! and again under one name, each creation a new *life* of the name. A
//! record belongs to the life that wrote it; a read in a later life that
//! returns it is a deleted topic's data served as the new topic's, which
//! Kafka's topic deletion exists to prevent (a deletion completes only once
//! every replica has removed its log; KIP-516 gives each life an id so a
//! stale log is told apart). op.rs reads and writes these as the bodies of
//! their lines:
//!
//! | f | invoke value | `ok` adds |
//! |---|---|---|
//! | `create-topic` | `{topic, life, node}` | nothing |
//! | `life-send` | `{topic, life, node, value}` (acks=all, partition 0) | `offset` |
//! | `life-read` | `{topic, life, node}` (partition 0 from offset 0 to the high watermark) | `records` `[[offset, value]]`, `high_watermark` |
//! | `delete-topic` | `{topic, life, node}` | nothing |

use serde::{Deserialize, Serialize};

use super::record_value::PolledRecord;
use crate::node::NodeId;

/// Which step of a life an op is; its `f`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum LifeStep {
    #[default]
    Create,
    Send,
    Read,
    Delete,
}

impl LifeStep {
    pub const ALL: [LifeStep; 4] = [
        LifeStep::Create,
        LifeStep::Send,
        LifeStep::Read,
        LifeStep::Delete,
    ];

    pub fn f(self) -> &'static str {
        match self {
            LifeStep::Create => "create-topic",
            LifeStep::Send => "life-send",
            LifeStep::Read => "life-read",
            LifeStep::Delete => "delete-topic",
        }
    }

    pub fn from_f(f: &str) -> Option<LifeStep> {
        Self::ALL.into_iter().find(|s| s.f() == f)
    }
}

/// One topic-lives op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifeOp {
    /// From the line's `f`, not its value.
    #[serde(skip)]
    pub step: LifeStep,
    pub topic: String,
    /// Which creation of `topic` this op belongs to, counting from 1: the
    /// life a `create-topic` would begin, and the one the other steps act in.
    pub life: u32,
    /// The node asked (`null`: none was, and the op failed).
    #[serde(default)]
    pub node: Option<NodeId>,
    /// A `life-send`'s value: unique in the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// An ok `life-send`'s offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// An ok `life-read`'s records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<PolledRecord>>,
    /// An ok `life-read`'s high watermark (of its first fetch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_watermark: Option<i64>,
}

impl LifeOp {
    /// The invoke of `step` in `life` of `topic`, on `node`.
    pub fn new(step: LifeStep, topic: &str, life: u32, node: Option<NodeId>) -> LifeOp {
        LifeOp {
            step,
            topic: topic.to_owned(),
            life,
            node,
            value: None,
            offset: None,
            records: None,
            high_watermark: None,
        }
    }
}
