//! CreateTopics: validate, choose replicas, write the topic's assignment to
//! etcd by create-if-absent (as a ZooKeeper-era broker wrote
//! `/brokers/topics/<t>`), then wait up to the request's timeout for the
//! controller to elect leaders and announce them. A timeout answers
//! REQUEST_TIMED_OUT while creation carries on, as Kafka does.
//!
//! Replica placement is deterministic — partition p gets the live brokers in id
//! order starting at index p — so a saved schedule places replicas the same way
//! on every run (Kafka starts at a random broker).

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::config::BrokerConfig;
use crate::controller::metadata_store::MetadataStore;
use crate::controller::metadata_store::{Overrides, TopicAssignment, wire_topic_id};
use crate::server::metadata_cache::MetadataCache;
use crate::storage::validate_topic_name;
use crate::topic_config::{self, TopicConfigs};

const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Partition p → `rf` brokers of `live` (sorted) starting at index p.
pub fn assign_replicas(live: &[i32], partitions: i32, rf: usize) -> BTreeMap<i32, Vec<i32>> {
    (0..partitions)
        .map(|p| {
            (
                p,
                (0..rf)
                    .map(|j| live[(p as usize + j) % live.len()])
                    .collect(),
            )
        })
        .collect()
}

struct Failure(ResponseError, String);

/// The request's configs for `topic`, each checked as Kafka's
/// `LogConfig.validate` checks it (INVALID_CONFIG, as Kafka answers).
fn configs_of(topic: &CreatableTopic) -> Result<Overrides, Failure> {
    let mut out = Overrides::new();
    for c in &topic.configs {
        let name = c.name.to_string();
        let invalid =
            |e: topic_config::ConfigError| Failure(ResponseError::InvalidConfig, e.to_string());
        let value = c
            .value
            .as_ref()
            .ok_or_else(|| invalid(topic_config::ConfigError::Null(name.clone())))?
            .to_string();
        topic_config::validate(&name, &value).map_err(invalid)?;
        out.insert(name, value);
    }
    Ok(out)
}

/// The topic's configs as CreateTopics v5+ answers them.
fn described(topic_configs: &TopicConfigs, configs: &Overrides) -> Vec<CreatableTopicConfigs> {
    topic_configs
        .describe(configs)
        .into_iter()
        .map(|d| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str(d.def.name))
                .with_value(Some(StrBytes::from_string(d.value)))
                // DYNAMIC_TOPIC_CONFIG or DEFAULT_CONFIG (Kafka's ConfigSource).
                .with_config_source(if d.overridden { 1 } else { 5 })
        })
        .collect()
}

fn plan(
    topic: &CreatableTopic,
    live: &[i32],
    defaults: Defaults,
) -> Result<TopicAssignment, Failure> {
    let name = topic.name.0.as_str();
    validate_topic_name(name)
        .map_err(|e| Failure(ResponseError::InvalidTopicException, e.to_string()))?;
    if !topic.assignments.is_empty() {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err(Failure(
                ResponseError::InvalidRequest,
                "give either an assignment or partitions and replication factor".into(),
            ));
        }
        let mut partitions = BTreeMap::new();
        for a in &topic.assignments {
            let replicas: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
            if replicas.is_empty() || replicas.iter().any(|r| !live.contains(r)) {
                return Err(Failure(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "partition {}: replicas {replicas:?} are not all live brokers",
                        a.partition_index
                    ),
                ));
            }
            partitions.insert(a.partition_index, replicas);
        }
        if partitions.keys().copied().ne(0..partitions.len() as i32) {
            return Err(Failure(
                ResponseError::InvalidReplicaAssignment,
                "partitions must be numbered 0..n".into(),
            ));
        }
        return Ok(TopicAssignment {
            partitions,
            ..TopicAssignment::default()
        });
    }
    // -1 means the broker's num.partitions and default.replication.factor (KIP-464).
    let partitions = if topic.num_partitions == -1 {
        defaults.partitions
    } else {
        topic.num_partitions
    };
    let rf = if topic.replication_factor == -1 {
        defaults.replication_factor
    } else {
        topic.replication_factor as i32
    };
    sized(partitions, rf, live)
}

/// The broker's `num_partitions` and `default_replication_factor`.
#[derive(Clone, Copy)]
pub struct Defaults {
    partitions: i32,
    replication_factor: i32,
}

impl Defaults {
    pub fn of(config: &BrokerConfig) -> Self {
        Defaults {
            partitions: config.num_partitions,
            replication_factor: config.default_replication_factor,
        }
    }
}

/// What creating a topic touches: the etcd store the controller learns new
/// topics from, the metadata it sends back once their leaders are elected,
/// the broker's defaults for a topic's size, and the topic configs a
/// created topic's configs are described with (CreateTopics, and Metadata's
/// auto-creation).
pub struct TopicCreation<'a> {
    pub store: &'a MetadataStore,
    pub metadata: &'a MetadataCache,
    pub defaults: Defaults,
    pub topic_configs: &'a TopicConfigs,
}

/// `partitions` partitions of `rf` replicas each over `live`.
fn sized(partitions: i32, rf: i32, live: &[i32]) -> Result<TopicAssignment, Failure> {
    if partitions < 1 {
        return Err(Failure(
            ResponseError::InvalidPartitions,
            format!("{partitions} partitions"),
        ));
    }
    if rf < 1 || rf as usize > live.len() {
        return Err(Failure(
            ResponseError::InvalidReplicationFactor,
            format!("replication factor {rf} with {} live brokers", live.len()),
        ));
    }
    Ok(TopicAssignment {
        partitions: assign_replicas(live, partitions, rf as usize),
        ..TopicAssignment::default()
    })
}

pub(super) async fn live_brokers(store: &MetadataStore, api: &str) -> Vec<i32> {
    match store.live_brokers().await {
        Ok(b) => b.keys().copied().collect(),
        Err(e) => {
            tracing::warn!(%e, api, "could not read live brokers");
            vec![]
        }
    }
}

/// Kafka's auto-creation of a topic a Metadata request named (ZooKeeper-era
/// `KafkaApis.createTopic`): created with the broker's defaults, it is
/// answered LEADER_NOT_AVAILABLE with no partitions, as is a topic someone
/// else created meanwhile, so the client asks again once leaders are elected;
/// an illegal name is INVALID_TOPIC_EXCEPTION and too few live brokers for
/// the default replication factor INVALID_REPLICATION_FACTOR, as there.
pub async fn auto_create(creation: &TopicCreation<'_>, name: &str) -> ResponseError {
    if let Err(e) = validate_topic_name(name) {
        tracing::info!(topic = %name, %e, "not auto-creating");
        return ResponseError::InvalidTopicException;
    }
    let live = live_brokers(creation.store, "Metadata").await;
    let defaults = creation.defaults;
    let assignment = match sized(defaults.partitions, defaults.replication_factor, &live) {
        Ok(a) => a,
        Err(Failure(code, why)) => {
            tracing::info!(topic = %name, %why, "not auto-creating");
            return code;
        }
    };
    match creation.store.create_topic(name, &assignment).await {
        Ok(created) => {
            if created {
                tracing::info!(topic = %name, partitions = ?assignment.partitions, "topic auto-created");
            }
            ResponseError::LeaderNotAvailable
        }
        Err(e) => {
            tracing::warn!(topic = %name, %e, "auto-creation failed");
            ResponseError::UnknownServerError
        }
    }
}

pub async fn handle(
    creation: &TopicCreation<'_>,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let live = live_brokers(creation.store, "CreateTopics").await;
    let defaults = creation.defaults;
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut results = Vec::with_capacity(req.topics.len());
    let mut created = Vec::new();
    for topic in &req.topics {
        let name = topic.name.0.to_string();
        let base = CreatableTopicResult::default().with_name(topic.name.clone());
        let planned = configs_of(topic).and_then(|c| Ok((plan(topic, &live, defaults)?, c)));
        let configs = planned.as_ref().map(|(_, c)| c.clone()).unwrap_or_default();
        let outcome = match planned {
            Err(f) => Err(f),
            Ok(_) if req.validate_only => Ok(None),
            Ok((assignment, configs)) => match creation
                .store
                .create_topic_with(&name, &assignment, &configs)
                .await
            {
                Ok(true) => Ok(Some(assignment)),
                Ok(false) => Err(Failure(
                    ResponseError::TopicAlreadyExists,
                    format!("topic {name:?} already exists"),
                )),
                Err(e) => Err(Failure(ResponseError::UnknownServerError, e.to_string())),
            },
        };
        results.push(match outcome {
            Ok(assignment) => {
                if let Some(a) = &assignment {
                    tracing::info!(topic = %name, partitions = ?a.partitions, "topic created");
                    created.push((results.len(), name.clone(), a.partitions.len() as i32));
                }
                let mut r = base;
                if version >= 5 {
                    let (np, rf) = assignment
                        .as_ref()
                        .map(|a| {
                            (
                                a.partitions.len() as i32,
                                a.partitions.values().next().map_or(0, |r| r.len()) as i16,
                            )
                        })
                        .unwrap_or((topic.num_partitions, topic.replication_factor));
                    r = r
                        .with_num_partitions(np)
                        .with_replication_factor(rf)
                        .with_configs(Some(described(creation.topic_configs, &configs)));
                }
                r
            }
            Err(Failure(code, message)) => {
                let r = base.with_error_code(code.code());
                if version >= 1 {
                    r.with_error_message(Some(StrBytes::from_string(message)))
                } else {
                    r
                }
            }
        });
    }
    // Wait for leaders, bounded by the request's timeout; v7 answers the
    // new topic's id (KIP-516), which the same announcement carried.
    for (index, name, partitions) in created {
        if wait_for_leaders(creation.metadata, &name, partitions, deadline).await {
            let id = creation.metadata.topic_id(&name);
            results[index].topic_id = wire_topic_id(id.as_deref());
        } else {
            results[index].error_code = ResponseError::RequestTimedOut.code();
        }
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// Waits until this broker's metadata shows `partitions` partitions of
/// `topic`, each with a leader; false at `deadline`.
pub(super) async fn wait_for_leaders(
    metadata: &MetadataCache,
    topic: &str,
    partitions: i32,
    deadline: tokio::time::Instant,
) -> bool {
    loop {
        if metadata.partitions_led(topic) >= partitions {
            return true;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_rotate_over_live_brokers_deterministically() {
        let a = assign_replicas(&[1, 2, 3], 4, 2);
        assert_eq!(a[&0], vec![1, 2]);
        assert_eq!(a[&2], vec![3, 1]);
        assert_eq!(a[&3], vec![1, 2]);
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders-1.v2_x").is_ok());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }
}
