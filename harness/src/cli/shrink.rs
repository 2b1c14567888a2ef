//! `epochal shrink`'s command line: a failing run's faults cut down, then
//! its load, to `shrunk.toml` in the run directory. In passes: what to
//! shrink (the run's schedule with its realised timing, the anomaly, the
//! fault units, where the evidence lies), the cut (the whole must fail
//! first; then the window the evidence leaves, campaign/shrink_search.rs;
//! then ddmin over it; then each kept fault's undo, left to the final heal;
//! then the load), the confirmation runs, and the file written. The
//! candidates' runs are shrink_trials.rs.

use std::io::Write;

use clap::Args;

use super::exit::{EXIT_HARNESS_ERROR, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID};
use super::run_settings::RunSettings;
use super::shrink_trials::{Trials, UnitJudge, faults};
use crate::campaign::power::detect::detect_in;
use crate::campaign::shrink::{LIGHTER_LOADS, Unit, header, units};
use crate::campaign::shrink_search::{self, Judge};
use crate::campaign::shrink_timing::Realised;
use crate::checker::{Anomaly, Report, Verdict};
use crate::run_dir::RunDir;
use crate::schedule::Schedule;

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    /// A failing run directory (a campaign's: its `schedule.toml` holds the
    /// faults it fired).
    pub run_dir: std::path::PathBuf,
    /// The anomaly kind a candidate must reproduce; default the first the
    /// run's results name.
    #[arg(long)]
    pub anomaly: Option<Anomaly>,
    /// Runs of each candidate before it counts as passing.
    #[arg(long, default_value_t = 3)]
    pub tries: u32,
    /// Runs of the final schedule, to say how often it reproduces.
    #[arg(long, default_value_t = 5)]
    pub confirm: u32,
    /// Candidates run at once (each its own cluster). More than the
    /// machine's cores stretches every run's timing.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// ddmin over every unit, without first cutting to the window the
    /// anomaly's evidence leaves.
    #[arg(long)]
    pub no_window: bool,
    /// Drop the time removed faults took instead of keeping it as
    /// `N ms pass` (and no realised delay after each gap).
    #[arg(long)]
    pub compress_gaps: bool,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// `epochal shrink`: the evidence window, then ddmin over it
/// (campaign/shrink_search.rs), then the load; writes `shrunk.toml` into
/// the run directory. Exit 0 when a schedule was written, 2 when the run
/// did not fail again, 3 when the run is not a failing campaign run, 4 on a
/// harness error.
pub fn shrink(args: &ShrinkArgs, out: &mut impl Write) -> u8 {
    let target = match Target::load(args) {
        Ok(target) => target,
        Err(code) => return code,
    };
    let Some(mut trials) = Trials::new(
        &args.run_dir,
        &args.settings,
        target.anomaly,
        args.tries,
        args.jobs,
    ) else {
        return EXIT_HARNESS_ERROR;
    };
    let _ = writeln!(
        out,
        "shrinking {} ({} faults in {} units) for `{}`, {} tries a candidate, {} at once; {}",
        args.run_dir.display(),
        faults(&target.schedule),
        target.units.len(),
        target.anomaly,
        args.tries,
        args.jobs.max(1),
        target.timing_note
    );
    let cut = cut_down(args, &target, &mut trials, out);
    let Some(shrunk) = cut else {
        trials.done();
        if let Some(e) = trials.harness_error {
            eprintln!("epochal: shrink: a candidate run failed to run: {e}");
            return EXIT_HARNESS_ERROR;
        }
        let _ = writeln!(
            out,
            "the run's schedule did not show `{}` in {} tries: nothing to shrink \
             (try more --tries)",
            target.anomaly, args.tries
        );
        return EXIT_UNKNOWN;
    };
    trials.progress(&format!(
        "confirming {} faults, {} runs",
        faults(&shrunk),
        args.confirm
    ));
    let confirmed = confirm(&mut trials, &shrunk, args.confirm);
    trials.done();
    if let Some(e) = trials.harness_error {
        eprintln!("epochal: shrink: a candidate run failed to run, so the shrink stopped: {e}");
        return EXIT_HARNESS_ERROR;
    }
    write_shrunk(args, &target, &shrunk, confirmed, &trials, out)
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
    /// Reads the run; `Err` is the exit code (3), after saying why.
    fn load(args: &ShrinkArgs) -> Result<Target, u8> {
        let dir = RunDir::open(&args.run_dir);
        let mut schedule = Schedule::load(dir.schedule()).map_err(|e| {
            eprintln!("epochal: {e}");
            EXIT_USAGE
        })?;
        crate::run::apply_sets(&mut schedule, &args.settings.sets).map_err(|e| {
            eprintln!("epochal: {e}");
            EXIT_USAGE
        })?;
        let report = read_report(&dir);
        let Some(anomaly) = args
            .anomaly
            .or_else(|| report.as_ref().and_then(first_anomaly))
        else {
            eprintln!(
                "epochal: {} is not invalid (no anomaly in its results.json): nothing to shrink",
                args.run_dir.display()
            );
            return Err(EXIT_USAGE);
        };
        // Units are cut from the realised schedule first, so a schedule
        // shrink cannot move is refused before anything is read.
        units(&schedule).map_err(|e| {
            eprintln!("epochal: {}: {e}", dir.schedule().display());
            EXIT_USAGE
        })?;
        let history = crate::history::read_history(dir.history());
        let (schedule, realised, timing_note) = match (&history, args.compress_gaps) {
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
        let units = units(&schedule).map_err(|e| {
            eprintln!("epochal: {}: {e}", dir.schedule().display());
            EXIT_USAGE
        })?;
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
    args: &ShrinkArgs,
    target: &Target,
    trials: &mut Trials,
    out: &mut dyn Write,
) -> Option<Schedule> {
    let jobs = args.jobs.max(1);
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
        &shrink_search::Ask {
            phase: "the whole",
            left: 0,
            best: all.len(),
        },
        std::slice::from_ref(&all),
    );
    if whole.first() != Some(&true) {
        return None;
    }
    let items: Vec<usize> = match (args.no_window, target.first_after_evidence) {
        (false, Some(first)) => {
            let (start, end) = shrink_search::window(all.len(), first, jobs, &mut judge);
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
    let kept = shrink_search::ddmin(items, jobs, empty_passes, &mut judge);
    let UnitJudge { trials, out, .. } = judge;
    let make = |units: &[Unit], kept: &[usize]| match &target.realised {
        Some(realised) => realised.candidate(&target.schedule, units, kept),
        None => crate::campaign::shrink::candidate(&target.schedule, units, kept),
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
/// reproduced, then the schedule; 0 when written, 4 when not.
fn write_shrunk(
    args: &ShrinkArgs,
    target: &Target,
    shrunk: &Schedule,
    confirmed: u32,
    trials: &Trials,
    out: &mut impl Write,
) -> u8 {
    let text = header(
        &args.run_dir,
        target.anomaly.name(),
        &args.settings.sets,
        faults(&target.schedule),
        faults(shrunk),
        (confirmed, args.confirm),
        trials.runs,
    ) + &shrunk.to_toml();
    let path = args.run_dir.join("shrunk.toml");
    if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("epochal: {}: {e}", path.display());
        return EXIT_HARNESS_ERROR;
    }
    let _ = writeln!(
        out,
        "shrunk to {} faults in {:.1} min ({} runs); reproduced {confirmed}/{} times; written to {}",
        faults(shrunk),
        trials.elapsed_s() / 60.0,
        trials.runs,
        args.confirm,
        path.display()
    );
    EXIT_VALID
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
