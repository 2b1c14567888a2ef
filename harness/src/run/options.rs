//! How one run is made: where its schedule and store are, the `--set`s,
//! the binaries, where under the store it goes, and on which runtime. The
//! CLI (cli/) and the gate (gate/) fill these in; run/ only reads them.

use std::path::{Path, PathBuf};

use crate::runtime::RuntimeKind;
use crate::system::System;

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub schedule: PathBuf,
    pub store: PathBuf,
    /// `KEY=VALUE` broker settings applied to every node, overriding the schedule.
    pub sets: Vec<String>,
    /// Where `epochal-broker` and `epochal-proxy` are.
    pub bin_dir: PathBuf,
    /// The etcd binary (a path or a name on `PATH`).
    pub etcd: PathBuf,
    /// Echo `harness.log` to stderr.
    pub echo: bool,
    /// The name runs are stored under; default: the schedule's file stem.
    pub name: Option<String>,
    /// Where under the store the run goes (`[suite, scenario, setting]` for the
    /// gate); default `["adhoc", name]`.
    pub group: Option<Vec<String>>,
    /// Where the nodes run: local processes or Docker containers.
    pub runtime: RuntimeKind,
    /// The system under test (systems/; default the reference broker).
    pub system: System,
}

impl RunOptions {
    pub fn new(schedule: impl Into<PathBuf>, store: impl Into<PathBuf>) -> Self {
        RunOptions {
            schedule: schedule.into(),
            store: store.into(),
            sets: Vec::new(),
            bin_dir: default_bin_dir(),
            etcd: "etcd".into(),
            echo: false,
            name: None,
            group: None,
            runtime: RuntimeKind::Process,
            system: System::reference(),
        }
    }
}

/// `EPOCHAL_BIN_DIR`, else the directory `epochal` itself runs from (cargo puts
/// every workspace binary there).
pub fn default_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("EPOCHAL_BIN_DIR") {
        return dir.into();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_owned))
        .unwrap_or_else(|| ".".into())
}
