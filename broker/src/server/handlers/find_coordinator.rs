//! FindCoordinator: which broker coordinates a group — the leader of the
//! group's partition of the offsets topic ([`crate::offsets`]).
//!
//! The offsets topic is made at the first FindCoordinator, as Kafka makes
//! `__consumer_offsets` (through the same path as CreateTopics: its
//! assignment written to etcd, leaders elected by the controller), once as
//! many brokers are live as `offsets_topic_replication_factor` asks; until
//! its partition has a leader the answer is COORDINATOR_NOT_AVAILABLE, which
//! clients retry. v0–v3 ask for one key; v4+ for several (KIP-699). A
//! transactional id's coordinator (key type 1, v1+) is found the same way in
//! the transaction-state topic ([`crate::transactions`]), made at the first
//! such request with its own two settings.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::create_topics::assign_replicas;
use crate::config::BrokerConfig;
use crate::controller::metadata_store::{MetadataStore, StoreError, TopicAssignment};
use crate::offsets::OFFSETS_TOPIC;
use crate::server::metadata_cache::MetadataCache;
use crate::transactions::TXN_STATE_TOPIC;

/// A coordinator's internal topic, made at the first FindCoordinator that
/// needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InternalTopic {
    /// Groups' offsets (key type 0).
    Offsets,
    /// Transactional ids' states (key type 1).
    TxnState,
}

impl InternalTopic {
    fn of_key_type(key_type: i8) -> Option<Self> {
        match key_type {
            0 => Some(InternalTopic::Offsets),
            1 => Some(InternalTopic::TxnState),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            InternalTopic::Offsets => OFFSETS_TOPIC,
            InternalTopic::TxnState => TXN_STATE_TOPIC,
        }
    }

    fn partitions(self, lookup: &CoordinatorLookup<'_>) -> u32 {
        match self {
            InternalTopic::Offsets => lookup.offsets_partitions,
            InternalTopic::TxnState => lookup.txn_partitions,
        }
    }

    /// The replication factor and the setting it comes from.
    fn replication_factor(self, config: &BrokerConfig) -> (usize, &'static str) {
        match self {
            InternalTopic::Offsets => (
                config.offsets_topic_replication_factor as usize,
                "offsets_topic_replication_factor",
            ),
            InternalTopic::TxnState => (
                config.transaction_state_replication_factor as usize,
                "transaction_state_replication_factor",
            ),
        }
    }
}

/// Whether `topic` is one of the coordinators' internal topics (Metadata
/// flags them; nothing auto-creates them).
pub fn is_internal(topic: &str) -> bool {
    topic == OFFSETS_TOPIC || topic == TXN_STATE_TOPIC
}

/// What finding a coordinator touches: the metadata naming each internal
/// topic's partition leaders, the etcd store an internal topic is created in
/// the first time a key of it is asked for, and what it is created with:
/// its coordinator's partition count and the broker's replication factor
/// setting for it.
pub struct CoordinatorLookup<'a> {
    pub metadata: &'a MetadataCache,
    pub store: &'a MetadataStore,
    pub config: &'a BrokerConfig,
    /// The group coordinator's partition count (`OffsetsManager::partitions`).
    pub offsets_partitions: u32,
    /// The transaction coordinator's (`TxnCoordinator::partitions`).
    pub txn_partitions: u32,
}

pub async fn handle(
    lookup: &CoordinatorLookup<'_>,
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
        let found = match InternalTopic::of_key_type(req.key_type) {
            Some(topic) => coordinator_of(lookup, topic, &key).await,
            None => Err((
                ResponseError::InvalidRequest,
                format!(
                    "key type {} is neither a group (0) nor a transactional id (1)",
                    req.key_type
                ),
            )),
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

/// The coordinator of `key` (its partition of `topic`'s leader): node id,
/// host, port; or why there is none now.
async fn coordinator_of(
    lookup: &CoordinatorLookup<'_>,
    topic: InternalTopic,
    key: &str,
) -> Result<(i32, String, i32), (ResponseError, String)> {
    let not_available =
        |why: String| -> (ResponseError, String) { (ResponseError::CoordinatorNotAvailable, why) };
    let name = topic.name();
    let partition = crate::group::partition_for(key, topic.partitions(lookup).max(1)) as i32;
    let view = lookup.metadata.snapshot();
    let Some(partitions) = view.topics.get(name) else {
        create_internal_topic(lookup, topic)
            .await
            .map_err(|e| not_available(e.to_string()))?;
        return Err(not_available(format!("{name} is being created")));
    };
    let leader = partitions
        .get(&partition)
        .map(|p| p.leader)
        .filter(|&l| l >= 0)
        .ok_or_else(|| not_available(format!("{name}-{partition} has no leader")))?;
    let endpoint = view
        .brokers
        .get(&leader)
        .ok_or_else(|| not_available(format!("coordinator {leader} is not live")))?;
    Ok((leader, endpoint.host.clone(), endpoint.port))
}

/// Why an internal topic cannot be made now.
#[derive(Debug, thiserror::Error)]
enum InternalTopicError {
    #[error("reading live brokers: {0}")]
    LiveBrokers(#[source] StoreError),
    #[error("{topic} needs {needed} live brokers ({setting}), {live} are")]
    TooFewBrokers {
        topic: &'static str,
        setting: &'static str,
        needed: usize,
        live: usize,
    },
    #[error("creating {topic}: {source}")]
    Create {
        topic: &'static str,
        #[source]
        source: StoreError,
    },
}

/// Writes `topic`'s assignment to etcd if no one has.
async fn create_internal_topic(
    lookup: &CoordinatorLookup<'_>,
    topic: InternalTopic,
) -> Result<(), InternalTopicError> {
    let live: Vec<i32> = lookup
        .store
        .live_brokers()
        .await
        .map_err(InternalTopicError::LiveBrokers)?
        .keys()
        .copied()
        .collect();
    let name = topic.name();
    let (rf, setting) = topic.replication_factor(lookup.config);
    if live.len() < rf {
        return Err(InternalTopicError::TooFewBrokers {
            topic: name,
            setting,
            needed: rf,
            live: live.len(),
        });
    }
    let assignment = TopicAssignment {
        partitions: assign_replicas(&live, topic.partitions(lookup) as i32, rf),
        ..TopicAssignment::default()
    };
    match lookup.store.create_topic(name, &assignment).await {
        Ok(true) => {
            tracing::info!(topic = name, partitions = ?assignment.partitions, "internal topic created");
            Ok(())
        }
        Ok(false) => Ok(()),
        Err(source) => Err(InternalTopicError::Create {
            topic: name,
            source,
        }),
    }
}
