//! Evidence of the direct checks: a leader elected from outside the ISR where
//! nothing allowed it, a cluster that did not recover after the final heal,
//! and a record served above the high watermark. Declared as evidence.rs's other details are (fields in
//! name order).

use serde::{Deserialize, Serialize};

use crate::node::NodeId;
use crate::topic_partition::PartitionRef;

/// `election-outside-isr`: etcd recorded `leader` as leader of the partition
/// in `leader_epoch` (at `revision`), though the state before it (at
/// `previous_revision`) named the ISR `previous_isr`, without `leader`; and
/// unclean election was off (`unclean_election_setting` named, not set true),
/// or members of that ISR (`registered_isr_members`) were registered with
/// etcd from the state before it through the election, so the controller
/// had a clean choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElectionOutsideIsr {
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition: u32,
    pub previous_isr: Vec<i32>,
    pub previous_revision: i64,
    pub registered_isr_members: Vec<i32>,
    pub revision: i64,
    pub topic: String,
    /// The setting that turns unclean election on, when the run left it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unclean_election_off: Option<String>,
}

/// `no-recovery`: what the final quiesce still found unsettled at its bound
/// (`bound_ms`), unchanged for the last `unchanged_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoRecovery {
    pub bound_ms: u64,
    /// Each partition whose replicas' log ends differed, with every
    /// replica's (HW, LEO).
    #[serde(default)]
    pub replicas: Vec<String>,
    pub unchanged_ms: u64,
    pub unsettled: String,
}

/// `read-above-high-watermark`: the poll at history `index`, served by
/// `node`, whose answer held `offsets` at or above its `high_watermark`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadAboveWatermark {
    pub high_watermark: i64,
    pub index: u64,
    pub node: Option<NodeId>,
    pub offsets: Vec<i64>,
    pub partition: PartitionRef,
}

/// `ack-before-isr-held`: the acks=all send (history `history_index`) whose
/// last value `leader` acknowledged at `offset`, the ISR etcd named in the
/// read after, and the member that had not fetched past the offset: the
/// offset of its last fetch before the op completed, and how long after it
/// first fetched past (`None`: never, in the recordings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AckBeforeIsrHeld {
    pub first_past_ms_after: Option<u64>,
    pub history_index: u64,
    pub isr: Vec<u32>,
    pub last_fetch_offset_before: Option<i64>,
    pub leader: u32,
    pub member: u32,
    pub offset: i64,
    pub partition: PartitionRef,
}
