//! ListOffsets: earliest (-2) and latest (-1) only; latest is the high
//! watermark for read_uncommitted clients and the last stable offset for
//! read_committed ones, as Kafka answers each. Only the
//! leader answers, except for Kafka's debugging replica id -2
//! (`DEBUGGING_REPLICA_ID`): any replica holding the log answers it, latest
//! being that replica's log end offset, since Kafka applies an isolation level
//! to replica id -1 only (`replica::manager::DEBUGGING_REPLICA_ID`).

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::replica::store::TopicPartition;

/// ListOffsets' isolation_level for read_committed (v2+, KIP-98).
const READ_COMMITTED: i8 = 1;
use crate::server::context::Broker;

pub fn handle(broker: &Broker, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
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
                    match broker
                        .replicas
                        .list_offset(&tp, p.timestamp, replica_id, committed)
                    {
                        Ok((offset, epoch)) => {
                            let r = base.with_offset(offset).with_timestamp(-1);
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
