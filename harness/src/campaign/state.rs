//! The cluster as a campaign's nemesis sees it before each pick: who is
//! paused, who is dead, whether a cut is in force. Its own file so both the
//! picks (pick.rs) and the fault sequences (sequence.rs) take it without
//! importing each other.

use std::collections::BTreeSet;

use crate::node::NodeId;
use crate::schedule::PartitionRef;

/// The cluster as the nemesis sees it before a pick.
#[derive(Debug, Clone, Default)]
pub struct State {
    pub nodes: Vec<NodeId>,
    /// Not running: crashed, stopped or powered off.
    pub down: BTreeSet<NodeId>,
    /// Running but SIGSTOPped.
    pub paused: BTreeSet<NodeId>,
    /// A network cut is in force.
    pub cut: bool,
    /// Nodes whose link to etcd is cut (alone, or with the rest: isolate).
    pub etcd_cut: BTreeSet<NodeId>,
    /// Nodes with a link to or from another broker cut.
    pub peer_cut: BTreeSet<NodeId>,
    pub partitions: Vec<PartitionRef>,
}

impl State {
    /// Running and not paused.
    pub fn up(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .copied()
            .filter(|n| !self.down.contains(n) && !self.paused.contains(n))
            .collect()
    }

    /// Paused or dead.
    pub(super) fn faulted(&self) -> usize {
        self.down.len() + self.paused.len()
    }

    /// The dead nodes that can start now: those whose link to etcd is not
    /// cut. With no cut in force, every dead node.
    pub fn restartable(&self) -> BTreeSet<NodeId> {
        self.down.difference(&self.etcd_cut).copied().collect()
    }

    /// Nothing paused, dead or cut.
    pub fn is_whole(&self) -> bool {
        self.faulted() == 0 && !self.cut
    }
}
