//! `epochal inspect`: a broker data directory's replica state, printed like
//! Kafka's DumpLogSegments, as JSON, or in the compact form.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;

use crate::reader::{self, ReadError, dump::write_dump};

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
