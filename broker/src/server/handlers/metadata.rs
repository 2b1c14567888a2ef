//! Metadata: brokers, controller and topic leadership from the metadata cache;
//! `__consumer_offsets` is flagged internal.
//! An unknown topic the request names is auto-created as Kafka's
//! `KafkaApis.getTopicMetadata` does it when the broker's
//! `auto_create_topics_enable` is on and the request lets it (every request
//! before v4; the `allow_auto_topic_creation` flag from v4): see
//! `create_topics::auto_create`. The offsets topic is made by FindCoordinator
//! only. An unknown topic not created is answered UNKNOWN_TOPIC_OR_PARTITION,
//! or INVALID_TOPIC_EXCEPTION when its name is one Kafka refuses, as
//! `getTopicMetadata` runs `Topic.validate` on each unknown topic it does not
//! create.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::create_topics::{TopicCreation, auto_create};
use super::find_coordinator::is_internal;
use super::topic_name;
use crate::controller::metadata_store::wire_topic_id;
use crate::server::metadata_cache::{ClusterView, MetadataCache};
use crate::storage::validate_topic_name;

/// What an unknown topic is answered: INVALID_TOPIC_EXCEPTION when Kafka's
/// `Topic.validate` would refuse its name, else UNKNOWN_TOPIC_OR_PARTITION.
fn unknown_topic_error(name: &str) -> ResponseError {
    if validate_topic_name(name).is_err() {
        ResponseError::InvalidTopicException
    } else {
        ResponseError::UnknownTopicOrPartition
    }
}

/// How this broker names itself to clients: its id and the address it
/// advertises (listed when the controller has not told it of itself yet),
/// and the cluster's id.
pub struct Advertised<'a> {
    pub node_id: i32,
    pub host: &'a str,
    pub port: i32,
    pub cluster_id: &'a str,
}

/// The live brokers as the controller last announced them (id, host,
/// port). Before the controller's first UpdateMetadata the cache is empty; a
/// client must still learn this broker's own address to come back.
fn brokers_of(me: &Advertised<'_>, view: &ClusterView) -> Vec<(i32, StrBytes, i32)> {
    let mut brokers: Vec<_> = view
        .brokers
        .values()
        .map(|b| (b.id, StrBytes::from_string(b.host.clone()), b.port))
        .collect();
    if !view.brokers.contains_key(&me.node_id) {
        brokers.push((
            me.node_id,
            StrBytes::from_string(me.host.to_owned()),
            me.port,
        ));
    }
    brokers
}

/// DescribeCluster (KIP-700): the brokers, the controller and the cluster id
/// Metadata also gives, for admin clients that ask this way.
pub fn describe_cluster(metadata: &MetadataCache, me: &Advertised<'_>) -> DescribeClusterResponse {
    let view = metadata.snapshot();
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(me.cluster_id.to_owned()))
        .with_controller_id(BrokerId(view.controller_id))
        .with_brokers(
            brokers_of(me, &view)
                .into_iter()
                .map(|(id, host, port)| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(id))
                        .with_host(host)
                        .with_port(port)
                })
                .collect(),
        )
}

/// Answers from `metadata`; a topic it does not hold is created through
/// `creation` when given (the broker's `auto_create_topics_enable`).
pub async fn handle(
    metadata: &MetadataCache,
    me: &Advertised<'_>,
    creation: Option<&TopicCreation<'_>>,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let view = metadata.snapshot();
    let brokers: Vec<MetadataResponseBroker> = brokers_of(me, &view)
        .into_iter()
        .map(|(id, host, port)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(host)
                .with_port(port)
        })
        .collect();
    let requested: Option<Vec<String>> = match req.topics {
        None => None,
        // v0 has no null array: an empty list means all topics.
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(
            t.into_iter()
                .filter_map(|t| t.name.map(|n| n.0.to_string()))
                .collect(),
        ),
    };
    let may_create =
        creation.filter(|_| requested.is_some() && (version < 4 || req.allow_auto_topic_creation));
    let names: Vec<String> = requested.unwrap_or_else(|| view.topics.keys().cloned().collect());
    let mut unknown = std::collections::BTreeMap::new();
    for name in names.iter().filter(|n| !view.topics.contains_key(*n)) {
        let error = match may_create {
            Some(creation) if !is_internal(name) => auto_create(creation, name).await,
            _ => unknown_topic_error(name),
        };
        unknown.insert(name.clone(), error);
    }
    let topics = names
        .into_iter()
        .map(|name| match view.topics.get(&name) {
            None => MetadataResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_error_code(unknown[&name].code()),
            Some(parts) => MetadataResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                // v10+ (KIP-516): the id the controller announced.
                .with_topic_id(wire_topic_id(view.topic_ids.get(&name).map(String::as_str)))
                // The coordinators' topics, as Kafka flags them (v1+).
                .with_is_internal(is_internal(&name))
                .with_partitions(
                    parts
                        .iter()
                        .map(|(p, m)| {
                            let error = if m.leader < 0 {
                                ResponseError::LeaderNotAvailable.code()
                            } else {
                                0
                            };
                            MetadataResponsePartition::default()
                                .with_error_code(error)
                                .with_partition_index(*p)
                                .with_leader_id(BrokerId(m.leader))
                                .with_leader_epoch(m.leader_epoch)
                                .with_replica_nodes(
                                    m.replicas.iter().copied().map(BrokerId).collect(),
                                )
                                .with_isr_nodes(m.isr.iter().copied().map(BrokerId).collect())
                                .with_offline_replicas(
                                    m.offline_replicas.iter().copied().map(BrokerId).collect(),
                                )
                        })
                        .collect(),
                ),
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(me.cluster_id.to_owned())))
        .with_controller_id(BrokerId(view.controller_id))
        .with_topics(topics)
}
