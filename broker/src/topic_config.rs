//! Per-topic configs ([clients]): the overrides a topic is created or altered
//! with, kept in etcd beside the topic as ZooKeeper-era Kafka kept them
//! (`/config/topics/<t>`: `{"version":1,"config":{"min.insync.replicas":"2"}}`),
//! checked as Kafka's `LogConfig.validate` checks them, and held by every
//! broker in a cache a watch keeps current (Kafka's brokers watched
//! `/config/changes` for the same purpose).
//!
//! Every topic config Kafka 3.x documents is taken (`defs.rs`). What each
//! does here:
//! - `min.insync.replicas`: the leader's acks=all check, per topic;
//! - `unclean.leader.election.enable`: the controller's election, per topic;
//! - `segment.bytes`: the size at which the topic's segments roll;
//! - `max.message.bytes`: the largest batch a produce appends
//!   (MESSAGE_TOO_LARGE);
//! - `cleanup.policy`: with `compact`, a produced record without a key is
//!   INVALID_RECORD (Kafka's `LogValidator`); the log itself never deletes
//!   or compacts. Kafka promises neither by a time (retention only allows a
//!   segment to go, some time after it rolled; compaction keeps at least
//!   each key's last value), so a log that keeps everything keeps both
//!   promises;
//! - the rest (retention, compaction tuning, roll by time, flush, format,
//!   timestamps, throttling): stored and described, not acted on (the
//!   broker's README lists each with what the broker does instead).

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Duration;

use etcd_client::{EventType, GetOptions, WatchOptions};
use tokio::sync::watch;

use crate::controller::metadata_store::{
    KeyKind, MetadataStore, Overrides, TopicConfigRecord, classify, topic_config_key,
    topic_configs_prefix,
};

mod defs;
pub use defs::{
    CLEANUP_POLICY, ConfigError, ConfigType, FLUSH_MESSAGES, FLUSH_MS, MAX_MESSAGE_BYTES,
    MIN_INSYNC_REPLICAS, SEGMENT_BYTES, TOPIC_CONFIGS, TopicConfigDef, UNCLEAN_LEADER_ELECTION,
    Values, definition, validate,
};

/// The broker settings topic configs default to.
#[derive(Clone, Copy, Debug)]
pub struct BrokerDefaults {
    pub min_insync_replicas: i32,
    pub unclean_leader_election: bool,
    pub segment_bytes: u64,
    /// `--flush-messages` (`u64::MAX`: never, by count).
    pub flush_messages: u64,
    /// `--flush-interval-ms` (0: never, by time).
    pub flush_interval_ms: u64,
}

/// What DescribeConfigs says of one config of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub def: &'static TopicConfigDef,
    pub value: String,
    /// Set on the topic (DYNAMIC_TOPIC_CONFIG), not a default.
    pub overridden: bool,
    /// What the topic would have without an override: the broker's value.
    pub broker_default: String,
    /// The broker's setting differs from Kafka's default (STATIC_BROKER_CONFIG).
    pub broker_set: bool,
}

/// Every topic's overrides as this broker last heard them, with the
/// broker's defaults: what the log and the produce path ask. Each entry
/// keeps the etcd revision it was read at, so an older watch event never
/// replaces a newer direct read; `None` is a topic known to have none.
pub struct TopicConfigs {
    defaults: BrokerDefaults,
    overrides: RwLock<BTreeMap<String, (i64, Option<Overrides>)>>,
}

impl TopicConfigs {
    pub fn new(defaults: BrokerDefaults) -> Self {
        TopicConfigs {
            defaults,
            overrides: RwLock::new(BTreeMap::new()),
        }
    }

    fn read<T>(&self, topic: &str, name: &str, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
        let overrides = self.overrides.read().unwrap_or_else(|p| p.into_inner());
        overrides
            .get(topic)
            .and_then(|(_, o)| o.as_ref())
            .and_then(|o| o.get(name))
            .and_then(|v| parse(v.trim()))
    }

    pub fn min_insync_replicas(&self, topic: &str) -> i32 {
        self.read(topic, MIN_INSYNC_REPLICAS, |v| v.parse().ok())
            .unwrap_or(self.defaults.min_insync_replicas)
    }

    /// `cleanup.policy` holds `compact`: the topic takes only keyed records
    /// (Kafka's `LogConfig.compact`; the broker's `log.cleanup.policy` is
    /// Kafka's default, `delete`).
    pub fn compacted(&self, topic: &str) -> bool {
        self.read(topic, CLEANUP_POLICY, |v| {
            Some(v.split(',').any(|p| p.trim() == "compact"))
        })
        .unwrap_or(false)
    }

    /// `max.message.bytes`: the largest batch a produce may append. This
    /// broker has no `message.max.bytes` setting, so the default is Kafka's.
    pub fn max_message_bytes(&self, topic: &str) -> usize {
        const KAFKA_DEFAULT: usize = 1_048_588;
        self.read(topic, MAX_MESSAGE_BYTES, |v| v.parse().ok())
            .unwrap_or(KAFKA_DEFAULT)
    }

    pub fn segment_bytes(&self, topic: &str) -> u64 {
        self.read(topic, SEGMENT_BYTES, |v| v.parse().ok())
            .unwrap_or(self.defaults.segment_bytes)
    }

    /// The broker default of `def`, as text. "Never" is `Long.MAX_VALUE`
    /// in Kafka's flush settings.
    fn default_of(&self, def: &TopicConfigDef) -> String {
        let never_if = |n: u64, never: u64| {
            if n == never {
                i64::MAX.to_string()
            } else {
                n.to_string()
            }
        };
        match def.name {
            MIN_INSYNC_REPLICAS => self.defaults.min_insync_replicas.to_string(),
            UNCLEAN_LEADER_ELECTION => self.defaults.unclean_leader_election.to_string(),
            SEGMENT_BYTES => self.defaults.segment_bytes.to_string(),
            FLUSH_MESSAGES => never_if(self.defaults.flush_messages, u64::MAX),
            FLUSH_MS => never_if(self.defaults.flush_interval_ms, 0),
            _ => def.kafka_default.to_owned(),
        }
    }

    /// Every config of `topic` given `overrides` (what etcd holds).
    pub fn describe(&self, overrides: &Overrides) -> Vec<Described> {
        TOPIC_CONFIGS
            .iter()
            .map(|def| {
                let default = self.default_of(def);
                Described {
                    def,
                    value: overrides.get(def.name).unwrap_or(&default).clone(),
                    overridden: overrides.contains_key(def.name),
                    broker_set: default != def.kafka_default,
                    broker_default: default,
                }
            })
            .collect()
    }

    /// Takes `topic`'s overrides as etcd held them at `revision`, unless a
    /// later revision of them is held already.
    pub fn set_at(&self, topic: &str, revision: i64, overrides: Option<Overrides>) {
        let mut all = self.overrides.write().unwrap_or_else(|p| p.into_inner());
        if all.get(topic).is_none_or(|(held, _)| *held <= revision) {
            all.insert(topic.to_owned(), (revision, overrides));
        }
    }

    /// Forgets `topic` (its log was deleted): a topic created later under
    /// the same name has its configs read again before its first append.
    pub fn forget(&self, topic: &str) {
        self.overrides
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(topic);
    }

    fn replace_all(&self, all: BTreeMap<String, (i64, Option<Overrides>)>) {
        *self.overrides.write().unwrap_or_else(|p| p.into_inner()) = all;
    }

    /// Reads from etcd the configs of each of `topics` this broker has not
    /// heard of yet, before it becomes a replica of them: a topic created
    /// with configs must have them from its first append, not once the watch
    /// catches up (Kafka reads a topic's config when it creates its log).
    /// A topic etcd cannot be asked about now keeps the defaults until the
    /// watch brings its configs.
    pub async fn ensure_read(&self, store: &MetadataStore, topics: Vec<String>) {
        for topic in topics {
            let known = self
                .overrides
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&topic);
            if known {
                continue;
            }
            let key = topic_config_key(&topic);
            match store.client().get(key.clone(), None).await {
                Ok(resp) => {
                    let revision = resp.header().map_or(0, |h| h.revision());
                    match resp.kvs().first() {
                        Some(kv) => {
                            let overrides = parse(&key, kv.value()).map(|(_, o)| o);
                            self.set_at(&topic, kv.mod_revision(), overrides);
                        }
                        None => self.set_at(&topic, revision, None),
                    }
                }
                Err(e) => tracing::warn!(%topic, %e, "could not read the topic's configs"),
            }
        }
    }
}

/// How long the watch waits before it reads etcd again after losing it.
const REWATCH_AFTER: Duration = Duration::from_millis(500);

/// Keeps `configs` current until `shutdown`: reads every topic's configs,
/// then follows changes; when etcd is lost (a partition, a restart) it reads
/// them all again once etcd answers, so nothing changed meanwhile is missed.
pub async fn watch_topic_configs(
    store: MetadataStore,
    configs: std::sync::Arc<TopicConfigs>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let followed = follow(&store, &configs);
        tokio::select! {
            _ = shutdown.changed() => return,
            why = followed => tracing::info!(%why, "topic config watch lost; reading again"),
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(REWATCH_AFTER) => {}
        }
    }
}

/// Reads all, then applies changes until the watch fails; why it ended.
async fn follow(store: &MetadataStore, configs: &TopicConfigs) -> String {
    let mut client = store.client();
    let all = match client
        .get(
            topic_configs_prefix(),
            Some(GetOptions::new().with_prefix()),
        )
        .await
    {
        Ok(r) => r,
        Err(e) => return e.to_string(),
    };
    let revision = all.header().map_or(0, |h| h.revision());
    configs.replace_all(
        all.kvs()
            .iter()
            .filter_map(|kv| {
                let (topic, o) = parse(kv.key_str().ok()?, kv.value())?;
                Some((topic, (kv.mod_revision(), Some(o))))
            })
            .collect(),
    );
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(revision + 1);
    let mut stream = match client.watch(topic_configs_prefix(), Some(options)).await {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    loop {
        let resp = match stream.message().await {
            Ok(Some(r)) if !r.canceled() => r,
            Ok(Some(r)) => return format!("cancelled: {}", r.cancel_reason()),
            Ok(None) => return "watch ended".into(),
            Err(e) => return e.to_string(),
        };
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let Ok(key) = kv.key_str() else { continue };
            let KeyKind::TopicConfig(topic) = classify(key) else {
                continue;
            };
            if event.event_type() == EventType::Delete {
                configs.set_at(&topic, kv.mod_revision(), None);
            } else if let Some((_, o)) = parse(key, kv.value()) {
                configs.set_at(&topic, kv.mod_revision(), Some(o));
            }
        }
    }
}

fn parse(key: &str, value: &[u8]) -> Option<(String, Overrides)> {
    let KeyKind::TopicConfig(topic) = classify(key) else {
        return None;
    };
    match serde_json::from_slice::<TopicConfigRecord>(value) {
        Ok(r) => Some((topic, r.config)),
        Err(e) => {
            tracing::warn!(%key, %e, "ignoring malformed topic configs");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_checked_as_kafka_checks_them() {
        assert!(validate("min.insync.replicas", "2").is_ok());
        assert!(validate("min.insync.replicas", "0").is_err());
        assert!(validate("min.insync.replicas", "two").is_err());
        assert!(validate("unclean.leader.election.enable", "TRUE").is_ok());
        assert!(validate("unclean.leader.election.enable", "yes").is_err());
        assert!(validate("segment.bytes", "13").is_err());
        assert!(validate("segment.bytes", "3000000000").is_err(), "INT");
        assert!(validate("retention.ms", "-1").is_ok());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "shred").is_err());
        assert_eq!(
            validate("no.such", "1").unwrap_err().to_string(),
            "Unknown topic config name: no.such"
        );
    }

    /// The topic configs Kafka documents are taken (checked as Kafka's
    /// `LogConfig` checks them) and described with Kafka's defaults, not
    /// refused as unknown, whether the broker acts on them or not.
    #[test]
    fn the_topic_configs_kafka_documents_are_taken_and_described() {
        for (name, value) in [
            ("compression.type", "lz4"),
            ("compression.type", "producer"),
            ("message.format.version", "2.8"),
            ("message.format.version", "0.10.2-IV0"),
            ("max.message.bytes", "1000"),
            ("retention.ms", "86400000"),
            ("segment.bytes", "1048576"),
            ("min.insync.replicas", "2"),
            ("segment.ms", "3600000"),
            ("flush.messages", "1"),
            ("message.timestamp.type", "LogAppendTime"),
            ("min.cleanable.dirty.ratio", "0.25"),
            ("delete.retention.ms", "0"),
            ("preallocate", "true"),
            ("leader.replication.throttled.replicas", "0:1,1:2"),
            ("follower.replication.throttled.replicas", "*"),
        ] {
            assert_eq!(validate(name, value), Ok(()), "{name}={value}");
        }
        for (name, value) in [
            ("compression.type", "brotli"),
            ("message.timestamp.type", "Now"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("max.message.bytes", "-1"),
            ("message.format.version", "latest"),
            ("leader.replication.throttled.replicas", "0-1"),
        ] {
            assert!(validate(name, value).is_err(), "{name}={value}");
        }
        let configs = TopicConfigs::new(BrokerDefaults {
            min_insync_replicas: 1,
            unclean_leader_election: false,
            segment_bytes: 1 << 30,
            flush_messages: u64::MAX,
            flush_interval_ms: 0,
        });
        let described = configs.describe(&Overrides::new());
        let value = |name: &str| {
            described
                .iter()
                .find(|d| d.def.name == name)
                .map(|d| d.value.clone())
        };
        assert_eq!(value("max.message.bytes").as_deref(), Some("1048588"));
        assert_eq!(value("compression.type").as_deref(), Some("producer"));
        assert_eq!(
            value("message.timestamp.type").as_deref(),
            Some("CreateTime")
        );
        assert_eq!(configs.max_message_bytes("t"), 1_048_588);
        configs.set_at(
            "t",
            1,
            Some([("max.message.bytes".into(), "100".into())].into()),
        );
        assert_eq!(configs.max_message_bytes("t"), 100);
    }

    #[test]
    fn an_override_wins_over_the_broker_default_and_goes_with_its_topic() {
        let configs = TopicConfigs::new(BrokerDefaults {
            min_insync_replicas: 1,
            unclean_leader_election: false,
            segment_bytes: 1 << 20,
            flush_messages: u64::MAX,
            flush_interval_ms: 0,
        });
        assert_eq!(configs.min_insync_replicas("t"), 1);
        configs.set_at(
            "t",
            5,
            Some([("min.insync.replicas".into(), "3".into())].into()),
        );
        assert_eq!(configs.min_insync_replicas("t"), 3);
        assert_eq!(configs.min_insync_replicas("u"), 1);
        let described = configs.describe(&[("min.insync.replicas".into(), "3".into())].into());
        let seg = described
            .iter()
            .find(|d| d.def.name == SEGMENT_BYTES)
            .unwrap();
        assert_eq!(
            (seg.value.as_str(), seg.overridden, seg.broker_set),
            ("1048576", false, true)
        );
        configs.set_at("t", 4, None);
        assert_eq!(
            configs.min_insync_replicas("t"),
            3,
            "an older event does not undo a newer read"
        );
        configs.set_at("t", 6, None);
        assert_eq!(configs.min_insync_replicas("t"), 1);
    }
}
