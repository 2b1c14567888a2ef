//! `epochal run`: a schedule against a real cluster, kept in the store and
//! checked.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::drive::finish_run;
use super::run_settings::RunSettings;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The schedule (TOML; docs/schedules.md).
    pub schedule: PathBuf,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// `epochal run`: the exit code follows the table in cli/mod.rs.
pub fn run(args: &RunArgs, out: &mut impl Write) -> u8 {
    run_schedule(&args.schedule, None, &args.settings, out)
}

/// Runs `schedule`, stored under `name` (default: its file stem).
pub(super) fn run_schedule(
    schedule: &std::path::Path,
    name: Option<String>,
    settings: &RunSettings,
    out: &mut impl Write,
) -> u8 {
    let mut options = settings.options(schedule);
    options.name = name;
    finish_run(crate::run::run(&options), out).0
}
