//! FindCoordinator: which broker coordinates a group — the leader of the
//! group's partition of the offsets topic ([`crate::offsets`]).
//!
//! The offsets topic is made at the first FindCoordinator, as Kafka makes
//! `__consumer_offsets` (through the same path as CreateTopics: its
//! assignment written to etcd, leaders elected by the controller), once as
//! many brokers are live as `offsets_topic_replication_factor` asks; until
//! its partition has a leader the answer is COORDINATOR_NOT_AVAILABLE, which
//! clients retry. v0–v3 ask for one key; v4+ for several (KIP-699). A
//! transaction coordinator (key type 1) is not offered: this broker has no
//! transactions, and says so.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::create_topics::assign_replicas;
use crate::controller::metadata_store::{StoreError, TopicAssignment};
use crate::offsets::{OFFSETS_TOPIC, partition_for};
use crate::server::context::Broker;

/// Key type of a group (0) and of a transactional id (1).
const GROUP_KEY: i8 = 0;

pub async fn handle(
    broker: &Broker,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let keys: Vec<StrBytes> = if version >= 4 {
        req.coordinator_keys.clone()
    } else {
        vec![req.key.clone()]
    };
    let mut coordinators = Vec::with_capacity(keys.len());
    for key in keys {
        let found = if req.key_type == GROUP_KEY {
            coordinator_of(broker, &key).await
        } else {
            Err((
                ResponseError::InvalidRequest,
                "this broker has no transaction coordinator".to_owned(),
            ))
        };
        coordinators.push(match found {
            Ok((node_id, host, port)) => Coordinator::default()
                .with_key(key)
                .with_node_id(BrokerId(node_id))
                .with_host(StrBytes::from_string(host))
                .with_port(port),
            Err((error, message)) => Coordinator::default()
                .with_key(key)
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    if version >= 4 {
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let one = coordinators.pop().unwrap_or_default();
    FindCoordinatorResponse::default()
        .with_error_code(one.error_code)
        .with_error_message(one.error_message)
        .with_node_id(one.node_id)
        .with_host(one.host)
        .with_port(one.port)
}

/// The coordinator of `group`: node id, host, port; or why there is none now.
async fn coordinator_of(
    broker: &Broker,
    group: &str,
) -> Result<(i32, String, i32), (ResponseError, String)> {
    let not_available =
        |why: String| -> (ResponseError, String) { (ResponseError::CoordinatorNotAvailable, why) };
    let partition = partition_for(group, broker.offsets.partitions());
    let view = broker.metadata.snapshot();
    let Some(partitions) = view.topics.get(OFFSETS_TOPIC) else {
        create_offsets_topic(broker)
            .await
            .map_err(|e| not_available(e.to_string()))?;
        return Err(not_available(format!("{OFFSETS_TOPIC} is being created")));
    };
    let leader = partitions
        .get(&partition)
        .map(|p| p.leader)
        .filter(|&l| l >= 0)
        .ok_or_else(|| not_available(format!("{OFFSETS_TOPIC}-{partition} has no leader")))?;
    let endpoint = view
        .brokers
        .get(&leader)
        .ok_or_else(|| not_available(format!("coordinator {leader} is not live")))?;
    Ok((leader, endpoint.host.clone(), endpoint.port))
}

/// Why the offsets topic cannot be made now.
#[derive(Debug, thiserror::Error)]
enum OffsetsTopicError {
    #[error("reading live brokers: {0}")]
    LiveBrokers(#[source] StoreError),
    #[error(
        "{OFFSETS_TOPIC} needs {needed} live brokers (offsets_topic_replication_factor), {live} are"
    )]
    TooFewBrokers { needed: usize, live: usize },
    #[error("creating {OFFSETS_TOPIC}: {0}")]
    Create(#[source] StoreError),
}

/// Writes the offsets topic's assignment to etcd if no one has.
async fn create_offsets_topic(broker: &Broker) -> Result<(), OffsetsTopicError> {
    let live: Vec<i32> = broker
        .store
        .live_brokers()
        .await
        .map_err(OffsetsTopicError::LiveBrokers)?
        .keys()
        .copied()
        .collect();
    let rf = broker.config.offsets_topic_replication_factor as usize;
    if live.len() < rf {
        return Err(OffsetsTopicError::TooFewBrokers {
            needed: rf,
            live: live.len(),
        });
    }
    let assignment = TopicAssignment {
        partitions: assign_replicas(&live, broker.offsets.partitions() as i32, rf),
    };
    match broker.store.create_topic(OFFSETS_TOPIC, &assignment).await {
        Ok(true) => {
            tracing::info!(topic = OFFSETS_TOPIC, partitions = ?assignment.partitions, "offsets topic created");
            Ok(())
        }
        Ok(false) => Ok(()),
        Err(e) => Err(OffsetsTopicError::Create(e)),
    }
}
