//! The nemesis: faults fired at a running cluster, as Jepsen's nemesis does.
//! A fault's target resolves when it fires, from etcd's view of the cluster at
//! that moment (`leader of t-0`, `controller`, ...), and the fault's whole
//! history op is decided here: what it resolved to and did, and for the faults
//! the checkers date (disk faults, starts) etcd's revision once it took
//! effect; the run only records it. Process faults go through the runtime,
//! partitions through the proxies (`partition`), request faults through the
//! proxies too (`requests`), disk faults cut a dead node's files (`disk`),
//! and the database faults act on the system's database through the
//! runtime (`database`).

pub mod database;
mod deregister;
pub use deregister::BOUND as DEREGISTER_BOUND;
pub mod disk;
pub mod partition;
pub mod requests;

use crate::fault::{Dated, Fires, Shape, Signal, Verb};
use crate::history::{Done, ExitedAtStart, NodeCut};
use crate::observe::{ClusterView, ObserveError, Observer};
use crate::random::SplitMix64;
use crate::runtime::Link;
use crate::runtime::{NodeId, Runtime, RuntimeError};
use crate::schedule::{Fault, OnHeal, Payload, Requests, Sender, Target, TruncateLog};
use crate::topic_partition::{OFFSETS_TOPIC, PartitionRef, TXN_STATE_TOPIC, offsets_partition_of};
use epochal_faults::proxy::toxics::RequestAction;
use partition::{PartitionSpec, Partitions};
use requests::{RequestFaults, RequestsError};
use std::collections::BTreeSet;

#[derive(Debug, thiserror::Error)]
pub enum NemesisError {
    /// The target names nothing right now (no leader, no controller, no
    /// follower): the schedule's assumption about the cluster did not hold.
    #[error("{target:?} resolves to no node: {why}")]
    Unresolved { target: String, why: String },
    /// The fault cannot apply to the cluster in its current state.
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The proxy would not take the cut.
    #[error("partition: {0}")]
    Partition(#[source] epochal_faults::toxiproxy_client::ClientError),
    /// The proxy would not take (or remove) a request fault.
    #[error("request fault: {0}")]
    Requests(#[source] epochal_faults::toxiproxy_client::ClientError),
    #[error("disk: {0}")]
    Disk(#[from] disk::DiskError),
    /// etcd could not be read once the fault took effect, to date it.
    #[error("reading etcd after the fault: {0}")]
    Observe(#[from] ObserveError),
}

/// Why a fault cannot apply now: the schedule's assumption about the cluster
/// did not hold, so the run ends unknown rather than as a harness error.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("cannot {verb}: {node} is running")]
    Running { verb: Verb, node: NodeId },
    #[error("cannot {verb}: {node} is not running")]
    NotRunning { verb: &'static str, node: NodeId },
    #[error("cannot truncate-log: {0} is running (crash or stop it first)")]
    TruncateRunning(NodeId),
    #[error("{target} resolves to {nodes} nodes; one-way needs one on each side")]
    NotOneNode { target: String, nodes: usize },
    /// The targets do not make the partition asked for (e.g. a "minority"
    /// as large as the rest), or the cut named is not in force.
    #[error(transparent)]
    Partition(partition::PartitionError),
    /// A request fault already in force on that link and API, or a release
    /// of one that is not.
    #[error(transparent)]
    Requests(RequestsError),
    /// Request faults need a link between two different nodes.
    #[error("a request fault needs a link: {0} -> {0} is none")]
    RequestsToSelf(NodeId),
    /// The system has no proxy for the link (its brokers never dial one
    /// another).
    #[error("no proxy {0}: this system's brokers do not dial one another")]
    NoLink(String),
    /// The database is not in the state the act starts from.
    #[error(transparent)]
    Database(database::NotInState),
}

impl NemesisError {
    /// Whether the cluster, not the harness, made the fault impossible: the run
    /// ends unknown rather than as a harness error.
    pub fn is_cluster_state(&self) -> bool {
        matches!(
            self,
            NemesisError::Unresolved { .. } | NemesisError::Refused(_)
        )
    }
}

/// The partition whose leader coordinates a coordinator target: the key's
/// partition of the internal topic, by Kafka's rule —
/// `GroupMetadataManager.partitionFor` for a group and
/// `TransactionStateManager.partitionFor` for a transactional id, both
/// `Utils.abs(key.hashCode) % partitions` with Java's `String.hashCode`, as
/// the reference broker computes it (broker/src/group/partition.rs, which
/// broker/src/transactions/coordinator.rs calls for transactional ids).
/// The partition count is the topic's as etcd records it: the setting the
/// brokers created it with (`offsets_topic_num_partitions`,
/// `transaction_state_num_partitions`, Kafka's `offsets.topic.num.partitions`
/// and `transaction.state.log.num.partitions`), which Kafka never changes
/// once the topic exists.
fn coordinator_partition(target: &Target, view: &ClusterView) -> Result<PartitionRef, NotCreated> {
    let (topic, key) = match target {
        Target::CoordinatorOfGroup(group) => (OFFSETS_TOPIC, group),
        Target::CoordinatorOfTxn(id) => (TXN_STATE_TOPIC, id),
        other => unreachable!("{other} names no coordinator"),
    };
    if let Some(missing) = not_created(view, topic) {
        return Err(missing);
    }
    let partitions = view.partitions.keys().filter(|p| p.topic == topic).count();
    let partitions = u32::try_from(partitions).unwrap_or(u32::MAX);
    // The offsets topic's rule is the transaction-state topic's too.
    let partition = offsets_partition_of(key, partitions).partition;
    Ok(PartitionRef::new(topic, partition))
}

/// A role in one of Kafka's internal topics that etcd records no partition
/// of: the brokers have not created it yet (they do at the first
/// FindCoordinator that needs it).
#[derive(Debug, thiserror::Error)]
#[error(
    "{topic} does not exist yet: the brokers create it at the first FindCoordinator \
     for {needed} (a client's first use of one)"
)]
struct NotCreated {
    topic: &'static str,
    needed: &'static str,
}

/// [`NotCreated`] when `topic` is an internal topic etcd records no
/// partition of; `None` for other topics.
fn not_created(view: &ClusterView, topic: &str) -> Option<NotCreated> {
    if view.partitions.keys().any(|p| p.topic == topic) {
        return None;
    }
    let (topic, needed) = match topic {
        OFFSETS_TOPIC => (OFFSETS_TOPIC, "a group"),
        TXN_STATE_TOPIC => (TXN_STATE_TOPIC, "a transactional id"),
        _ => return None,
    };
    Some(NotCreated { topic, needed })
}

/// The nemesis's state across steps: partitions in force and a seeded random
/// source for `random minority`, so a schedule resolves the same way each run.
pub struct Nemesis {
    partitions: Partitions,
    requests: RequestFaults,
    random: SplitMix64,
}

impl Nemesis {
    pub fn new(seed: u64) -> Self {
        Nemesis {
            partitions: Partitions::new(),
            requests: RequestFaults::default(),
            random: SplitMix64::new(seed),
        }
    }

    /// No cut and no request fault in force: what `heal` ends.
    pub fn partitions_healed(&self) -> bool {
        self.partitions.is_healed() && self.requests.is_empty()
    }

    /// The links a cut is in force on now (each once, whichever streams).
    pub fn cut_links(&self) -> BTreeSet<Link> {
        self.partitions.cut().map(|(link, _)| *link).collect()
    }

    /// Resolves a target against `view` to the nodes it names now.
    pub fn resolve(
        &mut self,
        target: &Target,
        view: &ClusterView,
        nodes: &[NodeId],
    ) -> Result<Vec<NodeId>, NemesisError> {
        let unresolved = |why: String| NemesisError::Unresolved {
            target: target.to_string(),
            why,
        };
        match target {
            Target::Node(node) => Ok(vec![*node]),
            Target::Nodes(named) => Ok(named.clone()),
            Target::Controller => view
                .controller
                .map(|c| vec![c])
                .ok_or_else(|| unresolved("etcd records no controller".into())),
            Target::Leader => Err(unresolved(
                "`leader` is for client operations; a fault names `leader of t-0`".into(),
            )),
            Target::LeaderOf(p) => {
                if let Some(missing) = not_created(view, &p.topic) {
                    return Err(unresolved(missing.to_string()));
                }
                view.leader_of(p)
                    .map(|l| vec![l])
                    .ok_or_else(|| unresolved(format!("etcd records no leader of {p}")))
            }
            Target::CoordinatorOfGroup(key) | Target::CoordinatorOfTxn(key) => {
                let p =
                    coordinator_partition(target, view).map_err(|e| unresolved(e.to_string()))?;
                view.leader_of(&p).map(|l| vec![l]).ok_or_else(|| {
                    unresolved(format!(
                        "etcd records no leader of {p}, {key:?}'s partition"
                    ))
                })
            }
            Target::AFollowerOf(p) => {
                let state = view
                    .partition(p)
                    .ok_or_else(|| unresolved(format!("etcd has no state for {p}")))?;
                // The lowest-id follower, in-sync ones first: deterministic, and
                // the one a scenario most often means (a follower that has the data).
                let followers = |in_sync: bool| {
                    state
                        .replicas
                        .iter()
                        .copied()
                        .filter(|r| Some(*r) != state.leader && state.isr.contains(r) == in_sync)
                        .min()
                };
                followers(true)
                    .or_else(|| followers(false))
                    .map(|f| vec![f])
                    .ok_or_else(|| unresolved(format!("{p} has no follower")))
            }
            Target::RandomMinority => {
                // The largest minority, ⌊(n−1)/2⌋, at least one node.
                let size = ((nodes.len().saturating_sub(1)) / 2).max(1);
                let mut pool = nodes.to_vec();
                let mut chosen = Vec::with_capacity(size);
                while chosen.len() < size && !pool.is_empty() {
                    let i = (self.random.next_u64() % pool.len() as u64) as usize;
                    chosen.push(pool.remove(i));
                }
                chosen.sort_unstable();
                Ok(chosen)
            }
        }
    }

    /// Fires `fault`; returns what it resolved to and did, for the history,
    /// with what the checkers date it by: for a disk fault or a start, etcd's
    /// revision read from `observer` once it took effect, and for a start
    /// when the nodes started.
    pub async fn fire<R: Runtime>(
        &mut self,
        runtime: &mut R,
        observer: &mut Observer,
        view: &ClusterView,
        fault: &Fault,
    ) -> Result<Done, NemesisError> {
        let nodes = runtime.nodes();
        let payload = fault.payload();
        let mut resolved = match (payload, fault.target()) {
            (Payload::TruncateLog(t), _) => self.resolve(&t.node, view, &nodes)?,
            (_, Some(t)) => self.resolve(t, view, &nodes)?,
            // Heal names nobody; one-way and the request faults resolve
            // their ends below.
            (_, None) => Vec::new(),
        };
        let spec = Verb::of(fault).spec();
        let mut done = Done::default();
        match (spec.fires, payload) {
            (Fires::Signal(signal), _) => {
                each_running(runtime, &resolved, signal, spec.name).await?;
                if signal == Signal::Stop {
                    let cut = self.cut_links();
                    done.registered_after_stop =
                        deregister::still_registered(observer, &resolved, &cut)
                            .await
                            .filter(|still| !still.is_empty());
                }
            }
            (Fires::Start, _) => {
                let exited = start_each(runtime, &resolved, Verb::of(fault)).await?;
                done.exited = (!exited.is_empty()).then_some(exited);
            }
            (Fires::CutEveryLog, _) => done.cut = Some(power_loss(runtime, &resolved).await?),
            (Fires::CutOneLog, Payload::TruncateLog(t)) => {
                done.cut = Some(truncate_log(runtime, t, &resolved)?);
            }
            (Fires::Partition(shape), Payload::Cut(cut)) => {
                let options = (cut.id.as_deref(), cut.on_heal);
                let mut blocked = Vec::new();
                for spec in partition_specs(shape, &resolved) {
                    blocked.extend(self.partition(runtime, &spec, &nodes, options).await?);
                }
                done.blocked = Some(blocked);
            }
            (Fires::Partition(_), Payload::OneWay(one_way)) => {
                let from = self.single(&one_way.from, view, &nodes)?;
                let to = self.single(&one_way.to, view, &nodes)?;
                resolved = vec![from, to];
                let spec = PartitionSpec::OneWay { from, to };
                let options = one_way.options();
                done.blocked = Some(self.partition(runtime, &spec, &nodes, options).await?);
            }
            (Fires::Requests(action), Payload::Requests(r)) => {
                resolved = self
                    .requests_on(runtime, view, &nodes, r, action, 0)
                    .await?;
            }
            (Fires::Requests(action), Payload::DelayedRequests(d)) => {
                let r = d.requests();
                resolved = self
                    .requests_on(runtime, view, &nodes, &r, action, d.ms)
                    .await?;
            }
            (Fires::Release, Payload::Requests(r)) => {
                let (link, named) = self.request_link(r, view, &nodes)?;
                self.requests
                    .release(runtime.proxies(), link, r.api)
                    .await
                    .map_err(requests_error)?;
                resolved = named;
            }
            (Fires::Database(act), _) => {
                database::act(runtime, act, Verb::of(fault))
                    .await
                    .map_err(|e| match e {
                        database::DatabaseError::Refused(not) => Refusal::Database(not).into(),
                        database::DatabaseError::Runtime(e) => NemesisError::Runtime(e),
                    })?;
            }
            (Fires::Heal, Payload::HealCut(id)) => {
                done.healed = Some(self.heal_cut(runtime, id).await?);
            }
            (Fires::Heal, _) => {
                self.partitions
                    .heal(runtime.proxies())
                    .await
                    .map_err(partition_error)?;
                // Held requests are delivered, as held bytes are at a heal.
                self.requests
                    .release_all(runtime.proxies())
                    .await
                    .map_err(requests_error)?;
            }
            (fires, _) => unreachable!("{} fires by {fires:?}, not on {fault:?}", spec.name),
        }
        done.nodes = resolved;
        dated(runtime, observer, spec.dated, &mut done).await?;
        Ok(done)
    }

    /// Heals the cut named `id`; returns the proxy streams that flow again.
    async fn heal_cut<R: Runtime>(
        &mut self,
        runtime: &R,
        id: &str,
    ) -> Result<Vec<String>, NemesisError> {
        let healed = self
            .partitions
            .heal_cut(runtime.proxies(), id)
            .await
            .map_err(partition_error)?;
        Ok(healed
            .iter()
            .map(|(link, stream)| format!("{}:{stream:?}", link.proxy_name()))
            .collect())
    }

    async fn partition<R: Runtime>(
        &mut self,
        runtime: &R,
        spec: &PartitionSpec,
        nodes: &[NodeId],
        (id, on_heal): (Option<&str>, OnHeal),
    ) -> Result<Vec<String>, NemesisError> {
        let blocked = self
            .partitions
            .apply(runtime.proxies(), spec, nodes, id, on_heal)
            .await
            .map_err(partition_error)?;
        Ok(blocked
            .iter()
            .map(|(from, to)| format!("{from}->{to}"))
            .collect())
    }

    /// The proxy a request fault acts on, and the nodes it resolved: the
    /// clients' link to `to`, or `from`'s link to `to`.
    fn request_link(
        &mut self,
        r: &Requests,
        view: &ClusterView,
        nodes: &[NodeId],
    ) -> Result<(Link, Vec<NodeId>), NemesisError> {
        let to = self.single(&r.to, view, nodes)?;
        match &r.from {
            Sender::Clients => Ok((Link::ClientToBroker(to), vec![to])),
            Sender::Broker(from) => {
                let from = self.single(from, view, nodes)?;
                if from == to {
                    return Err(Refusal::RequestsToSelf(from).into());
                }
                Ok((Link::BrokerToBroker { from, to }, vec![from, to]))
            }
        }
    }

    /// Puts `action` on the link's requests of `r.api`; returns the nodes
    /// the link resolved to.
    async fn requests_on<R: Runtime>(
        &mut self,
        runtime: &R,
        view: &ClusterView,
        nodes: &[NodeId],
        r: &Requests,
        action: RequestAction,
        delay_ms: u64,
    ) -> Result<Vec<NodeId>, NemesisError> {
        let (link, named) = self.request_link(r, view, nodes)?;
        match self
            .requests
            .apply(runtime.proxies(), link, r.api, action, delay_ms)
            .await
        {
            Err(RequestsError::Proxy(e)) if e.status() == Some(404) => {
                Err(Refusal::NoLink(link.proxy_name()).into())
            }
            Err(e) => Err(requests_error(e)),
            Ok(()) => Ok(named),
        }
    }

    fn single(
        &mut self,
        target: &Target,
        view: &ClusterView,
        nodes: &[NodeId],
    ) -> Result<NodeId, NemesisError> {
        match self.resolve(target, view, nodes)?.as_slice() {
            [one] => Ok(*one),
            several => Err(Refusal::NotOneNode {
                target: target.to_string(),
                nodes: several.len(),
            }
            .into()),
        }
    }
}

/// The partitions a cut of `shape` makes of the nodes its target resolved
/// to: one for each node, or (majority-minority) one of them all. One-way
/// names its two ends apart.
fn partition_specs(shape: Shape, resolved: &[NodeId]) -> Vec<PartitionSpec> {
    let each = |spec: fn(NodeId) -> PartitionSpec| resolved.iter().map(|&n| spec(n)).collect();
    match shape {
        Shape::Isolate => each(PartitionSpec::Isolate),
        Shape::Bridge => each(PartitionSpec::Bridge),
        Shape::NodeFromEtcd => each(PartitionSpec::NodeFromEtcd),
        Shape::NodeFromClients => each(PartitionSpec::NodeFromClients),
        Shape::NodeFromDatabase => each(PartitionSpec::NodeFromDatabase),
        Shape::MajorityMinority => vec![PartitionSpec::MajorityMinority {
            minority: resolved.to_vec(),
        }],
        Shape::OneWay => unreachable!("one-way names its ends, not a target"),
    }
}

/// Sends `signal` to each node, refusing one that is not running.
async fn each_running<R: Runtime>(
    runtime: &mut R,
    resolved: &[NodeId],
    signal: Signal,
    verb: &'static str,
) -> Result<(), NemesisError> {
    for &n in resolved {
        running(runtime, n, verb)?;
        match signal {
            Signal::Pause => runtime.pause_node(n).await?,
            Signal::Resume => runtime.resume_node(n).await?,
            Signal::Kill => runtime.kill_node(n).await?,
            Signal::Stop => runtime.stop_node(n).await?,
        }
    }
    Ok(())
}

/// Starts each node on its old data directory, refusing one that is running.
///
/// A node whose process ends by itself before it serves is the system's
/// failure, not the harness's: it is returned (and stays down) and the rest
/// still start. Any other error (a timeout, Docker refusing) is the harness's.
async fn start_each<R: Runtime>(
    runtime: &mut R,
    resolved: &[NodeId],
    verb: Verb,
) -> Result<Vec<ExitedAtStart>, NemesisError> {
    let mut exited = Vec::new();
    for &n in resolved {
        if runtime.is_running(n) {
            return Err(Refusal::Running { verb, node: n }.into());
        }
        match runtime.start_node(n).await {
            Ok(()) => {}
            Err(e @ (RuntimeError::Exited { .. } | RuntimeError::ContainerExited { .. })) => exited
                .push(ExitedAtStart {
                    node: n,
                    error: e.to_string(),
                }),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(exited)
}

/// Kills each node still running and cuts its logs as a power loss would;
/// returns what was cut, per node.
async fn power_loss<R: Runtime>(
    runtime: &mut R,
    resolved: &[NodeId],
) -> Result<Vec<NodeCut>, NemesisError> {
    let mut cuts = Vec::new();
    for &n in resolved {
        if runtime.is_running(n) {
            runtime.kill_node(n).await?;
        }
        let cut = disk::power_loss(&runtime.data_dir(n)?)?;
        cuts.push(NodeCut {
            node: n,
            cuts: Some(cut),
            cut: None,
        });
    }
    Ok(cuts)
}

/// Truncates one partition's log on each node, refusing one that is
/// running; returns what was cut, per node.
fn truncate_log<R: Runtime>(
    runtime: &R,
    t: &TruncateLog,
    resolved: &[NodeId],
) -> Result<Vec<NodeCut>, NemesisError> {
    let mut cuts = Vec::new();
    for &n in resolved {
        if runtime.is_running(n) {
            return Err(Refusal::TruncateRunning(n).into());
        }
        let cut = disk::truncate_log(
            &runtime.data_dir(n)?,
            &t.partition.topic,
            t.partition.wire_partition(),
            t.cut,
        )?;
        cuts.push(NodeCut {
            node: n,
            cuts: None,
            cut: Some(cut),
        });
    }
    Ok(cuts)
}

/// Dates a fault the checkers need to place: a disk fault or a start gets
/// etcd's revision now that it took effect, and a start the earliest time
/// one of its nodes started.
async fn dated<R: Runtime>(
    runtime: &R,
    observer: &mut Observer,
    dated: Dated,
    done: &mut Done,
) -> Result<(), NemesisError> {
    // Only etcd has revisions; a system seen through Metadata has none.
    if observer.source().is_etcd() && dated != Dated::Not {
        done.etcd_revision = Some(observer.view().await?.revision);
    }
    if dated == Dated::Started {
        done.started_time_ms = done
            .nodes
            .iter()
            .filter_map(|&n| runtime.started_at(n))
            .filter_map(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .min();
    }
    Ok(())
}

fn partition_error(e: partition::PartitionError) -> NemesisError {
    match e {
        partition::PartitionError::Proxy(e) => NemesisError::Partition(e),
        // The targets do not make the partition asked for (e.g. a "minority"
        // as large as the rest), or the cut named is not in force: the
        // schedule's assumption failed.
        other => Refusal::Partition(other).into(),
    }
}

fn requests_error(e: RequestsError) -> NemesisError {
    match e {
        RequestsError::Proxy(e) => NemesisError::Requests(e),
        // The schedule's assumption failed: one in force, or none to release.
        other => Refusal::Requests(other).into(),
    }
}

fn running<R: Runtime>(runtime: &R, node: NodeId, verb: &'static str) -> Result<(), NemesisError> {
    if runtime.is_running(node) {
        Ok(())
    } else {
        Err(Refusal::NotRunning { verb, node }.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::PartitionView;

    /// A view where partition `n` of each internal topic is led by b(n+1).
    fn view(internal: &[&str]) -> ClusterView {
        let mut view = ClusterView::default();
        for topic in internal {
            for n in 0..3 {
                let p = PartitionView {
                    leader: Some(NodeId::new(n + 1)),
                    ..PartitionView::default()
                };
                view.partitions.insert(PartitionRef::new(*topic, n), p);
            }
        }
        view
    }

    fn resolve(target: &str, view: &ClusterView) -> Result<Vec<NodeId>, NemesisError> {
        let nodes = NodeId::all(3).collect::<Vec<_>>();
        Nemesis::new(1).resolve(&target.parse().unwrap(), view, &nodes)
    }

    #[test]
    fn a_coordinator_is_the_leader_of_its_keys_partition_by_javas_hash() {
        let both = view(&[OFFSETS_TOPIC, TXN_STATE_TOPIC]);
        // Java's "my-group".hashCode() is -1906497762: abs % 3 = 0, led by b1
        // (broker/src/group/partition.rs pins the hash); "a" is 97: 97 % 3 = 1.
        let group = resolve("coordinator of group my-group", &both).unwrap();
        assert_eq!(group, [NodeId::new(1)]);
        let txn = resolve("coordinator of transactional id a", &both).unwrap();
        assert_eq!(txn, [NodeId::new(2)]);
        let named = resolve("leader of __transaction_state-2", &both).unwrap();
        assert_eq!(named, [NodeId::new(3)]);
    }

    #[test]
    fn an_internal_topic_not_created_yet_is_said_so() {
        let offsets_only = view(&[OFFSETS_TOPIC]);
        for target in [
            "coordinator of transactional id a",
            "leader of __transaction_state-0",
        ] {
            let e = resolve(target, &offsets_only).unwrap_err();
            assert!(e.is_cluster_state(), "{e}");
            let e = e.to_string();
            assert!(
                e.contains("__transaction_state does not exist yet")
                    && e.contains("FindCoordinator for a transactional id"),
                "{e}"
            );
        }
        let e = resolve("coordinator of group g", &ClusterView::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("__consumer_offsets does not exist yet"),
            "{e}"
        );
        let e = resolve("leader of t-0", &offsets_only).unwrap_err();
        assert!(
            e.to_string().contains("etcd records no leader of t-0"),
            "{e}"
        );
    }
}
