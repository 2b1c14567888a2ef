//! The `epochal` command line: argument parsing and the subcommands' bodies.
//!
//! Exit codes (one table for the whole binary; later subcommands extend it):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done; for `inspect`: the directory was read (findings, if any, are printed, not an error) |
//! | 1 | harness error: e.g. the data directory does not exist or cannot be listed |
//! | 2 | usage error (clap's own exit code for bad arguments) |

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::reader::{self, ReadError, dump::write_dump};

pub const EXIT_OK: u8 = 0;
pub const EXIT_HARNESS_ERROR: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

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
