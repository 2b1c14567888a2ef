//! The consumer groups' evidence ([groups]): committed offsets read low and
//! subscribed consumers resuming past what their group consumed. Declared
//! as evidence.rs's other details are (fields in name order).

use serde::{Deserialize, Serialize};

use super::refs::OpRef;
use crate::history::Process;
use crate::topic_partition::PartitionRef;

/// `committed-offset-regressed`: a read of a committed offset below a
/// commit acknowledged before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommittedRegressed {
    pub acked_index: OpRef,
    pub acked_offset: i64,
    pub group: String,
    pub partition: PartitionRef,
    pub read_index: OpRef,
    pub read_offset: i64,
}

/// `resume-skip`: a subscribed consumer's poll from `from_offset` while its
/// group had never been returned the record at `skipped_offset`; the
/// group's last acknowledged commit of the partition before the poll, if any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumeSkip {
    pub from_offset: i64,
    pub group: String,
    pub last_acked_commit: Option<i64>,
    pub partition: PartitionRef,
    pub poll_index: OpRef,
    pub process: Process,
    pub skipped_count: u64,
    pub skipped_offset: i64,
}
