//! The broker's configuration: command-line flags, an optional TOML file setting
//! the same keys, and the validated [`BrokerConfig`] the rest of the broker reads.
//!
//! Every setting is declared once, in the table in `settings.rs`: its key and
//! type, flag, kind, default, help and codec. From that entry come its flag
//! and file key ([`ConfigArgs`]), its field of [`BrokerConfig`], its check and
//! default (`value.rs`) and its line of `epochal-broker --list-settings`
//! ([`SETTINGS`], [`listing`]), which a launcher (the harness, which never
//! links this crate) checks its own list against. `declare.rs` is the macro
//! that makes them; it names no setting.
//!
//! Flags win over the file; the file wins over defaults (`resolve.rs`). The
//! resolved config is serializable back to TOML so a launcher can log exactly
//! what ran. This file holds what those files share, and names none of them:
//! what a row of the table is ([`Setting`]), the values some settings choose
//! between, and [`ConfigError`]. Settings that
//! the replication protocol reads (truncation rule, fencing, unclean election,
//! min ISR, fetch wait, lag time, checkpoint interval) are named after Kafka's.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

mod declare;
mod resolve;
mod settings;
mod value;

pub use settings::{BrokerConfig, ConfigArgs, DEFAULT_MAX_REQUEST_BYTES, SETTINGS, listing};

/// Which release's follower-truncation rule the broker follows (broker/README.md, "Truncation settings").
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

/// How a new group coordinator reads its offsets partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OffsetsLoad {
    /// Kafka 0.11.0.0 before KAFKA-5600 (fixed in 0.11.0.1, apache/kafka
    /// PR #3538): the loader's loop over the log's reads took each group as
    /// loaded with the offsets of the first read it appeared in, so a group
    /// whose later commits were in later segments came back with an older
    /// commit, and its consumers rewound to it.
    #[serde(rename = "kafka-5600")]
    #[value(name = "kafka-5600")]
    Kafka5600,
    /// Every commit of the log, the last one winning.
    #[default]
    Current,
}

/// How many replicas acknowledge a group's offset commit before the
/// coordinator answers (Kafka's `offsets.commit.required.acks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OffsetsCommitAcks {
    /// -1, Kafka's default: the commit is in every in-sync replica of the
    /// offsets partition, so a new coordinator elected from the ISR has it.
    #[default]
    All,
    /// 1: the coordinator's own log alone. Kafka documents it as a setting
    /// not to change ("the default (-1) should not be overridden"); a commit
    /// acknowledged this way is lost when the coordinator fails before its
    /// followers fetched it, and the group rewinds.
    Leader,
}

impl OffsetsCommitAcks {
    /// The produce `acks` the commit's append waits for.
    pub fn acks(self) -> i16 {
        match self {
            OffsetsCommitAcks::All => -1,
            OffsetsCommitAcks::Leader => 1,
        }
    }
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

/// What a setting's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    /// `true` or `false`.
    Bool,
    /// A whole number, at least `min`.
    Count { min: u64 },
    /// One of these names.
    OneOf(&'static [&'static str]),
    /// `HOST:PORT`.
    Address,
    /// A file or directory.
    Path,
    /// etcd endpoint URLs, comma-separated.
    Endpoints,
    /// `ID=HOST:PORT`, repeatable (a list in the file).
    Peers,
}

/// What a setting is when neither a flag nor the file sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingDefault {
    /// The broker refuses to start without it.
    Required,
    /// Left unset; the help says what the broker does instead.
    Unset,
    Bool(bool),
    Count(u64),
    Text(&'static str),
}

/// One row of the settings table (`settings.rs`): what `--list-settings`
/// prints of a setting and the flag's help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The config-file key (snake_case), and the field of [`ConfigArgs`] and
    /// [`BrokerConfig`].
    pub name: &'static str,
    /// The command-line flag.
    pub flag: &'static str,
    pub kind: SettingKind,
    pub default: SettingDefault,
    pub help: &'static str,
}

impl SettingKind {
    /// The kind's name in `--list-settings`.
    pub fn name(self) -> &'static str {
        match self {
            SettingKind::Bool => "bool",
            SettingKind::Count { .. } => "count",
            SettingKind::OneOf(_) => "one-of",
            SettingKind::Address => "address",
            SettingKind::Path => "path",
            SettingKind::Endpoints => "endpoints",
            SettingKind::Peers => "peers",
        }
    }
}

impl Setting {
    /// One line of `--list-settings`.
    pub fn to_json(&self) -> Value {
        let mut line = json!({
            "setting": self.name,
            "flag": self.flag,
            "kind": self.kind.name(),
            "required": self.default == SettingDefault::Required,
            "default": match self.default {
                SettingDefault::Required | SettingDefault::Unset => Value::Null,
                SettingDefault::Bool(b) => json!(b),
                SettingDefault::Count(n) => json!(n),
                SettingDefault::Text(t) => json!(t),
            },
            "help": self.help,
        });
        match self.kind {
            SettingKind::Count { min } => line["min"] = json!(min),
            SettingKind::OneOf(names) => line["values"] = json!(names),
            _ => {}
        }
        line
    }

    /// The flag without its dashes, as clap names it.
    pub fn long(&self) -> &'static str {
        self.flag.strip_prefix("--").unwrap_or(self.flag)
    }

    /// The default, for a setting whose default is text (for the codecs,
    /// `value.rs`).
    fn default_text(&self) -> &'static str {
        let SettingDefault::Text(default) = self.default else {
            unreachable!("setting {} has no text default", self.name)
        };
        default
    }
}
