//! CreatePartitions (KIP-195): more partitions for a topic, written to its
//! assignment in etcd by compare-and-swap; the controller elects the new
//! partitions' leaders as it does a new topic's, and the request waits up to
//! its timeout for them, as CreateTopics does. Errors as Kafka's
//! `AdminManager.createPartitions`: UNKNOWN_TOPIC_OR_PARTITION,
//! INVALID_PARTITIONS for a count not above the current one,
//! INVALID_REPLICA_ASSIGNMENT for assignments of the wrong number, size or
//! brokers. New partition p's replicas are the live brokers in id order
//! from index p, as CreateTopics places them. The offsets topic's partition
//! count is what group coordinators hash groups by, so it is refused.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::create_topics::{assign_replicas, live_brokers, wait_for_leaders};
use super::find_coordinator::is_internal;
use crate::controller::metadata_store::{MetadataStore, StoredTopic, TopicAssignment};
use crate::server::metadata_cache::MetadataCache;

/// Compare-and-swap attempts before the request answers that it could not.
const WRITE_ATTEMPTS: u32 = 8;

struct Failure(ResponseError, String);

/// The topic's assignment with partitions up to `topic.count`.
fn grown(
    topic: &CreatePartitionsTopic,
    held: &TopicAssignment,
    live: &[i32],
) -> Result<TopicAssignment, Failure> {
    let current = held.partitions.len() as i32;
    let name = topic.name.as_str();
    if topic.count <= current {
        let why = if topic.count == current {
            format!("Topic already has {current} partitions.")
        } else {
            format!(
                "Topic currently has {current} partitions, which is higher than the requested {}.",
                topic.count
            )
        };
        return Err(Failure(ResponseError::InvalidPartitions, why));
    }
    let rf = held.partitions.values().next().map_or(1, Vec::len);
    let adding = (topic.count - current) as usize;
    let new: Vec<Vec<i32>> = match &topic.assignments {
        Some(given) => {
            if given.len() != adding {
                return Err(Failure(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "Increasing the number of partitions by {adding} but {} assignments provided.",
                        given.len()
                    ),
                ));
            }
            let mut out = Vec::with_capacity(adding);
            for a in given {
                let replicas: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
                let mut distinct = replicas.clone();
                distinct.sort_unstable();
                distinct.dedup();
                if replicas.len() != rf
                    || distinct.len() != rf
                    || replicas.iter().any(|r| !live.contains(r))
                {
                    return Err(Failure(
                        ResponseError::InvalidReplicaAssignment,
                        format!("{name}: replicas {replicas:?} are not {rf} distinct live brokers"),
                    ));
                }
                out.push(replicas);
            }
            out
        }
        None => {
            if rf > live.len() {
                return Err(Failure(
                    ResponseError::InvalidReplicationFactor,
                    format!("replication factor {rf} with {} live brokers", live.len()),
                ));
            }
            let all = assign_replicas(live, topic.count, rf);
            (current..topic.count).map(|p| all[&p].clone()).collect()
        }
    };
    let mut next = held.clone();
    for (i, replicas) in new.into_iter().enumerate() {
        next.partitions.insert(current + i as i32, replicas);
    }
    Ok(next)
}

async fn grow(
    store: &MetadataStore,
    topic: &CreatePartitionsTopic,
    live: &[i32],
    validate_only: bool,
) -> Result<bool, Failure> {
    let name = topic.name.to_string();
    if is_internal(&name) {
        return Err(Failure(
            ResponseError::InvalidRequest,
            format!(
                "{name}'s partition count places every group or transactional id; it is not changed"
            ),
        ));
    }
    for _ in 0..WRITE_ATTEMPTS {
        let read: StoredTopic = match store.topic(&name).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                return Err(Failure(
                    ResponseError::UnknownTopicOrPartition,
                    format!("The topic '{name}' does not exist."),
                ));
            }
            Err(e) => return Err(Failure(ResponseError::UnknownServerError, e.to_string())),
        };
        let next = grown(topic, &read.assignment.value, live)?;
        if validate_only {
            return Ok(false);
        }
        match store.write_topic_assignment(&name, &read, &next).await {
            Ok(true) => {
                tracing::info!(topic = %name, partitions = ?next.partitions, "partitions added");
                return Ok(true);
            }
            Ok(false) => continue,
            Err(e) => return Err(Failure(ResponseError::UnknownServerError, e.to_string())),
        }
    }
    Err(Failure(
        ResponseError::UnknownServerError,
        format!("{name}'s assignment kept changing under {WRITE_ATTEMPTS} attempts"),
    ))
}

/// Grows topics' assignments in `store`, then waits for `metadata` to
/// announce the new partitions' leaders.
pub async fn handle(
    store: &MetadataStore,
    metadata: &MetadataCache,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let live = live_brokers(store, "CreatePartitions").await;
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut results = Vec::with_capacity(req.topics.len());
    let mut grew = Vec::new();
    for topic in &req.topics {
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        results.push(match grow(store, topic, &live, req.validate_only).await {
            Ok(written) => {
                if written {
                    grew.push((results.len(), topic.name.to_string(), topic.count));
                }
                result
            }
            Err(Failure(code, message)) => result
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    for (index, name, count) in grew {
        if !wait_for_leaders(metadata, &name, count, deadline).await {
            results[index].error_code = ResponseError::RequestTimedOut.code();
        }
    }
    CreatePartitionsResponse::default().with_results(results)
}
