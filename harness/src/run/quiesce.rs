//! Phase 4: the final heal and the quiesce. Partitions are removed, paused
//! nodes resumed and dead nodes started, each as a nemesis op; then, if the
//! schedule sets a liveness window, every partition must take a write within
//! it (liveness.rs); then the run
//! waits, bounded, for a quiet cluster: every partition led with its full
//! ISR, and every replica's high watermark and log end offset equal to the
//! leader's; then, with `[workload] final_read`, every partition is read
//! from its beginning (final_read.rs). A cluster that will not settle makes the run unknown, naming the
//! partition and the offsets last seen.

use std::time::{Duration, Instant};

use crate::observe::{await_ready_from, replica_offsets};
use crate::run_dir::Stuck;
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
) -> Result<(RunStatus, Vec<Stuck>), RunError> {
    let healed = heal(live).await?;
    if let RunStatus::Unknown(why) = healed {
        return Ok((RunStatus::Unknown(why), Vec::new()));
    }
    let stuck = match schedule.workload.liveness_ms {
        Some(ms) => liveness::probe(live, schedule, Duration::from_millis(ms)).await?,
        None => Vec::new(),
    };
    let bound = schedule
        .workload
        .quiesce_timeout_ms
        .map_or(QUIESCE_TIMEOUT, Duration::from_millis);
    let settled = quiesce(live, bound).await?;
    super::stable::await_stable(live, schedule).await?;
    if schedule.workload.final_read && settled == RunStatus::Completed {
        super::final_read::read_all(live, schedule).await?;
    }
    Ok((settled, stuck))
}

/// Removes every cut, resumes every paused node and starts every dead one,
/// each as a nemesis op.
async fn heal<R: Runtime>(live: &mut Live<R>) -> Result<RunStatus, RunError> {
    let mut fixes = Vec::new();
    if !live.nemesis.partitions_healed() {
        fixes.push(Fault::Heal);
    }
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
/// equal to the leader's, within `bound`.
async fn quiesce<R: Runtime>(live: &mut Live<R>, bound: Duration) -> Result<RunStatus, RunError> {
    let started = Instant::now();
    let deadline = started + bound;
    let source = live.observer.source();
    if let Err(e) = await_ready_from(&source, live.runtime.nodes(), bound).await {
        let why = format!("did not quiesce ([workload] quiesce_timeout_ms): {e}");
        live.log.line(&why);
        return Ok(RunStatus::Unknown(why));
    }
    // Replicas' offsets are compared where etcd names the replicas; a
    // system seen through Metadata alone is quiet once every broker answers
    // for every partition (its replicas, if any, are its own business).
    if !source.is_etcd() {
        live.log.line(format!(
            "quiesced after {} ms (every broker answers Metadata)",
            started.elapsed().as_millis()
        ));
        return Ok(RunStatus::Completed);
    }
    loop {
        let unsettled = unsettled(live).await?;
        match unsettled {
            None => {
                live.log.line(format!(
                    "quiesced after {} ms",
                    started.elapsed().as_millis()
                ));
                return Ok(RunStatus::Completed);
            }
            Some(why) if Instant::now() >= deadline => {
                let why = format!(
                    "did not quiesce within {bound:?} ([workload] quiesce_timeout_ms): {why}"
                );
                live.log.line(&why);
                return Ok(RunStatus::Unknown(why));
            }
            Some(_) => tokio::time::sleep(QUIESCE_POLL).await,
        }
    }
}

/// The first partition whose replicas are not yet all at one (HW, LEO) with
/// HW = LEO, and why; `None` when every partition is.
async fn unsettled<R: Runtime>(live: &mut Live<R>) -> Result<Option<String>, RunError> {
    let view = live.view().await?;
    for (partition, state) in &view.partitions {
        let mut seen = Vec::new();
        for &r in &state.replicas {
            match replica_offsets(&live.runtime, r, partition).await {
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
