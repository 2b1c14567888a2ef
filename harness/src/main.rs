//! The `epochal` command line. Exit codes are documented in `epochal::cli`.

use std::io;
use std::process::ExitCode;

use clap::Parser;
use epochal::cli::{Cli, Command, EXIT_HARNESS_ERROR, inspect};

fn main() -> ExitCode {
    // Parsing exits by itself: 2 on a usage error, 0 for --help and --version.
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match &cli.command {
        Command::Inspect(args) => inspect(args, &mut io::stdout().lock()).map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("epochal: {error:#}");
            ExitCode::from(EXIT_HARNESS_ERROR)
        }
    }
}
