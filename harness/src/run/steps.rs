//! Phase 3: the schedule's steps, in order, beside the background workload.
//! A fault goes through the nemesis (its target resolved from etcd as it
//! fires) and is recorded on the nemesis process; a produce or consume goes
//! through the worker's op-recording client; an await polls a condition over
//! direct observation, or counts the background producers' acks. The first
//! step that cannot establish its premise (an await timed out, a target that
//! names nobody) ends the steps and makes the run unknown.

use std::time::{Duration, Instant};

use crate::history::{Body, Done, FaultOp, Intent, OpType, Process, Verb};
use crate::nemesis::NemesisError;
use crate::node::NodeId;
use crate::observe::{ClusterView, ObserveError};
use crate::runtime::Runtime;
use crate::schedule::{
    Condition, Consume, Fault, PartitionRef, Produce, Schedule, Step, Target, TxnIntent, TxnStepOp,
};
use crate::workload::background::{Counted, Workers};
use crate::workload::send_options::SendOptions;
use crate::workload::txn::Planned;

use super::live::Live;
use super::{RunError, RunStatus};

/// Runs every step with the background workers (if any) going, then stops them.
pub(super) async fn play<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
) -> Result<RunStatus, RunError> {
    let mut background = start_background(live, schedule);
    let mut status = RunStatus::Completed;
    for (i, step) in schedule.steps.iter().enumerate() {
        let number = i + 1;
        if let RunStatus::Unknown(why) =
            run_step(live, schedule, background.as_mut(), number, step).await?
        {
            status = RunStatus::Unknown(format!("step {number}: {why}"));
            break;
        }
    }
    if let Some(workers) = background {
        stop_background(live, workers).await?;
    }
    Ok(status)
}

/// Stops the background workers, each finishing its request in flight.
pub async fn stop_background<R: Runtime>(
    live: &mut Live<R>,
    workers: Workers,
) -> Result<(), RunError> {
    let acknowledged = workers.acknowledged();
    workers.stop().await?;
    live.log.line(format!(
        "background workload stopped: {acknowledged} sends acknowledged"
    ));
    Ok(())
}

/// Starts `[workload.background]`'s workers on the ready cluster.
pub fn start_background<R: Runtime>(live: &mut Live<R>, schedule: &Schedule) -> Option<Workers> {
    let config = schedule.workload.background.as_ref()?;
    let partitions = schedule.cluster.partitions().collect();
    let workers = Workers::start(config, &schedule.workload, partitions, &live.clients);
    live.log.line(format!(
        "background workload: {} producers, {} consumers, every {} ms",
        config.producers, config.consumers, config.interval_ms
    ));
    Some(workers)
}

async fn run_step<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
    background: Option<&mut Workers>,
    number: usize,
    step: &Step,
) -> Result<RunStatus, RunError> {
    match step {
        Step::Fault(_) | Step::Faults(_) => faults(live, number, step.faults()).await,
        Step::Produce(produce) => {
            send(live, schedule, number, produce).await?;
            Ok(RunStatus::Completed)
        }
        Step::Consume(consume) => {
            poll(live, number, consume).await?;
            Ok(RunStatus::Completed)
        }
        Step::Commit(commit) => {
            let first = group_first(live, &commit.partition).await?;
            let client = live.scripted_client(commit.process.unwrap_or(0));
            let op = client
                .commit(&commit.group, &commit.partition, commit.offset, first)
                .await?;
            live.log.line(format!(
                "step {number}: commit {} of {} for {} -> {:?}{}",
                commit.offset,
                commit.partition,
                commit.group,
                op.kind,
                op.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
            Ok(RunStatus::Completed)
        }
        Step::Committed(read) => {
            let first = group_first(live, &read.partition).await?;
            let client = live.scripted_client(read.process.unwrap_or(0));
            let op = client
                .committed(&read.group, &read.partition, first)
                .await?;
            let answered = match &op.body {
                crate::history::Body::Committed(c) => c.offset,
                _ => None,
            };
            live.log.line(format!(
                "step {number}: committed {} for {} -> {:?} {}",
                read.partition,
                read.group,
                op.kind,
                answered.map_or_else(|| op.error.clone().unwrap_or_default(), |o| o.to_string())
            ));
            Ok(RunStatus::Completed)
        }
        Step::Subscribe(subscribe) => {
            super::members::subscribe(live, schedule, number, subscribe).await?;
            Ok(RunStatus::Completed)
        }
        Step::Poll(poll) => super::members::poll(live, number, poll).await,
        Step::Unsubscribe(member) => Ok(super::members::unsubscribe(live, number, member).await),
        Step::Txn(step) => {
            let planned: Vec<Planned> = step
                .ops
                .iter()
                .map(|op| match op {
                    TxnStepOp::Send(p, value) => Planned::Send(p.clone(), *value),
                    TxnStepOp::Poll(p) => Planned::Poll(p.clone()),
                })
                .collect();
            let intent = match step.intent {
                TxnIntent::Commit => Intent::Commit,
                TxnIntent::Abort => Intent::Abort,
            };
            let (client, producer) = live.scripted_txn(step.process.unwrap_or(0), &step.id);
            let op = client.txn(producer, &planned, intent).await?;
            live.log.line(format!(
                "step {number}: txn of {} ({} ops, {:?}) -> {:?}{}",
                step.id,
                planned.len(),
                intent,
                op.kind,
                op.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
            Ok(RunStatus::Completed)
        }
        Step::Await {
            condition,
            timeout_ms,
        } => {
            let timeout =
                Duration::from_millis(timeout_ms.unwrap_or(schedule.workload.await_timeout_ms));
            wait(live, background, number, condition, timeout).await
        }
    }
}

/// Fires faults in order, each recorded on the nemesis process. Also the
/// final heal's way of firing (quiesce.rs), as step 0.
pub async fn faults<R: Runtime>(
    live: &mut Live<R>,
    number: usize,
    faults: &[Fault],
) -> Result<RunStatus, RunError> {
    for fault in faults {
        if let Fired::Refused(e) = fire(live, number, fault).await? {
            return Ok(RunStatus::Unknown(format!("{}: {e}", Verb::of(fault))));
        }
    }
    Ok(RunStatus::Completed)
}

/// What one fault did: what it resolved to and did (as the history records
/// it), or why the cluster's state refused it (a target that names nobody
/// now, a node not running).
#[derive(Debug)]
pub enum Fired {
    Done(Done),
    Refused(NemesisError),
}

/// Fires one fault, as step `number`, recorded on the nemesis process: its
/// target resolved from the cluster's view now. A failure that is the
/// harness's, not the cluster's, is an error.
pub async fn fire<R: Runtime>(
    live: &mut Live<R>,
    number: usize,
    fault: &Fault,
) -> Result<Fired, RunError> {
    let mut op = FaultOp::of(fault);
    let f = op.verb;
    live.history
        .invoke(Process::Nemesis, Body::Fault(Box::new(op.clone())))?;
    let view = match live.observer.view().await {
        Ok(view) => view,
        // No broker answers Metadata (a system without etcd, every
        // broker down): a fault at named nodes still fires, one at a
        // role resolves to nothing.
        Err(ObserveError::NoMetadata(_)) => ClusterView::default(),
        Err(source) => {
            return Err(RunError::Await {
                step: number,
                source,
            });
        }
    };
    let fired = live
        .nemesis
        .fire(&mut live.runtime, &mut live.observer, &view, fault)
        .await;
    match fired {
        Ok(done) => {
            op.done = Some(done.clone());
            let body = Body::Fault(Box::new(op));
            live.log.line(format!(
                "step {number}: {f} {}",
                body.to_value(OpType::Info)
            ));
            // A connection to a node that just died or was cut is stale.
            for client in live.scripted.values_mut() {
                client.drop_connections();
            }
            live.history
                .append(Process::Nemesis, OpType::Info, body, None)?;
            Ok(Fired::Done(done))
        }
        Err(e) => {
            live.history.append(
                Process::Nemesis,
                OpType::Info,
                Body::Fault(Box::new(op)),
                Some(e.to_string()),
            )?;
            live.log.line(format!("step {number}: {f} failed: {e}"));
            if e.is_cluster_state() {
                Ok(Fired::Refused(e))
            } else {
                Err(RunError::Fault {
                    step: number,
                    verb: f,
                    source: e,
                })
            }
        }
    }
}

/// The broker a group op asks first for the coordinator: the partition's
/// leader now, else the first node.
async fn group_first<R: Runtime>(
    live: &mut Live<R>,
    partition: &PartitionRef,
) -> Result<NodeId, RunError> {
    Ok(client_target(live, None, partition)
        .await?
        .unwrap_or_else(|| NodeId::new(1)))
}

/// The node a client op goes to: `leader` (now, from etcd) or a named node.
async fn client_target<R: Runtime>(
    live: &mut Live<R>,
    to: Option<&Target>,
    partition: &PartitionRef,
) -> Result<Option<NodeId>, RunError> {
    match to {
        Some(Target::Node(node)) => Ok(Some(*node)),
        None | Some(Target::Leader) | Some(Target::LeaderOf(_)) => {
            Ok(live.view().await?.leader_of(partition))
        }
        Some(other) => {
            let view = live.view().await?;
            let nodes = live.nodes();
            Ok(live
                .nemesis
                .resolve(other, &view, &nodes)
                .ok()
                .and_then(|n| n.first().copied()))
        }
    }
}

async fn send<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
    number: usize,
    produce: &Produce,
) -> Result<(), RunError> {
    let workload = &schedule.workload;
    let options = SendOptions {
        acks: produce.acks.unwrap_or(workload.acks),
        records_per_batch: produce
            .records_per_batch
            .unwrap_or(workload.records_per_batch),
        compression: produce.compression.unwrap_or(workload.compression),
        key: produce.key.as_deref().map(Into::into),
        value_bytes: produce.value_bytes,
    };
    // One request for all the values, or one per value in turn.
    let requests: Vec<Vec<i64>> = if produce.one_request_per_record {
        produce.values.iter().map(|&v| vec![v]).collect()
    } else {
        vec![produce.values.clone()]
    };
    for values in requests {
        let node = client_target(live, produce.to.as_ref(), &produce.partition).await?;
        let client = live.scripted_client(produce.process.unwrap_or(0));
        let op = client
            .send(&produce.partition, values.clone(), node, options.clone())
            .await?;
        let Some(node) = node else {
            live.log.line(format!(
                "step {number}: send: no leader of {}",
                produce.partition
            ));
            continue;
        };
        live.log.line(format!(
            "step {number}: send {values:?} to {node} -> {:?}{}",
            op.kind,
            op.error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
    }
    Ok(())
}

async fn poll<R: Runtime>(
    live: &mut Live<R>,
    number: usize,
    consume: &Consume,
) -> Result<(), RunError> {
    let node = client_target(live, consume.from.as_ref(), &consume.partition).await?;
    let client = live.scripted_client(consume.process.unwrap_or(0));
    let op = client
        .poll(&consume.partition, consume.from_offset, node)
        .await?;
    let Some(node) = node else {
        return Ok(());
    };
    let read = op.read().map_or(0, |(_, read)| read.records.len());
    live.log.line(format!(
        "step {number}: poll {} from {node} at {} -> {:?} ({read} records)",
        consume.partition, consume.from_offset, op.kind
    ));
    Ok(())
}

/// An await: a condition observed over direct connections, or (for `N more
/// writes acknowledged`) the background producers' ack count.
async fn wait<R: Runtime>(
    live: &mut Live<R>,
    background: Option<&mut Workers>,
    number: usize,
    condition: &Condition,
    timeout: Duration,
) -> Result<RunStatus, RunError> {
    live.log.line(format!(
        "step {number}: await {condition} (within {timeout:?})"
    ));
    let started = Instant::now();
    if let Condition::Elapsed { ms } = condition {
        // A delay the schedule keeps (a campaign's gap between faults), not a
        // state awaited: nothing to observe, so nothing to time out.
        tokio::time::sleep(Duration::from_millis(*ms)).await;
        return Ok(RunStatus::Completed);
    }
    let counted = match condition {
        Condition::Acknowledged { more } => Some((Counted::Writes, *more)),
        Condition::CommitsAcknowledged { more } => Some((Counted::Commits, *more)),
        _ => None,
    };
    if let Some((counted, more)) = counted {
        let workers = background.ok_or_else(|| RunError::NoBackground {
            step: number,
            condition: condition.to_string(),
        })?;
        return Ok(match workers.await_counted(counted, more, timeout).await {
            Ok(n) => {
                live.log.line(format!(
                    "step {number}: {n} more {counted} acknowledged after {} ms",
                    started.elapsed().as_millis()
                ));
                RunStatus::Completed
            }
            Err(n) => {
                let e = format!("\"{condition}\" not within {timeout:?}; {n} were");
                live.log.line(format!("step {number}: {e}"));
                RunStatus::Unknown(format!("await {e}"))
            }
        });
    }
    match live
        .observer
        .await_condition(&live.runtime, condition, timeout)
        .await
    {
        Ok(seen) => {
            live.log.line(format!(
                "step {number}: {seen} after {} ms",
                started.elapsed().as_millis()
            ));
            Ok(RunStatus::Completed)
        }
        Err(e @ ObserveError::Timeout { .. }) => {
            live.log.line(format!("step {number}: {e}"));
            Ok(RunStatus::Unknown(format!("await {e}")))
        }
        Err(source) => Err(RunError::Await {
            step: number,
            source,
        }),
    }
}
