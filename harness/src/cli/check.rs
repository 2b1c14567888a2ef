//! `epochal check`: a stored run re-checked offline, no cluster.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::exit::{EXIT_HARNESS_ERROR, EXIT_USAGE, exit_code};

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A run directory (`<store>/adhoc/<schedule>/<timestamp>-<n>`, or `<store>/latest`).
    pub run_dir: PathBuf,
}

/// `epochal check`: the exit code follows the table in cli/mod.rs.
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
