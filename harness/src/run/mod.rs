//! `epochal run`: a schedule in, a real cluster, real faults, a history on disk
//! out. The phases go one way, each in its own file, each leaving its output in
//! the run directory (run_dir.rs) before the next starts:
//!
//! 1. here: load the schedule, apply `--set` (settings.rs), write
//!    `schedule.toml` as applied, open the history and the harness log, and
//!    start the cluster on the chosen runtime;
//! 2. setup.rs: create the topics and await a ready cluster;
//! 3. a [`Driver`] (driver.rs): steps.rs plays the steps in order — faults
//!    through the nemesis, client operations through op-recording clients,
//!    awaits over direct observation — beside `[workload.background]`'s
//!    workers; every op streamed to `history.jsonl` as it happens.
//!    (Or a campaign's nemesis, campaign/play.rs, picks and fires faults under
//!    the background load, writing each into `schedule.toml` as it fires.)
//! 4. quiesce.rs: the final heal (partitions removed, paused nodes resumed,
//!    dead nodes started, each a nemesis op), the liveness window if the
//!    schedule sets one (liveness.rs), then a bounded quiesce, and in a
//!    run whose clients ran transactions a bounded wait for every last
//!    stable offset to reach its high watermark (stable.rs);
//! 5. collect.rs: etcd's timeline to `timeline.json`, every broker killed
//!    (SIGKILL: no shutdown hook rewrites a file) so each data directory stays
//!    as the cluster left it, and `run.json` saying how the run ended;
//! 6. check.rs: the checkers read it all back from the run directory, as
//!    `epochal check` would, and their report goes to `results.json`.
//!
//! An await that times out, a target that resolves to nothing, or a cluster that
//! will not quiesce makes the run unknown; phases 4 and 5 still run so the
//! evidence is kept. Ctrl-C kills every child (runtime/reaper.rs) and leaves the
//! history as far as it got: every line is written whole.

mod check;
mod collect;
mod driver;
mod error;
mod final_polls;
mod live;
mod liveness;
mod members;
mod options;
mod outcome;
mod quiesce;
mod scripted_member;
mod settings;
mod setup;
mod stable;
mod steps;
mod summary;

pub use check::{check_dir, check_dir_and_draw, verdict, write_report};
pub use driver::{Driver, Steps};
pub use error::RunError;
pub use live::Live;
pub use liveness::FIRST_PROBE_VALUE;
pub use options::{RunOptions, default_bin_dir};
pub use outcome::{RunReport, RunStatus};
pub use settings::{apply_sets, cluster_config};
pub use steps::{Fired, faults, fire, start_background, stop_background};
pub use summary::write_summary;

use crate::history::{HistoryWriter, SharedHistory};
use crate::run_dir::RunDir;
use crate::runtime::{DockerRuntime, ProcessRuntime, Runtime, RuntimeError, RuntimeKind, reaper};
use crate::schedule::Schedule;
use crate::store::RunLog;

/// Runs a schedule end to end; see the module docs for the phases.
pub async fn run(options: &RunOptions) -> Result<RunReport, RunError> {
    let mut schedule = Schedule::load(&options.schedule)?;
    crate::fault::check_system(&schedule, &options.schedule, &options.system)?;
    apply_sets(&mut schedule, &options.sets)?;
    let name = options.name.clone().unwrap_or_else(|| {
        options
            .schedule
            .file_stem()
            .map_or("schedule".into(), |s| s.to_string_lossy().into_owned())
    });
    let source = options.schedule.display().to_string();
    execute(options, schedule, &name, &source, Steps).await
}

/// Runs `schedule` (`--set`s already applied), stored under `name`, with
/// `driver` playing phase 3 ([`Steps`], or a campaign's plan). `source`
/// names where it came from in the log.
pub async fn execute(
    options: &RunOptions,
    schedule: Schedule,
    name: &str,
    source: &str,
    driver: impl Driver,
) -> Result<RunReport, RunError> {
    // Ctrl-C from here on kills whatever children exist and exits 130.
    reaper::install();
    let group: Vec<String> = options
        .group
        .clone()
        .unwrap_or_else(|| vec!["adhoc".into(), name.to_owned()]);
    let group: Vec<&str> = group.iter().map(String::as_str).collect();
    let dir = RunDir::create(&options.store, &group)?;
    dir.write_schedule(&schedule)?;
    dir.write_system(&options.system)?;
    let mut log = RunLog::create(&dir.harness_log(), options.echo)?;
    log.line(format!("run of {source} in {}", dir.path().display()));
    let writer = HistoryWriter::create(dir.history())?;
    dir.write_clock(writer.opened())?;
    let history = SharedHistory::new(writer);

    let config = cluster_config(&schedule, options, &dir);
    let run = Prepared {
        schedule,
        dir,
        history,
        log,
        driver,
    };
    let ran = match options.runtime {
        RuntimeKind::Process => drive(ProcessRuntime::start(config).await, run).await,
        RuntimeKind::Docker => drive(DockerRuntime::start(config).await, run).await,
    };
    // Once the run has ended, checked (check_and_store) or not: the store's
    // index lists it either way. Not writing the index is a warning, never
    // the run's failure.
    crate::report::index::update_store_index(&options.store);
    ran
}

/// A run whose directory, history and log exist, before its cluster does.
struct Prepared<D> {
    schedule: Schedule,
    dir: RunDir,
    history: SharedHistory,
    log: RunLog,
    driver: D,
}

/// Phases 2 to 6 on a started (or failed) cluster, whatever its runtime.
async fn drive<R: Runtime, D: Driver>(
    started: Result<R, RuntimeError>,
    run: Prepared<D>,
) -> Result<RunReport, RunError> {
    let Prepared {
        schedule,
        dir,
        history,
        mut log,
        driver,
    } = run;
    let runtime = match started {
        Ok(runtime) => runtime,
        Err(e) => {
            log.line(format!("cluster did not start: {e}"));
            return Err(e.into());
        }
    };
    let mut live = match Live::connect(runtime, &schedule, history, log).await {
        Ok(live) => live,
        Err((mut log, e)) => {
            log.line(format!("harness error: {e}"));
            return Err(e);
        }
    };
    let outcome = play(&mut live, &schedule, driver, &dir).await;
    let frozen = collect::collect(&mut live, &dir).await;
    let (status, liveness) = match (outcome, frozen) {
        (Err(e), _) | (Ok(_), Err(e)) => {
            live.log.line(format!("harness error: {e}"));
            return Err(e);
        }
        (Ok(ended), Ok(())) => ended,
    };
    collect::write_end(&mut live.log, &dir, &status, liveness)?;
    // A campaign's realised steps replace what it started from.
    let schedule = dir.read_schedule().unwrap_or(schedule);
    drop(live);
    let report = check::check_and_store(&dir)?;
    Ok(RunReport {
        dir,
        status,
        schedule,
        report,
    })
}

/// Phases 2 to 4. A step that cannot go on ends the steps; the final heal,
/// the liveness window and the quiesce come whenever the cluster was ready.
async fn play<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
    driver: impl Driver,
    dir: &RunDir,
) -> Result<(RunStatus, quiesce::Liveness), RunError> {
    setup::setup(live, schedule).await?;
    let played = driver.play(live, schedule, dir).await?;
    let (settled, liveness) = quiesce::final_heal(live, schedule).await?;
    let status = match played {
        RunStatus::Unknown(why) => RunStatus::Unknown(why),
        RunStatus::Completed => settled,
    };
    Ok((status, liveness))
}
