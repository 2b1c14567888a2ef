//! `epochal replay`: a run of the schedule a stored run applied, or of a
//! schedule file.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::run::run_schedule;
use super::run_settings::RunSettings;
use crate::run_dir::RunDir;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A run directory (its `schedule.toml`, settings included) or a schedule file.
    pub source: PathBuf,
    #[command(flatten)]
    pub settings: RunSettings,
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
        (RunDir::open(&args.source).schedule(), name)
    } else {
        (args.source.clone(), None)
    };
    run_schedule(&schedule, name, &args.settings, out)
}
