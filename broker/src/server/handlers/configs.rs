//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (KIP-133,
//! KIP-339) for topics, over the overrides etcd keeps with each topic
//! (`crate::topic_config`); a BROKER resource's static settings and KIP-226
//! dynamic configs are [`broker_configs`]'.
//!
//! Overrides are read from etcd, not from the cache, so a describe right
//! after an alter sees it; an alter replaces the overrides by
//! compare-and-swap on the topic's and its configs' revisions, read again on
//! a lost compare. Errors as Kafka's `ConfigAdminManager` and `AdminManager`
//! give them: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG for an unknown name
//! or a bad value, INVALID_REQUEST for a null value, a duplicate key, or
//! APPEND / SUBTRACT on a config that is not a list.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, alter_configs_response,
    incremental_alter_configs_request, incremental_alter_configs_response,
};
use kafka_protocol::protocol::StrBytes;

use crate::config::BrokerConfig;
use crate::controller::metadata_store::MetadataStore;
use crate::controller::metadata_store::{Overrides, StoredTopic};
use crate::server::handlers::broker_configs::{self, STATIC_BROKER_CONFIG, versioned};
use crate::topic_config::{self, ConfigError, ConfigType, Described, TopicConfigs};

/// Kafka's `ConfigResource.Type`.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Kafka's `DescribeConfigsResponse.ConfigSource`.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;

/// Compare-and-swap attempts before an alter answers that it could not.
const WRITE_ATTEMPTS: u32 = 8;

/// Why one resource failed: its error and the message.
struct Failure(ResponseError, String);

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        let code = match e {
            ConfigError::Null(_) => ResponseError::InvalidRequest,
            _ => ResponseError::InvalidConfig,
        };
        Failure(code, e.to_string())
    }
}

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

async fn stored(store: &MetadataStore, topic: &str) -> Result<StoredTopic, Failure> {
    match store.topic(topic).await {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(Failure(
            ResponseError::UnknownTopicOrPartition,
            format!("Topic {topic} does not exist"),
        )),
        Err(e) => Err(Failure(ResponseError::UnknownServerError, e.to_string())),
    }
}

fn overrides_of(topic: &StoredTopic) -> Overrides {
    topic
        .configs
        .as_ref()
        .map(|c| c.value.config.clone())
        .unwrap_or_default()
}

/// One described config in DescribeConfigs' form at `version`: is_default
/// is v0's, sources and synonyms v1+'s, types v3+'s (kafka-protocol refuses
/// to encode a field its version lacks).
fn describe_entry(d: &Described, synonyms: bool, version: i16) -> DescribeConfigsResourceResult {
    let source = if d.overridden {
        DYNAMIC_TOPIC_CONFIG
    } else if d.broker_set {
        STATIC_BROKER_CONFIG
    } else {
        DEFAULT_CONFIG
    };
    let entry = DescribeConfigsResourceResult::default()
        .with_name(text(d.def.name))
        .with_value(Some(text(d.value.clone())));
    let mut entry = versioned(entry, version, source, d.def.kind);
    if version == 0 {
        entry.is_default = source == DEFAULT_CONFIG;
    }
    if synonyms && version >= 1 {
        let mut list = Vec::new();
        if d.overridden {
            list.push((d.def.name, d.value.clone(), DYNAMIC_TOPIC_CONFIG));
        }
        // A config with no broker setting behind it (Kafka's throttled
        // replica lists) has no synonym but its own override.
        if let Some(synonym) = d.def.broker_synonym {
            if d.broker_set {
                list.push((synonym, d.broker_default.clone(), STATIC_BROKER_CONFIG));
            }
            list.push((synonym, d.def.kafka_default.into(), DEFAULT_CONFIG));
        }
        entry.synonyms = list
            .into_iter()
            .map(|(name, value, source)| {
                DescribeConfigsSynonym::default()
                    .with_name(text(name))
                    .with_value(Some(text(value)))
                    .with_source(source)
            })
            .collect();
    }
    entry
}

/// Reads topics' overrides and dynamic broker configs from `store`; a
/// topic's are described against `topic_configs`' defaults, a broker's with
/// `config`'s static settings.
pub async fn describe(
    config: &BrokerConfig,
    store: &MetadataStore,
    topic_configs: &TopicConfigs,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut results = Vec::with_capacity(req.resources.len());
    for resource in req.resources {
        let name = resource.resource_name.to_string();
        let keys: Option<BTreeSet<String>> = resource
            .configuration_keys
            .map(|k| k.iter().map(|k| k.to_string()).collect());
        let entries = match resource.resource_type {
            TOPIC => stored(store, &name).await.map(|t| {
                topic_configs
                    .describe(&overrides_of(&t))
                    .iter()
                    .map(|d| describe_entry(d, req.include_synonyms, version))
                    .collect()
            }),
            BROKER => broker_configs::describe(config, store, &name, version)
                .await
                .map_err(|(code, message)| Failure(code, message)),
            other => Err(Failure(
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported"),
            )),
        };
        let result = DescribeConfigsResult::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(text(name));
        results.push(match entries {
            Ok(mut entries) => {
                if let Some(keys) = &keys {
                    entries.retain(|e| keys.contains(e.name.as_str()));
                }
                result.with_configs(entries)
            }
            Err(Failure(code, message)) => result
                .with_error_code(code.code())
                .with_error_message(Some(text(message))),
        });
    }
    DescribeConfigsResponse::default().with_results(results)
}

/// One config operation of IncrementalAlterConfigs (Kafka's `OpType`), or
/// AlterConfigs' whole replacement.
enum Change {
    Set(String, String),
    Delete(String),
    Append(String, String),
    Subtract(String, String),
}

/// Applies `changes` to `current`, checking each as Kafka does.
fn apply(current: &Overrides, changes: &[Change], replace: bool) -> Result<Overrides, Failure> {
    let mut next = if replace {
        Overrides::new()
    } else {
        current.clone()
    };
    let list_of = |name: &str, over: &Overrides| -> Result<Vec<String>, Failure> {
        let def =
            topic_config::definition(name).ok_or_else(|| ConfigError::Unknown(name.to_owned()))?;
        if def.kind != ConfigType::List {
            return Err(Failure(
                ResponseError::InvalidRequest,
                format!(
                    "Config value append is not allowed for config [{name}] as it is not of type list"
                ),
            ));
        }
        let value = over.get(name).map_or(def.kafka_default, String::as_str);
        Ok(value
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect())
    };
    for change in changes {
        match change {
            Change::Set(name, value) => {
                topic_config::validate(name, value)?;
                next.insert(name.clone(), value.clone());
            }
            Change::Delete(name) => {
                topic_config::definition(name).ok_or_else(|| ConfigError::Unknown(name.clone()))?;
                next.remove(name);
            }
            Change::Append(name, value) | Change::Subtract(name, value) => {
                let mut items = list_of(name, &next)?;
                let given = value.split(',').map(|v| v.trim().to_owned());
                if matches!(change, Change::Append(..)) {
                    for v in given {
                        if !items.contains(&v) {
                            items.push(v);
                        }
                    }
                } else {
                    let drop: Vec<String> = given.collect();
                    items.retain(|v| !drop.contains(v));
                }
                let joined = items.join(",");
                topic_config::validate(name, &joined)?;
                next.insert(name.clone(), joined);
            }
        }
    }
    Ok(next)
}

/// Alters one topic's overrides by `changes`, retried on a lost compare.
async fn alter_topic(
    store: &MetadataStore,
    topic: &str,
    changes: &[Change],
    replace: bool,
    validate_only: bool,
) -> Result<(), Failure> {
    for _ in 0..WRITE_ATTEMPTS {
        let read = stored(store, topic).await?;
        let next = apply(&overrides_of(&read), changes, replace)?;
        if validate_only {
            return Ok(());
        }
        match store.write_topic_configs(topic, &read, &next).await {
            Ok(true) => {
                tracing::info!(%topic, configs = ?next, "topic configs altered");
                return Ok(());
            }
            Ok(false) => continue,
            Err(e) => return Err(Failure(ResponseError::UnknownServerError, e.to_string())),
        }
    }
    Err(Failure(
        ResponseError::UnknownServerError,
        format!("{topic}'s configs kept changing under {WRITE_ATTEMPTS} attempts"),
    ))
}

/// One resource of either alter request, on broker `node_id`.
async fn alter_resource(
    (node_id, store): (i32, &MetadataStore),
    kind: i8,
    name: &str,
    changes: Result<Vec<Change>, Failure>,
    replace: bool,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    let outcome = match kind {
        TOPIC => match changes {
            Ok(changes) => alter_topic(store, name, &changes, replace, validate_only).await,
            Err(f) => Err(f),
        },
        BROKER => match changes.and_then(broker_ops) {
            Ok(ops) => broker_configs::alter(node_id, store, name, &ops, replace, validate_only)
                .await
                .map_err(|(code, message)| Failure(code, message)),
            Err(f) => Err(f),
        },
        other => Err(Failure(
            ResponseError::InvalidRequest,
            format!("resource type {other} is not supported"),
        )),
    };
    match outcome {
        Ok(()) => (0, None),
        Err(Failure(code, message)) => (code.code(), Some(text(message))),
    }
}

/// A broker resource's changes: none of its dynamic configs is a list, so
/// APPEND and SUBTRACT are refused as Kafka refuses them on a non-list.
fn broker_ops(changes: Vec<Change>) -> Result<Vec<broker_configs::Op>, Failure> {
    changes
        .into_iter()
        .map(|c| match c {
            Change::Set(name, value) => Ok(broker_configs::Op::Set(name, value)),
            Change::Delete(name) => Ok(broker_configs::Op::Delete(name)),
            Change::Append(name, _) | Change::Subtract(name, _) => Err(Failure(
                ResponseError::InvalidRequest,
                format!(
                    "Config value append is not allowed for config [{name}] as it is not of type list"
                ),
            )),
        })
        .collect()
}

/// Refuses a config named twice in one resource, as Kafka does.
fn no_duplicates<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), Failure> {
    let mut seen = BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(Failure(
                ResponseError::InvalidRequest,
                format!("Error due to duplicate config keys: {n}"),
            ));
        }
    }
    Ok(())
}

/// One resource of an alter request: its type and name, and its changes
/// (or why they cannot be taken).
type AlterResource = (i8, String, Result<Vec<Change>, Failure>);

/// Every resource of an alter request, in order: (type, name, error code,
/// message), on broker `node_id`.
async fn alter_all(
    on: (i32, &MetadataStore),
    resources: Vec<AlterResource>,
    replace: bool,
    validate_only: bool,
) -> Vec<(i8, String, i16, Option<StrBytes>)> {
    let mut out = Vec::with_capacity(resources.len());
    for (kind, name, changes) in resources {
        let (code, message) =
            alter_resource(on, kind, &name, changes, replace, validate_only).await;
        out.push((kind, name, code, message));
    }
    out
}

/// An IncrementalAlterConfigs entry as a [`Change`] (Kafka's `OpType`).
fn incremental_change(
    c: &incremental_alter_configs_request::AlterableConfig,
) -> Result<Change, Failure> {
    let key = c.name.to_string();
    let value = c.value.as_ref().map(|v| v.to_string());
    let need = |v: Option<String>| v.ok_or(ConfigError::Null(key.clone()));
    Ok(match c.config_operation {
        0 => Change::Set(key.clone(), need(value)?),
        1 => Change::Delete(key),
        2 => Change::Append(key.clone(), need(value)?),
        3 => Change::Subtract(key.clone(), need(value)?),
        op => {
            return Err(Failure(
                ResponseError::InvalidRequest,
                format!("unknown config operation {op}"),
            ));
        }
    })
}

/// Writes topics' overrides and dynamic broker configs in `store`;
/// `node_id` is this broker's, the one BROKER resource it alters besides
/// the cluster default.
pub async fn incremental_alter(
    node_id: i32,
    store: &MetadataStore,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let resources = req
        .resources
        .iter()
        .map(|r| {
            let changes = no_duplicates(r.configs.iter().map(|c| c.name.as_str()))
                .and_then(|_| r.configs.iter().map(incremental_change).collect());
            (r.resource_type, r.resource_name.to_string(), changes)
        })
        .collect();
    let responses = alter_all((node_id, store), resources, false, req.validate_only)
        .await
        .into_iter()
        .map(|(kind, name, code, message)| {
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(kind)
                .with_resource_name(text(name))
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// AlterConfigs: the given configs become the topic's whole set of overrides
/// (`store` and `node_id` as [`incremental_alter`]'s).
pub async fn alter(
    node_id: i32,
    store: &MetadataStore,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let resources = req
        .resources
        .iter()
        .map(|r| {
            let changes = no_duplicates(r.configs.iter().map(|c| c.name.as_str())).and_then(|_| {
                r.configs
                    .iter()
                    .map(|c| {
                        let key = c.name.to_string();
                        let value = c.value.as_ref().ok_or(ConfigError::Null(key.clone()))?;
                        Ok(Change::Set(key, value.to_string()))
                    })
                    .collect()
            });
            (r.resource_type, r.resource_name.to_string(), changes)
        })
        .collect();
    let responses = alter_all((node_id, store), resources, true, req.validate_only)
        .await
        .into_iter()
        .map(|(kind, name, code, message)| {
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(kind)
                .with_resource_name(text(name))
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: &str, v: &str) -> Change {
        Change::Set(n.into(), v.into())
    }

    #[test]
    fn changes_apply_as_kafka_s_incremental_ops() {
        let current: Overrides = [("retention.ms".into(), "1000".into())].into();
        let next =
            apply(&current, &[set("min.insync.replicas", "2")], false).unwrap_or_else(|_| panic!());
        assert_eq!(next.len(), 2);
        let replaced =
            apply(&current, &[set("min.insync.replicas", "2")], true).unwrap_or_else(|_| panic!());
        assert_eq!(replaced.len(), 1, "AlterConfigs replaces the whole set");
        let appended = apply(
            &current,
            &[Change::Append("cleanup.policy".into(), "compact".into())],
            false,
        )
        .unwrap_or_else(|_| panic!());
        assert_eq!(appended["cleanup.policy"], "delete,compact");
        let Err(Failure(code, _)) = apply(
            &current,
            &[Change::Append("retention.ms".into(), "5".into())],
            false,
        ) else {
            panic!("append to a number")
        };
        assert_eq!(code, ResponseError::InvalidRequest);
        let Err(Failure(code, message)) = apply(&current, &[set("nope", "1")], false) else {
            panic!("unknown name")
        };
        assert_eq!(
            (code, message.as_str()),
            (
                ResponseError::InvalidConfig,
                "Unknown topic config name: nope"
            )
        );
        let deleted = apply(&current, &[Change::Delete("retention.ms".into())], false)
            .unwrap_or_else(|_| panic!());
        assert!(deleted.is_empty());
    }
}
