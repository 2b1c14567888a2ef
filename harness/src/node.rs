//! The cluster's vocabulary: a broker as the harness names it. Broker `N`
//! (its `--node-id`, 1-based) is `bN` in schedules, the history, the run
//! directory (`nodes/bN/`), proxy names and every report; this type is the one
//! place that spelling is made and parsed. etcd and the wire speak raw broker
//! ids (`i32`, with -1 for "none"); [`NodeId::from_broker_id`] is the door.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A broker of the cluster. Ordered by id, so `b2` sorts before `b10`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeId(u32);

impl NodeId {
    /// Broker `id`; ids start at 1.
    pub const fn new(id: u32) -> NodeId {
        NodeId(id)
    }

    /// The broker id (`--node-id`).
    pub const fn id(self) -> u32 {
        self.0
    }

    /// The broker id as etcd and the wire carry it.
    pub fn broker_id(self) -> i32 {
        i32::try_from(self.0).expect("broker ids fit in i32")
    }

    /// A broker id from etcd or the wire; `None` for -1 ("no leader") and
    /// any other non-positive id.
    pub fn from_broker_id(id: i32) -> Option<NodeId> {
        u32::try_from(id).ok().filter(|&n| n > 0).map(NodeId)
    }

    /// `b1` .. `b<brokers>`.
    pub fn all(brokers: u32) -> impl Iterator<Item = NodeId> {
        (1..=brokers).map(NodeId)
    }

    /// Broker ids of `nodes`, as etcd lists them (`[1, 3]`).
    pub fn ids(nodes: &[NodeId]) -> Vec<u32> {
        nodes.iter().map(|n| n.0).collect()
    }

    /// Whether `s` has the shape of a node name (`b` and a number); whether
    /// the cluster has that node is the schedule's check.
    pub fn is_name(s: &str) -> bool {
        s.parse::<NodeId>().is_ok()
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b{}", self.0)
    }
}

/// Why a text is not a node name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeIdError {
    /// Not `b` and a number.
    #[error("{text:?} is not a node name like \"b1\"")]
    NotAName { text: String },
    /// `b` and a number too large for a broker id.
    #[error("{text:?}: node number out of range")]
    OutOfRange {
        text: String,
        #[source]
        source: std::num::ParseIntError,
    },
}

impl FromStr for NodeId {
    type Err = NodeIdError;
    fn from_str(s: &str) -> Result<NodeId, NodeIdError> {
        let digits = s
            .strip_prefix('b')
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| NodeIdError::NotAName { text: s.to_owned() })?;
        digits
            .parse()
            .map(NodeId)
            .map_err(|source| NodeIdError::OutOfRange {
                text: s.to_owned(),
                source,
            })
    }
}

crate::text_form::text_form!(NodeId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_round_trip() {
        let b12: NodeId = "b12".parse().unwrap();
        assert_eq!(b12.id(), 12);
        assert_eq!(b12.to_string(), "b12");
        assert_eq!(NodeId::from_broker_id(3), Some(NodeId::new(3)));
        assert_eq!(NodeId::from_broker_id(-1), None);
        assert!(NodeId::new(2) < NodeId::new(10));
        for bad in ["b", "1", "bx", "b-1", "B1", "b1 "] {
            assert!(!NodeId::is_name(bad), "{bad}");
        }
        assert_eq!(serde_json::to_string(&NodeId::new(4)).unwrap(), "\"b4\"");
    }
}
