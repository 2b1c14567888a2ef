//! `epochal shrink`: delta debugging over a failing run's faults, down to a
//! schedule a person can read. A campaign that fails after forty faults says
//! a bug exists; the two faults that matter say what it is.
//!
//! The schedule is cut into *units*: a fault together with its undo (pause b1
//! … resume b1, crash b2 … restart b2, a cut … heal), each with the gap that
//! preceded it, so that no candidate resumes a node it never paused. The
//! search over them (search.rs) first cuts to the window of units
//! the anomaly's evidence leaves, then runs ddmin (Zeller and Hildebrandt,
//! "Simplifying and Isolating Failure-Inducing Input", TSE 2002) over it;
//! the realised timing of what is kept comes from the failing run's history
//! (timing.rs). A candidate *fails* when a run of it is invalid with the same anomaly kind
//! on the same settings; since a replay of a random interleaving is not
//! always exact, each candidate gets up to `tries` runs and counts as failing
//! at its first failure. What remains is run `confirm` more times, and how
//! often it failed is written with it. When the faults are cut down, lighter
//! loads are tried too ([`LIGHTER_LOADS`]). The passes in order are
//! passes.rs, the candidates' runs trials.rs; the command line (cli/shrink.rs)
//! only parses its flags and prints the outcome.

mod passes;
pub mod search;
pub mod timing;
mod trials;

pub use passes::{Options, Outcome, Refused, run};

use crate::fault::{Ends, Role, Undo, Verb};
use crate::schedule::{Fault, Schedule, Step};

/// One shrinkable piece: indices of the schedule's steps that go together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub steps: Vec<usize>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ShrinkError(pub String);

/// Cuts a realised schedule into units; an error names a step shrink cannot
/// move (anything but a fault or an await before one).
pub fn units(schedule: &Schedule) -> Result<Vec<Unit>, ShrinkError> {
    // Each fault with the await(s) just before it.
    let mut pieces: Vec<(Vec<usize>, &Fault)> = Vec::new();
    let mut gap = Vec::new();
    for (i, step) in schedule.steps.iter().enumerate() {
        match step {
            Step::Await { .. } => gap.push(i),
            Step::Fault(fault) => {
                let mut steps = std::mem::take(&mut gap);
                steps.push(i);
                pieces.push((steps, fault));
            }
            other => {
                return Err(ShrinkError(format!(
                    "step {}: shrink moves faults and the awaits between them; {other:?} is neither \
                     (shrink a campaign's schedule.toml)",
                    i + 1
                )));
            }
        }
    }
    // Pair each undo with the latest open fault it undoes.
    let mut units: Vec<Unit> = Vec::new();
    let mut open: Vec<(usize, &Fault)> = Vec::new();
    for (steps, fault) in pieces {
        let undo = Verb::of(fault).spec();
        // A heal of one named cut stays where it is, as a fault would.
        let is_undo = undo.role == Role::Undo && !matches!(fault, Fault::HealCut(_));
        let undoes = |broke: &Fault| {
            undo.ends.ends(Verb::of(broke).spec().undo)
                && match undo.ends {
                    Ends::OnItsNodes(_) => broke.target() == fault.target(),
                    Ends::Requests => broke.requests() == fault.requests(),
                    Ends::Cuts | Ends::Database(_) | Ends::Nothing => true,
                }
        };
        match open.iter().rposition(|(_, broke)| undoes(broke)) {
            Some(at) if is_undo => {
                let (unit, _) = open.remove(at);
                units[unit].steps.extend(steps);
                // A heal ends every cut and request fault at once.
                if undo.ends == Ends::Cuts {
                    open.retain(|(_, broke)| !undoes(broke));
                }
            }
            _ => {
                units.push(Unit { steps });
                // What nothing undoes (truncate-log) opens nothing.
                if !is_undo && undo.undo != Undo::Never {
                    open.push((units.len() - 1, fault));
                }
            }
        }
    }
    Ok(units)
}

/// The schedule with only `kept` units' steps, in their original order,
/// and without the campaign's coverage minimums: a few faults kept because
/// they fail are not a campaign, and on a fixed setting the shrunk schedule
/// must pass, not be refused as vacuous.
pub fn candidate(schedule: &Schedule, units: &[Unit], kept: &[usize]) -> Schedule {
    let mut steps: Vec<usize> = kept
        .iter()
        .flat_map(|&u| units[u].steps.iter().copied())
        .collect();
    steps.sort_unstable();
    let mut workload = schedule.workload.clone();
    workload.clear_minimums();
    Schedule {
        steps: steps.iter().map(|&i| schedule.steps[i].clone()).collect(),
        workload,
        ..schedule.clone()
    }
}

/// The comment block `shrunk.toml` starts with.
pub fn header(
    source: &std::path::Path,
    anomaly: &str,
    sets: &[String],
    before: usize,
    after: usize,
    confirmed: (u32, u32),
    runs: u32,
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Shrunk by `epochal shrink` from {}\n",
        source.display()
    ));
    out.push_str(&format!(
        "# It fails with `{anomaly}`{}.\n",
        if sets.is_empty() {
            String::new()
        } else {
            format!(" under --set {}", sets.join(" --set "))
        }
    ));
    out.push_str(&format!(
        "# Kept {after} of {before} faults (with their undoes and the gaps before them); \
         {runs} candidate runs.\n"
    ));
    out.push_str(&format!(
        "# Reproduced in {} of {} confirming runs.\n\n",
        confirmed.0, confirmed.1
    ));
    out
}

/// Lighter loads to try, in order, each applied to the schedule as shrunk so
/// far (so what one step kept, the next keeps too): no background consumers,
/// one background producer, one partition per topic (only when no step names
/// a partition above 0). `None` where the step has nothing to lighten.
pub type Lighten = fn(&Schedule) -> Option<Schedule>;

pub const LIGHTER_LOADS: [(&str, Lighten); 3] = [
    ("no background consumers", |schedule| {
        let mut s = schedule.clone();
        let b = s.workload.background.as_mut()?;
        (b.consumers > 0).then(|| b.consumers = 0)?;
        Some(s)
    }),
    ("one background producer", |schedule| {
        let mut s = schedule.clone();
        let b = s.workload.background.as_mut()?;
        (b.producers > 1).then(|| b.producers = 1)?;
        Some(s)
    }),
    ("one partition per topic", |schedule| {
        let text = schedule.to_toml();
        let names_partition = |p: u32| {
            schedule
                .cluster
                .topics
                .iter()
                .any(|t| text.contains(&format!("\"{}-{p}", t.name)))
        };
        if !schedule.cluster.topics.iter().any(|t| t.partitions > 1) || (1..64).any(names_partition)
        {
            return None;
        }
        let mut s = schedule.clone();
        for t in &mut s.cluster.topics {
            t.partitions = 1;
        }
        Some(s)
    }),
];

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

    #[test]
    fn a_fault_and_its_undo_are_one_unit_with_their_gaps() {
        let s = schedule(
            r#"
[[step]]
await = "10 more writes acknowledged"
[[step]]
fault = { pause = "b1" }
[[step]]
await = "300 ms pass"
[[step]]
fault = { crash = "b2" }
[[step]]
fault = { isolate = "b3" }
[[step]]
fault = { resume = "b1" }
[[step]]
fault = "heal"
[[step]]
fault = { restart = "b2" }
[[step]]
fault = { pause = "b3" }
"#,
        );
        let units = units(&s).unwrap();
        let steps: Vec<Vec<usize>> = units.iter().map(|u| u.steps.clone()).collect();
        assert_eq!(
            steps,
            vec![vec![0, 1, 5], vec![2, 3, 7], vec![4, 6], vec![8]]
        );
        let mut s = s;
        s.workload.min_leader_changes = Some(1);
        let only_crash = candidate(&s, &units, &[1]);
        assert_eq!(
            only_crash.workload.min_leader_changes, None,
            "a shrunk schedule is not held to the campaign's coverage"
        );
        assert_eq!(only_crash.steps.len(), 3);
        assert_eq!(
            only_crash.steps.iter().flat_map(Step::faults).count(),
            2,
            "{:?}",
            only_crash.steps
        );
    }

    #[test]
    fn a_request_fault_is_one_unit_with_its_release_or_the_heal() {
        let s = schedule(
            r#"
[[step]]
fault = { hold-requests = { from = "clients", to = "b1", api = "EndTxn" } }
[[step]]
fault = { drop-requests = { from = "clients", to = "b1", api = "Produce" } }
[[step]]
fault = { release-requests = { from = "clients", to = "b1", api = "EndTxn" } }
[[step]]
fault = { duplicate-requests = { from = "b2", to = "b1", api = "Fetch" } }
[[step]]
fault = "heal"
"#,
        );
        let steps: Vec<Vec<usize>> = units(&s).unwrap().iter().map(|u| u.steps.clone()).collect();
        // The release pairs with the hold it names; the heal ends the rest,
        // and joins the latest of them.
        assert_eq!(steps, vec![vec![0, 2], vec![1], vec![3, 4]]);
    }

    #[test]
    fn other_steps_are_refused_naming_the_step() {
        let s = schedule("[[step]]\nproduce = { partition = \"t-0\", values = [1] }\n");
        let e = units(&s).unwrap_err().to_string();
        assert!(e.starts_with("step 1:"), "{e}");
    }
}
