//! The table of the broker's settings: for each, its config-file key, flag,
//! kind, default and help. [`super::ConfigArgs`] takes its flags' help from
//! here, validation takes defaults and minimums from here, and
//! `--list-settings` prints it ([`listing`]) beside the failpoint names, one JSON
//! object a line, so a launcher that cannot link this crate (the harness) can
//! hold its own list to the broker's.
//!
//! A setting added to the broker goes here first; the unit tests in
//! `config.rs` fail until the flag parser agrees with the table.

use serde_json::{Value, json};

use crate::failpoints::Failpoint;

/// Kafka's default `socket.request.max.bytes`: a frame claiming more is refused.
pub const DEFAULT_MAX_REQUEST_BYTES: u32 = 100 * 1024 * 1024;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The config-file key (snake_case), and the field of `ConfigArgs`.
    pub name: &'static str,
    /// The command-line flag.
    pub flag: &'static str,
    pub kind: SettingKind,
    pub default: SettingDefault,
    pub help: &'static str,
}

pub(super) const CONFIG: Setting = Setting {
    name: "config",
    flag: "--config",
    kind: SettingKind::Path,
    default: SettingDefault::Unset,
    help: "A TOML file setting any of the keys below (snake_case); flags override it. \
           A flag only, not a key of that file",
};
pub(super) const NODE_ID: Setting = Setting {
    name: "node_id",
    flag: "--node-id",
    kind: SettingKind::Count { min: 0 },
    default: SettingDefault::Required,
    help: "This broker's id (Kafka's broker.id)",
};
pub(super) const LISTEN: Setting = Setting {
    name: "listen",
    flag: "--listen",
    kind: SettingKind::Address,
    default: SettingDefault::Text("127.0.0.1:9092"),
    help: "Address to bind; port 0 picks a free port, written to `<data-dir>/listening`",
};
pub(super) const ADVERTISED: Setting = Setting {
    name: "advertised",
    flag: "--advertised",
    kind: SettingKind::Address,
    default: SettingDefault::Unset,
    help: "Address clients and other brokers are told to use (defaults to the bound one)",
};
pub(super) const DATA_DIR: Setting = Setting {
    name: "data_dir",
    flag: "--data-dir",
    kind: SettingKind::Path,
    default: SettingDefault::Required,
    help: "Directory holding the partition logs, checkpoints and state-change.log",
};
pub(super) const ETCD: Setting = Setting {
    name: "etcd",
    flag: "--etcd",
    kind: SettingKind::Endpoints,
    default: SettingDefault::Required,
    help: "etcd endpoints, comma-separated",
};
pub(super) const PEERS: Setting = Setting {
    name: "peers",
    flag: "--peer",
    kind: SettingKind::Peers,
    default: SettingDefault::Unset,
    help: "`ID=HOST:PORT`: reach broker ID at this address instead of its registered one \
           (how the harness routes every broker-to-broker link through a proxy)",
};
pub(super) const LEASE_TTL_S: Setting = Setting {
    name: "lease_ttl_s",
    flag: "--lease-ttl-s",
    kind: SettingKind::Count { min: 1 },
    default: SettingDefault::Count(6),
    help: "etcd lease TTL in whole seconds (at least 1; 2 or more under load)",
};
pub(super) const SEGMENT_BYTES: Setting = Setting {
    name: "segment_bytes",
    flag: "--segment-bytes",
    kind: SettingKind::Count { min: 0 },
    default: SettingDefault::Count(1024 * 1024 * 1024),
    help: "Size at which a log segment rolls",
};
pub(super) const FLUSH_MESSAGES: Setting = Setting {
    name: "flush_messages",
    flag: "--flush-messages",
    kind: SettingKind::Count { min: 1 },
    // "Never": no count of appends reaches it.
    default: SettingDefault::Count(u64::MAX),
    help: "fsync after this many appended messages (1 = every append; default never)",
};
pub(super) const FLUSH_INTERVAL_MS: Setting = Setting {
    name: "flush_interval_ms",
    flag: "--flush-interval-ms",
    kind: SettingKind::Count { min: 0 },
    default: SettingDefault::Count(0),
    help: "fsync when this long has passed since the last flush (0 = never by time)",
};
pub(super) const TRUNCATION: Setting = Setting {
    name: "truncation",
    flag: "--truncation",
    kind: SettingKind::OneOf(&["high-watermark", "kip-101", "kip-279", "current"]),
    default: SettingDefault::Text("current"),
    help: "Which Kafka release's epoch and follower-truncation rules to follow",
};
pub(super) const CONTROLLER_EPOCH_FENCING: Setting = Setting {
    name: "controller_epoch_fencing",
    flag: "--controller-epoch-fencing",
    kind: SettingKind::Bool,
    default: SettingDefault::Bool(true),
    help: "KAFKA-532's controller-epoch checks, in etcd and at the brokers",
};
pub(super) const BROKER_EPOCH_FENCING: Setting = Setting {
    name: "broker_epoch_fencing",
    flag: "--broker-epoch-fencing",
    kind: SettingKind::Bool,
    default: SettingDefault::Bool(true),
    help: "KIP-380: a broker that re-registers within its lease is treated as failed and \
           restarted, leaving every ISR until it catches up (false: it keeps its ISR \
           memberships, as KAFKA-1120-era controllers let it)",
};
pub(super) const UNCLEAN_LEADER_ELECTION: Setting = Setting {
    name: "unclean_leader_election",
    flag: "--unclean-leader-election",
    kind: SettingKind::Bool,
    default: SettingDefault::Bool(false),
    help: "Elect any live replica when no ISR member is live (Kafka's \
           unclean.leader.election.enable)",
};
pub(super) const MIN_INSYNC_REPLICAS: Setting = Setting {
    name: "min_insync_replicas",
    flag: "--min-insync-replicas",
    kind: SettingKind::Count { min: 1 },
    default: SettingDefault::Count(1),
    help: "acks=all needs an ISR at least this large (Kafka's min.insync.replicas)",
};
pub(super) const MAX_REQUEST_BYTES: Setting = Setting {
    name: "max_request_bytes",
    flag: "--max-request-bytes",
    kind: SettingKind::Count { min: 0 },
    default: SettingDefault::Count(DEFAULT_MAX_REQUEST_BYTES as u64),
    help: "Largest request frame accepted (Kafka's socket.request.max.bytes)",
};
// Kafka's defaults (2.x) for the next three: 500 ms long poll, 10 s lag, 5 s
// checkpoints.
pub(super) const REPLICA_FETCH_WAIT_MAX_MS: Setting = Setting {
    name: "replica_fetch_wait_max_ms",
    flag: "--replica-fetch-wait-max-ms",
    kind: SettingKind::Count { min: 0 },
    default: SettingDefault::Count(500),
    help: "How long a follower's fetch waits at the leader for data (Kafka's \
           replica.fetch.wait.max.ms)",
};
pub(super) const REPLICA_LAG_TIME_MAX_MS: Setting = Setting {
    name: "replica_lag_time_max_ms",
    flag: "--replica-lag-time-max-ms",
    kind: SettingKind::Count { min: 1 },
    default: SettingDefault::Count(10_000),
    help: "A follower that has not caught up for this long leaves the ISR (Kafka's \
           replica.lag.time.max.ms)",
};
pub(super) const HW_CHECKPOINT_INTERVAL_MS: Setting = Setting {
    name: "hw_checkpoint_interval_ms",
    flag: "--hw-checkpoint-interval-ms",
    kind: SettingKind::Count { min: 1 },
    default: SettingDefault::Count(5000),
    help: "How often the high watermarks are checkpointed (Kafka's \
           replica.high.watermark.checkpoint.interval.ms)",
};

// ZooKeeper-era Kafka waited zookeeper.connection.timeout.ms for its
// coordinator at start; unset, it is zookeeper.session.timeout.ms, 18 s since
// Kafka 2.5 (KIP-537).
pub(super) const ETCD_CONNECT_TIMEOUT_MS: Setting = Setting {
    name: "etcd_connect_timeout_ms",
    flag: "--etcd-connect-timeout-ms",
    kind: SettingKind::Count { min: 1 },
    default: SettingDefault::Count(18_000),
    help: "How long a starting broker keeps retrying etcd before it gives up (Kafka's \
           zookeeper.connection.timeout.ms)",
};

pub(super) const PRODUCER_STATE_RECOVERY: Setting = Setting {
    name: "producer_state_recovery",
    flag: "--producer-state-recovery",
    kind: SettingKind::OneOf(&["kafka-5435", "current"]),
    default: SettingDefault::Text("current"),
    help: "How a log with no producer-state snapshot at or below its end rebuilds its \
           idempotent producers' state: `current` replays the log; `kafka-5435` starts \
           empty without reading the log, as Kafka 0.11.0.0 did before KAFKA-5435 (taking \
           the missing snapshot for an upgrade), so once that replica leads, a producer's \
           retry of a batch it already holds is appended a second time",
};

/// Every setting, in the order `--help` lists them.
pub const SETTINGS: &[Setting] = &[
    CONFIG,
    NODE_ID,
    LISTEN,
    ADVERTISED,
    DATA_DIR,
    ETCD,
    PEERS,
    LEASE_TTL_S,
    SEGMENT_BYTES,
    FLUSH_MESSAGES,
    FLUSH_INTERVAL_MS,
    TRUNCATION,
    CONTROLLER_EPOCH_FENCING,
    BROKER_EPOCH_FENCING,
    UNCLEAN_LEADER_ELECTION,
    MIN_INSYNC_REPLICAS,
    MAX_REQUEST_BYTES,
    REPLICA_FETCH_WAIT_MAX_MS,
    REPLICA_LAG_TIME_MAX_MS,
    HW_CHECKPOINT_INTERVAL_MS,
    ETCD_CONNECT_TIMEOUT_MS,
    PRODUCER_STATE_RECOVERY,
];

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

    /// `value`, else the default; refused below the minimum. The message for a
    /// minimum of 0 reads as a sign check, since only a signed field can fail it.
    pub(super) fn count<T>(&self, value: Option<T>) -> Result<T, super::ConfigError>
    where
        T: Copy + TryFrom<u64> + TryInto<u64>,
    {
        let SettingKind::Count { min } = self.kind else {
            unreachable!("setting {} is not a count", self.name)
        };
        let value = match (value, self.default) {
            (Some(value), _) => value,
            (None, SettingDefault::Count(default)) => T::try_from(default)
                .unwrap_or_else(|_| unreachable!("the default of {} fits its type", self.name)),
            (None, _) => return Err(super::ConfigError::Missing(self.name)),
        };
        match value.try_into() {
            Ok(n) if n >= min => Ok(value),
            _ if min == 0 => Err(super::invalid(self.name, "must be >= 0")),
            _ => Err(super::invalid(self.name, format!("must be at least {min}"))),
        }
    }

    /// `value`, else the default.
    pub(super) fn bool(&self, value: Option<bool>) -> bool {
        let SettingDefault::Bool(default) = self.default else {
            unreachable!("setting {} has no boolean default", self.name)
        };
        value.unwrap_or(default)
    }

    /// The default, for a setting whose default is text.
    pub(super) fn default_text(&self) -> &'static str {
        let SettingDefault::Text(default) = self.default else {
            unreachable!("setting {} has no text default", self.name)
        };
        default
    }

    /// `value`, or the error naming this required setting.
    pub(super) fn required<T>(&self, value: Option<T>) -> Result<T, super::ConfigError> {
        value.ok_or(super::ConfigError::Missing(self.name))
    }
}

/// What `--list-settings` prints, a JSON object a line: every setting, then
/// every failpoint `EPOCHAL_FAILPOINTS` may arm (`{"failpoint": name}`).
pub fn listing() -> Vec<Value> {
    let settings = SETTINGS.iter().map(Setting::to_json);
    let failpoints = Failpoint::ALL
        .iter()
        .map(|point| json!({ "failpoint": point.name() }));
    settings.chain(failpoints).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_is_one_json_object_a_line_for_each_setting_and_failpoint() {
        let lines = listing();
        assert_eq!(
            lines.len(),
            SETTINGS.len() + crate::failpoints::Failpoint::ALL.len()
        );
        let ttl = lines
            .iter()
            .find(|l| l["setting"] == "lease_ttl_s")
            .unwrap();
        assert_eq!(ttl["kind"], "count");
        assert_eq!(ttl["min"], 1);
        assert_eq!(ttl["default"], 6);
        assert_eq!(ttl["flag"], "--lease-ttl-s");
        let truncation = lines.iter().find(|l| l["setting"] == "truncation").unwrap();
        assert_eq!(truncation["kind"], "one-of");
        assert_eq!(truncation["values"][3], "current");
        let node_id = lines.iter().find(|l| l["setting"] == "node_id").unwrap();
        assert_eq!(node_id["required"], true);
        assert!(
            lines
                .iter()
                .any(|l| l["failpoint"] == "follower-truncate-to-hw")
        );
        assert!(lines.iter().all(|l| !l.to_string().contains('\n')));
    }
}
