//! `epochal-proxy`: a Toxiproxy-compatible proxy with true partitions.
//!
//! Serves Toxiproxy's HTTP API on `--listen` and prints `listening on HOST:PORT`
//! as its first line on stdout once bound, so a launcher can pass port 0 and read
//! the port back instead of racing for one. Logs go to stderr (`RUST_LOG`
//! filters them). Runs until SIGINT or SIGTERM. With `--record DIR` every
//! Kafka request a proxy forwards is kept in DIR/<proxy name>.frames, and on
//! the clients' proxies (`client-*`) every response too.

use std::io::Write;

use anyhow::Context;
use clap::Parser;
use epochal_faults::proxy::ProxyServer;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Parser, Debug)]
#[command(
    name = "epochal-proxy",
    version,
    about = "Serves Toxiproxy's HTTP API, with a partition toxic that holds and resumes streams"
)]
struct Args {
    /// Address for the HTTP API; port 0 picks a free one (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8474")]
    listen: String,
    /// Record every Kafka request each proxy forwards upstream, and on the
    /// clients' proxies (`client-*`) every response, to
    /// DIR/<proxy name>.frames (epochal's extension; see the format in
    /// `proxy/link/record.rs`).
    #[arg(long, value_name = "DIR")]
    record: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();

    if let Some(dir) = &args.record {
        epochal_faults::proxy::record_requests(dir)
            .with_context(|| format!("cannot record to {}", dir.display()))?;
    }
    let server = ProxyServer::start(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on {}", server.address())?;
        stdout.flush()?;
    }

    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(())
}
