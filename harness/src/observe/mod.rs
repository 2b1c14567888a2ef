//! Observation: what the cluster says, seen only over connections no fault
//! touches — etcd directly (leaders, ISRs, the controller: [`etcd`], and its
//! revision history: [`timeline`]), each broker's own port bypassing its
//! proxies and its data directory ([`replica`]), and the process table (a
//! SIGSTOPped node), and the final read over the Kafka protocol that writes a
//! broker's log as Kafka segments ([`final_read`], for a broker whose files
//! the harness cannot read), and a system's database read after the run by
//! the harness's own client and written so too ([`database`]; what the two
//! writers share is [`segments`]). It reads and never acts: readiness ([`ready`]) and the
//! conditions an `await` step waits on are judged here, not by a runtime. A
//! wait polls with a deadline; when the deadline passes it reports the
//! condition and the last thing it saw.

pub mod database;
mod error;
pub mod etcd;
pub mod final_read;
pub mod ready;
pub mod replica;
pub mod segments;
pub mod source;
pub mod timeline;

use std::time::{Duration, Instant};

pub use error::ObserveError;
pub use etcd::{ClusterView, PartitionView};
pub use ready::{await_ready, await_ready_from};
pub use replica::replica_offsets;
pub use source::{MetadataSource, ViewSource};

use crate::reader::checkpoint::{
    LEADER_EPOCH_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
    parse_leader_epochs, parse_offsets,
};
use crate::runtime::{NodeId, Runtime};
use crate::schedule::condition::{Checkpoint, Compare, Condition, Offset};
use crate::topic_partition::PartitionRef;
use replica::applied_leader_and_isr;

/// How often a wait re-checks; each check is cheap (one etcd range read, or
/// one small request, or one file read).
const POLL: Duration = Duration::from_millis(50);

/// The answer of one look at the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Met(String),
    NotYet(String),
}

pub struct Observer {
    source: ViewSource,
}

impl Observer {
    /// An observer of etcd at `endpoint` (the reference broker's decisions).
    pub async fn connect(endpoint: &str) -> Result<Self, ObserveError> {
        let options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(Duration::from_secs(5));
        let etcd = etcd_client::Client::connect([endpoint], Some(options)).await?;
        Ok(Observer::new(etcd.into()))
    }

    pub fn new(source: ViewSource) -> Self {
        Observer { source }
    }

    /// Where the observer's views come from (cheap to clone: an etcd handle
    /// shares the channel).
    pub fn source(&self) -> ViewSource {
        self.source.clone()
    }

    /// The cluster as etcd, or the brokers' Metadata, say it is now.
    pub async fn view(&mut self) -> Result<ClusterView, ObserveError> {
        self.source.read().await
    }

    /// Polls `condition` until it holds or `timeout` passes.
    pub async fn await_condition<R: Runtime>(
        &mut self,
        runtime: &R,
        condition: &Condition,
        timeout: Duration,
    ) -> Result<String, ObserveError> {
        let deadline = Instant::now() + timeout;
        // ISR membership is also judged on every state etcd recorded since the
        // await began, so a state that came and went between two looks counts
        // (a replica out of the ISR for 40 ms while a controller takes over and
        // its leader takes it back: a campaign's KIP-380 watch missed one).
        let mut since = match condition {
            Condition::InIsr { .. } => self.etcd_revision().await,
            _ => None,
        };
        loop {
            let seen = match self.check(runtime, condition).await {
                Ok(Seen::Met(seen)) => return Ok(seen),
                Ok(Seen::NotYet(seen)) if since.is_some() => {
                    match self.met_since(condition, &mut since).await {
                        Some(met) => return Ok(met),
                        None => seen,
                    }
                }
                Ok(Seen::NotYet(seen)) => seen,
                // etcd answering slowly is no reason to give up before the deadline.
                Err(ObserveError::Etcd(e)) => format!("etcd: {e}"),
                Err(e @ ObserveError::NoMetadata(_)) => e.to_string(),
                Err(e) => return Err(e),
            };
            if Instant::now() >= deadline {
                return Err(ObserveError::Timeout {
                    condition: condition.to_string(),
                    timeout,
                    seen,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// etcd's current revision; `None` when the view does not come from
    /// etcd or etcd does not answer.
    async fn etcd_revision(&mut self) -> Option<i64> {
        let ViewSource::Etcd(client) = &mut self.source else {
            return None;
        };
        timeline::current_revision(client).await.ok()
    }

    /// Whether an ISR-membership `condition` held at a partition state etcd
    /// recorded after revision `since` (moved on to the revision read now).
    /// `None` when it did not, or the history could not be read (the next
    /// look reads from the same revision).
    async fn met_since(
        &mut self,
        condition: &Condition,
        since: &mut Option<i64>,
    ) -> Option<String> {
        let Condition::InIsr {
            node,
            partition,
            member,
        } = condition
        else {
            return None;
        };
        let after = (*since)?;
        let upto = self.etcd_revision().await?;
        let ViewSource::Etcd(client) = &mut self.source else {
            return None;
        };
        let changes = timeline::read_changes(client, after, upto).await.ok()?;
        *since = Some(upto);
        changes
            .states_of(&partition.topic, partition.partition)
            .into_iter()
            .find(|state| {
                state
                    .isr
                    .iter()
                    .any(|&b| NodeId::from_broker_id(b) == Some(*node))
                    == *member
            })
            .map(|state| {
                let isr: Vec<NodeId> = state
                    .isr
                    .iter()
                    .filter_map(|&b| NodeId::from_broker_id(b))
                    .collect();
                format!(
                    "ISR of {partition} was {:?} at etcd revision {}",
                    NodeId::ids(&isr),
                    state.revision
                )
            })
    }

    /// One look.
    pub async fn check<R: Runtime>(
        &mut self,
        runtime: &R,
        condition: &Condition,
    ) -> Result<Seen, ObserveError> {
        Ok(match condition {
            Condition::LeaderIs { partition, node } => {
                self.leader_is(runtime, partition, *node).await?
            }
            Condition::InIsr {
                node,
                partition,
                member,
            } => {
                let view = self.view().await?;
                let isr = view
                    .partition(partition)
                    .map(|p| p.isr.clone())
                    .unwrap_or_default();
                verdict(
                    isr.contains(node) == *member,
                    format!("ISR of {partition} is {:?}", NodeId::ids(&isr)),
                )
            }
            Condition::ControllerIs { node, is } => {
                let view = self.view().await?;
                verdict(
                    (view.controller == Some(*node)) == *is,
                    format!("controller is {}", show_node(view.controller)),
                )
            }
            Condition::OffsetIs {
                offset,
                node,
                partition,
                compare,
                value,
            } => offset_is(runtime, *offset, *node, partition, *compare, *value).await,
            Condition::NoLeader { partition } => {
                let view = self.view().await?;
                let leader = view.leader_of(partition);
                verdict(
                    leader.is_none(),
                    format!("leader of {partition} is {}", show_node(leader)),
                )
            }
            Condition::EpochCheckpointIs {
                node,
                partition,
                entries,
            } => epoch_checkpoint_is(runtime, *node, partition, entries)?,
            Condition::CheckpointIs {
                checkpoint,
                node,
                partition,
                value,
            } => checkpoint_is(runtime, *checkpoint, *node, partition, *value)?,
            Condition::AppliedLeaderAndIsr {
                node,
                partition,
                leader_epoch,
            } => {
                let applied: Vec<i32> = applied_leader_and_isr(runtime, *node, partition)?
                    .into_iter()
                    .map(|(_, epoch)| epoch)
                    .collect();
                verdict(
                    match leader_epoch {
                        Some(e) => applied.contains(&(*e as i32)),
                        None => !applied.is_empty(),
                    },
                    format!(
                        "{node} applied LeaderAndIsr for {partition} with leader epochs {applied:?}"
                    ),
                )
            }
            Condition::Stopped { node } => stopped(runtime, *node)?,
            // The run counts these itself (workload/background.rs); nothing
            // in the cluster shows them.
            Condition::Acknowledged { .. } | Condition::CommitsAcknowledged { .. } => Seen::NotYet(
                "acknowledgements are counted by the background workload, not observed".into(),
            ),
            // The run keeps this delay itself (run/steps.rs).
            Condition::Elapsed { .. } => Seen::NotYet("a delay is kept, not observed".into()),
        })
    }

    /// Whether etcd names `node` leader of `partition` and the node has
    /// applied the LeaderAndIsr that made it leader in that epoch.
    async fn leader_is<R: Runtime>(
        &mut self,
        runtime: &R,
        partition: &PartitionRef,
        node: NodeId,
    ) -> Result<Seen, ObserveError> {
        let view = self.view().await?;
        let leader = view.leader_of(partition);
        if leader != Some(node) {
            return Ok(Seen::NotYet(format!(
                "leader of {partition} is {}",
                show_node(leader)
            )));
        }
        // A leader in Metadata is the broker's own word: it leads.
        if !self.source.is_etcd() {
            return Ok(Seen::Met(format!("leader of {partition} is {node}")));
        }
        // Named in etcd is not yet leading: the node must also have
        // applied the LeaderAndIsr that made it leader in this epoch, so
        // a produce sent next reaches a leader, not NOT_LEADER.
        let epoch = view.partition(partition).map_or(-1, |p| p.leader_epoch);
        let applied = applied_leader_and_isr(runtime, node, partition)?;
        let leading = applied
            .iter()
            .any(|&(leader, e)| leader == node.broker_id() && e == epoch);
        Ok(verdict(
            leading,
            format!(
                "leader of {partition} is {node} in epoch {epoch}{}",
                if leading {
                    ""
                } else {
                    ", not yet applied by it"
                }
            ),
        ))
    }
}

/// `Met` when `met`, else `NotYet`, with what was seen.
fn verdict(met: bool, seen: String) -> Seen {
    if met {
        Seen::Met(seen)
    } else {
        Seen::NotYet(seen)
    }
}

/// Whether `node`'s high watermark or log end offset for `partition`, asked
/// of the broker, compares with `wanted`; a broker that does not answer is
/// "not yet".
async fn offset_is<R: Runtime>(
    runtime: &R,
    offset: Offset,
    node: NodeId,
    partition: &PartitionRef,
    compare: Compare,
    wanted: u64,
) -> Seen {
    let name = match offset {
        Offset::Hw => "HW",
        Offset::Leo => "LEO",
    };
    match replica_offsets(runtime, node, partition).await {
        Ok((hw, leo)) => {
            let value = if offset == Offset::Hw { hw } else { leo };
            verdict(
                compare.holds(value, wanted),
                format!("{name} of {node} for {partition} is {value}"),
            )
        }
        Err(why) => Seen::NotYet(format!("{name} of {node} for {partition}: {why}")),
    }
}

/// Whether `node`'s leader-epoch-checkpoint for `partition` holds exactly
/// `entries`, read from its data directory.
fn epoch_checkpoint_is<R: Runtime>(
    runtime: &R,
    node: NodeId,
    partition: &PartitionRef,
    entries: &[(i32, i64)],
) -> Result<Seen, ObserveError> {
    let path = runtime
        .data_dir(node)?
        .join(partition.to_string())
        .join(LEADER_EPOCH_CHECKPOINT);
    // Absent until first written, and a read may race the broker's
    // rename: either is "not yet", never an error.
    Ok(
        match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| parse_leader_epochs(&path, &text).map_err(|e| e.to_string()))
        {
            Ok(found) => {
                let found: Vec<(i32, i64)> =
                    found.iter().map(|e| (e.epoch, e.start_offset)).collect();
                verdict(
                    found == entries,
                    format!("{LEADER_EPOCH_CHECKPOINT} of {node} for {partition} is {found:?}"),
                )
            }
            Err(why) => Seen::NotYet(format!(
                "{LEADER_EPOCH_CHECKPOINT} of {node} for {partition}: {why}"
            )),
        },
    )
}

/// Whether `node`'s high-watermark or recovery-point checkpoint file holds
/// `value` for `partition`, read from its data directory.
fn checkpoint_is<R: Runtime>(
    runtime: &R,
    checkpoint: Checkpoint,
    node: NodeId,
    partition: &PartitionRef,
    value: u64,
) -> Result<Seen, ObserveError> {
    let file = match checkpoint {
        Checkpoint::Hw => REPLICATION_OFFSET_CHECKPOINT,
        Checkpoint::RecoveryPoint => RECOVERY_POINT_OFFSET_CHECKPOINT,
    };
    let path = runtime.data_dir(node)?.join(file);
    let found = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| parse_offsets(&path, &text).map_err(|e| e.to_string()))
        .map(|entries| {
            entries
                .into_iter()
                .find(|e| e.topic == partition.topic && e.partition == partition.wire_partition())
                .map(|e| e.offset)
        });
    Ok(match found {
        Ok(Some(offset)) => verdict(
            offset == value as i64,
            format!("{file} of {node} has {partition} at {offset}"),
        ),
        Ok(None) => Seen::NotYet(format!("{file} of {node} has no {partition}")),
        // Absent until first written; a torn read retries.
        Err(why) => Seen::NotYet(format!("{file} of {node}: {why}")),
    })
}

/// Whether the process table shows `node` stopped (SIGSTOPped).
fn stopped<R: Runtime>(runtime: &R, node: NodeId) -> Result<Seen, ObserveError> {
    let paused = runtime.is_paused(node)?;
    Ok(verdict(
        paused,
        if paused {
            format!("{node} is stopped")
        } else if runtime.is_running(node) {
            format!("{node} is running")
        } else {
            format!("{node} is not running")
        },
    ))
}

fn show_node(node: Option<NodeId>) -> String {
    node.map_or_else(|| "none".to_owned(), |n| n.to_string())
}
