//! Phase 4: the final heal and the quiesce. Partitions are removed, paused
//! nodes resumed and dead nodes started, each as a nemesis op; then, if the
//! schedule sets a liveness window, every partition must take a write within
//! it (liveness.rs); then the run
//! waits, bounded, for a quiet cluster: every partition led with its full
//! ISR, and every replica's high watermark and log end offset equal to the
//! leader's; then, with `[workload] final_read`, every partition is read
//! from its beginning (final_polls.rs). A cluster that will not settle makes the run unknown, naming the
//! partition and the offsets last seen.

use std::time::{Duration, Instant};

use std::collections::BTreeSet;

use crate::node::NodeId;
use crate::observe::replica::ReplicaOffsetsError;
use crate::observe::{ObserveError, replica_offsets};
use crate::run_dir::{Stuck, StuckGroup, StuckTopic, Unrecovered};
use crate::runtime::Runtime;
use crate::schedule::{Fault, Schedule, Target};

use super::live::Live;
use super::liveness;
use super::steps::faults;
use super::{RunError, RunStatus};

/// Default bound on the final quiesce (`[workload] quiesce_timeout_ms`): time
/// for restarted brokers to recover, catch up and rejoin the ISR after the
/// last fault.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the quiesce looks again.
const QUIESCE_POLL: Duration = Duration::from_millis(100);

/// Heals what the steps left broken, holds the cluster to the liveness
/// window if the schedule sets one, then awaits a quiet cluster.
pub(super) async fn final_heal<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
) -> Result<(RunStatus, Liveness), RunError> {
    let healed = heal(live).await?;
    if let RunStatus::Unknown(why) = healed {
        return Ok((RunStatus::Unknown(why), Liveness::default()));
    }
    let (stuck, stuck_groups, stuck_topics) = match schedule.workload.liveness_ms {
        Some(ms) => {
            let window = Duration::from_millis(ms);
            let stuck = liveness::probe(live, schedule, window).await?;
            let groups = liveness::probe_groups(live, schedule, window, &stuck).await?;
            (
                stuck,
                groups,
                liveness::probe_lives(live, schedule, window).await?,
            )
        }
        None => (Vec::new(), Vec::new(), Vec::new()),
    };
    let bound = schedule
        .workload
        .quiesce_timeout_ms
        .map_or(QUIESCE_TIMEOUT, Duration::from_millis);
    let (settled, unrecovered) = quiesce(live, bound).await?;
    super::stable::await_stable(live, schedule).await?;
    if schedule.workload.final_read && settled == RunStatus::Completed {
        super::final_polls::read_all(live, schedule).await?;
    }
    Ok((
        settled,
        Liveness {
            stuck,
            stuck_groups,
            stuck_topics,
            unrecovered,
        },
    ))
}

/// What the final heal found of the cluster's liveness: partitions that took
/// no write in the liveness window, groups whose coordinator took no commit
/// in it, and a quiesce that made no progress.
#[derive(Debug, Default)]
pub(super) struct Liveness {
    pub stuck: Vec<Stuck>,
    pub stuck_groups: Vec<StuckGroup>,
    pub stuck_topics: Vec<StuckTopic>,
    pub unrecovered: Option<Unrecovered>,
}

/// Removes every cut, brings the database back (resumed or restarted),
/// resumes every paused node and starts every dead one, each as a nemesis
/// op: the database before any broker, since a broker over a database
/// starts by reading it.
async fn heal<R: Runtime>(live: &mut Live<R>) -> Result<RunStatus, RunError> {
    let mut fixes = Vec::new();
    if !live.nemesis.partitions_healed() {
        fixes.push(Fault::Heal);
    }
    let database = live.runtime.database()?;
    fixes.extend(database.and_then(crate::nemesis::database::undo));
    for n in live.nodes() {
        let target = Target::Node(n);
        if !live.runtime.is_running(n) {
            fixes.push(Fault::Start(target));
        } else if live.runtime.is_paused(n)? {
            fixes.push(Fault::Resume(target));
        }
    }
    if !fixes.is_empty() {
        live.log.line("final heal");
        if let RunStatus::Unknown(why) = faults(live, 0, &fixes).await? {
            return Ok(RunStatus::Unknown(format!("final heal: {why}")));
        }
    }
    Ok(RunStatus::Completed)
}

/// Every partition led with a full ISR, and every replica's HW and LEO
/// equal to the leader's, within `bound`. A cluster still unsettled at the
/// bound is unknown; one whose unsettled state had not changed for the last
/// half of the bound made no progress toward recovery, which is recorded
/// ([`Unrecovered`]) for the verdict to judge against the system's claims.
async fn quiesce<R: Runtime>(
    live: &mut Live<R>,
    bound: Duration,
) -> Result<(RunStatus, Option<Unrecovered>), RunError> {
    let started = Instant::now();
    let deadline = started + bound;
    let source = live.observer.source();
    let nodes: BTreeSet<NodeId> = live.runtime.nodes().into_iter().collect();
    // What was last unsettled, and since when.
    let mut last: Option<(String, Instant)> = None;
    loop {
        let unsettled = match source.read().await {
            Ok(view) => match view.ready(&nodes) {
                Err(missing) => Some(format!("not ready: {missing}")),
                // Replicas' offsets are compared where etcd names the
                // replicas; a system seen through Metadata alone is quiet
                // once every broker answers for every partition (its
                // replicas, if any, are its own business).
                Ok(()) if !source.is_etcd() => {
                    live.log.line(format!(
                        "quiesced after {} ms (every broker answers Metadata)",
                        started.elapsed().as_millis()
                    ));
                    return Ok((RunStatus::Completed, None));
                }
                Ok(()) => unsettled(live).await?,
            },
            Err(ObserveError::Etcd(e)) => {
                let why = format!("did not quiesce ([workload] quiesce_timeout_ms): {e}");
                live.log.line(&why);
                return Ok((RunStatus::Unknown(why), None));
            }
            Err(e) => Some(e.to_string()),
        };
        let Some(why) = unsettled else {
            live.log.line(format!(
                "quiesced after {} ms",
                started.elapsed().as_millis()
            ));
            return Ok((RunStatus::Completed, None));
        };
        let now = Instant::now();
        let since = match &last {
            Some((seen, since)) if *seen == why => *since,
            _ => now,
        };
        if now >= deadline {
            let unchanged = now - since;
            let stalled = unchanged >= bound / 2;
            let why = format!(
                "did not quiesce within {bound:?} ([workload] quiesce_timeout_ms): {why}{}",
                if stalled {
                    format!(" (unchanged for the last {} ms)", unchanged.as_millis())
                } else {
                    " (still changing)".to_owned()
                }
            );
            live.log.line(&why);
            let unrecovered = if stalled {
                Some(Unrecovered {
                    unsettled: last.map_or(why.clone(), |(seen, _)| seen),
                    replicas: replicas_behind(live).await?,
                    unchanged_ms: unchanged.as_millis() as u64,
                    bound_ms: bound.as_millis() as u64,
                })
            } else {
                None
            };
            return Ok((RunStatus::Unknown(why), unrecovered));
        }
        last = Some((why, since));
        tokio::time::sleep(QUIESCE_POLL).await;
    }
}

/// Every replica of a partition whose replicas are not all at its leader's
/// log end, as `t-0: b1 leader (HW 5, LEO 5), b2 (HW 0, LEO 0)` (a replica
/// that did not answer, with why): the evidence of a cluster that did not
/// recover.
async fn replicas_behind<R: Runtime>(live: &mut Live<R>) -> Result<Vec<String>, RunError> {
    let view = live.view().await?;
    let mut behind = Vec::new();
    for (partition, state) in &view.partitions {
        let offsets = offsets_of(live, partition, &state.replicas).await;
        let ends: Vec<Option<u64>> = offsets
            .iter()
            .map(|(_, o)| o.as_ref().ok().map(|&(_, leo)| leo))
            .collect();
        if ends.windows(2).any(|w| w[0] != w[1]) {
            let seen: Vec<String> = offsets
                .iter()
                .map(|(r, o)| {
                    let role = if Some(*r) == state.leader {
                        " leader"
                    } else {
                        ""
                    };
                    match o {
                        Ok((hw, leo)) => format!("{r}{role} (HW {hw}, LEO {leo})"),
                        Err(why) => format!("{r}{role} ({why})"),
                    }
                })
                .collect();
            behind.push(format!("{partition}: {}", seen.join(", ")));
        }
    }
    Ok(behind)
}

/// Each replica's (HW, LEO) of `partition`, asked on its own port, or why
/// it did not answer.
async fn offsets_of<R: Runtime>(
    live: &Live<R>,
    partition: &crate::topic_partition::PartitionRef,
    replicas: &[NodeId],
) -> Vec<(NodeId, Result<(u64, u64), ReplicaOffsetsError>)> {
    let mut offsets = Vec::with_capacity(replicas.len());
    for &r in replicas {
        let answer = replica_offsets(&live.runtime, r, partition).await;
        offsets.push((r, answer));
    }
    offsets
}

/// The first partition whose replicas are not yet all at one (HW, LEO) with
/// HW = LEO, and why; `None` when every partition is.
async fn unsettled<R: Runtime>(live: &mut Live<R>) -> Result<Option<String>, RunError> {
    let view = live.view().await?;
    for (partition, state) in &view.partitions {
        let mut seen = Vec::new();
        for (r, answer) in offsets_of(live, partition, &state.replicas).await {
            match answer {
                Ok(offsets) => seen.push(offsets),
                Err(why) => return Ok(Some(format!("{partition} on {r}: {why}"))),
            }
        }
        let first = seen.first().copied();
        if seen
            .iter()
            .any(|&(hw, leo)| Some((hw, leo)) != first || hw != leo)
        {
            return Ok(Some(format!("{partition}: replicas' (HW, LEO) {seen:?}")));
        }
    }
    Ok(None)
}
