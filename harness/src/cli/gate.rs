//! `epochal gate`: every scenario of the suites under every setting, and
//! every campaign seed, each judged against its expectation.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::drive::current_thread_runtime;
use super::exit::{EXIT_HARNESS_ERROR, EXIT_INVALID, EXIT_USAGE, EXIT_VALID};
use crate::runtime::RuntimeKind;

#[derive(Debug, Args)]
pub struct GateArgs {
    /// Suite files, or directories whose `*.toml` suites are taken.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "process")]
    pub runtime: RuntimeKind,
    /// Write a JUnit XML report here (one case per scenario and setting).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// How many runs at once.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    #[arg(long, default_value = "store")]
    pub store: PathBuf,
    #[arg(long, default_value = "etcd")]
    pub etcd: PathBuf,
    /// The system under test: a built-in system's name or a system file's
    /// path. A suite that names the systems it is for runs only on those.
    #[arg(long, default_value = crate::system::REFERENCE, value_parser = super::run_settings::parse_system)]
    pub system: crate::system::System,
    /// Run only the I-th of N deterministic slices of the cases (`1/4`), so
    /// a CI matrix spreads the gate over N runners.
    #[arg(long, default_value = "1/1")]
    pub shard: crate::gate::Shard,
}

/// `epochal gate`: 0 when every case meets its expectation, 1 when any does
/// not (an unknown or a run that failed included), 3 for a malformed suite,
/// 4 when the report cannot be written.
pub fn gate(args: &GateArgs, out: &mut impl Write) -> u8 {
    let loaded = crate::gate::load_suites(&args.paths).map(|mut suites| {
        suites.retain(|s| {
            let for_it = s.suite.systems.contains(&args.system.name);
            if !for_it {
                eprintln!(
                    "epochal: skipping {}: it is for {}, not {}",
                    s.path.display(),
                    s.suite.systems.join(", "),
                    args.system.name
                );
            }
            for_it
        });
        suites
    });
    let suites = match loaded {
        Ok(suites)
            if suites
                .iter()
                .any(|s| !s.suite.scenarios.is_empty() || !s.suite.campaigns.is_empty()) =>
        {
            suites
        }
        Ok(_) => {
            eprintln!("epochal: no scenarios in {:?}", args.paths);
            return EXIT_USAGE;
        }
        Err(e) => {
            eprintln!("epochal: {e}");
            return EXIT_USAGE;
        }
    };
    let Some(runtime) = current_thread_runtime() else {
        return EXIT_HARNESS_ERROR;
    };
    let options = crate::gate::GateOptions {
        store: args.store.clone(),
        bin_dir: crate::run::default_bin_dir(),
        etcd: args.etcd.clone(),
        system: args.system.clone(),
        jobs: args.jobs,
        runtime: args.runtime,
        shard: args.shard,
    };
    let cases = runtime.block_on(crate::gate::run_gate(&suites, &options));
    let _ = crate::gate::write_table(&cases, out);
    if let Some(path) = &args.junit
        && let Err(e) = std::fs::write(path, crate::gate::junit(&cases))
    {
        eprintln!("epochal: {}: {e}", path.display());
        return EXIT_HARNESS_ERROR;
    }
    if !cases.is_empty() && cases.iter().all(|c| c.met) {
        EXIT_VALID
    } else {
        EXIT_INVALID
    }
}
