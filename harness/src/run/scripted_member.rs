//! What the run keeps of each member the steps subscribed ([groups]); the
//! steps themselves are in members.rs.

use std::collections::BTreeMap;

use crate::schedule::PartitionRef;
use crate::workload::subscribe::Membership;

/// A member the steps made.
pub struct ScriptedMember {
    pub(super) group: String,
    /// Every partition of the topics it subscribed to.
    pub(super) partitions: Vec<PartitionRef>,
    /// Its scripted client's key: clear of a schedule's `process` numbers.
    pub(super) worker: u64,
    /// "" until the coordinator hands one out (KIP-394).
    pub(super) member_id: String,
    pub(super) membership: Option<Membership>,
    /// The next offset to poll of each partition it holds.
    pub(super) positions: BTreeMap<PartitionRef, u64>,
}

pub(super) const MEMBER_WORKERS: u64 = 1 << 32;
