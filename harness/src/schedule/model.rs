//! The schedule's data: what a TOML schedule holds once parsed, and what is
//! printed back so a realised run can be saved and replayed. Names are kept as
//! written (`b2`, `t-0`); they are checked against the cluster in `parse.rs`.

use std::collections::BTreeMap;
use std::fmt;

use epochal_faults::proxy::OnHeal;
use serde::{Deserialize, Serialize};

use super::requests::{DelayedRequests, Requests};
pub use super::target::{Target, TargetError};
pub use crate::topic_partition::PartitionRef;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Brokers are named `b1` .. `bN`, broker id = N.
    pub brokers: u32,
    #[serde(default, rename = "topic")]
    pub topics: Vec<Topic>,
    /// Broker settings for every node (keys are the broker's config names).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, toml::Value>,
    /// Per-node overrides and failpoints, keyed by node name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node: BTreeMap<String, NodeConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topic {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u32,
}

impl Topic {
    /// Its partitions, `<name>-0` up.
    pub fn partition_refs(&self) -> impl Iterator<Item = PartitionRef> + '_ {
        (0..self.partitions).map(|p| PartitionRef::new(&self.name, p))
    }
}

impl Cluster {
    /// Every partition of every topic it declares, topic by topic.
    pub fn partitions(&self) -> impl Iterator<Item = PartitionRef> + '_ {
        self.topics.iter().flat_map(Topic::partition_refs)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, toml::Value>,
    /// Failpoint name → actions in the broker's `EPOCHAL_FAILPOINTS` syntax.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failpoints: BTreeMap<String, String>,
}

/// Defaults a client step uses when it does not say otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    pub acks: Acks,
    pub records_per_batch: u32,
    pub compression: Compression,
    /// Bound on an `await` step that gives no `timeout_ms` of its own.
    pub await_timeout_ms: u64,
    /// Bound on one client request.
    pub request_timeout_ms: u64,
    /// Seeds the nemesis's choices (`random minority`), so a schedule resolves
    /// the same way on every run.
    pub seed: u64,
    /// Producers and consumers that run from the moment the cluster is ready
    /// until the last step is done, beside the scripted steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background: Option<Background>,
    /// The liveness window: after the final heal, every partition must
    /// acknowledge a write within this many milliseconds, or the run is
    /// invalid with `stuck-partition` naming it. Off when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness_ms: Option<u64>,
    /// Bound on the final quiesce (every partition led with its full ISR and
    /// every replica caught up); a cluster that does not settle in time makes
    /// the run unknown. Default 60 s; a scenario that leaves a replica stuck
    /// on purpose sets less.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiesce_timeout_ms: Option<u64>,
    /// Every client process is an idempotent producer (KIP-98): a producer
    /// id from InitProducerId, a sequence per partition on every batch, and
    /// a send whose outcome is unknown resent with the same sequences until
    /// it is known or its deadline passes (workload/producer.rs). Needs
    /// acks = "all", as Kafka's producer does. Off by default; printed back
    /// only when on, so schedules that never set it print as before.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
    /// [transactions]: `[workload.background]`'s subscribers process
    /// transactionally (Jepsen's read-process-write, KIP-447) instead of
    /// polling and committing: each member's turn is one `txn` op that
    /// polls one of its partitions at read_committed, sends one to three
    /// fresh values to other partitions and sends the position it read to
    /// as the group's offset (AddOffsetsToTxn, TxnOffsetCommit with its
    /// generation), three in four meant to commit; a member resumes from
    /// the group's stable committed offset (workload/txn_subscribe.rs). Off
    /// by default; printed back only when on.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_process_write: bool,
    /// The final read ([groups]): after the final heal and quiesce, a fresh
    /// consumer reads every partition from its beginning to its high
    /// watermark, one poll each (`final_read` in the history), so an
    /// acknowledged write no poll returned can be told apart from one the
    /// consumers merely never reached (`unseen`). Off by default.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub final_read: bool,
    /// The transaction timeout the transactional producers ask for
    /// (`transaction.timeout.ms`); [`Workload::TRANSACTION_TIMEOUT_MS`]
    /// when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction_timeout_ms: Option<u64>,
    /// Declared minimums of coverage (checker/coverage.rs; docs/schedules.md,
    /// "Coverage minimums"): below any of them a run that would be valid is
    /// unknown, its reason starting "vacuous: ", because its faults could not
    /// have broken anything. None by default: a scripted schedule's author
    /// times its faults by hand; campaigns declare theirs (campaign/mod.rs).
    /// Faults that landed (fired without an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_faults: Option<u64>,
    /// Client ops each fault overlapped, at the least: in flight when it
    /// fired, or invoked before the next nemesis op.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ops_per_fault: Option<u64>,
    /// Writes acknowledged while some fault was in force, over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_acked_during_faults: Option<u64>,
    /// Leader changes the run caused, as etcd's timeline shows them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_leader_changes: Option<u64>,
}

impl Workload {
    /// The transactional producers' transaction timeout unless the schedule
    /// sets one: short beside Kafka's 60 s default, so a transaction its
    /// producer abandoned is aborted well inside a run.
    pub const TRANSACTION_TIMEOUT_MS: u64 = 10_000;

    /// `transaction_timeout_ms`, or its default.
    pub fn transaction_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.transaction_timeout_ms
                .unwrap_or(Self::TRANSACTION_TIMEOUT_MS),
        )
    }

    /// Drops every coverage minimum (`min_*`): for a schedule cut down by
    /// hand or by `epochal shrink`, whose few faults are where its author
    /// (or the shrink) put them.
    pub fn clear_minimums(&mut self) {
        self.min_faults = None;
        self.min_ops_per_fault = None;
        self.min_acked_during_faults = None;
        self.min_leader_changes = None;
    }
}

/// `[workload.background]`: clients that keep producing and consuming while
/// the steps run, as Jepsen's workload clients do. Producers write the values
/// [`Background::FIRST_VALUE`], +1, ... (each value once in the run); each
/// worker goes round the partitions, one request at a time, `interval_ms`
/// apart. Steps synchronise with them through the `N more writes
/// acknowledged` await.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Background {
    #[serde(default)]
    pub producers: u32,
    #[serde(default)]
    pub consumers: u32,
    /// Pause between one worker's requests.
    #[serde(default = "Background::default_interval_ms")]
    pub interval_ms: u64,
    /// Partitions the workers use; default every partition of every topic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PartitionRef>,
    /// [groups]: each consumer commits its position after each poll that
    /// moved it, as group `consumer-<i>` (a consumer that assigns its own
    /// partitions), and every eighth turn reads a committed offset back
    /// instead of polling.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub commits: bool,
    /// [groups]: consumers that subscribe, as one group
    /// ([`Background::GROUP`]), to every topic of `partitions`: each joins,
    /// polls the partitions the group assigns it from the group's committed
    /// offset, commits after each poll that moved it, heartbeats, and joins
    /// again when the group rebalances (Jepsen's subscribe mode).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subscribers: u32,
    /// Each subscriber crashes once every this many of its turns: it drops
    /// its connections without leaving the group and starts over as a new
    /// member (Jepsen's client crash). 0: never.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub crash_every: u32,
    /// [transactions]: transactional producers, each with its own
    /// transactional id, running `txn` ops — up to four sends and
    /// read_committed polls over `partitions`, three in four meant to
    /// commit, the rest to abort (workload/txn.rs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub transactional: u32,
    /// One client that creates, writes, reads and deletes a topic of its
    /// own (`epochal-lives`) again and again under one name, each creation
    /// a new life (workload/lives.rs): topic deletion under faults, and a
    /// deleted topic's records never served as its successor's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lives: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Background {
    /// Background values start here, clear of the small values scripted
    /// produce steps write, so the two never collide in one run.
    pub const FIRST_VALUE: i64 = 1_000_000;

    /// The group the subscribers join.
    pub const GROUP: &'static str = "subscribers";

    fn default_interval_ms() -> u64 {
        20
    }
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            acks: Acks::All,
            records_per_batch: 1,
            compression: Compression::None,
            await_timeout_ms: 30_000,
            request_timeout_ms: 10_000,
            seed: 0,
            background: None,
            liveness_ms: None,
            quiesce_timeout_ms: None,
            idempotent: false,
            read_process_write: false,
            final_read: false,
            transaction_timeout_ms: None,
            min_faults: None,
            min_ops_per_fault: None,
            min_acked_during_faults: None,
            min_leader_changes: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Acks {
    #[serde(rename = "all")]
    All,
    #[serde(rename = "1")]
    Leader,
    #[serde(rename = "0")]
    None,
}

impl Acks {
    /// The wire value of the produce request's `acks` field.
    pub fn wire(self) -> i16 {
        match self {
            Acks::All => -1,
            Acks::Leader => 1,
            Acks::None => 0,
        }
    }
}

/// `all`, `1` or `0`, as schedules and the history write it.
impl std::fmt::Display for Acks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Acks::All => "all",
            Acks::Leader => "1",
            Acks::None => "0",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// A fault, named by its verb. Partitions are named by the direction bytes flow.
///
/// In TOML a fault is a one-key table, the verb, or a word: `"heal"`
/// ([`Fault::Heal`]) or one of the database's verbs (`"pause-database"`);
/// `{ heal = "cut-1" }` heals one named cut. (De)serialized
/// through the derive below, which serde's `remote = "Self"` makes an
/// inherent function; the trait impls after it add the bare word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    Pause(Target),
    Resume(Target),
    Crash(Target),
    Restart(Target),
    Stop(Target),
    Start(Target),
    /// SIGKILL, then every log of the node cut back to its recovery point.
    PowerLoss(Target),
    TruncateLog(TruncateLog),
    /// No byte between the node and any other node or etcd, either way.
    Isolate(Cut),
    /// The target (e.g. `random minority`) on one side, everyone else on the other.
    MajorityMinority(Cut),
    /// No byte from `from` reaches `to`; the other direction still flows.
    OneWay(OneWay),
    /// The target sees both halves; the halves do not see each other.
    Bridge(Cut),
    NodeFromEtcd(Cut),
    /// No byte between the workload's clients and the node, either way; its
    /// links to other brokers and services still flow.
    NodeFromClients(Cut),
    /// No byte between the node and the system's database, either way
    /// (its `b<i>-postgres` link); undone by `heal` as every cut.
    NodeFromDatabase(Cut),
    /// The requests of one Kafka API on one link (`{ from, to, api }`) are
    /// held, with everything behind them on their connection, until
    /// released (schedule/requests.rs; the proxy's `kafka_requests` toxic).
    HoldRequests(Requests),
    /// Each such request waits `ms` from when the proxy read it.
    DelayRequests(DelayedRequests),
    /// Each such request is removed: the broker never sees it.
    DropRequests(Requests),
    /// Each such request reaches the broker twice; the client sees one answer.
    DuplicateRequests(Requests),
    /// Ends the request fault on that link and API; held requests are
    /// delivered in order.
    ReleaseRequests(Requests),
    /// Remove every partition and end every request fault (written as the
    /// word `"heal"`).
    #[serde(skip_deserializing)]
    Heal,
    /// Remove the partition fault that named itself so (`{ heal = "cut-1" }`).
    #[serde(rename = "heal")]
    HealCut(String),
    /// The system's database stopped, its whole process tree (written as
    /// the word `"pause-database"`, as the four below are).
    #[serde(skip_deserializing)]
    PauseDatabase,
    #[serde(skip_deserializing)]
    ResumeDatabase,
    /// Every process of the database killed.
    #[serde(skip_deserializing)]
    CrashDatabase,
    /// The database started again on its data directory, awaited until it
    /// answers.
    #[serde(skip_deserializing)]
    RestartDatabase,
}

impl Fault {
    /// The faults written as one word, each its verb's name.
    const WORDS: &[(&str, Fault)] = &[
        ("heal", Fault::Heal),
        ("pause-database", Fault::PauseDatabase),
        ("resume-database", Fault::ResumeDatabase),
        ("crash-database", Fault::CrashDatabase),
        ("restart-database", Fault::RestartDatabase),
    ];
}

impl Serialize for Fault {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Fault::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for Fault {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Form;
        impl<'de> serde::de::Visitor<'de> for Form {
            type Value = Fault;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a fault: a table with one verb, or a word such as \"heal\"")
            }
            fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<Fault, E> {
                const NAMES: &[&str] = &[
                    "heal",
                    "pause-database",
                    "resume-database",
                    "crash-database",
                    "restart-database",
                ];
                Fault::WORDS
                    .iter()
                    .find(|(name, _)| *name == word)
                    .map(|(_, fault)| fault.clone())
                    .ok_or_else(|| E::unknown_variant(word, NAMES))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Fault, A::Error> {
                Fault::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_any(Form)
    }
}

/// A partition fault's target, with the name that `heal` can take it away
/// by and what its held bytes do then. Written as the target alone
/// (`isolate = "b2"`) or as a table
/// (`isolate = { target = "b2", id = "cut-1", on_heal = "reset" }`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    pub target: Target,
    /// The name `{ heal = "…" }` removes this cut by; unnamed cuts go only
    /// with a heal of everything.
    pub id: Option<String>,
    /// `resume` (default): the held bytes are delivered at heal, as TCP
    /// retransmits through a dropped-packet partition. `reset`: every
    /// connection the cut held is reset at heal, so whatever was in flight
    /// (a LeaderAndIsr, a fetch) never arrives.
    pub on_heal: OnHeal,
}

impl From<Target> for Cut {
    fn from(target: Target) -> Cut {
        Cut {
            target,
            id: None,
            on_heal: OnHeal::Resume,
        }
    }
}

/// [`Cut`] as a table.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CutTable {
    target: Target,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(default, skip_serializing_if = "is_resume")]
    on_heal: OnHeal,
}

fn is_resume(on_heal: &OnHeal) -> bool {
    *on_heal == OnHeal::Resume
}

impl Serialize for Cut {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.id.is_none() && self.on_heal == OnHeal::Resume {
            return self.target.serialize(serializer);
        }
        CutTable {
            target: self.target.clone(),
            id: self.id.clone(),
            on_heal: self.on_heal,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Cut {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Form;
        impl<'de> serde::de::Visitor<'de> for Form {
            type Value = Cut;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a target, or a table { target, id, on_heal }")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Cut, E> {
                text.parse::<Target>().map(Cut::from).map_err(E::custom)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Cut, A::Error> {
                let t = CutTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(Cut {
                    target: t.target,
                    id: t.id,
                    on_heal: t.on_heal,
                })
            }
        }
        deserializer.deserialize_any(Form)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneWay {
    pub from: Target,
    pub to: Target,
    /// As [`Cut::id`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// As [`Cut::on_heal`].
    #[serde(default, skip_serializing_if = "is_resume")]
    pub on_heal: OnHeal,
}

impl OneWay {
    /// The cut's name and heal behaviour, as a [`Cut`] has them.
    pub fn options(&self) -> (Option<&str>, OnHeal) {
        (self.id.as_deref(), self.on_heal)
    }
}

/// Cut one replica's log: to an offset, by bytes or records off its end, or
/// by a fraction of its bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TruncateLogTable", into = "TruncateLogTable")]
pub struct TruncateLog {
    pub node: Target,
    pub partition: PartitionRef,
    pub cut: Truncate,
}

/// Where `truncate-log` cuts a log (nemesis/disk.rs says how exactly).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Truncate {
    /// Remove this offset and everything after it, at batch boundaries.
    ToOffset(u64),
    /// Chop this many bytes off the end of the log, wherever that falls.
    ByBytes(u64),
    /// Remove the last this many offsets, at batch boundaries: the cut is
    /// `ToOffset(log end - n)`, so the batch holding that offset goes whole.
    ByRecords(u64),
    /// Chop this fraction (above 0, at most 1) of the log's bytes off its
    /// end, as `ByBytes` with the fraction of every segment's bytes, rounded
    /// down: 0.5 is "half the file".
    Fraction(f64),
}

/// `truncate-log` as written: exactly one of `to_offset`, `by_bytes`,
/// `by_records` and `fraction`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TruncateLogTable {
    node: Target,
    partition: PartitionRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to_offset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by_records: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fraction: Option<f64>,
}

impl TryFrom<TruncateLogTable> for TruncateLog {
    type Error = &'static str;
    fn try_from(t: TruncateLogTable) -> Result<Self, Self::Error> {
        let cut = match (t.to_offset, t.by_bytes, t.by_records, t.fraction) {
            (Some(offset), None, None, None) => Truncate::ToOffset(offset),
            (None, Some(bytes), None, None) => Truncate::ByBytes(bytes),
            (None, None, Some(records), None) => Truncate::ByRecords(records),
            (None, None, None, Some(fraction)) => {
                if !(fraction > 0.0 && fraction <= 1.0) {
                    return Err("truncate-log's fraction must be above 0 and at most 1");
                }
                Truncate::Fraction(fraction)
            }
            _ => {
                return Err(
                    "truncate-log needs exactly one of to_offset, by_bytes, by_records, fraction",
                );
            }
        };
        Ok(TruncateLog {
            node: t.node,
            partition: t.partition,
            cut,
        })
    }
}

impl Truncate {
    /// The cut as the schedule's keys: (to_offset, by_bytes, by_records, fraction).
    pub fn keys(self) -> (Option<u64>, Option<u64>, Option<u64>, Option<f64>) {
        match self {
            Truncate::ToOffset(offset) => (Some(offset), None, None, None),
            Truncate::ByBytes(bytes) => (None, Some(bytes), None, None),
            Truncate::ByRecords(records) => (None, None, Some(records), None),
            Truncate::Fraction(fraction) => (None, None, None, Some(fraction)),
        }
    }
}

impl From<TruncateLog> for TruncateLogTable {
    fn from(t: TruncateLog) -> Self {
        let (to_offset, by_bytes, by_records, fraction) = t.cut.keys();
        TruncateLogTable {
            node: t.node,
            partition: t.partition,
            to_offset,
            by_bytes,
            by_records,
            fraction,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Produce {
    pub partition: PartitionRef,
    pub values: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acks: Option<Acks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_per_batch: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// `leader` (default: the current leader) or a node name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<u64>,
    /// Every record's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Each record's value padded to this many bytes (the digits, a space,
    /// dots), as a test of record size would: checkers read the value alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_bytes: Option<u32>,
    /// One request per value, each awaited before the next (a send and a
    /// flush per record, as Kafka's own tests produce): one history op each.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_request_per_record: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consume {
    pub partition: PartitionRef,
    pub from_offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<u64>,
}

/// A commit of `offset` of `partition` for `group` by a consumer that
/// assigns its own partitions ([groups]); `to`: the broker asked for the
/// group's coordinator first (default: the partition's leader).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitStep {
    pub group: String,
    pub partition: PartitionRef,
    pub offset: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<u64>,
}

/// A read of `group`'s committed offset of `partition`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommittedStep {
    pub group: String,
    pub partition: PartitionRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<u64>,
}

/// One transaction the steps run ([transactions]): `ops` in the history's
/// micro-op form (`["send", "t-0", 7]`, `["poll", "t-1"]`), ended as `intent`
/// says, by the transactional producer `id` (InitProducerId once, kept across
/// the steps that name the same id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TxnStep {
    pub id: String,
    pub ops: Vec<TxnStepOp>,
    #[serde(default)]
    pub intent: TxnIntent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<u64>,
}

/// How a scripted transaction is meant to end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TxnIntent {
    #[default]
    Commit,
    Abort,
}

/// A scripted transaction's micro-op: a send of a value to a partition, or
/// a read_committed poll of one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawTxnStepOp", into = "RawTxnStepOp")]
pub enum TxnStepOp {
    Send(PartitionRef, i64),
    Poll(PartitionRef),
}

impl TxnStepOp {
    pub fn partition(&self) -> &PartitionRef {
        match self {
            TxnStepOp::Send(p, _) | TxnStepOp::Poll(p) => p,
        }
    }
}

/// [`TxnStepOp`] as TOML writes it: an array with its verb first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum RawTxnStepOp {
    Send(String, PartitionRef, i64),
    Poll(String, PartitionRef),
}

/// A txn op whose first element is neither `send` with a value nor `poll`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a txn op is [\"send\", partition, value] or [\"poll\", partition], not {verb:?}")]
pub struct TxnStepOpError {
    pub verb: String,
}

impl TryFrom<RawTxnStepOp> for TxnStepOp {
    type Error = TxnStepOpError;
    fn try_from(raw: RawTxnStepOp) -> Result<Self, TxnStepOpError> {
        match raw {
            RawTxnStepOp::Send(verb, p, value) if verb == "send" => Ok(TxnStepOp::Send(p, value)),
            RawTxnStepOp::Poll(verb, p) if verb == "poll" => Ok(TxnStepOp::Poll(p)),
            RawTxnStepOp::Send(verb, ..) | RawTxnStepOp::Poll(verb, _) => {
                Err(TxnStepOpError { verb })
            }
        }
    }
}

impl From<TxnStepOp> for RawTxnStepOp {
    fn from(op: TxnStepOp) -> RawTxnStepOp {
        match op {
            TxnStepOp::Send(p, value) => RawTxnStepOp::Send("send".into(), p, value),
            TxnStepOp::Poll(p) => RawTxnStepOp::Poll("poll".into(), p),
        }
    }
}

/// A consumer the steps drive as a member of `group` ([groups], Jepsen's
/// subscribe mode scripted): `subscribe` makes it, subscribed to `topics`
/// (default: every topic of the cluster); `poll = { member = … }` polls
/// what it was assigned and commits; `unsubscribe = "…"` has it leave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscribeStep {
    pub member: String,
    pub group: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<String>,
}

/// One poll of a subscribed member's assignment, with its commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberPoll {
    pub member: String,
}
