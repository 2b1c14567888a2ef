//! The history's group ops ([groups]): a consumer's offset `commit`, a read
//! of what is `committed`, a subscribed consumer's membership round
//! (`rebalance`) and a client's crash; op.rs reads and writes them as the
//! bodies of their lines.

use serde::{Deserialize, Serialize};

use crate::node::NodeId;
use crate::topic_partition::PartitionRef;

/// A commit of `offset` (the next record to consume) for `partition` by
/// `group`: as a consumer that assigns its partitions itself commits
/// (generation -1, no member id), or, from a subscribed consumer, with its
/// `generation` and `member` id; `node`: the coordinator it went to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    pub group: String,
    pub partition: PartitionRef,
    pub offset: i64,
    #[serde(default)]
    pub node: Option<NodeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// The group's committed offset of the partition deleted, not set: an
    /// application's OffsetDelete (KIP-496) or DeleteGroups (KIP-229),
    /// after which the coordinator answers -1 (no commit), as after a
    /// commit of -1; `offset` is then -1.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// A subscribed consumer's membership round: JoinGroup then SyncGroup with
/// `group`'s coordinator (`node`). The invoke names the group and topics;
/// an `ok` adds the `generation`, the `member` id and the `partitions` the
/// group assigned it, the round's `leader` and, when it led, the number of
/// `members` it was given to assign.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rebalance {
    pub group: String,
    pub topics: Vec<String>,
    #[serde(default)]
    pub node: Option<NodeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<PartitionRef>>,
    /// On an `ok`: the member id of the round's leader, and, when this
    /// member led, how many members the coordinator listed for it to assign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<usize>,
}

/// A client's crash: the group it was a member of, if any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientCrash {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// A read of `group`'s committed offset of `partition` (OffsetFetch); on an
/// `ok`, `offset` is what the coordinator answered (-1: no commit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Committed {
    pub group: String,
    pub partition: PartitionRef,
    #[serde(default)]
    pub node: Option<NodeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// On an `ok`: the leader etcd named for the group's offsets partition
    /// just after the answer (absent where etcd does not say): when it is
    /// not `node`, the answer came from a coordinator already deposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<NodeId>,
    /// Asked as a read_committed consumer asks (KIP-447's `require_stable`):
    /// while a transaction's offsets for the partition are pending the
    /// coordinator answers UNSTABLE_OFFSET_COMMIT rather than the offset from
    /// before them, so the answer is at least every committed transaction's
    /// offset. Without it a transaction's offsets show only once its commit
    /// marker reached the offsets partition, after EndTxn was answered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stable: bool,
}
