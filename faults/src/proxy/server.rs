//! The running `epochal-proxy`: the HTTP API bound and served over a
//! collection of its own, and its orderly shutdown.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::api;
use super::collection::Collection;

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
