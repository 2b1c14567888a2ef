//! `epochal shrink`'s command line: a failing run's faults cut down (ddmin,
//! campaign/shrink.rs), then its load, to `shrunk.toml` in the run directory.
//! In passes: what to shrink (the run's schedule, the anomaly, the fault
//! units), the cut (the whole must fail first), the confirmation runs, and
//! the file written.

use std::io::Write;
use std::path::Path;

use clap::Args;

use super::exit::{EXIT_HARNESS_ERROR, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID};
use super::run_settings::RunSettings;
use crate::campaign::shrink::{LIGHTER_LOADS, Unit, candidate, ddmin, header, units};
use crate::checker::{Anomaly, Report, Verdict};
use crate::run::{RunOptions, Steps};
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
    #[command(flatten)]
    pub settings: RunSettings,
}

/// `epochal shrink`: ddmin over a failing run's faults (campaign/shrink.rs),
/// then over its load; writes `shrunk.toml` into the run directory. Exit 0
/// when a schedule was written, 3 when the run is not a failing campaign run,
/// 4 on a harness error.
pub fn shrink(args: &ShrinkArgs, out: &mut impl Write) -> u8 {
    let target = match Target::load(args) {
        Ok(target) => target,
        Err(code) => return code,
    };
    let Some(mut trials) = Trials::new(args, target.anomaly) else {
        return EXIT_HARNESS_ERROR;
    };
    let _ = writeln!(
        out,
        "shrinking {} ({} faults in {} units) for `{}`, {} tries a candidate",
        args.run_dir.display(),
        faults(&target.schedule),
        target.units.len(),
        target.anomaly,
        args.tries
    );
    let Some(shrunk) = cut_down(&target, &mut trials, out) else {
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
    let mut confirmed = 0;
    for _ in 0..args.confirm {
        if trials.reproduces(&shrunk) {
            confirmed += 1;
        }
    }
    if let Some(e) = trials.harness_error {
        eprintln!("epochal: shrink: a candidate run failed to run, so the shrink stopped: {e}");
        return EXIT_HARNESS_ERROR;
    }
    write_shrunk(args, &target, &shrunk, confirmed, trials.runs, out)
}

/// What a shrink works on: the failing run's schedule (`--set`s applied),
/// the anomaly every candidate must show, and the schedule cut into units.
struct Target {
    schedule: Schedule,
    anomaly: Anomaly,
    units: Vec<Unit>,
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
        let Some(anomaly) = args.anomaly.or_else(|| first_anomaly(&dir)) else {
            eprintln!(
                "epochal: {} is not invalid (no anomaly in its results.json): nothing to shrink",
                args.run_dir.display()
            );
            return Err(EXIT_USAGE);
        };
        let units = units(&schedule).map_err(|e| {
            eprintln!("epochal: {}: {e}", dir.schedule().display());
            EXIT_USAGE
        })?;
        Ok(Target {
            schedule,
            anomaly,
            units,
        })
    }
}

/// The candidates' runs, each an ordinary run of its own, counted. A
/// candidate that cannot run (a missing binary, a port in use) tells nothing:
/// after the first, no more are run and the shrink fails, rather than
/// counting them as passes and "keeping" every fault.
struct Trials {
    runtime: tokio::runtime::Runtime,
    options: RunOptions,
    name: String,
    anomaly: Anomaly,
    tries: u32,
    runs: u32,
    harness_error: Option<String>,
}

impl Trials {
    /// `None` when no async runtime could be had (said on stderr).
    fn new(args: &ShrinkArgs, anomaly: Anomaly) -> Option<Trials> {
        let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        else {
            eprintln!("epochal: starting the async runtime");
            return None;
        };
        let name = format!(
            "{}-shrink",
            args.run_dir
                .canonicalize()
                .ok()
                .and_then(|d| d
                    .parent()
                    .and_then(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "run".into())
        );
        let mut options = args.settings.options(Path::new(&name));
        options.group = Some(vec!["shrink".into(), name.clone()]);
        options.echo = false;
        Some(Trials {
            runtime,
            options,
            name,
            anomaly,
            tries: args.tries,
            runs: 0,
            harness_error: None,
        })
    }

    /// One run of `candidate`: whether it was invalid with the anomaly.
    fn reproduces(&mut self, candidate: &Schedule) -> bool {
        if self.harness_error.is_some() {
            return false;
        }
        self.runs += 1;
        let run = crate::run::execute(
            &self.options,
            candidate.clone(),
            &self.name,
            "a shrink candidate",
            Steps,
        );
        match self.runtime.block_on(run) {
            Ok(report) => {
                report.report.verdict == Verdict::Invalid
                    && report
                        .report
                        .results
                        .iter()
                        .flat_map(|r| &r.evidence)
                        .any(|e| e.anomaly == self.anomaly)
            }
            Err(e) => {
                self.harness_error.get_or_insert(e.to_string());
                false
            }
        }
    }

    /// Whether `candidate` fails within `tries` runs, said as `what`.
    fn fails(&mut self, candidate: &Schedule, what: &str, out: &mut dyn Write) -> bool {
        for attempt in 1..=self.tries {
            if self.reproduces(candidate) {
                let _ = writeln!(out, "  {what}: fails (try {attempt})");
                return true;
            }
        }
        let _ = writeln!(out, "  {what}: passes {} times", self.tries);
        false
    }
}

/// The cut: the whole schedule must fail first (ddmin takes it as failing);
/// then ddmin over the units, then each lighter load that still fails.
/// `None` when the whole did not fail.
fn cut_down(target: &Target, trials: &mut Trials, out: &mut dyn Write) -> Option<Schedule> {
    let (schedule, units) = (&target.schedule, &target.units);
    let all: Vec<usize> = (0..units.len()).collect();
    let whole = candidate(schedule, units, &all);
    if !trials.fails(&whole, &format!("all {} units", units.len()), out) {
        return None;
    }
    let kept = ddmin(all, |kept| {
        let c = candidate(schedule, units, kept);
        trials.fails(
            &c,
            &format!("{} of {} units {kept:?}", kept.len(), units.len()),
            out,
        )
    });
    let mut shrunk = candidate(schedule, units, &kept);
    // Then the load: fewer consumers, producers, partitions, while it fails.
    for (what, lighten) in LIGHTER_LOADS {
        if let Some(lighter) = lighten(&shrunk)
            && trials.fails(&lighter, what, out)
        {
            shrunk = lighter;
        }
    }
    Some(shrunk)
}

/// `shrunk.toml`: the header saying where it came from and how often it
/// reproduced, then the schedule; 0 when written, 4 when not.
fn write_shrunk(
    args: &ShrinkArgs,
    target: &Target,
    shrunk: &Schedule,
    confirmed: u32,
    runs: u32,
    out: &mut impl Write,
) -> u8 {
    let text = header(
        &args.run_dir,
        target.anomaly.name(),
        &args.settings.sets,
        faults(&target.schedule),
        faults(shrunk),
        (confirmed, args.confirm),
        runs,
    ) + &shrunk.to_toml();
    let path = args.run_dir.join("shrunk.toml");
    if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("epochal: {}: {e}", path.display());
        return EXIT_HARNESS_ERROR;
    }
    let _ = writeln!(
        out,
        "shrunk to {} faults; reproduced {confirmed}/{} times; written to {}",
        faults(shrunk),
        args.confirm,
        path.display()
    );
    EXIT_VALID
}

/// How many faults a schedule fires.
fn faults(schedule: &Schedule) -> usize {
    schedule.steps.iter().flat_map(|st| st.faults()).count()
}

/// The first anomaly an invalid run's results name.
fn first_anomaly(dir: &RunDir) -> Option<Anomaly> {
    let text = std::fs::read_to_string(dir.results()).ok()?;
    let report: Report = serde_json::from_str(&text).ok()?;
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
