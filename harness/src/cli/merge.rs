//! `epochal merge`: one JUnit report from a sharded gate's.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::exit::{EXIT_HARNESS_ERROR, EXIT_INVALID, EXIT_USAGE, EXIT_VALID};

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
