//! The table of the broker's settings, each declared once: its config-file
//! key and the type the broker reads, its flag, kind, default and help, and
//! the codec (`value.rs`) that checks and defaults it. [`broker_settings!`]
//! makes the rest from this table (see `declare.rs`): the flags
//! ([`ConfigArgs`]), the file's keys, the resolved [`BrokerConfig`], and the
//! rows `--list-settings` prints ([`listing`]) beside the failpoint names, one
//! JSON object a line, so a launcher that cannot link this crate (the harness)
//! can hold its own list to the broker's.
//!
//! Adding a setting is one entry below; the harness's pinned list
//! (`harness/src/schedule/broker_settings.rs`) then fails until it is told.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::declare::broker_settings;
use super::value::{BindAddress, Choice, Count, Endpoints, HostPort, Peers, Required, Switch};
use super::{
    OffsetsCommitAcks, OffsetsLoad, ProducerStateRecovery, Setting, SettingDefault, SettingKind,
    Truncation,
};
use crate::failpoints::Failpoint;

/// Kafka's default `socket.request.max.bytes`: a frame claiming more is refused.
pub const DEFAULT_MAX_REQUEST_BYTES: u32 = 100 * 1024 * 1024;

broker_settings! {
    #[arg(value_name = "FILE")]
    config: Option<PathBuf> {
        flag: "--config",
        kind: SettingKind::Path,
        default: SettingDefault::Unset,
        help: "A TOML file setting any of the keys below (snake_case); flags override it. \
               A flag only, not a key of that file",
    }
    node_id: Option<i32> => i32, by Count {
        flag: "--node-id",
        kind: SettingKind::Count { min: 0 },
        default: SettingDefault::Required,
        help: "This broker's id (Kafka's broker.id)",
    }
    #[arg(value_name = "HOST:PORT")]
    listen: Option<String> => String, by BindAddress {
        flag: "--listen",
        kind: SettingKind::Address,
        default: SettingDefault::Text("127.0.0.1:9092"),
        help: "Address to bind; port 0 picks a free port, written to `<data-dir>/listening`",
    }
    #[arg(value_name = "HOST:PORT")]
    advertised: Option<String> => Option<String>, by HostPort {
        flag: "--advertised",
        kind: SettingKind::Address,
        default: SettingDefault::Unset,
        help: "Address clients and other brokers are told to use (defaults to the bound one)",
    }
    #[arg(value_name = "DIR")]
    data_dir: Option<PathBuf> => PathBuf, by Required {
        flag: "--data-dir",
        kind: SettingKind::Path,
        default: SettingDefault::Required,
        help: "Directory holding the partition logs, checkpoints and state-change.log",
    }
    #[arg(value_name = "URL[,URL]")]
    etcd: Option<String> => Vec<String>, by Endpoints {
        flag: "--etcd",
        kind: SettingKind::Endpoints,
        default: SettingDefault::Required,
        help: "etcd endpoints, comma-separated",
    }
    /// Broker id → address override, from `--peer`.
    #[arg(value_name = "ID=HOST:PORT")]
    peers: Vec<String> => BTreeMap<i32, String>, by Peers {
        flag: "--peer",
        kind: SettingKind::Peers,
        default: SettingDefault::Unset,
        help: "`ID=HOST:PORT`: reach broker ID at this address instead of its registered one \
               (how the harness routes every broker-to-broker link through a proxy)",
    }
    lease_ttl_s: Option<u64> => u64, by Count {
        flag: "--lease-ttl-s",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(6),
        help: "etcd lease TTL in whole seconds (at least 1; 2 or more under load)",
    }
    segment_bytes: Option<u64> => u64, by Count {
        flag: "--segment-bytes",
        kind: SettingKind::Count { min: 0 },
        default: SettingDefault::Count(1024 * 1024 * 1024),
        help: "Size at which a log segment rolls",
    }
    flush_messages: Option<u64> => u64, by Count {
        flag: "--flush-messages",
        kind: SettingKind::Count { min: 1 },
        // "Never": no count of appends reaches it.
        default: SettingDefault::Count(u64::MAX),
        help: "fsync after this many appended messages (1 = every append; default never)",
    }
    flush_interval_ms: Option<u64> => u64, by Count {
        flag: "--flush-interval-ms",
        kind: SettingKind::Count { min: 0 },
        default: SettingDefault::Count(0),
        help: "fsync when this long has passed since the last flush (0 = never by time)",
    }
    #[arg(value_enum)]
    truncation: Option<Truncation> => Truncation, by Choice {
        flag: "--truncation",
        kind: SettingKind::OneOf(&["high-watermark", "kip-101", "kip-279", "current"]),
        default: SettingDefault::Text("current"),
        help: "Which Kafka release's epoch and follower-truncation rules to follow",
    }
    #[arg(value_name = "true|false")]
    controller_epoch_fencing: Option<bool> => bool, by Switch {
        flag: "--controller-epoch-fencing",
        kind: SettingKind::Bool,
        default: SettingDefault::Bool(true),
        help: "KAFKA-532's controller-epoch checks, in etcd and at the brokers",
    }
    #[arg(value_name = "true|false")]
    broker_epoch_fencing: Option<bool> => bool, by Switch {
        flag: "--broker-epoch-fencing",
        kind: SettingKind::Bool,
        default: SettingDefault::Bool(true),
        help: "KIP-380: a broker that re-registers within its lease is treated as failed and \
               restarted, leaving every ISR until it catches up (false: it keeps its ISR \
               memberships, as KAFKA-1120-era controllers let it)",
    }
    #[arg(value_name = "true|false")]
    isr_join_fencing: Option<bool> => bool, by Switch {
        flag: "--isr-join-fencing",
        kind: SettingKind::Bool,
        default: SettingDefault::Bool(true),
        help: "KIP-903 (Kafka 3.5): a replica joins an ISR only on fetches of its current \
               registration, so a restarted broker is not taken back in on what an earlier run \
               of it had fetched (false: any recent fetch qualifies, as before KAFKA-14139's fix)",
    }
    #[arg(value_name = "true|false")]
    unclean_leader_election: Option<bool> => bool, by Switch {
        flag: "--unclean-leader-election",
        kind: SettingKind::Bool,
        default: SettingDefault::Bool(false),
        help: "Elect any live replica when no ISR member is live (Kafka's \
               unclean.leader.election.enable)",
    }
    min_insync_replicas: Option<i32> => i32, by Count {
        flag: "--min-insync-replicas",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(1),
        help: "acks=all needs an ISR at least this large (Kafka's min.insync.replicas)",
    }
    // Kafka's auto-creation (auto.create.topics.enable, default true through
    // 3.x): a Metadata request naming an unknown topic, asking for creation
    // (every request before Metadata v4; from v4 its allow_auto_topic_creation
    // flag), creates it with the two defaults below, which CreateTopics' -1
    // also means (KIP-464).
    #[arg(value_name = "true|false")]
    auto_create_topics_enable: Option<bool> => bool, by Switch {
        flag: "--auto-create-topics-enable",
        kind: SettingKind::Bool,
        default: SettingDefault::Bool(true),
        help: "Create an unknown topic a client's Metadata request names and lets be created \
               (Kafka's auto.create.topics.enable)",
    }
    num_partitions: Option<i32> => i32, by Count {
        flag: "--num-partitions",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(1),
        help: "Partitions of an auto-created topic, and of CreateTopics' -1 (Kafka's \
               num.partitions)",
    }
    default_replication_factor: Option<i32> => i32, by Count {
        flag: "--default-replication-factor",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(1),
        help: "Replication factor of an auto-created topic, and of CreateTopics' -1 (Kafka's \
               default.replication.factor)",
    }
    max_request_bytes: Option<u32> => u32, by Count {
        flag: "--max-request-bytes",
        kind: SettingKind::Count { min: 0 },
        default: SettingDefault::Count(DEFAULT_MAX_REQUEST_BYTES as u64),
        help: "Largest request frame accepted (Kafka's socket.request.max.bytes)",
    }
    // Kafka's defaults (2.x) for the next three: 500 ms long poll, 10 s lag, 5 s
    // checkpoints.
    replica_fetch_wait_max_ms: Option<u64> => u64, by Count {
        flag: "--replica-fetch-wait-max-ms",
        kind: SettingKind::Count { min: 0 },
        default: SettingDefault::Count(500),
        help: "How long a follower's fetch waits at the leader for data (Kafka's \
               replica.fetch.wait.max.ms)",
    }
    replica_lag_time_max_ms: Option<u64> => u64, by Count {
        flag: "--replica-lag-time-max-ms",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(10_000),
        help: "A follower that has not caught up for this long leaves the ISR (Kafka's \
               replica.lag.time.max.ms)",
    }
    hw_checkpoint_interval_ms: Option<u64> => u64, by Count {
        flag: "--hw-checkpoint-interval-ms",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(5000),
        help: "How often the high watermarks are checkpointed (Kafka's \
               replica.high.watermark.checkpoint.interval.ms)",
    }
    // ZooKeeper-era Kafka waited zookeeper.connection.timeout.ms for its
    // coordinator at start; unset, it is zookeeper.session.timeout.ms, 18 s since
    // Kafka 2.5 (KIP-537).
    etcd_connect_timeout_ms: Option<u64> => u64, by Count {
        flag: "--etcd-connect-timeout-ms",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(18_000),
        help: "How long a starting broker keeps retrying etcd before it gives up (Kafka's \
               zookeeper.connection.timeout.ms)",
    }
    /// What a log with no producer-state snapshot at or below its end does.
    #[arg(value_enum)]
    producer_state_recovery: Option<ProducerStateRecovery> => ProducerStateRecovery, by Choice {
        flag: "--producer-state-recovery",
        kind: SettingKind::OneOf(&["kafka-5435", "current"]),
        default: SettingDefault::Text("current"),
        help: "How a log with no producer-state snapshot at or below its end rebuilds its \
               idempotent producers' state: `current` replays the log; `kafka-5435` starts \
               empty without reading the log, as Kafka 0.11.0.0 did before KAFKA-5435 (taking \
               the missing snapshot for an upgrade), so once that replica leads, a producer's \
               retry of a batch it already holds is appended a second time",
    }
    // The group coordinator's internal topic (Kafka's __consumer_offsets).
    // Kafka's default is 50 partitions; 3 keeps a test cluster's data dirs
    // small while still spreading groups over coordinators.
    offsets_topic_num_partitions: Option<u64> => u64, by Count {
        flag: "--offsets-topic-num-partitions",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(3),
        help: "Partitions of the internal offsets topic, made at the first FindCoordinator \
               (Kafka's offsets.topic.num.partitions, default 50 there)",
    }
    offsets_topic_replication_factor: Option<u64> => u64, by Count {
        flag: "--offsets-topic-replication-factor",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(3),
        help: "Replication factor of the internal offsets topic; it is not made until this \
               many brokers are live (Kafka's offsets.topic.replication.factor)",
    }
    // The transaction coordinator's internal topic (Kafka's
    // __transaction_state), sized like the offsets topic for the same reason.
    transaction_state_num_partitions: Option<u64> => u64, by Count {
        flag: "--transaction-state-num-partitions",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(3),
        help: "Partitions of the internal transaction-state topic, made at the first \
               FindCoordinator for a transactional id (Kafka's \
               transaction.state.log.num.partitions, default 50 there)",
    }
    transaction_state_replication_factor: Option<u64> => u64, by Count {
        flag: "--transaction-state-replication-factor",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(3),
        help: "Replication factor of the internal transaction-state topic; it is not made \
               until this many brokers are live (Kafka's \
               transaction.state.log.replication.factor)",
    }
    // KIP-890 part 1 (Kafka 3.6.0, `transaction.partition.verification.enable`,
    // default true): before a transactional producer's first batch of a
    // transaction on a partition is appended, its leader asks the transaction
    // coordinator whether the partition is in the producer's ongoing
    // transaction. Without it a produce that arrives after its transaction
    // ended opens a transaction the coordinator knows nothing of: the
    // partition's last stable offset, and every read_committed consumer,
    // stop there for good (KAFKA-14402, the "hanging transaction").
    #[arg(value_name = "true|false")]
    transaction_partition_verification: Option<bool> => bool, by Switch {
        flag: "--transaction-partition-verification",
        kind: SettingKind::Bool,
        default: SettingDefault::Bool(true),
        help: "KIP-890: a transactional batch that would open a transaction on a partition is \
               appended only if the coordinator has the partition in the producer's ongoing \
               transaction (false: appended unasked, as before Kafka 3.6, so a late produce \
               after an abort leaves a hanging transaction)",
    }
    // KAFKA-6119 (fixed in 0.11.0.2 and 1.0.0): a transaction the
    // coordinator aborts for its timeout is aborted under a bumped producer
    // epoch, fencing the producer that let it lapse.
    #[arg(value_name = "true|false")]
    transaction_timeout_fences_producer: Option<bool> => bool, by Switch {
        flag: "--transaction-timeout-fences-producer",
        kind: SettingKind::Bool,
        default: SettingDefault::Bool(true),
        help: "A transaction aborted for its timeout bumps its producer's epoch, so the producer \
               is fenced (false: the abort keeps the epoch, as Kafka 0.11.0.0-0.11.0.1 before \
               KAFKA-6119, and the producer's next send begins a new transaction it commits, \
               the lapsed writes aborted)",
    }
    #[arg(value_enum)]
    offsets_commit_acks: Option<OffsetsCommitAcks> => OffsetsCommitAcks, by Choice {
        flag: "--offsets-commit-acks",
        kind: SettingKind::OneOf(&["all", "leader"]),
        default: SettingDefault::Text("all"),
        help: "Which replicas of the offsets partition hold a commit before it is answered: \
               `all` (Kafka's offsets.commit.required.acks=-1) or `leader` (=1, the \
               misconfiguration Kafka's docs warn against)",
    }
    #[arg(value_enum)]
    offsets_load: Option<OffsetsLoad> => OffsetsLoad, by Choice {
        flag: "--offsets-load",
        kind: SettingKind::OneOf(&["kafka-5600", "current"]),
        default: SettingDefault::Text("current"),
        help: "How a new group coordinator reads its offsets partition: `current` applies \
               every commit in the log; `kafka-5600` keeps, for each group, the offsets of the \
               first read (segment) it appears in, as Kafka 0.11.0.0 did before KAFKA-5600, so \
               after a coordinator moves a group's consumers rewind to an older commit",
    }
    group_initial_rebalance_delay_ms: Option<u64> => u64, by Count {
        flag: "--group-initial-rebalance-delay-ms",
        kind: SettingKind::Count { min: 0 },
        default: SettingDefault::Count(3000),
        help: "How long the first rebalance of an empty group waits for more members \
               (Kafka's group.initial.rebalance.delay.ms, KIP-134)",
    }
    group_min_session_timeout_ms: Option<u64> => u64, by Count {
        flag: "--group-min-session-timeout-ms",
        kind: SettingKind::Count { min: 0 },
        default: SettingDefault::Count(6000),
        help: "Shortest session timeout a group member may ask for (Kafka's \
               group.min.session.timeout.ms)",
    }
    group_max_session_timeout_ms: Option<u64> => u64, by Count {
        flag: "--group-max-session-timeout-ms",
        kind: SettingKind::Count { min: 1 },
        default: SettingDefault::Count(1_800_000),
        help: "Longest session timeout a group member may ask for (Kafka's \
               group.max.session.timeout.ms)",
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
