//! ListOffsets: earliest (-2), latest (-1), by timestamp (≥ 0: the first
//! record at or after it, KIP-79) and the largest timestamp (-3, KIP-734).
//! Latest is the high watermark for read_uncommitted clients and the last
//! stable offset for read_committed ones, as Kafka answers each, and a
//! lookup by timestamp finds nothing past that bound (offset and timestamp
//! -1, no error). Only the leader answers, except for Kafka's debugging
//! replica id -2 (`DEBUGGING_REPLICA_ID`): any replica holding the log
//! answers it, latest being that replica's log end offset, since Kafka
//! applies an isolation level to replica id -1 only
//! (`replica::manager::DEBUGGING_REPLICA_ID`). The lookup by timestamp scans
//! the in-memory index of batch max timestamps and reads one batch
//! (`storage/partition_log/time_index.rs`).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::replica::store::TopicPartition;

/// ListOffsets' isolation_level for read_committed (v2+, KIP-98).
const READ_COMMITTED: i8 = 1;
use crate::replica::manager::ReplicaManager;

/// One partition's (offset, timestamp, leader epoch). A lookup by timestamp
/// that finds nothing is offset and timestamp -1, as Kafka answers it; -1 and
/// -2 carry timestamp -1.
fn list_one(
    replicas: &ReplicaManager,
    tp: &TopicPartition,
    timestamp: i64,
    replica_id: i32,
    committed: bool,
) -> Result<(i64, i64, i32), ResponseError> {
    if matches!(timestamp, -1 | -2) {
        let (offset, epoch) = replicas.list_offset(tp, timestamp, replica_id, committed)?;
        return Ok((offset, -1, epoch));
    }
    let found = replicas.offset_for_timestamp(tp, timestamp, replica_id, committed)?;
    Ok(found.map_or((-1, -1, -1), |f| (f.offset, f.timestamp, f.leader_epoch)))
}

pub fn handle(
    replicas: &ReplicaManager,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let replica_id = req.replica_id.0;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = t.name.0.to_string();
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let tp = TopicPartition {
                        topic: topic.clone(),
                        partition: p.partition_index,
                    };
                    let base = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let committed = req.isolation_level == READ_COMMITTED;
                    let listed = list_one(replicas, &tp, p.timestamp, replica_id, committed);
                    match listed {
                        Ok((offset, timestamp, epoch)) => {
                            let r = base.with_offset(offset).with_timestamp(timestamp);
                            // The leader epoch field exists from v4 (KIP-320).
                            if version >= 4 {
                                r.with_leader_epoch(epoch)
                            } else {
                                r
                            }
                        }
                        Err(e) => base.with_error_code(e.code()),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

#[cfg(test)]
#[path = "list_offsets_tests.rs"]
mod tests;
