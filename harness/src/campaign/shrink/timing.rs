//! The realised timing of a campaign's faults, kept through a shrink. A
//! campaign's `schedule.toml` records the gap before each fault in the unit
//! that mattered (writes acknowledged, or the time that passed when too few
//! came), but not two things its history does: how long after the gap ended
//! the fault fired (the nemesis looked at the cluster and picked first, a
//! few to tens of milliseconds), and how long the faults a shrink removes
//! took to fire and to wait out. A fault that fired 40 ms after an ack, or
//! an undo that came 9 s after its fault, can matter (a lease lapses, a
//! checkpoint is written, a follower fetches); a shrunk schedule that moves
//! them shows a different run.
//!
//! So the shrink reads the failing run's history once ([`Realised::read`]):
//! each fault of the schedule paired with its nemesis op (the k-th fault of
//! the schedule is the k-th nemesis op that landed; the final heal's come
//! after them), its invoke and completion times, and from the background
//! producers' acks when each gap ended. [`Realised::annotate`] writes the
//! delay after each gap as an `N ms pass` step before the fault, and
//! [`Realised::candidate`] replaces the stretch of removed faults between
//! two kept ones by the time it took (`N ms pass`). The stretch before the
//! first kept fault is dropped, not waited: cutting it is what a shrink is for.

use std::collections::BTreeMap;

use super::Unit;
use crate::history::{Body, Op, OpType, Process, Verb};
use crate::schedule::{Condition, Schedule, Step};

/// When one fault of the schedule fired in the failing run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    pub invoke_ns: u64,
    pub complete_ns: u64,
}

/// Each fault step's realised times, by its index in the schedule's steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Realised {
    pub faults: BTreeMap<usize, Fired>,
    /// The background's acks, in time order (ok sends by client processes).
    acks_ns: Vec<u64>,
    /// The first client op: where the first gap started.
    start_ns: u64,
}

/// Why a history cannot be lined up with its schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlignError {
    #[error(
        "the schedule's fault {number} is {expected}, the history's nemesis op {index} is {found}"
    )]
    Mismatch {
        number: usize,
        expected: Verb,
        index: u64,
        found: Verb,
    },
    #[error(
        "the schedule has {schedule} faults, the history only {history} nemesis ops that landed"
    )]
    TooFew { schedule: usize, history: usize },
}

impl Realised {
    /// Lines `schedule`'s faults up with `ops`, the history of the run that
    /// realised it.
    pub fn read(schedule: &Schedule, ops: &[Op]) -> Result<Realised, AlignError> {
        let nemesis: Vec<&Op> = ops
            .iter()
            .filter(|o| o.process == Process::Nemesis)
            .collect();
        let landed: Vec<(&Op, &Op)> = nemesis
            .windows(2)
            .filter(|w| w[0].kind == OpType::Invoke && w[1].kind != OpType::Invoke)
            .filter(|w| w[1].error.is_none())
            .map(|w| (w[0], w[1]))
            .collect();
        let steps: Vec<(usize, Verb)> = schedule
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Step::Fault(f) => Some((i, Verb::of(f))),
                _ => None,
            })
            .collect();
        if steps.len() > landed.len() {
            return Err(AlignError::TooFew {
                schedule: steps.len(),
                history: landed.len(),
            });
        }
        let mut faults = BTreeMap::new();
        for (number, ((step, verb), (invoke, done))) in steps.iter().zip(&landed).enumerate() {
            let found = invoke.fault().map(|f| f.verb);
            if found != Some(*verb) {
                return Err(AlignError::Mismatch {
                    number: number + 1,
                    expected: *verb,
                    index: invoke.index,
                    found: found.unwrap_or(Verb::Heal),
                });
            }
            faults.insert(
                *step,
                Fired {
                    invoke_ns: invoke.time_ns,
                    complete_ns: done.time_ns,
                },
            );
        }
        let acks_ns = ops
            .iter()
            .filter(|o| matches!(o.process, Process::Client(_)) && o.kind == OpType::Ok)
            .filter(|o| matches!(o.body, Body::Send(_)))
            .map(|o| o.time_ns)
            .collect();
        let start_ns = ops
            .iter()
            .find(|o| matches!(o.process, Process::Client(_)))
            .map_or(0, |o| o.time_ns);
        Ok(Realised {
            faults,
            acks_ns,
            start_ns,
        })
    }

    /// When the gap before fault step `step` ended, as well as the history
    /// tells: the N-th ack after the previous fault completed for "N more
    /// writes acknowledged", that completion plus N ms for "N ms pass", the
    /// completion itself for no gap.
    fn gap_end_ns(&self, schedule: &Schedule, step: usize) -> Option<u64> {
        let previous = self
            .faults
            .range(..step)
            .next_back()
            .map_or(self.start_ns, |(_, f)| f.complete_ns);
        let mut end = previous;
        for s in schedule.steps[..step].iter().rev() {
            match s {
                Step::Await { condition, .. } => match condition {
                    Condition::Acknowledged { more } => {
                        let from = self.acks_ns.partition_point(|&t| t <= end);
                        let n = usize::try_from(*more).ok()?;
                        end = *self.acks_ns.get(from + n.checked_sub(1)?)?;
                    }
                    Condition::Elapsed { ms } => end += ms * 1_000_000,
                    _ => return None,
                },
                _ => break,
            }
        }
        Some(end)
    }

    /// `schedule` with each fault's realised delay after its gap written as
    /// an `N ms pass` step just before it (1 ms or more; none where the
    /// history does not place the gap's end). The times stay keyed by the
    /// faults' new step indices.
    pub fn annotate(&self, schedule: &Schedule) -> (Schedule, Realised) {
        let mut steps = Vec::with_capacity(schedule.steps.len());
        let mut faults = BTreeMap::new();
        for (i, step) in schedule.steps.iter().enumerate() {
            if let Some(fired) = self.faults.get(&i) {
                let delay_ms = self
                    .gap_end_ns(schedule, i)
                    .map_or(0, |end| fired.invoke_ns.saturating_sub(end) / 1_000_000);
                if delay_ms > 0 {
                    steps.push(Step::Await {
                        condition: Condition::Elapsed { ms: delay_ms },
                        timeout_ms: None,
                    });
                }
                faults.insert(steps.len(), *fired);
            }
            steps.push(step.clone());
        }
        let annotated = Schedule {
            steps,
            ..schedule.clone()
        };
        let realised = Realised {
            faults,
            ..self.clone()
        };
        (annotated, realised)
    }

    /// The schedule with only `kept` units (super::candidate), where
    /// each run of removed faults between two kept ones becomes the time it
    /// took: `N ms pass` from the earlier kept fault's completion to the last
    /// removed one's, before the later kept fault's own gap.
    pub fn candidate(&self, schedule: &Schedule, units: &[Unit], kept: &[usize]) -> Schedule {
        let mut keep: Vec<usize> = kept
            .iter()
            .flat_map(|&u| units[u].steps.iter().copied())
            .collect();
        keep.sort_unstable();
        let kept_faults: Vec<usize> = keep
            .iter()
            .copied()
            .filter(|i| matches!(schedule.steps[*i], Step::Fault(_)))
            .collect();
        let mut steps = Vec::with_capacity(keep.len() * 2);
        let mut previous: Option<usize> = None;
        for &i in &keep {
            if let Step::Fault(_) = schedule.steps[i] {
                if let (Some(p), Some(fired_p)) =
                    (previous, previous.and_then(|p| self.faults.get(&p)))
                {
                    // The last removed fault between p and i.
                    let removed = self
                        .faults
                        .range(p + 1..i)
                        .rfind(|(s, _)| !kept_faults.contains(s));
                    if let Some((_, fired_r)) = removed {
                        let ms =
                            fired_r.complete_ns.saturating_sub(fired_p.complete_ns) / 1_000_000;
                        // Before i's own gap: at the first kept await that
                        // precedes i with no kept fault between.
                        let own_gap = steps
                            .iter()
                            .rposition(|s| matches!(s, Step::Fault(_)))
                            .map_or(0, |f| f + 1);
                        if ms > 0 {
                            steps.insert(
                                own_gap,
                                Step::Await {
                                    condition: Condition::Elapsed { ms },
                                    timeout_ms: None,
                                },
                            );
                        }
                    }
                }
                previous = Some(i);
            }
            steps.push(schedule.steps[i].clone());
        }
        let mut workload = schedule.workload.clone();
        workload.clear_minimums();
        Schedule {
            steps: merge_passes(steps),
            workload,
            ..schedule.clone()
        }
    }
}

/// Consecutive `N ms pass` steps as one: a removed stretch's time and the
/// next fault's realised delay read as one pause.
fn merge_passes(steps: Vec<Step>) -> Vec<Step> {
    let mut merged: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        if let (
            Some(Step::Await {
                condition: Condition::Elapsed { ms: before },
                timeout_ms: None,
            }),
            Step::Await {
                condition: Condition::Elapsed { ms },
                timeout_ms: None,
            },
        ) = (merged.last_mut(), &step)
        {
            *before += ms;
            continue;
        }
        merged.push(step);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(steps: &str) -> Schedule {
        let src = format!(
            "[cluster]\nbrokers = 3\n[[cluster.topic]]\nname = \"t\"\npartitions = 1\n\
             replication_factor = 3\n[workload.background]\nproducers = 1\n{steps}"
        );
        Schedule::parse("s.toml", &src).unwrap()
    }

    fn line(index: u64, ms: u64, process: &str, kind: &str, body: &str) -> Op {
        let text = format!(
            r#"{{"index":{index},"time_ns":{},"process":{process},"type":"{kind}",{body}}}"#,
            ms * 1_000_000
        );
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    const SEND: &str = r#""f":"send","value":{"partition":"t-0","values":[1],"acks":"all"}"#;
    const OK: &str =
        r#""f":"send","value":{"partition":"t-0","values":[1],"acks":"all","offsets":[0]}"#;

    fn fault(verb: &str, node: &str, done: bool) -> String {
        if done {
            format!(r#""f":"{verb}","value":{{"target":"{node}","nodes":["{node}"]}}"#)
        } else {
            format!(r#""f":"{verb}","value":{{"target":"{node}"}}"#)
        }
    }

    #[test]
    fn realised_delays_and_removed_stretches_become_time() {
        let s = schedule(
            r#"
[[step]]
await = "2 more writes acknowledged"
[[step]]
fault = { crash = "b1" }
[[step]]
fault = { pause = "b2" }
[[step]]
await = "500 ms pass"
[[step]]
fault = { resume = "b2" }
[[step]]
fault = { restart = "b1" }
"#,
        );
        let n = "\"nemesis\"";
        let ops = vec![
            line(0, 100, "0", "invoke", SEND),
            line(1, 110, "0", "ok", OK),
            line(2, 120, "0", "invoke", SEND),
            line(3, 130, "0", "ok", OK),
            // 40 ms after the second ack.
            line(4, 170, n, "invoke", &fault("crash", "b1", false)),
            line(5, 180, n, "info", &fault("crash", "b1", true)),
            line(6, 200, n, "invoke", &fault("pause", "b2", false)),
            line(7, 210, n, "info", &fault("pause", "b2", true)),
            line(8, 720, n, "invoke", &fault("resume", "b2", false)),
            line(9, 730, n, "info", &fault("resume", "b2", true)),
            line(10, 2_730, n, "invoke", &fault("restart", "b1", false)),
            line(11, 3_000, n, "info", &fault("restart", "b1", true)),
        ];
        let realised = Realised::read(&s, &ops).unwrap();
        let (annotated, realised) = realised.annotate(&s);
        let text: Vec<String> = annotated
            .steps
            .iter()
            .map(|s| match s {
                Step::Await { condition, .. } => condition.to_string(),
                Step::Fault(f) => Verb::of(f).to_string(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            text,
            [
                "2 more writes acknowledged",
                "40 ms pass",
                "crash",
                "20 ms pass",
                "pause",
                "500 ms pass",
                "10 ms pass",
                "resume",
                "2000 ms pass",
                "restart"
            ]
        );
        let units = super::super::units(&annotated).unwrap();
        assert_eq!(units.len(), 2);
        // Only the crash and its restart: the pause..resume stretch (from the
        // crash's completion at 180 ms to the resume's at 730 ms) is kept as
        // time before the restart's own gap.
        let crash_only = realised.candidate(&annotated, &units, &[0]);
        let text: Vec<String> = crash_only
            .steps
            .iter()
            .map(|s| match s {
                Step::Await { condition, .. } => condition.to_string(),
                Step::Fault(f) => Verb::of(f).to_string(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            text,
            [
                "2 more writes acknowledged",
                "40 ms pass",
                "crash",
                "2550 ms pass",
                "restart"
            ]
        );
    }

    #[test]
    fn a_history_that_does_not_match_its_schedule_is_refused() {
        let s = schedule("[[step]]\nfault = { crash = \"b1\" }\n");
        let n = "\"nemesis\"";
        let ops = vec![
            line(0, 1, n, "invoke", &fault("pause", "b1", false)),
            line(1, 2, n, "info", &fault("pause", "b1", true)),
        ];
        assert!(matches!(
            Realised::read(&s, &ops),
            Err(AlignError::Mismatch { number: 1, .. })
        ));
    }
}
