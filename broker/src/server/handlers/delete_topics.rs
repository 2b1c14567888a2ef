//! DeleteTopics: each existing topic is marked for deletion in etcd (as
//! ZooKeeper-era Kafka's `AdminZkClient.deleteTopic` wrote
//! `/admin/delete_topics/<t>`), and the request waits up to its timeout for
//! the controller to finish it (`controller/topics.rs`: every replica's log
//! removed, then the topic's keys); a timeout answers REQUEST_TIMED_OUT while
//! the deletion carries on, as Kafka does. An unknown topic is
//! UNKNOWN_TOPIC_OR_PARTITION; the offsets and transaction-state topics hold
//! the coordinators' state and this broker refuses to delete them
//! (INVALID_REQUEST). Topics are named,
//! not addressed by id (v6's topic ids are the zero UUID here).

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::find_coordinator::is_internal;
use crate::server::context::Broker;

const POLL_INTERVAL: Duration = Duration::from_millis(20);

async fn mark(broker: &Broker, topic: &str) -> Result<(), (ResponseError, String)> {
    if is_internal(topic) {
        return Err((
            ResponseError::InvalidRequest,
            format!("{topic} holds a coordinator's state; this broker does not delete it"),
        ));
    }
    match broker.store.mark_for_deletion(topic).await {
        Ok(true) => Ok(()),
        Ok(false) => Err((
            ResponseError::UnknownTopicOrPartition,
            format!("Topic '{topic}' does not exist"),
        )),
        Err(e) => Err((ResponseError::UnknownServerError, e.to_string())),
    }
}

/// Waits until etcd no longer holds `topic`; false at `deadline`.
async fn wait_deleted(broker: &Broker, topic: &str, deadline: tokio::time::Instant) -> bool {
    loop {
        if let Ok(None) = broker.store.topic(topic).await {
            return true;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

pub async fn handle(
    broker: &Broker,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    // v0-5 name topics in `topic_names`, v6 in `topics`.
    let names: Vec<String> = if version >= 6 {
        req.topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
            .collect()
    } else {
        req.topic_names.iter().map(|n| n.to_string()).collect()
    };
    let mut results = Vec::with_capacity(names.len());
    let mut marked = Vec::new();
    for name in names {
        let result = DeletableTopicResult::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
        results.push(match mark(broker, &name).await {
            Ok(()) => {
                tracing::info!(topic = %name, "topic marked for deletion");
                marked.push((results.len(), name));
                result
            }
            Err((code, message)) => {
                tracing::info!(topic = %name, %message, "not deleting");
                let result = result.with_error_code(code.code());
                // The message is v5+'s.
                if version >= 5 {
                    result.with_error_message(Some(StrBytes::from_string(message)))
                } else {
                    result
                }
            }
        });
    }
    for (index, name) in marked {
        if !wait_deleted(broker, &name, deadline).await {
            results[index].error_code = ResponseError::RequestTimedOut.code();
        }
    }
    DeleteTopicsResponse::default().with_responses(results)
}
