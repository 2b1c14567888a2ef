//! How a schedule runs: the flags `run`, `replay`, `campaign` and `shrink`
//! share, and the run options they make.

use std::path::PathBuf;

use clap::Args;

use crate::runtime::RuntimeKind;
use crate::system::System;

/// How a schedule runs: shared by `run` and `replay`.
#[derive(Debug, Clone, Args)]
pub struct RunSettings {
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
    /// The system under test: a built-in system's name (`epochal`, `tansu`, `noida`)
    /// or a system file's path (systems/README.md).
    #[arg(long, default_value = crate::system::REFERENCE, value_parser = parse_system)]
    pub system: System,
    /// Do not echo harness.log to stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl RunSettings {
    /// Run options for `schedule` with these settings.
    pub(crate) fn options(&self, schedule: &std::path::Path) -> crate::run::RunOptions {
        let mut options = crate::run::RunOptions::new(schedule, &self.store);
        options.sets = self.sets.clone();
        options.etcd = self.etcd.clone();
        options.echo = !self.quiet;
        options.runtime = self.runtime;
        options.system = self.system.clone();
        options
    }
}

/// `--system`'s value: a built-in name or a file, parsed and checked now so a
/// typo fails before anything starts.
pub(crate) fn parse_system(value: &str) -> Result<System, crate::system::SystemError> {
    System::named(value)
}
