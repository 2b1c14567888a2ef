//! A BROKER resource's configs (resource type 4): the broker's static
//! settings, read-only, and KIP-226's dynamic broker configs — a few configs
//! a client may set on one broker (resource name = its id) or as the
//! cluster-wide default (resource name ""), kept in etcd as ZooKeeper's
//! `/config/brokers/<id>` and `/config/brokers/<default>` were.
//!
//! This broker accepts and describes the dynamic configs [`DYNAMIC`] lists;
//! it acts on none of them (broker/README.md says so). DescribeConfigs
//! shows each with its KIP-226 source: DYNAMIC_BROKER_CONFIG when set for
//! this broker, DYNAMIC_DEFAULT_BROKER_CONFIG when set cluster-wide,
//! DEFAULT_CONFIG otherwise.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::protocol::StrBytes;

use crate::config::BrokerConfig;
use crate::controller::metadata_store::MetadataStore;
use crate::controller::metadata_store::Overrides;
use crate::controller::metadata_store::broker_configs::DEFAULT_ENTITY;
use crate::topic_config::ConfigType;

/// Kafka's `DescribeConfigsResponse.ConfigSource` (KIP-226).
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
pub(super) const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// Compare-and-swap attempts before an alter answers that it could not.
const WRITE_ATTEMPTS: u32 = 8;

/// One dynamic broker config: its name, type, Kafka's default and the
/// least value Kafka's `ConfigDef` takes for it.
pub struct Dynamic {
    pub name: &'static str,
    pub kind: ConfigType,
    pub default: &'static str,
    pub min: i64,
}

/// The dynamic broker configs accepted here, a subset of Kafka's
/// `DynamicBrokerConfig.AllDynamicConfigs` (KIP-226), with Kafka's defaults
/// and lower bounds. librdkafka's 0081_admin sets the first.
pub const DYNAMIC: &[Dynamic] = &[
    Dynamic {
        name: "sasl.kerberos.min.time.before.relogin",
        kind: ConfigType::Long,
        default: "60000",
        min: 0,
    },
    Dynamic {
        name: "log.cleaner.threads",
        kind: ConfigType::Int,
        default: "1",
        min: 0,
    },
    Dynamic {
        name: "num.io.threads",
        kind: ConfigType::Int,
        default: "8",
        min: 1,
    },
    Dynamic {
        name: "num.network.threads",
        kind: ConfigType::Int,
        default: "3",
        min: 1,
    },
    Dynamic {
        name: "message.max.bytes",
        kind: ConfigType::Int,
        default: "1048588",
        min: 0,
    },
    Dynamic {
        name: "max.connections",
        kind: ConfigType::Int,
        default: "2147483647",
        min: 0,
    },
];

/// One change to a broker resource's dynamic configs.
pub enum Op {
    Set(String, String),
    Delete(String),
}

/// Why a broker resource was refused: its error and message.
pub type Refusal = (ResponseError, String);

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

fn dynamic(name: &str) -> Result<&'static Dynamic, Refusal> {
    DYNAMIC.iter().find(|d| d.name == name).ok_or_else(|| {
        (
            ResponseError::InvalidConfig,
            format!("Cannot update these configs dynamically: Set({name})"),
        )
    })
}

/// Checks `value` for `name` as Kafka's `ConfigDef` would.
pub fn validate(name: &str, value: &str) -> Result<(), Refusal> {
    let def = dynamic(name)?;
    let parsed: Option<i64> = match def.kind {
        ConfigType::Int => value.trim().parse::<i32>().ok().map(i64::from),
        _ => value.trim().parse::<i64>().ok(),
    };
    match parsed {
        Some(v) if v >= def.min => Ok(()),
        Some(_) => Err((
            ResponseError::InvalidConfig,
            format!(
                "Invalid value {value} for configuration {name}: Value must be at least {}",
                def.min
            ),
        )),
        None => Err((
            ResponseError::InvalidConfig,
            format!("Invalid value {value} for configuration {name}: Not a number"),
        )),
    }
}

/// The entity a resource name stands for: this broker's id, or "" for the
/// cluster-wide default. Kafka refuses another broker's id as an
/// INVALID_REQUEST (`ConfigAdminManager`'s "Unexpected broker id").
fn entity(node_id: i32, name: &str) -> Result<String, Refusal> {
    let own = node_id.to_string();
    if name.is_empty() {
        Ok(DEFAULT_ENTITY.into())
    } else if name == own {
        Ok(own)
    } else {
        Err((
            ResponseError::InvalidRequest,
            format!("Unexpected broker id, expected {own} or empty string, but received {name}"),
        ))
    }
}

/// Applies `ops` to `current` (to nothing when `replace`: AlterConfigs).
pub fn apply(current: &Overrides, ops: &[Op], replace: bool) -> Result<Overrides, Refusal> {
    let mut next = if replace {
        Overrides::new()
    } else {
        current.clone()
    };
    for op in ops {
        match op {
            Op::Set(name, value) => {
                validate(name, value)?;
                next.insert(name.clone(), value.trim().to_owned());
            }
            Op::Delete(name) => {
                dynamic(name)?;
                next.remove(name);
            }
        }
    }
    Ok(next)
}

/// Alters the dynamic configs of broker resource `name`, retried on a lost
/// compare. `node_id` is this broker's, the one id `name` may be.
pub async fn alter(
    node_id: i32,
    store: &MetadataStore,
    name: &str,
    ops: &[Op],
    replace: bool,
    validate_only: bool,
) -> Result<(), Refusal> {
    let entity = entity(node_id, name)?;
    let failed = |e: &dyn std::fmt::Display| (ResponseError::UnknownServerError, e.to_string());
    for _ in 0..WRITE_ATTEMPTS {
        let (current, held) = store
            .broker_configs(&entity)
            .await
            .map_err(|e| failed(&e))?;
        let next = apply(&current, ops, replace)?;
        if validate_only {
            return Ok(());
        }
        match store.write_broker_configs(&entity, held, &next).await {
            Ok(true) => {
                tracing::info!(%entity, configs = ?next, "dynamic broker configs altered");
                return Ok(());
            }
            Ok(false) => continue,
            Err(e) => return Err(failed(&e)),
        }
    }
    Err((
        ResponseError::UnknownServerError,
        format!("broker {entity}'s configs kept changing under {WRITE_ATTEMPTS} attempts"),
    ))
}

/// The source (v1+) and type (v3+) of an entry, where `version` has them.
pub(super) fn versioned(
    mut entry: DescribeConfigsResourceResult,
    version: i16,
    source: i8,
    kind: ConfigType,
) -> DescribeConfigsResourceResult {
    if version >= 1 {
        entry.config_source = source;
    }
    if version >= 3 {
        entry.config_type = kind as i8;
    }
    entry
}

/// The broker's static settings a client may ask of it, read-only.
fn static_entries(c: &BrokerConfig, version: i16) -> Vec<DescribeConfigsResourceResult> {
    [
        (
            "auto.create.topics.enable",
            c.auto_create_topics_enable.to_string(),
            ConfigType::Boolean,
        ),
        (
            "default.replication.factor",
            c.default_replication_factor.to_string(),
            ConfigType::Int,
        ),
        (
            "log.segment.bytes",
            c.segment_bytes.to_string(),
            ConfigType::Int,
        ),
        (
            "min.insync.replicas",
            c.min_insync_replicas.to_string(),
            ConfigType::Int,
        ),
        (
            "num.partitions",
            c.num_partitions.to_string(),
            ConfigType::Int,
        ),
        (
            "unclean.leader.election.enable",
            c.unclean_leader_election.to_string(),
            ConfigType::Boolean,
        ),
    ]
    .into_iter()
    .map(|(name, value, kind)| {
        let entry = DescribeConfigsResourceResult::default()
            .with_name(text(name))
            .with_value(Some(text(value)))
            .with_read_only(true);
        versioned(entry, version, STATIC_BROKER_CONFIG, kind)
    })
    .collect()
}

/// Each dynamic config's value and source, given this broker's own
/// (`None` when describing the cluster default) and the default's settings.
pub fn dynamic_values(
    own: Option<&Overrides>,
    default: &Overrides,
) -> Vec<(&'static Dynamic, String, i8)> {
    DYNAMIC
        .iter()
        .filter_map(|d| {
            if let Some(v) = own.and_then(|o| o.get(d.name)) {
                Some((d, v.clone(), DYNAMIC_BROKER_CONFIG))
            } else if let Some(v) = default.get(d.name) {
                Some((d, v.clone(), DYNAMIC_DEFAULT_BROKER_CONFIG))
            } else {
                // Kafka describes the cluster default with what is set only.
                own.map(|_| (d, d.default.to_owned(), DEFAULT_CONFIG))
            }
        })
        .collect()
}

/// DescribeConfigs of broker resource `name`: this broker's static settings
/// and its dynamic configs, or the cluster-wide dynamic defaults for "".
pub async fn describe(
    config: &BrokerConfig,
    store: &MetadataStore,
    name: &str,
    version: i16,
) -> Result<Vec<DescribeConfigsResourceResult>, Refusal> {
    let entity = entity(config.node_id, name)?;
    let failed = |e: &dyn std::fmt::Display| (ResponseError::UnknownServerError, e.to_string());
    let (default, _) = store
        .broker_configs(DEFAULT_ENTITY)
        .await
        .map_err(|e| failed(&e))?;
    let own = if entity == DEFAULT_ENTITY {
        None
    } else {
        Some(
            store
                .broker_configs(&entity)
                .await
                .map_err(|e| failed(&e))?
                .0,
        )
    };
    let mut entries = if own.is_some() {
        static_entries(config, version)
    } else {
        Vec::new()
    };
    for (d, value, source) in dynamic_values(own.as_ref(), &default) {
        let entry = DescribeConfigsResourceResult::default()
            .with_name(text(d.name))
            .with_value(Some(text(value)));
        let mut entry = versioned(entry, version, source, d.kind);
        if version == 0 {
            entry.is_default = source == DEFAULT_CONFIG;
        }
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: &str, v: &str) -> Op {
        Op::Set(n.into(), v.into())
    }

    #[test]
    fn dynamic_configs_are_checked_as_kafka_s_config_def() {
        let none = Overrides::new();
        let next = apply(
            &none,
            &[set("sasl.kerberos.min.time.before.relogin", "58000")],
            true,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(next["sasl.kerberos.min.time.before.relogin"], "58000");
        let (code, message) = apply(&none, &[set("broker.id", "3")], true).unwrap_err();
        assert_eq!(code, ResponseError::InvalidConfig);
        assert!(message.contains("broker.id"), "{message}");
        let (code, _) = apply(&none, &[set("num.io.threads", "0")], true).unwrap_err();
        assert_eq!(code, ResponseError::InvalidConfig, "below the least value");
        let (code, _) = apply(&none, &[set("num.io.threads", "4294967296")], true).unwrap_err();
        assert_eq!(code, ResponseError::InvalidConfig, "not an int");
        let deleted = apply(
            &next,
            &[Op::Delete("sasl.kerberos.min.time.before.relogin".into())],
            false,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(deleted.is_empty());
    }

    #[test]
    fn sources_say_where_a_dynamic_value_comes_from() {
        let own: Overrides = [("num.io.threads".into(), "4".into())].into();
        let default: Overrides = [
            ("num.io.threads".into(), "6".into()),
            ("message.max.bytes".into(), "100".into()),
        ]
        .into();
        let of = |values: &[(&Dynamic, String, i8)], name: &str| {
            values
                .iter()
                .find(|(d, _, _)| d.name == name)
                .map(|(_, v, s)| (v.clone(), *s))
        };
        let broker = dynamic_values(Some(&own), &default);
        assert_eq!(broker.len(), DYNAMIC.len());
        assert_eq!(
            of(&broker, "num.io.threads"),
            Some(("4".into(), DYNAMIC_BROKER_CONFIG))
        );
        assert_eq!(
            of(&broker, "message.max.bytes"),
            Some(("100".into(), DYNAMIC_DEFAULT_BROKER_CONFIG))
        );
        assert_eq!(
            of(&broker, "max.connections"),
            Some(("2147483647".into(), DEFAULT_CONFIG))
        );
        let cluster = dynamic_values(None, &default);
        assert_eq!(cluster.len(), 2, "the default describes what is set");
    }
}
