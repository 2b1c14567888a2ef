//! The `epochal` command line: argument parsing and the subcommands' bodies.
//!
//! Exit codes, one table for the whole binary. 1 and 2 follow Jepsen (invalid,
//! unknown) so scripts written for it read ours the same way; clap's own exit
//! code for a usage error (2) is therefore remapped to 3.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | valid; for `inspect`: the directory was read (findings, if any, are printed, not an error); for `serve`: stopped by SIGINT (Ctrl-C) or SIGTERM, its usual end |
//! | 1 | invalid: a checker found an anomaly |
//! | 2 | unknown: the run could not decide (an await timed out, a checker could not run) |
//! | 3 | usage error: bad arguments or a malformed schedule |
//! | 4 | harness error: e.g. a data directory that does not exist, a node that will not start |
//! | 130 | interrupted by SIGINT (143: SIGTERM); every child is killed and reaped first (not `serve`: it has no children and a signal is how it stops, so 0) |

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::campaign::command::{CampaignArgs, ShrinkArgs, campaign, shrink};
use crate::reader::{self, ReadError, dump::write_dump};

pub const EXIT_VALID: u8 = 0;
pub const EXIT_INVALID: u8 = 1;
pub const EXIT_UNKNOWN: u8 = 2;
pub const EXIT_USAGE: u8 = 3;
pub const EXIT_HARNESS_ERROR: u8 = 4;

#[derive(Debug, Parser)]
#[command(
    name = "epochal",
    version,
    about = "Fault-injection conformance harness for Kafka-style replicated logs"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a broker data directory's replica state, like Kafka's DumpLogSegments.
    Inspect(InspectArgs),
    /// Run a schedule against a real cluster, keep everything in the store, check it.
    Run(RunArgs),
    /// Re-check a stored run offline (no cluster): the same verdict `run` gave.
    Check(CheckArgs),
    /// Run again the schedule a stored run applied (its `schedule.toml`), or a schedule file.
    Replay(ReplayArgs),
    /// Run every scenario of the suites under every setting; pass only if each meets its expectation.
    Gate(GateArgs),
    /// A seeded randomized run: faults picked by the seed under background load, then every checker.
    Campaign(CampaignArgs),
    /// Cut a failing run's faults down (ddmin) to a schedule that still fails the same way: `shrunk.toml`.
    Shrink(ShrinkArgs),
    /// Remove what killed harnesses left: process groups, Docker containers and networks, and stale epochal images.
    Gc(GcArgs),
    /// Merge the JUnit reports of a sharded gate (`--shard I/N` on N runners) into one.
    Merge(MergeArgs),
    /// Serve the store read-only on 127.0.0.1: its index of runs, each run's report and files.
    Serve(ServeArgs),
    /// Print every anomaly kind a checker can name: its checker, whether it makes a run invalid, what it means.
    Anomalies,
}

/// `epochal anomalies`: the table of `checker::Anomaly` (the names suites'
/// `anomaly = "..."` take), as Markdown; always 0.
pub fn anomalies(out: &mut impl Write) -> u8 {
    let _ = out.write_all(crate::checker::anomaly::table().as_bytes());
    EXIT_VALID
}

#[derive(Debug, Args)]
pub struct GateArgs {
    /// Suite files, or directories whose `*.toml` suites are taken.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "process")]
    pub runtime: RuntimeKind,
    /// Write a JUnit XML report here (one case per scenario and setting).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// How many runs at once.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    #[arg(long, default_value = "store")]
    pub store: PathBuf,
    #[arg(long, default_value = "etcd")]
    pub etcd: PathBuf,
    /// Run only the I-th of N deterministic slices of the cases (`1/4`), so
    /// a CI matrix spreads the gate over N runners.
    #[arg(long, default_value = "1/1")]
    pub shard: crate::gate::Shard,
}

/// `epochal gate`: 0 when every case meets its expectation, 1 when any does
/// not (an unknown or a run that failed included), 3 for a malformed suite,
/// 4 when the report cannot be written.
pub fn gate(args: &GateArgs, out: &mut impl Write) -> u8 {
    let suites = match crate::gate::load_suites(&args.paths) {
        Ok(suites)
            if suites
                .iter()
                .any(|s| !s.suite.scenarios.is_empty() || !s.suite.campaigns.is_empty()) =>
        {
            suites
        }
        Ok(_) => {
            eprintln!("epochal: no scenarios in {:?}", args.paths);
            return EXIT_USAGE;
        }
        Err(e) => {
            eprintln!("epochal: {e}");
            return EXIT_USAGE;
        }
    };
    let Some(runtime) = current_thread_runtime() else {
        return EXIT_HARNESS_ERROR;
    };
    let options = crate::gate::GateOptions {
        store: args.store.clone(),
        bin_dir: crate::run::default_bin_dir(),
        etcd: args.etcd.clone(),
        jobs: args.jobs,
        runtime: args.runtime,
        shard: args.shard,
    };
    let cases = runtime.block_on(crate::gate::run_gate(&suites, &options));
    let _ = crate::gate::write_table(&cases, out);
    if let Some(path) = &args.junit
        && let Err(e) = std::fs::write(path, crate::gate::junit(&cases))
    {
        eprintln!("epochal: {}: {e}", path.display());
        return EXIT_HARNESS_ERROR;
    }
    if !cases.is_empty() && cases.iter().all(|c| c.met) {
        EXIT_VALID
    } else {
        EXIT_INVALID
    }
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A run directory (`<store>/adhoc/<schedule>/<timestamp>-<n>`, or `<store>/latest`).
    pub run_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A run directory (its `schedule.toml`, settings included) or a schedule file.
    pub source: PathBuf,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// `epochal check`: the exit code follows the table above.
pub fn check(args: &CheckArgs, out: &mut impl Write) -> u8 {
    match crate::run::check_dir_and_draw(&crate::run_dir::RunDir::open(&args.run_dir)) {
        Ok(report) => {
            let _ = writeln!(out, "run: {}", args.run_dir.display());
            if let Err(e) = crate::run::write_report(&report, out) {
                eprintln!("epochal: writing the report: {e}");
            }
            exit_code(report.verdict)
        }
        Err(e @ crate::checker::LoadError::NotARun(_)) => {
            eprintln!("epochal: {e}");
            EXIT_USAGE
        }
        Err(e) => {
            eprintln!("epochal: {e}");
            EXIT_HARNESS_ERROR
        }
    }
}

/// `epochal replay`: a run of the stored `schedule.toml` (or the file given).
pub fn replay(args: &ReplayArgs, out: &mut impl Write) -> u8 {
    // A stored run replays under its schedule's name, not "schedule".
    let (schedule, name) = if args.source.is_dir() {
        let dir = std::fs::canonicalize(&args.source).unwrap_or_else(|_| args.source.clone());
        let name = dir
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        (args.source.join("schedule.toml"), name)
    } else {
        (args.source.clone(), None)
    };
    run_schedule(&schedule, name, &args.settings, out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeKind {
    /// Nodes as local child processes on 127.0.0.1.
    Process,
    /// Each node a Docker container of its own on a network made for the run;
    /// images built locally, nothing pulled (runtime/docker).
    Docker,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The schedule (TOML; docs/schedules.md).
    pub schedule: PathBuf,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// How a schedule runs: shared by `run` and `replay`.
#[derive(Debug, Clone, Args)]
pub struct RunSettings {
    #[arg(long, value_enum, default_value = "process")]
    pub runtime: RuntimeKind,
    /// Where runs are kept (`<store>/adhoc/<schedule>/<timestamp>-<n>/`).
    #[arg(long, default_value = "store")]
    pub store: PathBuf,
    /// A broker setting for every node, overriding the schedule (repeatable),
    /// e.g. `--set truncation=high-watermark`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// The etcd binary.
    #[arg(long, default_value = "etcd")]
    pub etcd: PathBuf,
    /// Do not echo harness.log to stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// `epochal run`: the exit code follows the table above.
pub fn run(args: &RunArgs, out: &mut impl Write) -> u8 {
    run_schedule(&args.schedule, None, &args.settings, out)
}

impl RunSettings {
    /// Run options for `schedule` with these settings.
    pub(crate) fn options(&self, schedule: &std::path::Path) -> crate::run::RunOptions {
        let mut options = crate::run::RunOptions::new(schedule, &self.store);
        options.sets = self.sets.clone();
        options.etcd = self.etcd.clone();
        options.echo = !self.quiet;
        options.runtime = self.runtime;
        options
    }
}

/// Runs `schedule`, stored under `name` (default: its file stem).
fn run_schedule(
    schedule: &std::path::Path,
    name: Option<String>,
    settings: &RunSettings,
    out: &mut impl Write,
) -> u8 {
    let mut options = settings.options(schedule);
    options.name = name;
    finish_run(crate::run::run(&options), out).0
}

/// Drives a run to its end on a two-thread runtime, prints its summary and
/// report, and gives its exit code (and the report, when it ran).
pub(crate) fn finish_run(
    run: impl std::future::Future<Output = Result<crate::run::RunReport, crate::run::RunError>>,
    out: &mut impl Write,
) -> (u8, Option<crate::run::RunReport>) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("epochal: starting the async runtime: {e}");
            return (EXIT_HARNESS_ERROR, None);
        }
    };
    match runtime.block_on(run) {
        Ok(report) => {
            if let Err(e) = crate::run::write_summary(&report, out)
                .and_then(|()| crate::run::write_report(&report.report, out))
            {
                eprintln!("epochal: writing the summary: {e}");
            }
            (exit_code(report.report.verdict), Some(report))
        }
        Err(e) => {
            eprintln!("epochal: {e}");
            let code = if e.is_usage() {
                EXIT_USAGE
            } else {
                EXIT_HARNESS_ERROR
            };
            (code, None)
        }
    }
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The broker's data directory (holding `<topic>-<partition>/` directories).
    pub data_dir: PathBuf,
    /// Print everything read as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print the compact form as JSON: `[offset, epoch, value]` per record,
    /// epoch file, high watermark, recovery point, findings.
    #[arg(long, conflicts_with = "json")]
    pub compact: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("writing the output: {0}")]
    Output(#[from] io::Error),
}

/// `epochal inspect`: reads `args.data_dir` and prints it to `out`.
pub fn inspect(args: &InspectArgs, out: &mut impl Write) -> Result<(), InspectError> {
    let state = reader::read_data_dir(&args.data_dir)?;
    let written = if args.json {
        serde_json::to_writer_pretty(&mut *out, &state)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else if args.compact {
        serde_json::to_writer_pretty(&mut *out, &state.compact())
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        write_dump(&state, out)
    };
    match written.and_then(|()| out.flush()) {
        // `epochal inspect DIR | head` closing the pipe early is not an error.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// The exit code of a verdict (the table above).
pub fn exit_code(verdict: crate::checker::Verdict) -> u8 {
    match verdict {
        crate::checker::Verdict::Valid => EXIT_VALID,
        crate::checker::Verdict::Invalid => EXIT_INVALID,
        crate::checker::Verdict::Unknown => EXIT_UNKNOWN,
    }
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Where `epochal-broker` and `epochal-proxy` are (default: beside `epochal`),
    /// to tell current images from stale ones.
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    #[arg(long, default_value = "etcd")]
    pub etcd: PathBuf,
    /// Also remove the containers and networks of runs whose harness is still
    /// running (by default only those of harnesses that are gone).
    #[arg(long)]
    pub all: bool,
}

/// `epochal gc`: kills the process groups (etcd, proxy, brokers) of
/// harnesses that were killed outright (runtime/orphans.rs), removes the
/// containers and networks that runs of dead harnesses left (all runs' with
/// `--all`), and every epochal image whose tag is not the hash of what it
/// would hold now.
/// 0 when all went, 4 when Docker could not be reached or something stayed.
pub fn gc(args: &GcArgs, out: &mut impl Write) -> u8 {
    let bin_dir = args
        .bin_dir
        .clone()
        .unwrap_or_else(crate::run::default_bin_dir);
    // Process groups first: they need no Docker.
    match crate::runtime::orphans::reap_dead() {
        Ok(reaped) => {
            let _ = writeln!(
                out,
                "killed {} process groups left by {} killed harnesses",
                reaped.groups.len(),
                reaped.ledgers
            );
            if reaped.memory_dirs > 0 {
                let _ = writeln!(
                    out,
                    "removed {} etcd data directories they left in memory",
                    reaped.memory_dirs
                );
            }
        }
        Err(e) => {
            eprintln!(
                "epochal: gc: reading {}: {e}",
                crate::runtime::orphans::ledger_dir().display()
            );
            return EXIT_HARNESS_ERROR;
        }
    }
    let Some(runtime) = current_thread_runtime() else {
        return EXIT_HARNESS_ERROR;
    };
    match runtime.block_on(crate::runtime::docker::gc(&bin_dir, &args.etcd, args.all)) {
        Ok(report) => {
            let _ = writeln!(
                out,
                "removed {} containers, {} networks, {} images",
                report.containers,
                report.networks,
                report.images.len()
            );
            for image in &report.images {
                let _ = writeln!(out, "  image {image}");
            }
            EXIT_VALID
        }
        Err(e) => {
            eprintln!("epochal: gc: {e}");
            EXIT_HARNESS_ERROR
        }
    }
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' JUnit reports (`gate --junit` files).
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Where the merged report goes.
    #[arg(long)]
    pub junit: PathBuf,
}

/// `epochal merge`: one JUnit report from the shards'. Prints the cases,
/// failures and errors; 0 when every case passed, 1 when one did not, 3 when
/// an input is missing or not JUnit (naming it), 4 when the output cannot be
/// written.
pub fn merge(args: &MergeArgs, out: &mut impl Write) -> u8 {
    let report = match crate::gate::merge("epochal-gate", &args.reports) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("epochal: merge: {e}");
            return EXIT_USAGE;
        }
    };
    let text = match report.to_string() {
        Ok(text) => text,
        Err(e) => {
            eprintln!("epochal: merge: {e}");
            return EXIT_HARNESS_ERROR;
        }
    };
    if let Err(e) = std::fs::write(&args.junit, text) {
        eprintln!("epochal: merge: {}: {e}", args.junit.display());
        return EXIT_HARNESS_ERROR;
    }
    let _ = writeln!(
        out,
        "merged {} reports into {}: {} cases, {} failures, {} errors",
        args.reports.len(),
        args.junit.display(),
        report.tests,
        report.failures,
        report.errors
    );
    if report.failures + report.errors == 0 {
        EXIT_VALID
    } else {
        EXIT_INVALID
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The store to serve: where `run`, `gate` and `campaign` keep runs (their `--store`).
    #[arg(default_value = "store")]
    pub store: PathBuf,
    /// The port on 127.0.0.1; 0 (the default) lets the system pick a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

/// `epochal serve`: rewrites the store's index, prints one line `serving
/// <store> on http://127.0.0.1:<port>/` (flushed, so a script can read the
/// port) and serves until SIGINT or SIGTERM: then 0. 4 when the store is not a
/// directory or the port cannot be had.
pub fn serve(args: &ServeArgs, out: &mut impl Write) -> u8 {
    use crate::report::{index, serve};
    if !args.store.is_dir() {
        eprintln!(
            "epochal: serve: {} is not a directory (a store is made by `run` or `gate`)",
            args.store.display()
        );
        return EXIT_HARNESS_ERROR;
    }
    let Some(runtime) = current_thread_runtime() else {
        return EXIT_HARNESS_ERROR;
    };
    let code = runtime.block_on(async {
        // The handlers first: a Ctrl-C any time after the address is printed
        // must stop the server cleanly, not kill it.
        let stop = match serve::stop_signals() {
            Ok(stop) => stop,
            Err(e) => {
                eprintln!("epochal: serve: installing the signal handlers: {e}");
                return EXIT_HARNESS_ERROR;
            }
        };
        let listener = match serve::bind(args.port) {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("epochal: serve: 127.0.0.1:{}: {e}", args.port);
                return EXIT_HARNESS_ERROR;
            }
        };
        let port = listener.local_addr().map_or(args.port, |a| a.port());
        index::update_store_index(&args.store);
        let _ = writeln!(
            out,
            "serving {} on http://127.0.0.1:{port}/",
            args.store.display()
        );
        let _ = out.flush();
        match serve::serve(&args.store, listener, stop).await {
            Ok(()) => EXIT_VALID,
            Err(e) => {
                eprintln!("epochal: serve: {e}");
                EXIT_HARNESS_ERROR
            }
        }
    });
    // Blocking reads still in flight (a file a stopped connection was
    // reading) get a moment, not a wait without end.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

/// A single-threaded tokio runtime, or `None` after saying why there is none.
fn current_thread_runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .inspect_err(|e| eprintln!("epochal: starting the async runtime: {e}"))
        .ok()
}
