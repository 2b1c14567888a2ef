//! The cluster as a campaign's nemesis sees it before each pick: who is
//! paused, who is dead, whether a cut is in force, and how the system's
//! database is, when it has one. Its own file so both the
//! picks (pick.rs) and the fault sequences (sequence.rs) take it without
//! importing each other.

use std::collections::BTreeSet;

use crate::node::NodeId;
use crate::runtime::DatabaseState;
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
    /// The system's database; `None` when it has none.
    pub database: Option<DatabaseState>,
    /// Nodes whose link to the database is cut.
    pub database_cut: BTreeSet<NodeId>,
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

    /// The dead nodes that can start now: those whose links to etcd and
    /// to the database are not cut, and none while the database is paused
    /// or down (a broker over a database reads its state from it as it
    /// starts). With no cut in force and the database running, every dead
    /// node.
    pub fn restartable(&self) -> BTreeSet<NodeId> {
        if self.database_out() {
            return BTreeSet::new();
        }
        self.down
            .iter()
            .filter(|n| !self.etcd_cut.contains(n) && !self.database_cut.contains(n))
            .copied()
            .collect()
    }

    /// The database is paused or down.
    pub fn database_out(&self) -> bool {
        matches!(
            self.database,
            Some(DatabaseState::Paused | DatabaseState::Down)
        )
    }

    /// Nothing paused, dead or cut, the database included.
    pub fn is_whole(&self) -> bool {
        self.faulted() == 0 && !self.cut && !self.database_out()
    }
}
