//! `epochal shrink`'s passes: what to shrink (the run's schedule with its
//! realised timing, the anomaly, the fault units, where the evidence lies),
//! the cut (the whole must fail first; then the window the evidence leaves,
//! search.rs; then ddmin over it; then each kept fault's undo, left to the
//! final heal; then the load), the confirmation runs, and the file written.
//! The candidates' runs are trials.rs.

use std::io::Write;
use std::path::PathBuf;

use super::search::{self, Judge};
use super::timing::Realised;
use super::trials::{Trials, UnitJudge, faults};
use super::{LIGHTER_LOADS, Unit, header, units};
use crate::campaign::power::detect::detect_in;
use crate::checker::{Anomaly, Report, Verdict};
use crate::run::RunOptions;
use crate::run_dir::RunDir;
use crate::schedule::Schedule;

/// What `epochal shrink` was asked (cli/shrink.rs has each flag's meaning).
#[derive(Debug, Clone)]
pub struct Options {
    pub run_dir: PathBuf,
    pub anomaly: Option<Anomaly>,
    pub tries: u32,
    pub confirm: u32,
    pub jobs: usize,
    pub no_window: bool,
    pub compress_gaps: bool,
    /// How each candidate runs (store, binaries, runtime, `--set`s); its
    /// schedule path and group are set per shrink.
    pub run: RunOptions,
}

/// How a shrink ended, when it ran.
#[derive(Debug)]
pub enum Outcome {
    /// `shrunk.toml` written.
    Written,
    /// The whole schedule did not fail again within `tries`.
    DidNotFail { anomaly: Anomaly, tries: u32 },
}

/// Why a shrink did not run, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The run is not a failing campaign run shrink can cut (a bad
    /// schedule, no anomaly, a step it cannot move).
    #[error("{0}")]
    NotShrinkable(String),
    /// A candidate could not run, or the file not be written.
    #[error("{0}")]
    Harness(String),
}

/// The evidence window, then ddmin over it (search.rs), then the load;
/// writes `shrunk.toml` into the run directory.
pub fn run(options: &Options, out: &mut impl Write) -> Result<Outcome, Refused> {
    let target = Target::load(options)?;
    let Some(mut trials) = Trials::new(
        &options.run_dir,
        &options.run,
        target.anomaly,
        options.tries,
        options.jobs,
    ) else {
        return Err(Refused::Harness("starting the async runtime".into()));
    };
    let _ = writeln!(
        out,
        "shrinking {} ({} faults in {} units) for `{}`, {} tries a candidate, {} at once; {}",
        options.run_dir.display(),
        faults(&target.schedule),
        target.units.len(),
        target.anomaly,
        options.tries,
        options.jobs.max(1),
        target.timing_note
    );
    let cut = cut_down(options, &target, &mut trials, out);
    let Some(shrunk) = cut else {
        trials.done();
        if let Some(e) = trials.harness_error {
            return Err(Refused::Harness(format!(
                "shrink: a candidate run failed to run: {e}"
            )));
        }
        return Ok(Outcome::DidNotFail {
            anomaly: target.anomaly,
            tries: options.tries,
        });
    };
    trials.progress(&format!(
        "confirming {} faults, {} runs",
        faults(&shrunk),
        options.confirm
    ));
    let confirmed = confirm(&mut trials, &shrunk, options.confirm);
    trials.done();
    if let Some(e) = trials.harness_error {
        return Err(Refused::Harness(format!(
            "shrink: a candidate run failed to run, so the shrink stopped: {e}"
        )));
    }
    write_shrunk(options, &target, &shrunk, confirmed, &trials, out)?;
    Ok(Outcome::Written)
}

/// What a shrink works on: the failing run's schedule (`--set`s applied,
/// each fault's realised delay after its gap written in unless
/// `--compress-gaps`), the anomaly every candidate must show, the schedule
/// cut into units, and the first unit after the anomaly's first evidence.
struct Target {
    schedule: Schedule,
    anomaly: Anomaly,
    units: Vec<Unit>,
    realised: Option<Realised>,
    first_after_evidence: Option<usize>,
    timing_note: String,
}

impl Target {
    /// Reads the run; refused when it is not a failing run shrink can cut.
    fn load(options: &Options) -> Result<Target, Refused> {
        let refused = |e: &dyn std::fmt::Display| Refused::NotShrinkable(e.to_string());
        let dir = RunDir::open(&options.run_dir);
        let mut schedule = Schedule::load(dir.schedule()).map_err(|e| refused(&e))?;
        crate::run::apply_sets(&mut schedule, &options.run.sets).map_err(|e| refused(&e))?;
        let report = read_report(&dir);
        let Some(anomaly) = options
            .anomaly
            .or_else(|| report.as_ref().and_then(first_anomaly))
        else {
            return Err(Refused::NotShrinkable(format!(
                "{} is not invalid (no anomaly in its results.json): nothing to shrink",
                options.run_dir.display()
            )));
        };
        let unmovable = |e: &dyn std::fmt::Display| {
            Refused::NotShrinkable(format!("{}: {e}", dir.schedule().display()))
        };
        // Units are cut from the realised schedule first, so a schedule
        // shrink cannot move is refused before anything is read.
        units(&schedule).map_err(|e| unmovable(&e))?;
        let history = crate::history::read_history(dir.history());
        let (schedule, realised, timing_note) = match (&history, options.compress_gaps) {
            (_, true) => (schedule, None, "gaps compressed".to_owned()),
            (Err(e), false) => (schedule, None, format!("no realised timing ({e})")),
            (Ok(ops), false) => match Realised::read(&schedule, ops) {
                Ok(realised) => {
                    let (annotated, realised) = realised.annotate(&schedule);
                    (annotated, Some(realised), "realised timing kept".to_owned())
                }
                Err(e) => (schedule, None, format!("no realised timing ({e})")),
            },
        };
        let units = units(&schedule).map_err(|e| unmovable(&e))?;
        let first_after_evidence = match (&history, &report, &realised) {
            (Ok(ops), Some(report), Some(realised)) => {
                evidence_unit(ops, dir.read_clock(), report, anomaly, realised, &units)
            }
            _ => None,
        };
        Ok(Target {
            schedule,
            anomaly,
            units,
            realised,
            first_after_evidence,
            timing_note,
        })
    }
}

/// The last unit whose first fault fired no later than the first fault
/// after the earliest moment the anomaly's evidence names (or the last unit,
/// when no fault came after it): the shortest prefix the search starts from.
fn evidence_unit(
    ops: &[crate::history::Op],
    opened_unix_ms: Option<u64>,
    report: &Report,
    anomaly: Anomaly,
    realised: &Realised,
    units: &[Unit],
) -> Option<usize> {
    let mut only = report.clone();
    for r in &mut only.results {
        r.evidence.retain(|e| e.anomaly == anomaly);
    }
    let detection = detect_in(ops, &only, opened_unix_ms, 0.0);
    if !detection.placed {
        return None;
    }
    // The earliest moment the evidence names (the ack of the write later
    // lost): the faults that did the damage came after it, before
    // `at_ns`, when a client first saw it.
    let evidence_ns = detection.from_ns;
    // The first fault step invoked at or after the evidence.
    let step = realised
        .faults
        .iter()
        .find(|(_, f)| f.invoke_ns >= evidence_ns)
        .map(|(s, _)| *s);
    let first_fault = |u: &Unit| {
        u.steps
            .iter()
            .copied()
            .find(|s| realised.faults.contains_key(s))
    };
    Some(match step {
        None => units.len().saturating_sub(1),
        Some(step) => units
            .iter()
            .rposition(|u| first_fault(u).is_some_and(|f| f <= step))
            .unwrap_or(0),
    })
}

/// The cut: the whole schedule must fail first; then the window the
/// evidence leaves (unless `--no-window`), ddmin over it, and each lighter
/// load that still fails. `None` when the whole did not fail.
fn cut_down(
    options: &Options,
    target: &Target,
    trials: &mut Trials,
    out: &mut dyn Write,
) -> Option<Schedule> {
    let jobs = options.jobs.max(1);
    let all: Vec<usize> = (0..target.units.len()).collect();
    let mut judge = UnitJudge {
        trials,
        schedule: &target.schedule,
        units: &target.units,
        realised: target.realised.as_ref(),
        out,
        passed: 0,
    };
    let whole = judge.judge(
        &search::Ask {
            phase: "the whole",
            left: 0,
            best: all.len(),
        },
        std::slice::from_ref(&all),
    );
    if whole.first() != Some(&true) {
        return None;
    }
    let items: Vec<usize> = match (options.no_window, target.first_after_evidence) {
        (false, Some(first)) => {
            let (start, end) = search::window(all.len(), first, jobs, &mut judge);
            let _ = writeln!(
                judge.out,
                "  window: units {start}..={end} of {} (the evidence came before unit {first})",
                all.len()
            );
            (start..=end).collect()
        }
        _ => all,
    };
    // Any candidate that passed shows the empty one would (it keeps less).
    let empty_passes = judge.passed > 0;
    let kept = search::ddmin(items, jobs, empty_passes, &mut judge);
    let UnitJudge { trials, out, .. } = judge;
    let make = |units: &[Unit], kept: &[usize]| match &target.realised {
        Some(realised) => realised.candidate(&target.schedule, units, kept),
        None => super::candidate(&target.schedule, units, kept),
    };
    // Then the undoes: the final heal resumes, restarts and heals whatever
    // is still down or cut, so a kept fault's own undo is dropped when the
    // run still fails without it (one fault fewer for a person to read).
    // Each alone, `jobs` at once; then those that failed alone, together.
    let mut units = target.units.clone();
    let drops: Vec<(usize, Unit)> = kept
        .iter()
        .filter_map(|&u| Some((u, without_undo(&units[u], &target.schedule)?)))
        .collect();
    let mut dropped: Vec<(usize, Unit)> = Vec::new();
    for batch in drops.chunks(jobs) {
        trials.progress(&format!(
            "drop undoes, {} candidates, best so far {} faults",
            drops.len(),
            faults(&make(&units, &kept))
        ));
        let candidates: Vec<Schedule> = batch
            .iter()
            .map(|(u, cut)| {
                let mut trial = units.clone();
                trial[*u] = cut.clone();
                make(&trial, &kept)
            })
            .collect();
        let failed = trials.fail(&candidates);
        for (((u, cut), candidate), fails) in batch.iter().zip(&candidates).zip(failed) {
            let _ = writeln!(
                out,
                "  drop undoes: unit {u} without its undo ({} faults): {}",
                faults(candidate),
                if fails { "fails" } else { "passes" }
            );
            if fails {
                dropped.push((*u, cut.clone()));
            }
        }
    }
    if let [(u, cut)] = dropped.as_slice() {
        units[*u] = cut.clone();
    } else if !dropped.is_empty() {
        let mut together = units.clone();
        for (u, cut) in &dropped {
            together[*u] = cut.clone();
        }
        let candidate = make(&together, &kept);
        let fails = trials.fail(std::slice::from_ref(&candidate))[0];
        let _ = writeln!(
            out,
            "  drop undoes: all {} together ({} faults): {}",
            dropped.len(),
            faults(&candidate),
            if fails { "fails" } else { "passes" }
        );
        let (u, cut) = &dropped[0];
        if fails {
            units = together;
        } else {
            units[*u] = cut.clone();
        }
    }
    let mut shrunk = make(&units, &kept);
    // Then the load: fewer consumers, producers, partitions, while it fails.
    for (what, lighten) in LIGHTER_LOADS {
        if let Some(lighter) = lighten(&shrunk) {
            trials.progress(&format!(
                "lighter load: {what}, best so far {} faults",
                faults(&shrunk)
            ));
            let fails = trials.fail(std::slice::from_ref(&lighter))[0];
            let _ = writeln!(out, "  {what}: {}", if fails { "fails" } else { "passes" });
            if fails {
                shrunk = lighter;
            }
        }
    }
    Some(shrunk)
}

/// `unit` without its undo (the steps after its fault: the undo's gap and
/// the undo), or `None` when it has none.
fn without_undo(unit: &Unit, schedule: &Schedule) -> Option<Unit> {
    let fault = unit
        .steps
        .iter()
        .position(|&i| matches!(schedule.steps[i], crate::schedule::Step::Fault(_)))?;
    (fault + 1 < unit.steps.len()).then(|| Unit {
        steps: unit.steps[..=fault].to_vec(),
    })
}

/// Runs `shrunk` `runs` times (`jobs` at once, one try each): how many failed.
fn confirm(trials: &mut Trials, shrunk: &Schedule, runs: u32) -> u32 {
    let tries = std::mem::replace(&mut trials.tries, 1);
    let mut confirmed = 0;
    let mut left = runs as usize;
    while left > 0 && trials.harness_error.is_none() {
        let batch = left.min(trials.jobs);
        let copies = vec![shrunk.clone(); batch];
        confirmed += trials.fail(&copies).iter().filter(|&&f| f).count() as u32;
        left -= batch;
    }
    trials.tries = tries;
    confirmed
}

/// `shrunk.toml`: the header saying where it came from and how often it
/// reproduced, then the schedule.
fn write_shrunk(
    options: &Options,
    target: &Target,
    shrunk: &Schedule,
    confirmed: u32,
    trials: &Trials,
    out: &mut impl Write,
) -> Result<(), Refused> {
    let text = header(
        &options.run_dir,
        target.anomaly.name(),
        &options.run.sets,
        faults(&target.schedule),
        faults(shrunk),
        (confirmed, options.confirm),
        trials.runs,
    ) + &shrunk.to_toml();
    let path = options.run_dir.join("shrunk.toml");
    std::fs::write(&path, &text)
        .map_err(|e| Refused::Harness(format!("{}: {e}", path.display())))?;
    let _ = writeln!(
        out,
        "shrunk to {} faults in {:.1} min ({} runs); reproduced {confirmed}/{} times; written to {}",
        faults(shrunk),
        trials.elapsed_s() / 60.0,
        trials.runs,
        options.confirm,
        path.display()
    );
    Ok(())
}

/// The run's `results.json`, if it reads.
fn read_report(dir: &RunDir) -> Option<Report> {
    let text = std::fs::read_to_string(dir.results()).ok()?;
    serde_json::from_str(&text).ok()
}

/// The first anomaly an invalid run's results name.
fn first_anomaly(report: &Report) -> Option<Anomaly> {
    if report.verdict != Verdict::Invalid {
        return None;
    }
    report
        .results
        .iter()
        .filter(|r| r.verdict == Verdict::Invalid)
        .flat_map(|r| &r.evidence)
        .map(|e| e.anomaly)
        .next()
}
