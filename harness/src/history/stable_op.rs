//! The history's `stable-offsets` op ([transactions]): a look at one
//! partition's last stable offset and high watermark, as its leader answers
//! ListOffsets latest at isolation level read_committed and at
//! read_uncommitted (KIP-98: a read_committed consumer reads only below the
//! last stable offset, the first offset of the first transaction no marker
//! has ended yet). The run takes these looks at its end, after the quiesce,
//! in a run whose clients ran transactions: it waits, bounded, for every
//! partition's two offsets to meet, and records each partition's last look
//! (run/stable.rs), so the hanging-transaction checker judges from the
//! history what a read_committed consumer would have seen, and when.
//!
//! `{partition, node}` on the invoke (node: the leader asked, `null` when
//! there was none); on `ok`, `last_stable_offset` and `high_watermark`; a
//! `fail` carries the error.

use serde::{Deserialize, Serialize};

use crate::node::NodeId;
use crate::topic_partition::PartitionRef;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StableOffsets {
    pub partition: PartitionRef,
    #[serde(default)]
    pub node: Option<NodeId>,
    /// On an `ok` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stable_offset: Option<i64>,
    /// On an `ok` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_watermark: Option<i64>,
}

impl StableOffsets {
    /// The invoke of a look at `partition` on `node`.
    pub fn new(partition: PartitionRef, node: Option<NodeId>) -> StableOffsets {
        StableOffsets {
            partition,
            node,
            last_stable_offset: None,
            high_watermark: None,
        }
    }

    /// The two offsets, on an `ok`.
    pub fn offsets(&self) -> Option<(i64, i64)> {
        Some((self.last_stable_offset?, self.high_watermark?))
    }

    /// Whether a transaction was open here: the last stable offset short of
    /// the high watermark.
    pub fn unstable(&self) -> bool {
        self.offsets().is_some_and(|(lso, hw)| lso < hw)
    }
}
