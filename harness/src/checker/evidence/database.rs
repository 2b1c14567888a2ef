//! Evidence of `database-divergence`: where a system's database and the
//! final read over the protocol first part for a partition, and how many
//! offsets differ in all. Declared as evidence.rs's other details are
//! (fields in name order).

use serde::{Deserialize, Serialize};

use crate::node::NodeId;
use crate::reader::Payload;
use crate::topic_partition::PartitionRef;

/// `database-divergence`: at `offset` of `partition` the database holds
/// `database` and the final read through `via` answered `protocol` (`None`:
/// nothing there); `database_only` offsets are in the database alone,
/// `protocol_only` in the final read alone, and `differing` in both with
/// different records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatabaseDivergence {
    pub database: Option<HeldRecord>,
    pub database_only: u64,
    pub differing: u64,
    pub offset: i64,
    pub partition: PartitionRef,
    pub protocol: Option<HeldRecord>,
    pub protocol_only: u64,
    pub via: NodeId,
}

/// What a log holds at one offset, as the database and the protocol are
/// compared: a control record or not, the key and the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldRecord {
    pub control: bool,
    pub key: Option<Payload>,
    pub value: Option<Payload>,
}
