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
