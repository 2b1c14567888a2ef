//! TOML text to a checked `Schedule`. Two passes: serde (unknown keys rejected,
//! toml's byte span turned into a line and the key named), then validation of
//! every name against the cluster the schedule declares, so a typo fails before
//! anything starts rather than as a fault aimed at nothing mid-run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::broker_settings::{BROKER_SETTINGS, FAILPOINTS, HARNESS_OWNED_SETTINGS};
use super::condition::Condition;
use serde::Deserialize;

use super::document::Schedule;
use super::model::{Acks, Cluster, Fault, PartitionRef, Produce, Target, Workload};
use super::payload::Payload;
use super::requests::{Requests, Sender};
use super::step::{ONE_KIND, Step, StepTable, TIMEOUT_WITHOUT_AWAIT};
use crate::node::NodeId;
use crate::toml_span::{TomlErrorAt, key_line};

/// A schedule as written: steps still flat tables, checked before they are typed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleTable {
    cluster: Cluster,
    #[serde(default)]
    workload: Workload,
    #[serde(default)]
    step: Vec<StepTable>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {}{message}", file.display(), key.as_ref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
    Syntax {
        file: PathBuf,
        line: usize,
        /// The key the error is at, when toml's span points at one.
        key: Option<String>,
        message: String,
    },
    #[error("{}{}: {what}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        line: Option<usize>,
        what: Invalid,
    },
}

impl ScheduleError {
    pub fn line(&self) -> Option<usize> {
        match self {
            ScheduleError::Io { .. } => None,
            ScheduleError::Syntax { line, .. } => Some(*line),
            ScheduleError::Invalid { line, .. } => *line,
        }
    }
}

use crate::topic_partition::{OFFSETS_TOPIC, TXN_STATE_TOPIC};
/// Its partitions when the schedule does not set `offsets_topic_num_partitions`:
/// the reference broker's default (Kafka's is 50; a test cluster needs few).
const OFFSETS_TOPIC_PARTITIONS: u32 = 3;
/// The transaction-state topic's, when the schedule does not set
/// `transaction_state_num_partitions`: the reference broker's default too.
const TXN_STATE_TOPIC_PARTITIONS: u32 = 3;

/// A well-formed schedule that does not fit its own cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("a cluster needs at least one broker")]
    NoBrokers,
    #[error("topic {topic}: {why}")]
    BadTopic { topic: String, why: String },
    #[error("unknown node {node} (the cluster has b1..b{brokers})")]
    UnknownNode { node: String, brokers: u32 },
    #[error("unknown topic {topic} in {partition}")]
    UnknownTopic { topic: String, partition: String },
    #[error("unknown partition {partition} (topic {topic} has {partitions})")]
    UnknownPartition {
        partition: String,
        topic: String,
        partitions: u32,
    },
    #[error("unknown broker setting {setting} in {at} (known: {})", super::broker_settings::BROKER_SETTINGS.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", "))]
    UnknownSetting { setting: String, at: String },
    #[error("broker setting {setting} in {at}: {why}")]
    BadSettingValue {
        setting: String,
        at: String,
        /// "must be <kind>, not <value>"
        why: String,
    },
    #[error("broker setting {setting} in {at} is set by the harness")]
    HarnessOwnedSetting { setting: String, at: String },
    #[error("unknown failpoint {failpoint} on {node} (known: {})", super::broker_settings::FAILPOINTS.join(", "))]
    UnknownFailpoint { failpoint: String, node: String },
    #[error("step {step}: {why}")]
    BadStep { step: usize, why: String },
    #[error(
        "[workload.background] needs at least one producer, consumer, subscriber or \
         transactional producer, and a topic to use"
    )]
    EmptyBackground,
    /// Kafka's producer refuses `enable.idempotence` with acks other than
    /// all: an acks=1 write the leader loses in a failover would leave the
    /// producer's sequence ahead of the log's.
    #[error("`idempotent = true` needs acks = \"all\"; {at} sets acks = \"{acks}\"")]
    IdempotenceNeedsAcksAll { at: String, acks: Acks },
    /// A database fault on a system without a database (fault/fits.rs).
    #[error("step {step}: {verb} needs a system with a database, and {system} has none")]
    NoDatabase {
        step: usize,
        verb: &'static str,
        system: String,
    },
}

pub(super) fn parse(file: &Path, src: &str) -> Result<Schedule, ScheduleError> {
    let table: ScheduleTable = toml::from_str(src).map_err(|err| syntax_error(file, src, &err))?;
    let invalid = |(line, what)| ScheduleError::Invalid {
        file: file.to_owned(),
        line,
        what,
    };
    validate(&table, src).map_err(invalid)?;
    let mut steps = Vec::with_capacity(table.step.len());
    for (i, step) in table.step.into_iter().enumerate() {
        let step = Step::try_from(step).map_err(|why| {
            invalid((
                step_line(src, i),
                Invalid::BadStep {
                    step: i + 1,
                    why: why.to_owned(),
                },
            ))
        })?;
        steps.push(step);
    }
    Ok(Schedule {
        cluster: table.cluster,
        workload: table.workload,
        steps,
    })
}

fn syntax_error(file: &Path, src: &str, err: &toml::de::Error) -> ScheduleError {
    let at = TomlErrorAt::of(src, err);
    ScheduleError::Syntax {
        file: file.to_owned(),
        line: at.line,
        key: at.key,
        message: at.message,
    }
}

/// The line of the `n`th `[[step]]` header (0-based), when steps are written so.
/// The line of the `n`-th (from 0) `[[step]]` header in `src`.
pub fn step_line(src: &str, n: usize) -> Option<usize> {
    src.lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "[[step]]")
        .nth(n)
        .map(|(i, _)| i + 1)
}

type Failure = (Option<usize>, Invalid);

fn validate(s: &ScheduleTable, src: &str) -> Result<(), Failure> {
    let brokers = s.cluster.brokers;
    if brokers == 0 {
        return Err((key_line(src, "brokers"), Invalid::NoBrokers));
    }
    let declared = Declared::topics(s, src)?;
    settings(&s.cluster.settings, "cluster.settings", src)?;
    workload(s, src, &declared)?;
    nodes(s, src, &declared)?;
    // Cut names given by earlier steps, for `{ heal = "…" }` to name, and
    // the request faults' links and APIs, for `release-requests` to name; the
    // members subscribed and not yet unsubscribed, for `poll` to name.
    let mut cut_ids: BTreeSet<String> = BTreeSet::new();
    let mut members: BTreeSet<&str> = BTreeSet::new();
    for (i, step) in s.step.iter().enumerate() {
        let step_check = StepCheck {
            line: step_line(src, i),
            number: i + 1,
            declared: &declared,
        };
        step_check.step(s, step, &mut cut_ids)?;
        step_check.members(step, &mut members)?;
    }
    Ok(())
}

/// What the cluster declares for the rest of a schedule to name: its broker
/// count and each topic's partition count.
struct Declared<'a> {
    brokers: u32,
    topics: BTreeMap<&'a str, u32>,
}

impl<'a> Declared<'a> {
    /// Checks each declared topic and collects them.
    fn topics(s: &'a ScheduleTable, src: &str) -> Result<Declared<'a>, Failure> {
        let brokers = s.cluster.brokers;
        let mut topics = BTreeMap::new();
        for t in &s.cluster.topics {
            let bad = |why: &str| {
                (
                    key_line(src, "name"),
                    Invalid::BadTopic {
                        topic: t.name.clone(),
                        why: why.to_owned(),
                    },
                )
            };
            if topics.insert(t.name.as_str(), t.partitions).is_some() {
                return Err(bad("declared twice"));
            }
            if t.partitions == 0 {
                return Err(bad("needs at least one partition"));
            }
            if t.replication_factor == 0 || t.replication_factor > brokers {
                return Err(bad(&format!(
                    "replication_factor {} must be 1..={brokers}",
                    t.replication_factor
                )));
            }
        }
        // Kafka's internal topics may be named too (`leader of
        // __consumer_offsets-0`: a group's coordinator; `leader of
        // __transaction_state-1`: a transactional id's), with the partitions
        // the cluster's settings give them. The brokers create them at the
        // first FindCoordinator; a fault at one before that resolves to
        // nobody, and says so (nemesis/).
        let internal = [
            (
                OFFSETS_TOPIC,
                "offsets_topic_num_partitions",
                OFFSETS_TOPIC_PARTITIONS,
            ),
            (
                TXN_STATE_TOPIC,
                "transaction_state_num_partitions",
                TXN_STATE_TOPIC_PARTITIONS,
            ),
        ];
        for (topic, setting, default) in internal {
            let partitions = s
                .cluster
                .settings
                .get(setting)
                .and_then(toml::Value::as_integer)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(default);
            topics.entry(topic).or_insert(partitions);
        }
        Ok(Declared { brokers, topics })
    }

    /// Whether `name` is one of the cluster's nodes.
    fn node(&self, name: &str, line: Option<usize>) -> Result<(), Failure> {
        let brokers = self.brokers;
        let ok = name
            .parse::<NodeId>()
            .is_ok_and(|n| (1..=brokers).contains(&n.id()));
        if ok {
            Ok(())
        } else {
            Err((
                line,
                Invalid::UnknownNode {
                    node: name.to_owned(),
                    brokers,
                },
            ))
        }
    }

    /// Whether `p` is a partition of a declared topic.
    fn partition(&self, p: &PartitionRef, line: Option<usize>) -> Result<(), Failure> {
        match self.topics.get(p.topic.as_str()) {
            None => Err((
                line,
                Invalid::UnknownTopic {
                    topic: p.topic.clone(),
                    partition: p.to_string(),
                },
            )),
            Some(&n) if p.partition >= n => Err((
                line,
                Invalid::UnknownPartition {
                    partition: p.to_string(),
                    topic: p.topic.clone(),
                    partitions: n,
                },
            )),
            Some(_) => Ok(()),
        }
    }
}

/// Checks `[workload]`: idempotence with its acks, and the background's
/// partitions and clients.
fn workload(s: &ScheduleTable, src: &str, declared: &Declared) -> Result<(), Failure> {
    if s.workload.idempotent && s.workload.acks != Acks::All {
        return Err((
            key_line(src, "idempotent"),
            Invalid::IdempotenceNeedsAcksAll {
                at: "[workload]".into(),
                acks: s.workload.acks,
            },
        ));
    }
    if let Some(b) = &s.workload.background {
        let line = key_line(src, "background");
        for p in &b.partitions {
            declared.partition(p, line)?;
        }
        if b.producers + b.consumers + b.subscribers + b.transactional == 0 {
            return Err((line, Invalid::EmptyBackground));
        }
        if s.cluster.topics.is_empty() {
            return Err((line, Invalid::EmptyBackground));
        }
    }
    Ok(())
}

/// Checks each `[cluster.node.*]` table: the node, its settings and its
/// failpoints.
fn nodes(s: &ScheduleTable, src: &str, declared: &Declared) -> Result<(), Failure> {
    for (name, config) in &s.cluster.node {
        declared.node(name, key_line(src, name))?;
        settings(
            &config.settings,
            &format!("cluster.node.{name}.settings"),
            src,
        )?;
        for failpoint in config.failpoints.keys() {
            if !FAILPOINTS.contains(&failpoint.as_str()) {
                return Err((
                    key_line(src, failpoint),
                    Invalid::UnknownFailpoint {
                        failpoint: failpoint.clone(),
                        node: name.clone(),
                    },
                ));
            }
        }
    }
    Ok(())
}

/// The checks of one step, which fail at its line and with its number.
struct StepCheck<'d, 'a> {
    line: Option<usize>,
    number: usize,
    declared: &'d Declared<'a>,
}

impl StepCheck<'_, '_> {
    fn bad(&self, why: String) -> Failure {
        (
            self.line,
            Invalid::BadStep {
                step: self.number,
                why,
            },
        )
    }

    /// Checks the step: one kind, then what that kind names.
    fn step(
        &self,
        s: &ScheduleTable,
        step: &StepTable,
        cut_ids: &mut BTreeSet<String>,
    ) -> Result<(), Failure> {
        if step.kinds() != 1 {
            return Err(self.bad(ONE_KIND.into()));
        }
        if step.timeout_ms.is_some() && step.await_.is_none() {
            return Err(self.bad(TIMEOUT_WITHOUT_AWAIT.into()));
        }
        let StepTable {
            fault,
            faults,
            produce,
            consume,
            commit,
            committed,
            txn,
            await_,
            ..
        } = step;
        if let Some(t) = txn {
            if t.id.is_empty() {
                return Err(self.bad("a txn names an empty transactional id".into()));
            }
            if t.ops.is_empty() || t.ops.len() > 4 {
                return Err(self.bad(format!("a txn has 1 to 4 ops, not {}", t.ops.len())));
            }
            for op in &t.ops {
                let partition = op.partition();
                self.declared.partition(partition, self.line)?;
            }
        }
        let groups = commit
            .iter()
            .map(|c| (&c.group, &c.partition))
            .chain(committed.iter().map(|c| (&c.group, &c.partition)));
        for (group, partition) in groups {
            if group.is_empty() {
                return Err(self.bad("a group op names an empty group".into()));
            }
            self.declared.partition(partition, self.line)?;
        }
        for f in fault.iter().chain(faults.iter().flatten()) {
            self.fault(f, cut_ids)?;
        }
        if faults.as_ref().is_some_and(Vec::is_empty) {
            return Err(self.bad("faults is empty".into()));
        }
        if let Some(p) = produce {
            self.produce(s, p)?;
        }
        if let Some(c) = consume {
            self.declared.partition(&c.partition, self.line)?;
            if let Some(t) = &c.from {
                self.target(t, true)?;
            }
        }
        if let Some(c) = await_ {
            self.await_(s, c)?;
        }
        Ok(())
    }

    /// A subscribed member's steps: `subscribe` names a new member of a
    /// group and declared topics; `poll` and `unsubscribe` a member an
    /// earlier step subscribed and none has unsubscribed since.
    fn members<'s>(
        &self,
        step: &'s StepTable,
        members: &mut BTreeSet<&'s str>,
    ) -> Result<(), Failure> {
        if let Some(sub) = &step.subscribe {
            if sub.member.is_empty() || sub.group.is_empty() {
                return Err(self.bad("subscribe names an empty member or group".into()));
            }
            for topic in &sub.topics {
                if !self.declared.topics.contains_key(topic.as_str()) {
                    return Err(self.bad(format!(
                        "subscribe names topic {topic}, which [cluster] does not declare"
                    )));
                }
            }
            if !members.insert(&sub.member) {
                return Err(self.bad(format!("member {} is already subscribed", sub.member)));
            }
        }
        let named = step
            .poll
            .as_ref()
            .map(|p| (&p.member, "poll"))
            .or(step.unsubscribe.as_ref().map(|m| (m, "unsubscribe")));
        if let Some((member, what)) = named
            && !members.contains(member.as_str())
        {
            return Err(self.bad(format!(
                "{what} names member {member}, which no earlier step subscribed (or one unsubscribed)"
            )));
        }
        if let Some(member) = &step.unsubscribe {
            members.remove(member.as_str());
        }
        Ok(())
    }

    /// Whether a fault's or a client op's (`client`) target names nodes and
    /// partitions the cluster has, in a form the op can take.
    fn target(&self, t: &Target, client: bool) -> Result<(), Failure> {
        let declared = self.declared;
        match t {
            Target::Node(n) => declared.node(&n.to_string(), self.line),
            Target::Nodes(_) if client => {
                Err(self.bad("a client op goes to one node, not several".into()))
            }
            Target::Nodes(nodes) => nodes
                .iter()
                .try_for_each(|n| declared.node(&n.to_string(), self.line)),
            Target::LeaderOf(p) | Target::AFollowerOf(p) => declared.partition(p, self.line),
            Target::Leader if !client => {
                Err(self.bad("`leader` alone names no partition; write `leader of t-0`".into()))
            }
            Target::RandomMinority if client => {
                Err(self.bad("a client op goes to one node, not `random minority`".into()))
            }
            _ => Ok(()),
        }
    }

    /// Checks a fault's targets, and that a heal names a cut an earlier
    /// fault gave; records the cut it names.
    fn fault(&self, f: &Fault, cut_ids: &mut BTreeSet<String>) -> Result<(), Failure> {
        if let Some(t) = f.target() {
            self.target(t, false)?;
        }
        if let Some(r) = f.requests() {
            self.requests(&r)?;
            let key = format!("requests {} -> {} {}", r.from, r.to, r.api);
            if matches!(f, Fault::ReleaseRequests(_)) {
                if !cut_ids.contains(&key) {
                    return Err(self.bad(format!(
                        "release-requests names {} -> {} {}, which no earlier request fault names",
                        r.from, r.to, r.api
                    )));
                }
            } else {
                cut_ids.insert(key);
            }
        }
        match f.payload() {
            Payload::OneWay(w) => {
                self.target(&w.from, false)?;
                self.target(&w.to, false)?;
            }
            Payload::TruncateLog(t) => {
                self.target(&t.node, false)?;
                self.declared.partition(&t.partition, self.line)?;
            }
            Payload::HealCut(id) if !cut_ids.contains(id) => {
                return Err(self.bad(format!(
                    "heal names the cut {id:?}, which no earlier partition fault names (`id = {id:?}`)"
                )));
            }
            // The rest name one target, checked above.
            _ => {}
        }
        let id = match f.payload() {
            Payload::Cut(c) => c.id.as_deref(),
            Payload::OneWay(w) => w.id.as_deref(),
            _ => None,
        };
        if let Some(id) = id {
            if id.is_empty() {
                return Err(self.bad("a cut's id must not be empty".into()));
            }
            cut_ids.insert(id.to_owned());
        }
        Ok(())
    }

    /// Checks a request fault's link: a broker it goes to, sent by the
    /// clients or by another broker.
    fn requests(&self, r: &Requests) -> Result<(), Failure> {
        self.target(&r.to, false)?;
        if let Sender::Broker(from) = &r.from {
            self.target(from, false)?;
            if from == &r.to && matches!(from, Target::Node(_)) {
                return Err(self.bad(format!(
                    "request faults name a link between two nodes; {from} -> {} is none",
                    r.to
                )));
            }
        }
        Ok(())
    }

    /// Checks a produce: its partition, target, values, batch size and acks.
    fn produce(&self, s: &ScheduleTable, p: &Produce) -> Result<(), Failure> {
        self.declared.partition(&p.partition, self.line)?;
        if let Some(t) = &p.to {
            self.target(t, true)?;
        }
        if p.values.is_empty() {
            return Err(self.bad("produce needs at least one value".into()));
        }
        if p.records_per_batch == Some(0) {
            return Err(self.bad("records_per_batch must be at least 1".into()));
        }
        if let Some(acks) = p.acks.filter(|&a| s.workload.idempotent && a != Acks::All) {
            return Err((
                self.line,
                Invalid::IdempotenceNeedsAcksAll {
                    at: format!("step {}", self.number),
                    acks,
                },
            ));
        }
        Ok(())
    }

    /// Checks an await: what it names, and that an ack count has producers
    /// to count.
    fn await_(&self, s: &ScheduleTable, c: &Condition) -> Result<(), Failure> {
        let (n, p) = c.nodes_and_partition();
        if let Some(n) = n {
            self.declared.node(&n.to_string(), self.line)?;
        }
        if let Some(p) = p {
            self.declared.partition(p, self.line)?;
        }
        let producers = s.workload.background.as_ref().map_or(0, |b| b.producers);
        if matches!(c, Condition::Acknowledged { .. }) && producers == 0 {
            return Err(self.bad(format!(
                "`{c}` counts background producers' acks, and [workload.background] has no producers"
            )));
        }
        let committers = s.workload.background.as_ref().map_or(0, |b| {
            b.subscribers + if b.commits { b.consumers } else { 0 }
        });
        if matches!(c, Condition::CommitsAcknowledged { .. }) && committers == 0 {
            return Err(self.bad(format!(
                "`{c}` counts background consumers' commits, and [workload.background] has no \
                 subscribers (nor consumers with `commits = true`)"
            )));
        }
        Ok(())
    }
}

fn settings(map: &BTreeMap<String, toml::Value>, at: &str, src: &str) -> Result<(), Failure> {
    for (setting, value) in map {
        let known = BROKER_SETTINGS.iter().find(|(name, _)| name == setting);
        let what = if HARNESS_OWNED_SETTINGS.contains(&setting.as_str()) {
            Invalid::HarnessOwnedSetting {
                setting: setting.clone(),
                at: at.to_owned(),
            }
        } else if let Some((_, kind)) = known {
            if kind.accepts(value) {
                continue;
            }
            Invalid::BadSettingValue {
                setting: setting.clone(),
                at: at.to_owned(),
                why: format!("must be {kind}, not {value}"),
            }
        } else {
            Invalid::UnknownSetting {
                setting: setting.clone(),
                at: at.to_owned(),
            }
        };
        return Err((key_line(src, setting), what));
    }
    Ok(())
}
