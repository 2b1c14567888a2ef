//! The live side of an enabled proxy: its accept loop and its connections.
//!
//! Each accepted client gets its own upstream connection (the upstream's host
//! name is resolved again for every connection, since containers change address
//! when they restart) and one task that runs both links. A connection ends when
//! both directions have closed, when a link demands it (a toxic, an I/O error),
//! or when the proxy is disabled or deleted. Whatever a peer does ends that
//! connection only, never the proxy.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::link::{self, Chain, Duplicates, LinkEnd};
use super::wire::Stream;

/// How long the proxy waits for the upstream to accept a new connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping proxy waits for a connection task to wind down before
/// aborting it (closing its sockets all the same).
const CONNECTION_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// An order from the proxy to one of its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Run,
    Close,
}

struct Handle {
    order: watch::Sender<Order>,
    task: JoinHandle<()>,
}

/// The connections of one enabled proxy. A new set is made each time the proxy
/// starts, with the upstream it has then.
pub(crate) struct Connections {
    proxy: Arc<str>,
    upstream: String,
    chain: watch::Receiver<Chain>,
    next_id: AtomicU64,
    live: Mutex<HashMap<u64, Handle>>,
}

impl Connections {
    pub fn new(proxy: &str, upstream: &str, chain: watch::Receiver<Chain>) -> Arc<Self> {
        Arc::new(Connections {
            proxy: proxy.into(),
            upstream: upstream.to_owned(),
            chain,
            next_id: AtomicU64::new(1),
            live: Mutex::new(HashMap::new()),
        })
    }

    /// Accepts clients until the task is aborted (which closes the listener).
    pub async fn accept_loop(self: Arc<Self>, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((client, peer)) => self.spawn(client, peer),
                Err(error) => {
                    // Typically out of file descriptors: back off instead of spinning.
                    warn!(proxy = %self.proxy, %error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn spawn(self: &Arc<Self>, client: TcpStream, peer: SocketAddr) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (order, orders) = watch::channel(Order::Run);
        // Registered under the lock so the task, which removes itself when done,
        // cannot finish before it is registered.
        let mut live = self.live.lock().expect("connection registry poisoned");
        let task = tokio::spawn(Arc::clone(self).serve(id, client, peer, orders));
        live.insert(id, Handle { order, task });
    }

    async fn serve(
        self: Arc<Self>,
        id: u64,
        client: TcpStream,
        peer: SocketAddr,
        orders: watch::Receiver<Order>,
    ) {
        info!(proxy = %self.proxy, connection = id, client = %peer, upstream = %self.upstream, "connection opened");
        let outcome = self.proxy_bytes(client, orders).await;
        info!(proxy = %self.proxy, connection = id, client = %peer, outcome = %outcome, "connection closed");
        self.live
            .lock()
            .expect("connection registry poisoned")
            .remove(&id);
    }

    async fn proxy_bytes(
        &self,
        mut client: TcpStream,
        mut orders: watch::Receiver<Order>,
    ) -> String {
        let connect =
            tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(&self.upstream));
        let mut upstream = tokio::select! {
            connected = connect => match connected {
                Ok(Ok(upstream)) => upstream,
                Ok(Err(error)) => return format!("upstream {} refused: {error}", self.upstream),
                Err(_) => return format!("upstream {} did not answer in {UPSTREAM_CONNECT_TIMEOUT:?}", self.upstream),
            },
            () = closed(&mut orders) => return "proxy stopped".to_owned(),
        };
        // Toxics time bytes; Nagle's delay would blur every latency they add.
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);

        let end = {
            let duplicates = Arc::new(Duplicates::default());
            let (client_read, client_write) = client.split();
            let (upstream_read, upstream_write) = upstream.split();
            let (requests, responses) = link::record::Tap::pair(&self.proxy);
            let up = link::run(
                Stream::Upstream,
                client_read,
                upstream_write,
                self.chain.clone(),
                Arc::clone(&duplicates),
                requests,
            );
            let down = link::run(
                Stream::Downstream,
                upstream_read,
                client_write,
                self.chain.clone(),
                duplicates,
                responses,
            );
            tokio::select! {
                ended = async { tokio::try_join!(up, down) } => ended.err(),
                () = closed(&mut orders) => Some(LinkEnd::Close("proxy stopped".to_owned())),
            }
        };
        match end {
            None => "both sides closed".to_owned(),
            Some(LinkEnd::Close(why)) => why,
            Some(LinkEnd::Reset(why)) => {
                // A zero linger makes the close below send RST instead of FIN.
                let _ = client.set_zero_linger();
                let _ = upstream.set_zero_linger();
                format!("reset: {why}")
            }
        }
    }

    /// Closes every live connection and waits for their tasks (bounded).
    pub async fn close_all(&self) {
        let handles: Vec<Handle> = self
            .live
            .lock()
            .expect("connection registry poisoned")
            .drain()
            .map(|(_, handle)| handle)
            .collect();
        for handle in &handles {
            handle.order.send_replace(Order::Close);
        }
        for mut handle in handles {
            if tokio::time::timeout(CONNECTION_STOP_TIMEOUT, &mut handle.task)
                .await
                .is_err()
            {
                handle.task.abort();
            }
        }
    }

    /// Aborts every connection task at once, for a server dropped without a
    /// shutdown: their sockets close as the tasks are dropped.
    pub fn abort_all(&self) {
        if let Ok(mut live) = self.live.lock() {
            for (_, handle) in live.drain() {
                handle.task.abort();
            }
        }
    }
}

/// Resolves when the proxy orders the connection closed (or drops it).
async fn closed(orders: &mut watch::Receiver<Order>) {
    loop {
        if *orders.borrow_and_update() == Order::Close {
            return;
        }
        if orders.changed().await.is_err() {
            return;
        }
    }
}
