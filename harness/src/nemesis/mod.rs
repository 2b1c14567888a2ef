//! The nemesis: faults fired at a running cluster, as Jepsen's nemesis does.
//! A fault's target resolves when it fires, from etcd's view of the cluster at
//! that moment (`leader of t-0`, `controller`, ...), and what it resolved to is
//! returned for the history. Process faults go through the runtime, partitions
//! through the proxies (`partition`), disk faults cut a dead node's files
//! (`disk`).

pub mod disk;
pub mod partition;

use crate::history::{Done, NodeCut, Verb};
use crate::observe::ClusterView;
use crate::random::SplitMix64;
use crate::runtime::{NodeId, Runtime, RuntimeError};
use crate::schedule::{Fault, OnHeal, Target};
use partition::{PartitionSpec, Partitions};

#[derive(Debug, thiserror::Error)]
pub enum NemesisError {
    /// The target names nothing right now (no leader, no controller, no
    /// follower): the schedule's assumption about the cluster did not hold.
    #[error("{target:?} resolves to no node: {why}")]
    Unresolved { target: String, why: String },
    /// The fault cannot apply to the node in its current state.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("partition: {0}")]
    Partition(String),
    #[error("disk: {0}")]
    Disk(String),
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

/// The nemesis's state across steps: partitions in force and a seeded random
/// source for `random minority`, so a schedule resolves the same way each run.
pub struct Nemesis {
    partitions: Partitions,
    random: SplitMix64,
}

impl Nemesis {
    pub fn new(seed: u64) -> Self {
        Nemesis {
            partitions: Partitions::new(),
            random: SplitMix64::new(seed),
        }
    }

    pub fn partitions_healed(&self) -> bool {
        self.partitions.is_healed()
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
            Target::LeaderOf(p) => view
                .leader_of(p)
                .map(|l| vec![l])
                .ok_or_else(|| unresolved(format!("etcd records no leader of {p}"))),
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

    /// Fires `fault`; returns what it resolved to and did, for the history.
    pub async fn fire<R: Runtime>(
        &mut self,
        runtime: &mut R,
        view: &ClusterView,
        fault: &Fault,
    ) -> Result<Done, NemesisError> {
        let verb = Verb::of(fault);
        let nodes = runtime.nodes();
        let mut resolved = match (fault, fault.target()) {
            (Fault::TruncateLog(t), _) => self.resolve(&t.node, view, &nodes)?,
            (_, Some(t)) => self.resolve(t, view, &nodes)?,
            // Heal names nobody; one-way resolves its two ends below.
            (_, None) => Vec::new(),
        };
        let mut done = Done::default();
        match fault {
            Fault::Pause(_) => {
                for &n in &resolved {
                    running(runtime, n, "pause")?;
                    runtime.pause_node(n).await?;
                }
            }
            Fault::Resume(_) => {
                for &n in &resolved {
                    running(runtime, n, "resume")?;
                    runtime.resume_node(n).await?;
                }
            }
            Fault::Crash(_) => {
                for &n in &resolved {
                    running(runtime, n, "crash")?;
                    runtime.kill_node(n).await?;
                }
            }
            Fault::Stop(_) => {
                for &n in &resolved {
                    running(runtime, n, "stop")?;
                    runtime.stop_node(n).await?;
                }
            }
            Fault::Restart(_) | Fault::Start(_) => {
                for &n in &resolved {
                    if runtime.is_running(n) {
                        return Err(NemesisError::Refused(format!(
                            "cannot {verb}: {n} is running"
                        )));
                    }
                    runtime.start_node(n).await?;
                }
            }
            Fault::PowerLoss(_) => {
                let mut cuts = Vec::new();
                for &n in &resolved {
                    if runtime.is_running(n) {
                        runtime.kill_node(n).await?;
                    }
                    let cut = disk::power_loss(&runtime.data_dir(n)?)
                        .map_err(|e| NemesisError::Disk(e.to_string()))?;
                    cuts.push(NodeCut {
                        node: n,
                        cuts: Some(cut),
                        cut: None,
                    });
                }
                done.cut = Some(cuts);
            }
            Fault::TruncateLog(t) => {
                let how = t.cut;
                let mut cuts = Vec::new();
                for &n in &resolved {
                    if runtime.is_running(n) {
                        return Err(NemesisError::Refused(format!(
                            "cannot truncate-log: {} is running (crash or stop it first)",
                            n
                        )));
                    }
                    let cut = disk::truncate_log(
                        &runtime.data_dir(n)?,
                        &t.partition.topic,
                        t.partition.wire_partition(),
                        how,
                    )
                    .map_err(|e| NemesisError::Disk(e.to_string()))?;
                    cuts.push(NodeCut {
                        node: n,
                        cuts: None,
                        cut: Some(cut),
                    });
                }
                done.cut = Some(cuts);
            }
            Fault::Isolate(cut) | Fault::Bridge(cut) | Fault::NodeFromEtcd(cut) => {
                let mut blocked = Vec::new();
                for &n in &resolved {
                    let spec = match fault {
                        Fault::Isolate(_) => PartitionSpec::Isolate(n),
                        Fault::Bridge(_) => PartitionSpec::Bridge(n),
                        _ => PartitionSpec::NodeFromEtcd(n),
                    };
                    let options = (cut.id.as_deref(), cut.on_heal);
                    blocked.extend(self.partition(runtime, &spec, &nodes, options).await?);
                }
                done.blocked = Some(blocked);
            }
            Fault::MajorityMinority(cut) => {
                let spec = PartitionSpec::MajorityMinority {
                    minority: resolved.clone(),
                };
                let options = (cut.id.as_deref(), cut.on_heal);
                done.blocked = Some(self.partition(runtime, &spec, &nodes, options).await?);
            }
            Fault::OneWay(one_way) => {
                let from = self.single(&one_way.from, view, &nodes)?;
                let to = self.single(&one_way.to, view, &nodes)?;
                resolved = vec![from, to];
                let spec = PartitionSpec::OneWay { from, to };
                let options = one_way.options();
                done.blocked = Some(self.partition(runtime, &spec, &nodes, options).await?);
            }
            Fault::Heal => {
                self.partitions
                    .heal(runtime.proxies())
                    .await
                    .map_err(partition_error)?;
            }
            Fault::HealCut(id) => {
                let healed = self
                    .partitions
                    .heal_cut(runtime.proxies(), id)
                    .await
                    .map_err(partition_error)?;
                done.healed = Some(
                    healed
                        .iter()
                        .map(|(link, stream)| format!("{}:{stream:?}", link.proxy_name()))
                        .collect(),
                );
            }
        }
        done.nodes = resolved;
        Ok(done)
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
            .map(|(from, to)| format!("{}->{}", endpoint(from), endpoint(to)))
            .collect())
    }

    fn single(
        &mut self,
        target: &Target,
        view: &ClusterView,
        nodes: &[NodeId],
    ) -> Result<NodeId, NemesisError> {
        match self.resolve(target, view, nodes)?.as_slice() {
            [one] => Ok(*one),
            several => Err(NemesisError::Refused(format!(
                "{target} resolves to {} nodes; one-way needs one on each side",
                several.len()
            ))),
        }
    }
}

fn partition_error(e: partition::PartitionError) -> NemesisError {
    match e {
        partition::PartitionError::Proxy(e) => NemesisError::Partition(e.to_string()),
        // The targets do not make the partition asked for (e.g. a "minority"
        // as large as the rest), or the cut named is not in force: the
        // schedule's assumption failed.
        other => NemesisError::Refused(other.to_string()),
    }
}

fn endpoint(endpoint: &partition::Endpoint) -> String {
    match endpoint {
        partition::Endpoint::Broker(n) => n.to_string(),
        partition::Endpoint::Etcd => "etcd".into(),
    }
}

fn running<R: Runtime>(runtime: &R, node: NodeId, verb: &str) -> Result<(), NemesisError> {
    if runtime.is_running(node) {
        Ok(())
    } else {
        Err(NemesisError::Refused(format!(
            "cannot {verb}: {} is not running",
            node
        )))
    }
}
