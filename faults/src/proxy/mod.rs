//! `epochal-proxy`: a TCP proxy that serves Toxiproxy's HTTP API, plus a true
//! partition.
//!
//! A proxy listens on one address and forwards each accepted connection to its
//! upstream as two independent links: `upstream` carries the client's bytes to
//! the server, `downstream` the server's bytes back. Each link passes its bytes
//! through the proxy's toxics for that stream; this module owns the listeners,
//! the connections and the toxics, and must never reorder bytes nor drop one
//! that no toxic told it to drop.
//!
//! The Toxiproxy toxics (`latency`, `bandwidth`, `timeout`, `reset_peer`,
//! `slow_close`, `limit_data`, `slicer`) behave as Toxiproxy documents them,
//! with `toxicity` drawn once per connection. `partition` is our extension: it
//! holds a stream's bytes while present, keeps connections open, and on removal
//! resumes or resets them (see [`toxics::Partition`] for what is held and the
//! bound). A cut proxy still completes new TCP handshakes: it cannot refuse a
//! SYN silently, so a cut link looks like a silent peer, not a refusing one.
//! `kafka_requests` is our other extension: it holds, delays, drops or
//! duplicates whole Kafka requests of one API (see [`toxics::KafkaRequests`]),
//! for which every link follows its stream's Kafka framing as bytes pass.
//!
//! Why not wrap `noxious` (a Rust port of Toxiproxy's server): it is dormant,
//! and it keeps Toxiproxy's design, where a link's read and write halves are
//! joined through one stage per toxic, so holding a stream and later resuming
//! or resetting it would have to be threaded through every stage. Here a link
//! is one ordered sender that re-reads the toxic set before each wait and each
//! write, which makes "hold, then resume in order" one small, testable rule,
//! and the engine is small enough to own.

mod api;
mod collection;
mod connection;
mod link;
pub mod toxics;
pub mod wire;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use api::{ApiError, VERSION};
pub use toxics::{OnHeal, ToxicKind, ToxicParseError};
pub use wire::{ApiErrorJson, NewProxy, ProxyJson, Stream, ToxicJson, VersionJson};

use collection::Collection;

/// The most a link reads from its source at once.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Chunks a link buffers between its reader and its sender. With
/// [`READ_CHUNK_BYTES`] this bounds what a partition holds in the proxy per
/// connection and stream: 64 × 64 KiB = 4 MiB (plus the chunk in hand).
pub const HELD_CHUNKS_MAX: usize = 64;

/// How long [`ProxyServer::shutdown`] lets open API requests finish.
const API_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// A running `epochal-proxy`: the HTTP API and every proxy it created. Dropping it
/// aborts everything; [`ProxyServer::shutdown`] closes it in order.
pub struct ProxyServer {
    address: SocketAddr,
    collection: Arc<Collection>,
    stop: Option<oneshot::Sender<()>>,
    http: Option<JoinHandle<()>>,
}

impl ProxyServer {
    /// Binds the API on `listen` (`127.0.0.1:0` picks a free port; read it back
    /// with [`ProxyServer::address`]) and starts serving. No proxy exists yet.
    pub async fn start(listen: &str) -> io::Result<ProxyServer> {
        let listener = TcpListener::bind(listen).await?;
        let address = listener.local_addr()?;
        let collection = Arc::new(Collection::default());
        let router = api::router(Arc::clone(&collection));
        let (stop, stopped) = oneshot::channel::<()>();
        let http = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "API server failed");
            }
        });
        tracing::info!(%address, "epochal-proxy API listening");
        Ok(ProxyServer {
            address,
            collection,
            stop: Some(stop),
            http: Some(http),
        })
    }

    /// The address the API is bound to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops answering the API, then stops every proxy (closing its listener and
    /// connections).
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut http) = self.http.take()
            && tokio::time::timeout(API_SHUTDOWN_TIMEOUT, &mut http)
                .await
                .is_err()
        {
            http.abort();
        }
        self.collection.shutdown().await;
    }
}

/// The HTTP API as a service over a collection of its own, with no proxy yet
/// and nothing bound: what [`ProxyServer::start`] serves, for driving in
/// process with `tower::ServiceExt::oneshot` (the `fuzz/` crate's
/// `proxy_toxic` target posts its bodies through it). A proxy created through
/// it with `"enabled": false` never binds a socket.
#[doc(hidden)]
pub fn api_service() -> axum::Router {
    api::router(Arc::new(Collection::default()))
}

impl Drop for ProxyServer {
    fn drop(&mut self) {
        if let Some(http) = self.http.take() {
            http.abort();
        }
        self.collection.abort_all();
    }
}
