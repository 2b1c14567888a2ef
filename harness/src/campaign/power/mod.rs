//! `epochal power`: how strong is a campaign? The reference broker's era
//! settings are known-positive controls — each has a documented bug — so N
//! seeds of D seconds on each measure the harness's own power: the share of
//! seeds that went invalid, how soon, with which anomaly kinds; and the
//! fixed settings are the negative control, where every invalid seed is a
//! false alarm or a bug (issue [power], item 2).
//!
//! This module owns running the table: the settings as data (settings.rs),
//! one ordinary campaign run per setting and seed (the same cluster, load,
//! nemesis and checkers as `epochal campaign`; the run directories stay in
//! the store under `power/<setting>/seed-N/`), when each failing run first
//! showed its anomaly (detect.rs), and the table and its JSON (table.rs).
//! It never judges a run differently from the gate: a seed is detected when
//! its verdict is invalid, whatever the kind.

pub mod detect;
pub mod settings;
pub mod table;

use std::time::{Duration, Instant};

use crate::run::{self, RunOptions};
use crate::schedule::Step;

pub use detect::{Detection, detect, forbidden_kinds};
pub use settings::{Control, PowerFile, PowerFileError, PowerSetting};
pub use table::{PowerTable, Row, SeedOutcome, Summary};

/// What to run: which settings, seeds and length, how many at once, and how
/// each run is made (store, binaries, runtime; its `group` and `sets` are
/// set here per run).
#[derive(Debug, Clone)]
pub struct PowerOptions {
    pub settings: Vec<PowerSetting>,
    pub seeds: Vec<u64>,
    pub duration: Duration,
    pub jobs: usize,
    pub quick: bool,
    /// Targeted fault sequences in every setting's mix, the negative
    /// control's too (off: `power --no-sequences`).
    pub sequences: bool,
    /// Guided or not; every run measured against, and merged into, its prior.
    pub guide: super::explore::pairs::Guide,
    pub run: RunOptions,
}

impl PowerOptions {
    /// The `epochal campaign` command line of `setting`'s first seed, with
    /// the table's own flags (no sequences, guided).
    pub fn command(&self, setting: &PowerSetting) -> String {
        let mut command = setting.command(self.seeds[0], self.duration);
        if !self.sequences {
            command += " --no-sequences";
        }
        if self.guide.guided {
            command += " --guided";
        }
        if self.guide.lookahead {
            command += " --lookahead";
        }
        command
    }
}

/// Runs every setting's seeds (at most `jobs` at once), then builds the
/// table. `progress` is told each seed's outcome as it ends.
pub async fn run_power(
    options: &PowerOptions,
    progress: &mut dyn FnMut(&PowerSetting, &SeedOutcome),
) -> PowerTable {
    let started = Instant::now();
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(options.jobs.max(1)));
    let local = tokio::task::LocalSet::new();
    let mut handles = Vec::new();
    for (row, setting) in options.settings.iter().enumerate() {
        for &seed in &options.seeds {
            let permits = permits.clone();
            let setting = setting.clone();
            let mut run_options = options.run.clone();
            run_options.sets.clear();
            run_options.echo = false;
            run_options.group = Some(vec![
                "power".into(),
                setting.name.clone(),
                format!("seed-{seed}"),
            ]);
            let duration = options.duration;
            let sequences = options.sequences;
            let guide = options.guide.clone();
            handles.push((
                row,
                local.spawn_local(async move {
                    let _permit = permits.acquire_owned().await.expect("never closed");
                    let outcome =
                        one_seed(&setting, seed, duration, (sequences, guide), &run_options).await;
                    (setting, outcome)
                }),
            ));
        }
    }
    let mut outcomes: Vec<Vec<SeedOutcome>> = vec![Vec::new(); options.settings.len()];
    local
        .run_until(async {
            for (row, handle) in handles {
                let (setting, outcome) = handle.await.expect("a power run panicked");
                progress(&setting, &outcome);
                outcomes[row].push(outcome);
            }
        })
        .await;
    let rows: Vec<Row> = options
        .settings
        .iter()
        .zip(outcomes)
        .map(|(s, seeds)| {
            let command = options.command(s);
            Row::new(s.clone(), command, seeds)
        })
        .collect();
    table(options, rows, started)
}

/// One campaign: the setting's flags and `--set`s on seed `seed`, run as
/// `epochal campaign` would, then measured.
async fn one_seed(
    setting: &PowerSetting,
    seed: u64,
    duration: Duration,
    (sequences, guide): (bool, super::explore::pairs::Guide),
    options: &RunOptions,
) -> SeedOutcome {
    let started = Instant::now();
    let failed = |error: String| SeedOutcome {
        seed,
        verdict: None,
        error: Some(error),
        anomalies: Vec::new(),
        detection: None,
        faults: 0,
        run_dir: None,
        wall_s: started.elapsed().as_secs_f64(),
        pairs: None,
    };
    let campaign = setting.options(seed, duration);
    let explicit = !setting.campaign.kinds.is_empty();
    let kinds = match super::kinds_for(&options.system, &campaign.kinds, explicit) {
        Ok(kinds) => kinds,
        Err(e) => return failed(e.to_string()),
    };
    let mut schedule = super::schedule(&campaign);
    schedule.workload.idempotent = setting.campaign.idempotent;
    if let Err(e) = run::apply_sets(&mut schedule, &setting.set) {
        return failed(e.to_string());
    }
    let plan = super::Plan::derive(seed, campaign.stop, campaign.brokers, &kinds);
    let plan = if sequences {
        plan
    } else {
        plan.without_sequences()
    };
    let plan = super::Plan { guide, ..plan };
    let name = format!("seed-{seed}");
    let source = format!("power {} seed {seed}", setting.name);
    match run::execute(options, schedule, &name, &source, plan).await {
        Ok(report) => {
            let detection = detect(&report.dir, &report.report, duration.as_secs_f64());
            SeedOutcome {
                seed,
                verdict: Some(report.report.verdict),
                error: None,
                anomalies: forbidden_kinds(&report.report),
                detection,
                faults: report
                    .schedule
                    .steps
                    .iter()
                    .filter(|s| matches!(s, Step::Fault(_) | Step::Faults(_)))
                    .flat_map(Step::faults)
                    .count(),
                run_dir: Some(report.dir.path().to_owned()),
                wall_s: started.elapsed().as_secs_f64(),
                pairs: pairs_reached(report.dir.path()),
            }
        }
        Err(e) => failed(e.to_string()),
    }
}

/// The table again from the runs a power table left in the store (the
/// latest run of each setting and seed under `<store>/power/<setting>/seed-N/`),
/// measured with this build's detection, without running anything: for a
/// table whose runs outlived a change to how detection is measured. A run
/// that is missing is an error row.
pub fn remeasure(options: &PowerOptions) -> PowerTable {
    let started = Instant::now();
    let rows: Vec<Row> = options
        .settings
        .iter()
        .map(|setting| {
            let seeds = options
                .seeds
                .iter()
                .map(|&seed| stored_seed(&options.run.store, setting, seed, options.duration))
                .collect();
            Row::new(setting.clone(), options.command(setting), seeds)
        })
        .collect();
    table(options, rows, started)
}

/// One seed's outcome from its stored run.
fn stored_seed(
    store: &std::path::Path,
    setting: &PowerSetting,
    seed: u64,
    duration: Duration,
) -> SeedOutcome {
    let parent = store
        .join("power")
        .join(&setting.name)
        .join(format!("seed-{seed}"));
    let latest = std::fs::read_dir(&parent).ok().and_then(|entries| {
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("results.json").is_file())
            .max()
    });
    let missing = |error: String| SeedOutcome {
        seed,
        verdict: None,
        error: Some(error),
        anomalies: Vec::new(),
        detection: None,
        faults: 0,
        run_dir: None,
        wall_s: 0.0,
        pairs: None,
    };
    let Some(path) = latest else {
        return missing(format!("no checked run under {}", parent.display()));
    };
    let dir = crate::run_dir::RunDir::open(&path);
    let report: crate::checker::Report = match std::fs::read_to_string(dir.results())
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(report) => report,
        Err(e) => return missing(format!("{}: {e}", dir.results().display())),
    };
    let faults = dir.read_schedule().map_or(0, |s| {
        s.steps
            .iter()
            .filter(|s| matches!(s, Step::Fault(_)))
            .count()
    });
    // The harness log's last line is stamped with the run's end.
    let wall_s = std::fs::read_to_string(dir.harness_log())
        .ok()
        .and_then(|log| {
            let last = log.lines().last()?;
            let stamp = last.strip_prefix('[')?.split_once("s]")?.0;
            stamp.trim().parse::<f64>().ok()
        })
        .unwrap_or(0.0);
    SeedOutcome {
        seed,
        verdict: Some(report.verdict),
        error: None,
        anomalies: forbidden_kinds(&report),
        detection: detect(&dir, &report, duration.as_secs_f64()),
        faults,
        pairs: pairs_reached(&path),
        run_dir: Some(path),
        wall_s,
    }
}

/// How many state-fault pairs the campaign in `dir` reached, from its
/// `coverage.json` (none for a run from before coverage was kept).
fn pairs_reached(dir: &std::path::Path) -> Option<usize> {
    let map =
        super::explore::pairs::Coverage::load(&dir.join(super::explore::pairs::COVERAGE_FILE))
            .ok()?;
    (!map.pairs.is_empty()).then_some(map.pairs.len())
}

/// The table of `rows`, with when and where it was made.
fn table(options: &PowerOptions, rows: Vec<Row>, started: Instant) -> PowerTable {
    let false_alarms = rows
        .iter()
        .filter(|r| r.setting.control == Control::Negative)
        .map(|r| r.invalid)
        .sum();
    PowerTable {
        date: crate::store::utc_stamp(std::time::SystemTime::now()),
        commit: commit(),
        machine: machine(),
        quick: options.quick,
        seeds: options.seeds.clone(),
        duration_s: options.duration.as_secs(),
        jobs: options.jobs.max(1),
        rows,
        false_alarms,
        wall_s: started.elapsed().as_secs_f64(),
    }
}

/// The commit checked out where the table ran, when git can say.
fn commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Cores and memory, as a person comparing tables needs them.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / (1024 * 1024));
    format!("{cores} cores, {memory_gib} GiB")
}
