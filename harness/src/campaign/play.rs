//! Phase 3 of a campaign (campaign/mod.rs says what one is), as the run's
//! [`Driver`] a campaign's [`Plan`] is: under the
//! background load, the nemesis waits a gap, looks at the cluster, picks a
//! fault or an undo (campaign/pick.rs), resolves its roles against etcd's
//! view, fires it as an ordinary step, and writes it into `schedule.toml`
//! with the gap before it. It stops after the plan's duration or number of
//! faults; the final heal and the liveness window follow as for any run.
//!
//! A gap is "N more writes acknowledged", N drawn from the plan, bounded by
//! the plan's time: when the cluster takes too few writes to count (a
//! partition without a leader holds up every producer that goes round to it),
//! the gap is written as the time that passed instead. Either way a replay
//! spaces its faults as this run did, in the unit that mattered.

use std::collections::BTreeSet;
use std::time::Instant;

use super::pick::{self, State};
use super::{Plan, StopAfter};
use crate::run::{Driver, Live, RunError, RunStatus, faults, start_background, stop_background};
use crate::run_dir::RunDir;
use crate::runtime::Runtime;
use crate::schedule::{Condition, PartitionRef, Schedule, Step};

/// Bound a replay gives each realised "N more writes acknowledged": long, as
/// the campaign saw those writes come; a replay that waits longer has not
/// reproduced the run and ends unknown saying so.
const REPLAY_AWAIT_MS: u64 = 60_000;

impl Driver for Plan {
    async fn play<R: Runtime>(
        self,
        live: &mut Live<R>,
        schedule: &Schedule,
        dir: &RunDir,
    ) -> Result<RunStatus, RunError> {
        play(live, schedule, &self, dir).await
    }
}

async fn play<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
    plan: &Plan,
    dir: &RunDir,
) -> Result<RunStatus, RunError> {
    let Some(mut workers) = start_background(live, schedule) else {
        return Err(RunError::CampaignWithoutBackground);
    };
    let partitions: Vec<PartitionRef> = schedule.cluster.partitions().collect();
    let mut realised = schedule.clone();
    let mut random = plan.picker();
    let started = Instant::now();
    let mut fired = 0u32;
    let mut progress = Progress::new();
    let done = |fired: u32| match plan.stop {
        StopAfter::Duration(d) => started.elapsed() >= d,
        StopAfter::Faults(n) => fired >= n,
    };
    while !done(fired) {
        // The gap, never past the campaign's end.
        let mut bound = plan.gap_max;
        if let StopAfter::Duration(d) = plan.stop {
            bound = bound.min(d.saturating_sub(started.elapsed()));
        }
        let more = random.between(plan.gap_acks.0, plan.gap_acks.1);
        if more > 0 {
            let gap_started = Instant::now();
            let gap = match workers.await_acknowledged(more, bound).await {
                Ok(n) => Condition::Acknowledged { more: n },
                Err(_) => Condition::Elapsed {
                    ms: gap_started.elapsed().as_millis() as u64,
                },
            };
            realised.steps.push(Step::Await {
                timeout_ms: matches!(gap, Condition::Acknowledged { .. })
                    .then_some(REPLAY_AWAIT_MS),
                condition: gap,
            });
        }
        if done(fired) {
            break;
        }
        let view = live.view().await?;
        let nodes = live.nodes();
        let mut state = State {
            nodes: nodes.clone(),
            down: BTreeSet::new(),
            paused: BTreeSet::new(),
            cut: !live.nemesis.partitions_healed(),
            partitions: partitions.clone(),
        };
        for &n in &nodes {
            if !live.runtime.is_running(n) {
                state.down.insert(n);
            } else if live.runtime.is_paused(n)? {
                state.paused.insert(n);
            }
        }
        let Some(choice) = pick::choose(&mut random, plan, &state) else {
            continue;
        };
        let nemesis = &mut live.nemesis;
        let Some(fault) = pick::realise(&mut random, &choice, &state, |target| {
            nemesis.resolve(target, &view, &nodes).ok()
        }) else {
            live.log
                .line(format!("campaign: {choice:?} names nobody now; skipped"));
            continue;
        };
        let number = realised.steps.len() + 1;
        match faults(live, number, std::slice::from_ref(&fault)).await? {
            RunStatus::Completed => {
                fired += 1;
                realised.steps.push(Step::Fault(fault));
                dir.write_schedule(&realised)?;
                let line = format!(
                    "campaign: {fired} faults fired, {} writes acknowledged, {:.1} s",
                    workers.acknowledged(),
                    started.elapsed().as_secs_f64()
                );
                progress.show(plan, fired, workers.acknowledged(), started.elapsed());
                live.log.line(line);
            }
            // The cluster changed between the look and the fault (a node
            // died by itself, a leader moved): not written down, since it
            // did nothing; the next pick looks again.
            RunStatus::Unknown(why) => {
                live.log.line(format!("campaign: skipped: {why}"));
            }
        }
    }
    progress.done();
    // A trailing gap with no fault after it only delays a replay.
    while matches!(realised.steps.last(), Some(Step::Await { .. })) {
        realised.steps.pop();
    }
    dir.write_schedule(&realised)?;
    stop_background(live, workers).await?;
    live.log.line(format!(
        "campaign: stopped after {fired} faults in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(RunStatus::Completed)
}

/// The campaign's progress on stderr, whatever `--quiet` says (it quiets the
/// harness log, not this): on a terminal one line rewritten after each fault
/// (elapsed and what is left, faults fired, writes acknowledged); elsewhere
/// (CI logs) a plain line every tenth fault. Anomalies are only known once
/// the checkers run at the end.
struct Progress {
    terminal: bool,
    shown: bool,
}

impl Progress {
    fn new() -> Self {
        use std::io::IsTerminal;
        Progress {
            terminal: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn show(&mut self, plan: &Plan, fired: u32, acked: u64, elapsed: std::time::Duration) {
        let left = match plan.stop {
            StopAfter::Duration(d) => {
                format!("{:.0}/{:.0} s", elapsed.as_secs_f64(), d.as_secs_f64())
            }
            StopAfter::Faults(n) => format!("{fired}/{n} faults, {:.0} s", elapsed.as_secs_f64()),
        };
        let line = format!(
            "campaign seed {}: {left}; {fired} faults fired, {acked} writes acknowledged",
            plan.seed
        );
        if self.terminal {
            eprint!("\r\x1b[2K{line}");
            self.shown = true;
        } else if fired.is_multiple_of(10) {
            eprintln!("{line}");
        }
    }

    /// Ends the rewritten line, so what follows starts on its own.
    fn done(&mut self) {
        if self.shown {
            eprintln!();
            self.shown = false;
        }
    }
}
