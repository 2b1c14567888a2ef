//! The `epochal-broker` binary: parse flags (and `--config FILE`), log through
//! `tracing` to stderr, run the broker until SIGTERM or SIGINT, stop cleanly.
//! `--list-settings` prints the settings table and the failpoint names instead.

use anyhow::Context;
use clap::Parser;
use epochal_broker::config::ConfigArgs;
use epochal_broker::failpoints::{self, Failpoint};
use tokio::signal::unix::{SignalKind, signal};

/// Keeps a request that declares an absurd array length from aborting the
/// broker (see `huge_alloc`).
#[global_allocator]
static ALLOCATOR: epochal_broker::huge_alloc::LazyHugeAlloc =
    epochal_broker::huge_alloc::LazyHugeAlloc;

/// Runs the broker; any error ends it with one line on stderr naming what
/// failed and why (the cause chain joined by ": "), and exit status 1 — no
/// backtrace, so a harness or a person reads the reason at a glance.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("epochal-broker: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    // Before anything else runs, so a scenario's failpoint is armed from the
    // first event and a misspelt name stops the broker here.
    let armed = failpoints::configure_from_env()?;
    let args = ConfigArgs::parse();
    if args.list_settings {
        for line in epochal_broker::config::listing() {
            println!("{line}");
        }
        return Ok(());
    }
    let config = args.resolve().context("invalid configuration")?;
    tracing::info!(config = %config.to_toml(), "starting");
    for (point, actions) in &armed {
        tracing::warn!(failpoint = %point, %actions, "failpoint armed");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = int.recv() => tracing::info!("SIGINT received"),
            }
            if failpoints::hit_or_return(Failpoint::ShutdownExitsAtOnce) {
                tracing::warn!("failpoint shutdown-exits-at-once: exiting now, nothing closed");
                std::process::exit(0);
            }
        };
        epochal_broker::broker::run(config, shutdown)
            .await
            .context("broker failed")
    })
}
