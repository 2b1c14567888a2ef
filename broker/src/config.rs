//! The broker's configuration: command-line flags, an optional TOML file setting
//! the same keys, and the validated [`BrokerConfig`] the rest of the broker reads.
//!
//! Flags win over the file; the file wins over defaults. The resolved config is
//! serializable back to TOML so a launcher can log exactly what ran. Settings that
//! the replication protocol reads (truncation rule, fencing, unclean election,
//! min ISR, fetch wait, lag time, checkpoint interval) are named after Kafka's.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde::{Deserialize, Serialize};

/// Kafka's default `socket.request.max.bytes`: a frame claiming more is refused.
pub const DEFAULT_MAX_REQUEST_BYTES: u32 = 100 * 1024 * 1024;

/// Which release's follower-truncation rule the broker follows (DESIGN.md's epoch table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Truncation {
    /// Kafka ≤ 0.10: a new follower truncates to its high watermark.
    HighWatermark,
    /// Kafka 0.11–1.1: OffsetsForLeaderEpoch answers one offset (KIP-101).
    #[serde(rename = "kip-101")]
    #[value(name = "kip-101")]
    Kip101,
    /// Kafka 2.0: answers `(largest epoch ≤ asked, its end offset)` (KIP-279).
    #[serde(rename = "kip-279")]
    #[value(name = "kip-279")]
    Kip279,
    /// Kafka 2.1+: KIP-279 plus KAFKA-7415 and KAFKA-7164.
    Current,
}

/// Every key the flags and the TOML file may set. All optional here; required
/// ones are checked in [`ConfigArgs::resolve`].
#[derive(Parser, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[command(
    name = "epochal-broker",
    version,
    about = "Kafka-style broker with etcd in ZooKeeper's role"
)]
pub struct ConfigArgs {
    /// A TOML file setting any of the keys below (snake_case); flags override it.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// This broker's id (Kafka's broker.id).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<i32>,
    /// Address to bind; port 0 picks a free port, written to `<data-dir>/listening`.
    #[arg(long, value_name = "HOST:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Address clients and other brokers are told to use (defaults to the bound one).
    #[arg(long, value_name = "HOST:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertised: Option<String>,
    /// Directory holding the partition logs, checkpoints and state-change.log.
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// etcd endpoints, comma-separated.
    #[arg(long, value_name = "URL[,URL]")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd: Option<String>,
    /// `ID=HOST:PORT`: reach broker ID at this address instead of its registered one
    /// (how the harness routes every broker-to-broker link through a proxy).
    #[arg(long = "peer", value_name = "ID=HOST:PORT")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<String>,
    /// etcd lease TTL in whole seconds (at least 1; 2 or more under load).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl_s: Option<u64>,
    /// Size at which a log segment rolls.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u64>,
    /// fsync after this many appended messages (1 = every append).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_messages: Option<u64>,
    /// fsync when this long has passed since the last flush (0 = never by time).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_interval_ms: Option<u64>,
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncation: Option<Truncation>,
    #[arg(long, value_name = "true|false")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_epoch_fencing: Option<bool>,
    #[arg(long, value_name = "true|false")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unclean_leader_election: Option<bool>,
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_insync_replicas: Option<i32>,
    /// Largest request frame accepted (Kafka's socket.request.max.bytes).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<u32>,
    /// How long a follower's fetch waits at the leader for data (Kafka's
    /// replica.fetch.wait.max.ms).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_fetch_wait_max_ms: Option<u64>,
    /// A follower that has not caught up for this long leaves the ISR (Kafka's
    /// replica.lag.time.max.ms).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_lag_time_max_ms: Option<u64>,
    /// How often the high watermarks are checkpointed (Kafka's
    /// replica.high.watermark.checkpoint.interval.ms).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_checkpoint_interval_ms: Option<u64>,
}

/// The validated configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listen: String,
    pub advertised: Option<String>,
    pub data_dir: PathBuf,
    pub etcd: Vec<String>,
    /// Broker id → address override, from `--peer`.
    pub peers: BTreeMap<i32, String>,
    pub lease_ttl_s: u64,
    pub segment_bytes: u64,
    pub flush_messages: u64,
    pub flush_interval_ms: u64,
    pub truncation: Truncation,
    pub controller_epoch_fencing: bool,
    pub unclean_leader_election: bool,
    pub min_insync_replicas: i32,
    pub max_request_bytes: u32,
    pub replica_fetch_wait_max_ms: u64,
    pub replica_lag_time_max_ms: u64,
    pub hw_checkpoint_interval_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing config file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("missing required setting `{0}` (flag or config file)")]
    Missing(&'static str),
    #[error("invalid setting `{key}`: {reason}")]
    Invalid { key: &'static str, reason: String },
}

impl ConfigArgs {
    /// Read the TOML file (if any) and merge it under the flags.
    pub fn resolve(self) -> Result<BrokerConfig, ConfigError> {
        let file = match &self.config {
            Some(path) => load_file(path)?,
            None => ConfigArgs::default(),
        };
        let merged = self.merge_over(file);
        merged.validate()
    }

    fn merge_over(self, file: ConfigArgs) -> ConfigArgs {
        ConfigArgs {
            config: self.config,
            node_id: self.node_id.or(file.node_id),
            listen: self.listen.or(file.listen),
            advertised: self.advertised.or(file.advertised),
            data_dir: self.data_dir.or(file.data_dir),
            etcd: self.etcd.or(file.etcd),
            peers: if self.peers.is_empty() {
                file.peers
            } else {
                self.peers
            },
            lease_ttl_s: self.lease_ttl_s.or(file.lease_ttl_s),
            segment_bytes: self.segment_bytes.or(file.segment_bytes),
            flush_messages: self.flush_messages.or(file.flush_messages),
            flush_interval_ms: self.flush_interval_ms.or(file.flush_interval_ms),
            truncation: self.truncation.or(file.truncation),
            controller_epoch_fencing: self
                .controller_epoch_fencing
                .or(file.controller_epoch_fencing),
            unclean_leader_election: self
                .unclean_leader_election
                .or(file.unclean_leader_election),
            min_insync_replicas: self.min_insync_replicas.or(file.min_insync_replicas),
            max_request_bytes: self.max_request_bytes.or(file.max_request_bytes),
            replica_fetch_wait_max_ms: self
                .replica_fetch_wait_max_ms
                .or(file.replica_fetch_wait_max_ms),
            replica_lag_time_max_ms: self
                .replica_lag_time_max_ms
                .or(file.replica_lag_time_max_ms),
            hw_checkpoint_interval_ms: self
                .hw_checkpoint_interval_ms
                .or(file.hw_checkpoint_interval_ms),
        }
    }

    fn validate(self) -> Result<BrokerConfig, ConfigError> {
        let node_id = self.node_id.ok_or(ConfigError::Missing("node_id"))?;
        if node_id < 0 {
            return Err(invalid("node_id", "must be >= 0"));
        }
        let listen = self.listen.unwrap_or_else(|| "127.0.0.1:9092".to_string());
        listen
            .parse::<SocketAddr>()
            .map_err(|e| invalid("listen", format!("{listen:?}: {e}")))?;
        if let Some(adv) = &self.advertised {
            split_host_port(adv)
                .ok_or_else(|| invalid("advertised", format!("{adv:?} is not HOST:PORT")))?;
        }
        let data_dir = self.data_dir.ok_or(ConfigError::Missing("data_dir"))?;
        let etcd: Vec<String> = self
            .etcd
            .ok_or(ConfigError::Missing("etcd"))?
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if etcd.is_empty() {
            return Err(invalid("etcd", "no endpoint given"));
        }
        let mut peers = BTreeMap::new();
        for p in &self.peers {
            let (id, addr) = p
                .split_once('=')
                .ok_or_else(|| invalid("peer", format!("{p:?} is not ID=HOST:PORT")))?;
            let id: i32 = id
                .parse()
                .map_err(|_| invalid("peer", format!("{p:?}: bad broker id")))?;
            split_host_port(addr).ok_or_else(|| invalid("peer", format!("{p:?}: bad address")))?;
            peers.insert(id, addr.to_string());
        }
        let lease_ttl_s = self.lease_ttl_s.unwrap_or(6);
        if lease_ttl_s < 1 {
            return Err(invalid("lease_ttl_s", "must be at least 1"));
        }
        let min_insync_replicas = self.min_insync_replicas.unwrap_or(1);
        if min_insync_replicas < 1 {
            return Err(invalid("min_insync_replicas", "must be at least 1"));
        }
        let flush_messages = self.flush_messages.unwrap_or(u64::MAX);
        if flush_messages < 1 {
            return Err(invalid("flush_messages", "must be at least 1"));
        }
        let hw_checkpoint_interval_ms = self.hw_checkpoint_interval_ms.unwrap_or(5000);
        if hw_checkpoint_interval_ms < 1 {
            return Err(invalid("hw_checkpoint_interval_ms", "must be at least 1"));
        }
        let replica_lag_time_max_ms = self.replica_lag_time_max_ms.unwrap_or(10_000);
        if replica_lag_time_max_ms < 1 {
            return Err(invalid("replica_lag_time_max_ms", "must be at least 1"));
        }
        Ok(BrokerConfig {
            node_id,
            listen,
            advertised: self.advertised,
            data_dir,
            etcd,
            peers,
            lease_ttl_s,
            segment_bytes: self.segment_bytes.unwrap_or(1024 * 1024 * 1024),
            flush_messages,
            flush_interval_ms: self.flush_interval_ms.unwrap_or(0),
            truncation: self.truncation.unwrap_or(Truncation::Current),
            controller_epoch_fencing: self.controller_epoch_fencing.unwrap_or(true),
            unclean_leader_election: self.unclean_leader_election.unwrap_or(false),
            min_insync_replicas,
            max_request_bytes: self.max_request_bytes.unwrap_or(DEFAULT_MAX_REQUEST_BYTES),
            // Kafka's defaults (2.x): 500 ms long poll, 10 s lag, 5 s checkpoints.
            replica_fetch_wait_max_ms: self.replica_fetch_wait_max_ms.unwrap_or(500),
            replica_lag_time_max_ms,
            hw_checkpoint_interval_ms,
        })
    }
}

impl BrokerConfig {
    /// The resolved settings as a config file: logged at start so a run records
    /// what it used, and readable back through `--config` to the same settings.
    pub fn to_toml(&self) -> String {
        let args = ConfigArgs {
            config: None,
            node_id: Some(self.node_id),
            listen: Some(self.listen.clone()),
            advertised: self.advertised.clone(),
            data_dir: Some(self.data_dir.clone()),
            etcd: Some(self.etcd.join(",")),
            peers: self
                .peers
                .iter()
                .map(|(id, addr)| format!("{id}={addr}"))
                .collect(),
            lease_ttl_s: Some(self.lease_ttl_s),
            segment_bytes: Some(self.segment_bytes),
            // "Never" is u64::MAX, which TOML integers (i64) cannot hold: omit it.
            flush_messages: (self.flush_messages != u64::MAX).then_some(self.flush_messages),
            flush_interval_ms: Some(self.flush_interval_ms),
            truncation: Some(self.truncation),
            controller_epoch_fencing: Some(self.controller_epoch_fencing),
            unclean_leader_election: Some(self.unclean_leader_election),
            min_insync_replicas: Some(self.min_insync_replicas),
            max_request_bytes: Some(self.max_request_bytes),
            replica_fetch_wait_max_ms: Some(self.replica_fetch_wait_max_ms),
            replica_lag_time_max_ms: Some(self.replica_lag_time_max_ms),
            hw_checkpoint_interval_ms: Some(self.hw_checkpoint_interval_ms),
        };
        toml::to_string(&args).unwrap_or_else(|e| format!("# unprintable config: {e}"))
    }
}

fn load_file(path: &Path) -> Result<ConfigArgs, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| ConfigError::Parse {
        path: path.to_path_buf(),
        source: Box::new(source),
    })
}

fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

/// Split `host:port` (host may be a name); None when the port is missing or bad.
pub fn split_host_port(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host.to_string(), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> ConfigArgs {
        let mut v = vec!["epochal-broker"];
        v.extend_from_slice(list);
        ConfigArgs::try_parse_from(v).unwrap()
    }

    #[test]
    fn flags_override_file_and_defaults_fill_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.toml");
        std::fs::write(
            &file,
            "node_id = 3\ndata_dir = \"/tmp/x\"\netcd = \"http://a:1,http://b:2\"\nlease_ttl_s = 9\n\
             truncation = \"kip-279\"\npeers = [\"2=127.0.0.1:7000\"]\n",
        )
        .unwrap();
        let cfg = args(&[
            "--config",
            file.to_str().unwrap(),
            "--lease-ttl-s",
            "2",
            "--truncation",
            "kip-101",
        ])
        .resolve()
        .unwrap();
        assert_eq!(cfg.node_id, 3);
        assert_eq!(cfg.lease_ttl_s, 2);
        assert_eq!(cfg.etcd, vec!["http://a:1", "http://b:2"]);
        assert_eq!(
            cfg.peers.get(&2).map(String::as_str),
            Some("127.0.0.1:7000")
        );
        assert_eq!(cfg.truncation, Truncation::Kip101);
        assert!(cfg.controller_epoch_fencing);
    }

    #[test]
    fn bool_settings_take_a_value_and_missing_required_keys_are_named() {
        let cfg = args(&[
            "--node-id",
            "1",
            "--data-dir",
            "/d",
            "--etcd",
            "http://e:1",
            "--controller-epoch-fencing",
            "false",
            "--unclean-leader-election",
            "true",
        ])
        .resolve()
        .unwrap();
        assert!(!cfg.controller_epoch_fencing);
        assert!(cfg.unclean_leader_election);
        let err = args(&["--node-id", "1"]).resolve().unwrap_err();
        assert!(matches!(err, ConfigError::Missing("data_dir")), "{err}");
    }

    #[test]
    fn the_printed_config_reads_back_to_the_same_settings() {
        let cfg = args(&[
            "--node-id",
            "2",
            "--data-dir",
            "/d",
            "--etcd",
            "http://e:1,http://f:2",
            "--peer",
            "1=127.0.0.1:9001",
            "--peer",
            "3=127.0.0.1:9003",
            "--truncation",
            "high-watermark",
        ])
        .resolve()
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("printed.toml");
        std::fs::write(&file, cfg.to_toml()).unwrap();
        let back = args(&["--config", file.to_str().unwrap()])
            .resolve()
            .unwrap();
        assert_eq!(back, cfg, "printed:\n{}", cfg.to_toml());
    }

    #[test]
    fn unknown_file_keys_and_zero_ttl_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.toml");
        std::fs::write(&file, "node_id = 1\nbogus = 2\n").unwrap();
        let err = args(&["--config", file.to_str().unwrap()])
            .resolve()
            .unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
        let err = args(&[
            "--node-id",
            "1",
            "--data-dir",
            "/d",
            "--etcd",
            "e",
            "--lease-ttl-s",
            "0",
        ])
        .resolve()
        .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    key: "lease_ttl_s",
                    ..
                }
            ),
            "{err}"
        );
    }
}
