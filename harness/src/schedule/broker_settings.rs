//! The broker's per-node settings and failpoint names a schedule may use. The one
//! place this list lives; it mirrors the flag table and the failpoint table in
//! broker/README.md ("Running", "Failpoints") — update both together. The harness
//! cannot read them from the broker crate: it never depends on it (DESIGN.md).

/// Settings a schedule may set, in the broker config file's snake_case.
pub const BROKER_SETTINGS: &[&str] = &[
    "lease_ttl_s",
    "segment_bytes",
    "flush_messages",
    "flush_interval_ms",
    "truncation",
    "controller_epoch_fencing",
    "unclean_leader_election",
    "min_insync_replicas",
    "max_request_bytes",
    "replica_fetch_wait_max_ms",
    "replica_lag_time_max_ms",
    "hw_checkpoint_interval_ms",
];

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
];
