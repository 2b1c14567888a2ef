//! `epochal shrink`'s command line: its flags, and the outcome printed as an
//! exit code. The shrink itself (its passes, the candidates' runs, the
//! search) is campaign/shrink/.

use std::io::Write;

use clap::Args;

use super::exit::{EXIT_HARNESS_ERROR, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID};
use super::run_settings::RunSettings;
use crate::campaign::shrink::{self, Options, Outcome, Refused};
use crate::checker::Anomaly;

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    /// A failing run directory (a campaign's: its `schedule.toml` holds the
    /// faults it fired).
    pub run_dir: std::path::PathBuf,
    /// The anomaly kind a candidate must reproduce; default the first the
    /// run's results name.
    #[arg(long)]
    pub anomaly: Option<Anomaly>,
    /// Runs of each candidate before it counts as passing.
    #[arg(long, default_value_t = 3)]
    pub tries: u32,
    /// Runs of the final schedule, to say how often it reproduces.
    #[arg(long, default_value_t = 5)]
    pub confirm: u32,
    /// Candidates run at once (each its own cluster). More than the
    /// machine's cores stretches every run's timing.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// ddmin over every unit, without first cutting to the window the
    /// anomaly's evidence leaves.
    #[arg(long)]
    pub no_window: bool,
    /// Drop the time removed faults took instead of keeping it as
    /// `N ms pass` (and no realised delay after each gap).
    #[arg(long)]
    pub compress_gaps: bool,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// `epochal shrink`: a failing run's faults cut down, then its load, to
/// `shrunk.toml` in the run directory (campaign/shrink/). Exit 0 when a
/// schedule was written, 2 when the run did not fail again, 3 when the run
/// is not a failing campaign run, 4 on a harness error.
pub fn shrink(args: &ShrinkArgs, out: &mut impl Write) -> u8 {
    let options = Options {
        run_dir: args.run_dir.clone(),
        anomaly: args.anomaly,
        tries: args.tries,
        confirm: args.confirm,
        jobs: args.jobs,
        no_window: args.no_window,
        compress_gaps: args.compress_gaps,
        run: args.settings.options(std::path::Path::new("shrink")),
    };
    match shrink::run(&options, out) {
        Ok(Outcome::Written) => EXIT_VALID,
        Ok(Outcome::DidNotFail { anomaly, tries }) => {
            let _ = writeln!(
                out,
                "the run's schedule did not show `{anomaly}` in {tries} tries: nothing to \
                 shrink (try more --tries)"
            );
            EXIT_UNKNOWN
        }
        Err(e @ Refused::NotShrinkable(_)) => {
            eprintln!("epochal: {e}");
            EXIT_USAGE
        }
        Err(e @ Refused::Harness(_)) => {
            eprintln!("epochal: {e}");
            EXIT_HARNESS_ERROR
        }
    }
}
