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
//! spaces its faults as this run did, in the unit that mattered. A gap
//! taken while the cluster is whole is a quarter of the drawn one.
//!
//! A pick may be a targeted sequence (campaign/sequence.rs): its faults fire
//! back to back, or once a state it awaits is seen (`await` steps in the
//! realised schedule), each still resolved from etcd's view as it fires.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::explore::pairs::COVERAGE_FILE;
use super::explore::{Explorer, Picked};
use super::pick::State;
use super::sequence::{self, Move, Roles, Sequence};
use super::{Plan, StopAfter};
use crate::node::NodeId;
use crate::observe::{ClusterView, ObserveError};
use crate::random::SplitMix64;
use crate::run::{Driver, Live, RunError, RunStatus, faults, start_background, stop_background};
use crate::run_dir::RunDir;
use crate::runtime::{Link, Runtime};
use crate::schedule::{Condition, Fault, PartitionRef, Schedule, Step};
use crate::system::ServiceKind;
use crate::workload::background::Workers;
use crate::workload::producer::delivery_timeout;
use crate::workload::txn::txn_bound;

/// Bound a replay gives each realised "N more writes acknowledged": long, as
/// the campaign saw those writes come; a replay that waits longer has not
/// reproduced the run and ends unknown saying so.
const REPLAY_AWAIT_MS: u64 = 60_000;

/// How long past the clients' giving up a hold of requests stays before
/// anything may undo it.
const LATE_MARGIN: Duration = Duration::from_millis(200);

/// How long a hold of requests stays before anything may undo it, with
/// clients' request timeout `request_timeout` (and transactional producers
/// when `transactions`): until every operation that
/// had a request held has given up — a send after its delivery timeout (its
/// retries included), a transaction after its bound — and a margin. A hold
/// the next pick heals sooner is only latency: the client retries and gets
/// its answer. Held past that, the client has given up and acted on it (a
/// transaction aborted, its producer given a new epoch) when the request
/// arrives: the late request behind KAFKA-14402's hanging transaction.
/// Without this floor a 60 s transactional campaign's holds lasted the
/// 100-300 ms its other partitions took to acknowledge the gap's writes,
/// and no send or transaction failed on one (seed 1: 57 holds, 25 386 sends
/// and 982 transactions, none failed by a hold).
pub(super) fn hold_floor(request_timeout: Duration, transactions: bool) -> Duration {
    let sends = delivery_timeout(request_timeout);
    let given_up = if transactions {
        sends.max(txn_bound(request_timeout))
    } else {
        sends
    };
    given_up + LATE_MARGIN
}

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

/// The gap between two faults: `more` writes acknowledged, or `bound`
/// passed first; the step that replays it.
async fn await_gap(workers: &mut Workers, more: u64, bound: Duration) -> Step {
    let gap_started = Instant::now();
    let gap = match workers.await_acknowledged(more, bound).await {
        Ok(n) => Condition::Acknowledged { more: n },
        Err(_) => Condition::Elapsed {
            ms: gap_started.elapsed().as_millis() as u64,
        },
    };
    Step::Await {
        timeout_ms: matches!(gap, Condition::Acknowledged { .. }).then_some(REPLAY_AWAIT_MS),
        condition: gap,
    }
}

/// The gap before the next pick, never past the campaign's end; `None` when
/// the draw is no gap at all. A whole cluster (nothing paused, dead or cut)
/// has nothing left to interleave with, so its gap is a quarter of the drawn
/// one: more interleavings per minute where waiting teaches nothing.
async fn gap(
    workers: &mut Workers,
    random: &mut SplitMix64,
    plan: &Plan,
    started: Instant,
    whole: bool,
) -> Option<Step> {
    let mut bound = plan.gap_max;
    if let StopAfter::Duration(d) = plan.stop {
        bound = bound.min(d.saturating_sub(started.elapsed()));
    }
    let mut more = random.between(plan.gap_acks.0, plan.gap_acks.1);
    if whole {
        more = more.div_ceil(4);
        bound /= 4;
    }
    if more == 0 {
        return None;
    }
    Some(await_gap(workers, more, bound).await)
}

/// Waits until a hold of requests in force has lasted `until` (never past
/// the campaign's end), written into the realised schedule as the time it
/// waited. Once waited out, a hold has lasted long enough: nothing to keep.
async fn wait_out_hold(until: Instant, plan: &Plan, started: Instant, realised: &mut Schedule) {
    let until = match plan.stop {
        StopAfter::Duration(d) => until.min(started + d),
        StopAfter::Faults(_) => until,
    };
    let rest = until.saturating_duration_since(Instant::now());
    if !rest.is_zero() {
        tokio::time::sleep(rest).await;
        realised.steps.push(Step::Await {
            timeout_ms: None,
            condition: Condition::Elapsed {
                ms: rest.as_millis() as u64,
            },
        });
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
    let mut explorer = Explorer::new(plan, started);
    // A hold of requests in force stays until then ([`hold_floor`]).
    let hold_for = hold_floor(
        Duration::from_millis(schedule.workload.request_timeout_ms),
        schedule.runs_transactions(),
    );
    let mut held_until: Option<Instant> = None;
    let done = |fired: u32| match plan.stop {
        StopAfter::Duration(d) => started.elapsed() >= d,
        StopAfter::Faults(n) => fired >= n,
    };
    while !done(fired) {
        let whole = look(live, &partitions)?.is_whole();
        if let Some(step) = gap(&mut workers, &mut random, plan, started, whole).await {
            realised.steps.push(step);
        }
        if let Some(until) = held_until.take() {
            wait_out_hold(until, plan, started, &mut realised).await;
        }
        if done(fired) {
            break;
        }
        let view = view_or_empty(live).await?;
        let nodes = live.nodes();
        let state = look(live, &partitions)?;
        let nemesis = &mut live.nemesis;
        let picked = explorer.pick(&mut random, plan, &state, &view, |target| {
            nemesis.resolve(target, &view, &nodes).ok()
        });
        let (choice, fault, pairs) = match picked {
            None => continue,
            Some(Picked::Sequence(sequence)) => {
                let (end, faults_left) = match plan.stop {
                    StopAfter::Duration(d) => (Some(started + d), None),
                    StopAfter::Faults(n) => (None, Some(n.saturating_sub(fired))),
                };
                let mut play = Sequencer {
                    plan,
                    random: &mut random,
                    realised: &mut realised,
                    dir,
                    end,
                    faults_left,
                };
                let sequence_fired = play.run(live, &sequence).await?;
                explorer.sequence_fired(&sequence_fired, &view.brokers);
                for _ in sequence_fired {
                    fired += 1;
                    progress.show(plan, fired, workers.acknowledged(), started.elapsed());
                }
                live.log.line(format!(
                    "campaign: {fired} faults fired, {} writes acknowledged, {:.1} s",
                    workers.acknowledged(),
                    started.elapsed().as_secs_f64()
                ));
                continue;
            }
            Some(Picked::Fault {
                choice,
                fault,
                pairs,
            }) => (choice, fault, pairs),
        };
        let Some(fault) = fault else {
            live.log
                .line(format!("campaign: {choice:?} names nobody now; skipped"));
            continue;
        };
        let number = realised.steps.len() + 1;
        match faults(live, number, std::slice::from_ref(&fault)).await? {
            RunStatus::Completed => {
                fired += 1;
                if let Fault::HoldRequests(_) = &fault {
                    held_until = Some(Instant::now() + hold_for);
                }
                explorer.fired(&fault, &pairs, &view.brokers);
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
    let (coverage, new) = explorer.finish();
    let path = dir.path().join(COVERAGE_FILE);
    std::fs::write(&path, coverage.to_json())
        .map_err(|source| crate::store::StoreError { path, source })?;
    live.log.line(format!(
        "campaign: {} state-fault pairs reached ({new} not in the prior), {COVERAGE_FILE}",
        coverage.pairs.len()
    ));
    live.log.line(format!(
        "campaign: stopped after {fired} faults in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(RunStatus::Completed)
}

/// The cluster's view, or an empty one when no broker answers Metadata (a
/// single-node system's node is down or paused): a fault at a role then
/// resolves to nothing, while a restart or resume names its node.
async fn view_or_empty<R: Runtime>(live: &mut Live<R>) -> Result<ClusterView, RunError> {
    match live.observer.view().await {
        Ok(view) => Ok(view),
        Err(ObserveError::NoMetadata(_)) => Ok(ClusterView::default()),
        Err(e) => Err(e.into()),
    }
}

/// The cluster as the nemesis sees it: who is dead or paused and how the
/// database is (from the runtime), whether a cut is in force.
fn look<R: Runtime>(live: &Live<R>, partitions: &[PartitionRef]) -> Result<State, RunError> {
    let nodes = live.nodes();
    let mut state = State {
        nodes: nodes.clone(),
        down: BTreeSet::new(),
        paused: BTreeSet::new(),
        cut: !live.nemesis.partitions_healed(),
        etcd_cut: BTreeSet::new(),
        peer_cut: BTreeSet::new(),
        partitions: partitions.to_vec(),
        database: live.runtime.database()?,
        database_cut: BTreeSet::new(),
    };
    for link in live.nemesis.cut_links() {
        match link {
            Link::BrokerToService(n, ServiceKind::Etcd) => {
                state.etcd_cut.insert(n);
            }
            Link::BrokerToService(n, ServiceKind::Postgres) => {
                state.database_cut.insert(n);
            }
            Link::BrokerToBroker { from, to } => {
                state.peer_cut.insert(from);
                state.peer_cut.insert(to);
            }
            _ => {}
        }
    }
    for &n in &nodes {
        if !live.runtime.is_running(n) {
            state.down.insert(n);
        } else if live.runtime.is_paused(n)? {
            state.paused.insert(n);
        }
    }
    Ok(state)
}

/// Plays one targeted sequence (sequence.rs) move by move: each hit
/// resolves its role from etcd's view as it fires, each `Until` awaits its
/// state with its deadline (never past the campaign's end). What fired is
/// written into the realised schedule as ordinary steps: the faults on
/// named nodes, each awaited state as an `await` a replay waits for again
/// (or the time that passed, when the deadline came first and the sequence
/// ended there).
struct Sequencer<'a> {
    plan: &'a Plan,
    random: &'a mut SplitMix64,
    realised: &'a mut Schedule,
    dir: &'a RunDir,
    /// The campaign's end, or how many faults it may still fire.
    end: Option<Instant>,
    faults_left: Option<u32>,
}

impl Sequencer<'_> {
    /// The faults it fired, in order.
    async fn run<R: Runtime>(
        &mut self,
        live: &mut Live<R>,
        sequence: &Sequence,
    ) -> Result<Vec<Fault>, RunError> {
        let partitions = &self.realised.cluster.partitions().collect::<Vec<_>>();
        let mut slots: Vec<NodeId> = Vec::new();
        let mut fired = Vec::new();
        let undoes = sequence::make_whole(&look(live, partitions)?);
        for fault in undoes.iter().cloned() {
            if !self.fire(live, fault, &mut fired).await? {
                return Ok(fired);
            }
        }
        // Whole means back in the drawn partition's ISR too: a node just
        // restarted or resumed is out of it until it caught up, and most
        // shapes need an ISR follower to hit. The wait goes on (the
        // partition may then move, below) when one does not rejoin in time.
        let deadline = Instant::now() + Duration::from_millis(sequence::REJOIN_MS);
        for node in undoes.iter().filter_map(sequence::undone_node) {
            let ms = deadline
                .saturating_duration_since(Instant::now())
                .as_millis() as u64;
            let condition = Condition::InIsr {
                node,
                partition: sequence.partition.clone(),
                member: true,
            };
            if !self
                .await_state(live, condition, ms, "sequence's start", "going on")
                .await?
            {
                break;
            }
        }
        let view = live.view().await?;
        let isr_sizes: Vec<usize> = partitions
            .iter()
            .map(|p| view.partition(p).map_or(0, |v| v.isr.len()))
            .collect();
        let partition = sequence::partition_for(&sequence.partition, partitions, &isr_sizes);
        let sequence = &Sequence {
            partition,
            ..sequence.clone()
        };
        live.log.line(format!(
            "campaign: sequence {} on {}",
            sequence.shape.name(),
            sequence.partition
        ));
        for &step in &sequence.moves {
            if self.end.is_some_and(|end| Instant::now() >= end) || self.faults_left == Some(0) {
                break;
            }
            let state = look(live, partitions)?;
            let fault = match step {
                Move::Until(watch, ms) | Move::Settle(watch, ms) => {
                    let Some(condition) = sequence::condition(watch, &sequence.partition, &slots)
                    else {
                        break;
                    };
                    let settle = matches!(step, Move::Settle(..));
                    let then = if settle { "going on" } else { "ended" };
                    let why = format!("sequence {}", sequence.shape.name());
                    if self.await_state(live, condition, ms, &why, then).await? || settle {
                        continue;
                    }
                    break;
                }
                Move::Wait(ms) => {
                    self.wait(ms).await;
                    continue;
                }
                Move::Hit(..) | Move::Stall => {
                    let view = live.view().await?;
                    let roles = view
                        .partition(&sequence.partition)
                        .map(|p| Roles {
                            leader: p.leader,
                            isr: p.isr.clone(),
                            replicas: p.replicas.clone(),
                            controller: view.controller,
                        })
                        .unwrap_or_default();
                    let hit = match step {
                        Move::Hit(kind, role) => sequence::hit(
                            self.random,
                            self.plan,
                            &state,
                            kind,
                            role,
                            &roles,
                            &slots,
                        ),
                        _ => sequence::stall(self.random, &state, &roles, &slots),
                    };
                    match hit {
                        Some((node, fault)) => {
                            slots.push(node);
                            fault
                        }
                        None => break,
                    }
                }
                Move::Again(kind, slot) => {
                    match sequence::again(self.plan, &state, kind, slot, &slots) {
                        Some(fault) => fault,
                        None => break,
                    }
                }
                undo => match sequence::undo(&state, undo, &slots) {
                    Some(fault) => fault,
                    None => break,
                },
            };
            if !self.fire(live, fault, &mut fired).await? {
                break;
            }
        }
        Ok(fired)
    }

    /// Lets `ms` pass (never past the campaign's end), written into the
    /// realised schedule as the time it waited.
    async fn wait(&mut self, ms: u64) {
        let mut within = Duration::from_millis(ms);
        if let Some(end) = self.end {
            within = within.min(end.saturating_duration_since(Instant::now()));
        }
        tokio::time::sleep(within).await;
        self.realised.steps.push(Step::Await {
            condition: Condition::Elapsed {
                ms: within.as_millis() as u64,
            },
            timeout_ms: None,
        });
    }

    /// Awaits `condition` for up to `ms` (never past the campaign's end) and
    /// writes it into the realised schedule: as an `await` when seen, else
    /// as the time that passed. Whether it was seen.
    async fn await_state<R: Runtime>(
        &mut self,
        live: &mut Live<R>,
        condition: Condition,
        ms: u64,
        why: &str,
        then: &str,
    ) -> Result<bool, RunError> {
        let mut within = Duration::from_millis(ms);
        if let Some(end) = self.end {
            within = within.min(end.saturating_duration_since(Instant::now()));
        }
        let waited = Instant::now();
        let seen = live
            .observer
            .await_condition(&live.runtime, &condition, within)
            .await;
        match seen {
            Ok(_) => {
                self.realised.steps.push(Step::Await {
                    condition,
                    timeout_ms: Some(ms),
                });
                Ok(true)
            }
            Err(ObserveError::Timeout { .. }) => {
                live.log.line(format!(
                    "campaign: {why}: \"{condition}\" not seen within {within:?}; {then}"
                ));
                self.realised.steps.push(Step::Await {
                    condition: Condition::Elapsed {
                        ms: waited.elapsed().as_millis() as u64,
                    },
                    timeout_ms: None,
                });
                Ok(false)
            }
            Err(source) => Err(RunError::Await {
                step: self.realised.steps.len() + 1,
                source,
            }),
        }
    }

    /// Fires one fault and writes it down; false when the cluster refused
    /// it (the rest of the sequence is skipped).
    async fn fire<R: Runtime>(
        &mut self,
        live: &mut Live<R>,
        fault: Fault,
        fired: &mut Vec<Fault>,
    ) -> Result<bool, RunError> {
        if self.faults_left == Some(0) {
            return Ok(false);
        }
        let number = self.realised.steps.len() + 1;
        match faults(live, number, std::slice::from_ref(&fault)).await? {
            RunStatus::Completed => {
                self.realised.steps.push(Step::Fault(fault.clone()));
                self.dir.write_schedule(self.realised)?;
                fired.push(fault);
                if let Some(n) = &mut self.faults_left {
                    *n -= 1;
                }
                Ok(true)
            }
            RunStatus::Unknown(why) => {
                live.log
                    .line(format!("campaign: sequence skipped the rest: {why}"));
                Ok(false)
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_outlasts_every_operation_it_could_hold() {
        let request = Duration::from_millis(800);
        // Plain sends give up after their delivery timeout, retries included.
        let plain = hold_floor(request, false);
        assert!(plain > delivery_timeout(request));
        // A transaction keeps retrying its held produce until its bound.
        let txns = hold_floor(request, true);
        assert!(txns > txn_bound(request));
        assert!(txns > plain);
    }
}
