//! The `epochal` command line: argument parsing and the subcommands' bodies.
//!
//! Exit codes, one table for the whole binary. 1 and 2 follow Jepsen (invalid,
//! unknown) so scripts written for it read ours the same way; clap's own exit
//! code for a usage error (2) is therefore remapped to 3.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | valid; for `inspect`: the directory was read (findings, if any, are printed, not an error) |
//! | 1 | invalid: a checker found an anomaly |
//! | 2 | unknown: the run could not decide (an await timed out, a checker could not run) |
//! | 3 | usage error: bad arguments or a malformed schedule |
//! | 4 | harness error: e.g. a data directory that does not exist, a node that will not start |

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// Run a schedule against a real cluster and keep everything in the store.
    Run(RunArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeKind {
    /// Nodes as local child processes on 127.0.0.1.
    Process,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The schedule (TOML; docs/schedules.md).
    pub schedule: PathBuf,
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
    let mut options = crate::run::RunOptions::new(&args.schedule, &args.store);
    options.sets = args.sets.clone();
    options.etcd = args.etcd.clone();
    options.echo = !args.quiet;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("epochal: starting the async runtime: {e}");
            return EXIT_HARNESS_ERROR;
        }
    };
    match runtime.block_on(crate::run::run(&options)) {
        Ok(report) => {
            if let Err(e) = crate::run::write_summary(&report, out) {
                eprintln!("epochal: writing the summary: {e}");
            }
            match report.status {
                crate::run::RunStatus::Completed => EXIT_VALID,
                crate::run::RunStatus::Unknown(_) => EXIT_UNKNOWN,
            }
        }
        Err(e) => {
            eprintln!("epochal: {e}");
            if e.is_usage() {
                EXIT_USAGE
            } else {
                EXIT_HARNESS_ERROR
            }
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
