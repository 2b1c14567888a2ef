//! DeleteRecords (KIP-107, API key 21): each partition's log start moved on
//! its leader (`replica/delete_records.rs`), and the answer held until every
//! ISR member's log start reached it or the request's `timeout_ms` passed.
//! Versions 0–2 answer alike (v1 only throttles differently, v2 is flexible).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::replica::manager::ReplicaManager;
use crate::storage::TopicPartition;
use std::time::Duration;

pub async fn handle(replicas: &ReplicaManager, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    // First every partition's start moved, so the followers learn them all
    // in the same fetches; then the waits, under the one deadline.
    let moved: Vec<Vec<(i32, Result<i64, ResponseError>)>> = req
        .topics
        .iter()
        .map(|t| {
            t.partitions
                .iter()
                .map(|p| {
                    let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
                    (p.partition_index, replicas.delete_records(&tp, p.offset))
                })
                .collect()
        })
        .collect();
    let mut topics = Vec::with_capacity(req.topics.len());
    for (t, partitions) in req.topics.iter().zip(moved) {
        let mut results = Vec::with_capacity(partitions.len());
        for (partition, target) in partitions {
            let tp = TopicPartition::new(t.name.to_string(), partition);
            let answer = match target {
                Ok(target) => replicas.await_low_watermark(&tp, target, deadline).await,
                Err(e) => Err(e),
            };
            let result = DeleteRecordsPartitionResult::default().with_partition_index(partition);
            results.push(match answer {
                Ok(low_watermark) => result.with_low_watermark(low_watermark),
                Err(e) => result.with_low_watermark(-1).with_error_code(e.code()),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(results),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
