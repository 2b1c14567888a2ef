//! The broker's configuration: command-line flags, an optional TOML file setting
//! the same keys, and the validated [`BrokerConfig`] the rest of the broker reads.
//!
//! Every setting is declared once, in [`SETTINGS`] (`settings.rs`): its name,
//! kind, default and help. The flags' help and the defaults and minimums applied
//! here come from that table, unit tests hold the flag parser to it, and
//! `epochal-broker --list-settings` prints it so a launcher (the harness, which
//! never links this crate) can check its own list against it.
//!
//! Flags win over the file; the file wins over defaults. The resolved config is
//! serializable back to TOML so a launcher can log exactly what ran. Settings that
//! the replication protocol reads (truncation rule, fencing, unclean election,
//! min ISR, fetch wait, lag time, checkpoint interval) are named after Kafka's.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Parser, ValueEnum};
use serde::{Deserialize, Serialize};

mod settings;

use settings::*;
pub use settings::{
    DEFAULT_MAX_REQUEST_BYTES, SETTINGS, Setting, SettingDefault, SettingKind, listing,
};

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

/// How a log rebuilds its idempotent producers' state when no producer-state
/// snapshot at or below its log end is left (after a crash before the first
/// snapshot, or a truncation below every snapshot kept).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ProducerStateRecovery {
    /// Kafka 0.11.0.0 before KAFKA-5435 (found in its release candidates,
    /// fixed in 0.11.0.0 by apache/kafka PRs #3306 and #3361): no snapshot was
    /// taken to mean the log predates idempotence, so the state started empty
    /// and the log was not replayed. A replica that then leads accepts a
    /// retried batch it already holds as new (an unknown producer may start at
    /// any sequence since KIP-360), and the batch is in the log twice.
    #[serde(rename = "kafka-5435")]
    #[value(name = "kafka-5435")]
    Kafka5435,
    /// Replay the log from its start (Kafka's `rebuildProducerState`).
    #[default]
    Current,
}

/// Every key the flags and the TOML file may set, with the help [`SETTINGS`]
/// gives it, and the `--list-settings` command. All optional here; required
/// ones and defaults are applied in [`ConfigArgs::resolve`].
#[derive(Parser, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[command(
    name = "epochal-broker",
    version,
    about = "Kafka-style broker with etcd in ZooKeeper's role"
)]
pub struct ConfigArgs {
    #[arg(long, value_name = "FILE", help = CONFIG.help)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    #[arg(long, help = NODE_ID.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<i32>,
    #[arg(long, value_name = "HOST:PORT", help = LISTEN.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    #[arg(long, value_name = "HOST:PORT", help = ADVERTISED.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertised: Option<String>,
    #[arg(long, value_name = "DIR", help = DATA_DIR.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[arg(long, value_name = "URL[,URL]", help = ETCD.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd: Option<String>,
    #[arg(long = "peer", value_name = "ID=HOST:PORT", help = PEERS.help)]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<String>,
    #[arg(long, help = LEASE_TTL_S.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl_s: Option<u64>,
    #[arg(long, help = SEGMENT_BYTES.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u64>,
    #[arg(long, help = FLUSH_MESSAGES.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_messages: Option<u64>,
    #[arg(long, help = FLUSH_INTERVAL_MS.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_interval_ms: Option<u64>,
    #[arg(long, value_enum, help = TRUNCATION.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncation: Option<Truncation>,
    #[arg(long, value_name = "true|false", help = CONTROLLER_EPOCH_FENCING.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_epoch_fencing: Option<bool>,
    #[arg(long, value_name = "true|false", help = BROKER_EPOCH_FENCING.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_epoch_fencing: Option<bool>,
    #[arg(long, value_name = "true|false", help = UNCLEAN_LEADER_ELECTION.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unclean_leader_election: Option<bool>,
    #[arg(long, help = MIN_INSYNC_REPLICAS.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_insync_replicas: Option<i32>,
    #[arg(long, help = MAX_REQUEST_BYTES.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<u32>,
    #[arg(long, help = REPLICA_FETCH_WAIT_MAX_MS.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_fetch_wait_max_ms: Option<u64>,
    #[arg(long, help = REPLICA_LAG_TIME_MAX_MS.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_lag_time_max_ms: Option<u64>,
    #[arg(long, help = HW_CHECKPOINT_INTERVAL_MS.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_checkpoint_interval_ms: Option<u64>,
    #[arg(long, help = ETCD_CONNECT_TIMEOUT_MS.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd_connect_timeout_ms: Option<u64>,
    #[arg(long, value_enum, help = PRODUCER_STATE_RECOVERY.help)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer_state_recovery: Option<ProducerStateRecovery>,
    /// Not a setting: print every setting and failpoint (JSON lines) and exit.
    #[arg(
        long,
        help = "Print every setting and failpoint as JSON lines, then exit"
    )]
    #[serde(skip)]
    pub list_settings: bool,
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
    pub broker_epoch_fencing: bool,
    pub unclean_leader_election: bool,
    pub min_insync_replicas: i32,
    pub max_request_bytes: u32,
    pub replica_fetch_wait_max_ms: u64,
    pub replica_lag_time_max_ms: u64,
    pub hw_checkpoint_interval_ms: u64,
    pub etcd_connect_timeout_ms: u64,
    pub producer_state_recovery: ProducerStateRecovery,
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
            broker_epoch_fencing: self.broker_epoch_fencing.or(file.broker_epoch_fencing),
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
            etcd_connect_timeout_ms: self
                .etcd_connect_timeout_ms
                .or(file.etcd_connect_timeout_ms),
            producer_state_recovery: self
                .producer_state_recovery
                .or(file.producer_state_recovery),
            list_settings: self.list_settings,
        }
    }

    fn validate(self) -> Result<BrokerConfig, ConfigError> {
        let node_id = NODE_ID.count(self.node_id)?;
        let listen = self
            .listen
            .unwrap_or_else(|| LISTEN.default_text().to_string());
        listen
            .parse::<SocketAddr>()
            .map_err(|e| invalid("listen", format!("{listen:?}: {e}")))?;
        if let Some(adv) = &self.advertised {
            split_host_port(adv)
                .ok_or_else(|| invalid("advertised", format!("{adv:?} is not HOST:PORT")))?;
        }
        let data_dir = DATA_DIR.required(self.data_dir)?;
        let etcd: Vec<String> = ETCD
            .required(self.etcd)?
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
        let truncation = match self.truncation {
            Some(truncation) => truncation,
            None => Truncation::from_str(TRUNCATION.default_text(), false)
                .unwrap_or_else(|e| unreachable!("the default truncation is a setting: {e}")),
        };
        let producer_state_recovery = match self.producer_state_recovery {
            Some(recovery) => recovery,
            None => ProducerStateRecovery::from_str(PRODUCER_STATE_RECOVERY.default_text(), false)
                .unwrap_or_else(|e| unreachable!("the default recovery is a setting: {e}")),
        };
        // Checked in this order so that, of several bad values, the one named
        // is the same as before the table existed.
        let lease_ttl_s = LEASE_TTL_S.count(self.lease_ttl_s)?;
        let min_insync_replicas = MIN_INSYNC_REPLICAS.count(self.min_insync_replicas)?;
        let flush_messages = FLUSH_MESSAGES.count(self.flush_messages)?;
        let hw_checkpoint_interval_ms =
            HW_CHECKPOINT_INTERVAL_MS.count(self.hw_checkpoint_interval_ms)?;
        let replica_lag_time_max_ms =
            REPLICA_LAG_TIME_MAX_MS.count(self.replica_lag_time_max_ms)?;
        Ok(BrokerConfig {
            node_id,
            listen,
            advertised: self.advertised,
            data_dir,
            etcd,
            peers,
            lease_ttl_s,
            segment_bytes: SEGMENT_BYTES.count(self.segment_bytes)?,
            flush_messages,
            flush_interval_ms: FLUSH_INTERVAL_MS.count(self.flush_interval_ms)?,
            truncation,
            controller_epoch_fencing: CONTROLLER_EPOCH_FENCING.bool(self.controller_epoch_fencing),
            broker_epoch_fencing: BROKER_EPOCH_FENCING.bool(self.broker_epoch_fencing),
            unclean_leader_election: UNCLEAN_LEADER_ELECTION.bool(self.unclean_leader_election),
            min_insync_replicas,
            max_request_bytes: MAX_REQUEST_BYTES.count(self.max_request_bytes)?,
            replica_fetch_wait_max_ms: REPLICA_FETCH_WAIT_MAX_MS
                .count(self.replica_fetch_wait_max_ms)?,
            replica_lag_time_max_ms,
            hw_checkpoint_interval_ms,
            etcd_connect_timeout_ms: ETCD_CONNECT_TIMEOUT_MS.count(self.etcd_connect_timeout_ms)?,
            producer_state_recovery,
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
            broker_epoch_fencing: Some(self.broker_epoch_fencing),
            unclean_leader_election: Some(self.unclean_leader_election),
            min_insync_replicas: Some(self.min_insync_replicas),
            max_request_bytes: Some(self.max_request_bytes),
            replica_fetch_wait_max_ms: Some(self.replica_fetch_wait_max_ms),
            replica_lag_time_max_ms: Some(self.replica_lag_time_max_ms),
            hw_checkpoint_interval_ms: Some(self.hw_checkpoint_interval_ms),
            etcd_connect_timeout_ms: Some(self.etcd_connect_timeout_ms),
            producer_state_recovery: Some(self.producer_state_recovery),
            list_settings: false,
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

    /// The flag parser and the table name the same settings with the same
    /// flags and help, so the table `--list-settings` prints is the one parsed.
    #[test]
    fn every_flag_is_a_row_of_the_settings_table_and_back() {
        use clap::CommandFactory;
        let command = ConfigArgs::command();
        let flags: Vec<(String, String, String)> = command
            .get_arguments()
            .filter(|a| !["list_settings", "help", "version"].contains(&a.get_id().as_str()))
            .map(|a| {
                (
                    a.get_id().to_string(),
                    format!("--{}", a.get_long().unwrap()),
                    a.get_help().map(|h| h.to_string()).unwrap_or_default(),
                )
            })
            .collect();
        let rows: Vec<(String, String, String)> = SETTINGS
            .iter()
            .map(|s| (s.name.into(), s.flag.into(), s.help.into()))
            .collect();
        assert_eq!(flags, rows);
    }

    /// Every row but the flag-only `config` is a key the file accepts and the
    /// printed config carries; and the `truncation` names are the parser's.
    #[test]
    fn the_table_names_the_file_keys_and_the_truncation_values() {
        let cfg = args(&[
            "--node-id",
            "1",
            "--data-dir",
            "/d",
            "--etcd",
            "http://e:1",
            "--advertised",
            "h:1",
            "--peer",
            "2=h:2",
            "--flush-messages",
            "1",
        ])
        .resolve()
        .unwrap();
        let printed: toml::Table = toml::from_str(&cfg.to_toml()).unwrap();
        let keys: Vec<&str> = printed.keys().map(String::as_str).collect();
        let mut names: Vec<&str> = SETTINGS
            .iter()
            .map(|s| s.name)
            .filter(|n| *n != "config")
            .collect();
        names.sort_unstable();
        assert_eq!(keys, names);
        let values: Vec<String> = Truncation::value_variants()
            .iter()
            .map(|v| v.to_possible_value().unwrap().get_name().to_string())
            .collect();
        assert_eq!(
            TRUNCATION.kind,
            SettingKind::OneOf(&["high-watermark", "kip-101", "kip-279", "current"])
        );
        let SettingKind::OneOf(names) = TRUNCATION.kind else {
            unreachable!()
        };
        assert_eq!(values, names);
        let values: Vec<String> = ProducerStateRecovery::value_variants()
            .iter()
            .map(|v| v.to_possible_value().unwrap().get_name().to_string())
            .collect();
        let SettingKind::OneOf(names) = PRODUCER_STATE_RECOVERY.kind else {
            unreachable!()
        };
        assert_eq!(values, names);
    }

    /// Unset settings take the table's defaults, and a value below a
    /// table minimum is refused naming the setting.
    #[test]
    fn defaults_and_minimums_come_from_the_table() {
        let cfg = args(&["--node-id", "1", "--data-dir", "/d", "--etcd", "e"])
            .resolve()
            .unwrap();
        assert_eq!(cfg.lease_ttl_s, 6);
        assert_eq!(cfg.flush_messages, u64::MAX);
        assert_eq!(cfg.max_request_bytes, DEFAULT_MAX_REQUEST_BYTES);
        assert_eq!(cfg.truncation, Truncation::Current);
        assert_eq!(cfg.producer_state_recovery, ProducerStateRecovery::Current);
        assert_eq!(cfg.listen, "127.0.0.1:9092");
        assert!(cfg.controller_epoch_fencing && !cfg.unclean_leader_election);
        for (flag, key) in [
            ("--min-insync-replicas", "min_insync_replicas"),
            ("--flush-messages", "flush_messages"),
            ("--replica-lag-time-max-ms", "replica_lag_time_max_ms"),
            ("--hw-checkpoint-interval-ms", "hw_checkpoint_interval_ms"),
        ] {
            let err = args(&[
                "--node-id",
                "1",
                "--data-dir",
                "/d",
                "--etcd",
                "e",
                flag,
                "0",
            ])
            .resolve()
            .unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key: k, reason } if *k == key && reason == "must be at least 1"),
                "{err}"
            );
        }
        let err = args(&["--node-id=-1", "--data-dir", "/d", "--etcd", "e"])
            .resolve()
            .unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { key: "node_id", .. }),
            "{err}"
        );
    }
}
