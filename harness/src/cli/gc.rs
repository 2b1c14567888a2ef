//! `epochal gc`: what killed harnesses left behind, removed.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::drive::current_thread_runtime;
use super::exit::{EXIT_HARNESS_ERROR, EXIT_VALID};

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Where `epochal-broker` and `epochal-proxy` are (default: beside `epochal`),
    /// to tell current images from stale ones.
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    #[arg(long, default_value = "etcd")]
    pub etcd: PathBuf,
    /// Also remove the containers and networks of runs whose harness is still
    /// running (by default only those of harnesses that are gone).
    #[arg(long)]
    pub all: bool,
}

/// `epochal gc`: kills the process groups (etcd, proxy, brokers) of
/// harnesses that were killed outright (runtime/orphans.rs), removes the
/// containers and networks that runs of dead harnesses left (all runs' with
/// `--all`), and every epochal image whose tag is not the hash of what it
/// would hold now.
/// 0 when all went, 4 when Docker could not be reached or something stayed.
pub fn gc(args: &GcArgs, out: &mut impl Write) -> u8 {
    let bin_dir = args
        .bin_dir
        .clone()
        .unwrap_or_else(crate::run::default_bin_dir);
    // Process groups first: they need no Docker.
    match crate::runtime::orphans::reap_dead() {
        Ok(reaped) => {
            let _ = writeln!(
                out,
                "killed {} process groups left by {} killed harnesses",
                reaped.groups.len(),
                reaped.ledgers
            );
            if reaped.memory_dirs > 0 {
                let _ = writeln!(
                    out,
                    "removed {} etcd data directories they left in memory",
                    reaped.memory_dirs
                );
            }
        }
        Err(e) => {
            eprintln!(
                "epochal: gc: reading {}: {e}",
                crate::runtime::orphans::ledger_dir().display()
            );
            return EXIT_HARNESS_ERROR;
        }
    }
    let Some(runtime) = current_thread_runtime() else {
        return EXIT_HARNESS_ERROR;
    };
    match runtime.block_on(crate::runtime::docker::gc(&bin_dir, &args.etcd, args.all)) {
        Ok(report) => {
            let _ = writeln!(
                out,
                "removed {} containers, {} networks, {} images",
                report.containers,
                report.networks,
                report.images.len()
            );
            for image in &report.images {
                let _ = writeln!(out, "  image {image}");
            }
            EXIT_VALID
        }
        Err(e) => {
            eprintln!("epochal: gc: {e}");
            EXIT_HARNESS_ERROR
        }
    }
}
