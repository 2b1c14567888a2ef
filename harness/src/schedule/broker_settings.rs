//! The broker's per-node settings and failpoint names a schedule may use. The one
//! place the harness keeps this list. The harness cannot read it from the broker
//! crate: it never depends on it (docs/architecture.md, "The one hard rule"). Instead
//! `tests/broker_settings_pinned.rs` runs the built `epochal-broker
//! --list-settings` and fails when this list and the broker's disagree.

/// What a setting's TOML value must be, so a wrong type fails at parse time
/// rather than as a broker that refuses to start mid-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    Bool,
    /// A non-negative integer.
    Count,
    /// One of the listed strings.
    OneOf(&'static [&'static str]),
}

/// Settings a schedule may set, in the broker config file's snake_case.
pub const BROKER_SETTINGS: &[(&str, SettingKind)] = &[
    ("lease_ttl_s", SettingKind::Count),
    ("segment_bytes", SettingKind::Count),
    ("flush_messages", SettingKind::Count),
    ("flush_interval_ms", SettingKind::Count),
    (
        "truncation",
        SettingKind::OneOf(&["high-watermark", "kip-101", "kip-279", "current"]),
    ),
    ("controller_epoch_fencing", SettingKind::Bool),
    ("broker_epoch_fencing", SettingKind::Bool),
    ("isr_join_fencing", SettingKind::Bool),
    ("unclean_leader_election", SettingKind::Bool),
    ("min_insync_replicas", SettingKind::Count),
    ("auto_create_topics_enable", SettingKind::Bool),
    ("num_partitions", SettingKind::Count),
    ("default_replication_factor", SettingKind::Count),
    ("max_request_bytes", SettingKind::Count),
    ("replica_fetch_wait_max_ms", SettingKind::Count),
    ("replica_lag_time_max_ms", SettingKind::Count),
    ("hw_checkpoint_interval_ms", SettingKind::Count),
    ("etcd_connect_timeout_ms", SettingKind::Count),
    (
        "producer_state_recovery",
        SettingKind::OneOf(&["kafka-5435", "current"]),
    ),
    ("offsets_topic_num_partitions", SettingKind::Count),
    ("offsets_topic_replication_factor", SettingKind::Count),
    ("transaction_state_num_partitions", SettingKind::Count),
    ("transaction_state_replication_factor", SettingKind::Count),
    ("transaction_partition_verification", SettingKind::Bool),
    ("transaction_timeout_fences_producer", SettingKind::Bool),
    (
        "offsets_commit_acks",
        SettingKind::OneOf(&["all", "leader"]),
    ),
    (
        "offsets_load",
        SettingKind::OneOf(&["kafka-5600", "current"]),
    ),
    ("group_initial_rebalance_delay_ms", SettingKind::Count),
    ("group_min_session_timeout_ms", SettingKind::Count),
    ("group_max_session_timeout_ms", SettingKind::Count),
];

impl SettingKind {
    pub fn accepts(self, value: &toml::Value) -> bool {
        match (self, value) {
            (SettingKind::Bool, toml::Value::Boolean(_)) => true,
            (SettingKind::Count, toml::Value::Integer(n)) => *n >= 0,
            (SettingKind::OneOf(names), toml::Value::String(s)) => names.contains(&s.as_str()),
            _ => false,
        }
    }
}

impl std::fmt::Display for SettingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingKind::Bool => f.write_str("true or false"),
            SettingKind::Count => f.write_str("a non-negative integer"),
            SettingKind::OneOf(names) => write!(f, "one of {}", names.join(", ")),
        }
    }
}

/// Broker settings the runtime sets itself (identity, addresses, the proxy
/// mesh); a schedule setting one would cut the node off the harness.
pub const HARNESS_OWNED_SETTINGS: &[&str] = &[
    "node_id",
    "listen",
    "advertised",
    "data_dir",
    "etcd",
    "peers",
    "config",
];

/// `EPOCHAL_FAILPOINTS` names the broker knows.
pub const FAILPOINTS: &[&str] = &[
    "controller-before-event",
    "controller-before-broker-loss",
    "controller-after-write",
    "leader-after-append",
    "leader-before-ack",
    "controller-before-campaign",
    "follower-truncate-to-hw",
    "follower-fetcher-dies",
    "shutdown-exits-at-once",
    "controller-election-ignores-isr",
    "leader-reads-past-high-watermark",
    "leader-and-isr-skips-epoch-check",
    "leader-acks-on-append",
    "stop-replica-keeps-log",
    "controller-drops-stop-replica-answer",
    "leader-omits-aborted-transactions",
];
