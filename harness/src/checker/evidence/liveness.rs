//! The liveness window's evidence (run/liveness.rs, folded in by
//! run/check.rs): partitions, groups and topics that did not serve again
//! after the final heal, and a node that would not start. Declared as
//! evidence.rs's other details are (fields in name order).

use serde::{Deserialize, Serialize};

use super::refs::OpRef;
use crate::node::NodeId;
use crate::topic_partition::PartitionRef;

/// `stuck-partition`: a partition that took no write within the liveness
/// window, and the last attempt's error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stuck {
    pub last_error: Option<String>,
    pub partition: PartitionRef,
    pub window_ms: u64,
}

/// `stuck-group`: a consumer group whose coordinator took no commit within
/// the liveness window, and the last attempt's error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StuckGroup {
    pub group: String,
    pub last_error: Option<String>,
    pub window_ms: u64,
}

/// `stuck-topic`: the topic-lives workload's topic that the liveness window
/// could not delete, create again and read, the step that never succeeded
/// and its last answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StuckTopic {
    pub last_error: Option<String>,
    pub step: String,
    pub topic: String,
    pub window_ms: u64,
}

/// `restart-failed`: a node whose process ended by itself during a start,
/// the nemesis op that started it, and what the runtime saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartFailed {
    pub error: String,
    pub history_index: OpRef,
    pub node: NodeId,
}

/// `stop-kept-registration`: a node etcd still named registered `bound_ms`
/// after the clean stop at `history_index` ended its process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopKeptRegistration {
    pub bound_ms: u64,
    pub history_index: u64,
    pub node: NodeId,
}
