//! DeleteTopics: each existing topic is marked for deletion in etcd (as
//! ZooKeeper-era Kafka's `AdminZkClient.deleteTopic` wrote
//! `/admin/delete_topics/<t>`), the marks written concurrently, and the
//! request waits up to its timeout for the controller to take the topic out
//! of the metadata it announces: once this broker's metadata cache no longer
//! holds it, the topic is answered deleted. That is Kafka's rule since the
//! request came in (KIP-4, KAFKA-2946: `DelayedDeleteTopics` completes when
//! `metadataCache.contains(topic)` is false; under KRaft the answer follows
//! the controller's committed `RemoveTopicRecord`): the answer does not wait
//! for the replicas to delete their logs, which the controller carries on with (`controller/topics.rs`;
//! a replica that is down keeps the topic's keys in etcd until it has, and a
//! CreateTopics of the name meanwhile is TOPIC_ALREADY_EXISTS, as in Kafka).
//! A timeout answers REQUEST_TIMED_OUT while the deletion carries on, as
//! Kafka does. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; the offsets
//! and transaction-state topics hold the coordinators' state and this broker
//! refuses to delete them (INVALID_REQUEST). From v6 a topic may be named by
//! its id (KIP-516), looked up in this broker's metadata.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::find_coordinator::is_internal;
use crate::controller::metadata_store::{MetadataStore, wire_topic_id};
use crate::server::metadata_cache::MetadataCache;

async fn mark(store: MetadataStore, topic: &str) -> Result<(), (ResponseError, String)> {
    if is_internal(topic) {
        return Err((
            ResponseError::InvalidRequest,
            format!("{topic} holds a coordinator's state; this broker does not delete it"),
        ));
    }
    match store.mark_for_deletion(topic).await {
        Ok(true) => Ok(()),
        Ok(false) => Err((
            ResponseError::UnknownTopicOrPartition,
            format!("Topic '{topic}' does not exist"),
        )),
        Err(e) => Err((ResponseError::UnknownServerError, e.to_string())),
    }
}

/// Marks every topic of `names` at once (one etcd round trip each, all in
/// flight together), each outcome at its name's index.
async fn mark_all(
    store: &MetadataStore,
    names: &[String],
) -> Vec<Result<(), (ResponseError, String)>> {
    let mut marks = tokio::task::JoinSet::new();
    for (index, name) in names.iter().enumerate() {
        let store = store.clone();
        let name = name.clone();
        marks.spawn(async move { (index, mark(store, &name).await) });
    }
    let mut outcomes: Vec<_> = names
        .iter()
        .map(|_| {
            Err((
                ResponseError::UnknownServerError,
                "marking for deletion did not finish".to_owned(),
            ))
        })
        .collect();
    while let Some(joined) = marks.join_next().await {
        if let Ok((index, outcome)) = joined {
            outcomes[index] = outcome;
        }
    }
    outcomes
}

/// The topics a request names, in order: by name, or from v6 by id,
/// resolved through this broker's metadata (Kafka's `KafkaApis`: an id it
/// does not know is UNKNOWN_TOPIC_ID, a topic given both ways
/// INVALID_REQUEST). Each `Ok` is the topic's name and its id, if the
/// metadata holds one, for the answer.
fn requested(
    metadata: &MetadataCache,
    req: &DeleteTopicsRequest,
    version: i16,
) -> Vec<Result<(String, Option<String>), DeletableTopicResult>> {
    let named = |name: String| {
        let id = metadata.topic_id(&name);
        Ok((name, id))
    };
    if version < 6 {
        return req
            .topic_names
            .iter()
            .map(|n| named(n.to_string()))
            .collect();
    }
    req.topics
        .iter()
        .map(|t| match (&t.name, t.topic_id.is_nil()) {
            (Some(name), true) => named(name.to_string()),
            (Some(name), false) => Err(refused(
                DeletableTopicResult::default().with_name(Some(name.clone())),
                ResponseError::InvalidRequest,
                "You may not specify both topic name and topic id.".to_owned(),
                version,
            )),
            (None, _) => {
                let id = t.topic_id.to_string();
                match metadata.topic_named(&id) {
                    Some(name) => Ok((name, Some(id))),
                    None => Err(refused(
                        DeletableTopicResult::default().with_topic_id(t.topic_id),
                        ResponseError::UnknownTopicId,
                        format!("Topic id {id} not found"),
                        version,
                    )),
                }
            }
        })
        .collect()
}

/// `result` with an error, and its message from v5.
fn refused(
    result: DeletableTopicResult,
    code: ResponseError,
    message: String,
    version: i16,
) -> DeletableTopicResult {
    tracing::info!(topic = ?result.name, %message, "not deleting");
    let result = result.with_error_code(code.code());
    if version >= 5 {
        result.with_error_message(Some(StrBytes::from_string(message)))
    } else {
        result
    }
}

/// Marks topics for deletion in `store`, then waits for `metadata` to stop
/// holding them.
pub async fn handle(
    store: &MetadataStore,
    metadata: &MetadataCache,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    let topics = requested(metadata, &req, version);
    let names: Vec<String> = topics
        .iter()
        .filter_map(|t| t.as_ref().ok().map(|(name, _)| name.clone()))
        .collect();
    let mut outcomes = mark_all(store, &names).await.into_iter();
    let mut results = Vec::with_capacity(topics.len());
    let mut marked = Vec::new();
    for topic in topics {
        let (name, id) = match topic {
            Ok(named) => named,
            Err(result) => {
                results.push(result);
                continue;
            }
        };
        let result = DeletableTopicResult::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
            .with_topic_id(wire_topic_id(id.as_deref()));
        match outcomes.next().expect("an outcome per name") {
            Ok(()) => {
                tracing::info!(topic = %name, "topic marked for deletion");
                marked.push((results.len(), name));
                results.push(result);
            }
            Err((code, message)) => results.push(refused(result, code, message, version)),
        }
    }
    for (index, name) in marked {
        // A timeout of 0 or less waits for nothing: every marked topic is
        // REQUEST_TIMED_OUT (Kafka's `ZkAdminManager.deleteTopics`).
        if req.timeout_ms <= 0
            || !metadata
                .wait_until(deadline, |cache| !cache.holds(&name))
                .await
        {
            results[index].error_code = ResponseError::RequestTimedOut.code();
        }
    }
    DeleteTopicsResponse::default().with_responses(results)
}
