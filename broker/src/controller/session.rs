//! The broker's etcd session: a lease (ZooKeeper's session), the registration
//! key under it, and the keep-alive loop.
//!
//! Every leased key this broker writes — its registration, the controller key
//! when it wins — hangs off the current lease, so a broker that dies loses them
//! all when the TTL runs out, as an expired ZooKeeper session dropped its
//! ephemeral znodes. When etcd reports the lease gone (the broker was paused or
//! cut off past its TTL), the session opens a new lease and registers again, as
//! a ZooKeeper-era broker re-registered after session expiry; the new lease is
//! published to whoever campaigns with it.
//!
//! The session also fences its broker without waiting to hear from etcd (a
//! partitioned gRPC stream may simply stall): etcd cannot expire a lease earlier
//! than one TTL after the last renewal it answered was *sent*, so the broker
//! counts itself live only until that instant. Past it, [`Session::is_live`] is
//! false and the broker stops acting as controller and as leader.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::metadata_store::{BrokerRegistration, MetadataStore, StoreError};

const REOPEN_BACKOFF: Duration = Duration::from_millis(500);

/// One lease and the registration made under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    /// The revision of this run's registration put (the broker epoch).
    pub broker_epoch: i64,
}

pub struct Session {
    pub ttl: Duration,
    registration: BrokerRegistration,
    current: watch::Sender<Lease>,
    /// When the last renewal etcd confirmed was sent.
    last_renewed: Mutex<Instant>,
    /// Whether the fencing transition was logged (once per loss).
    fenced_logged: std::sync::atomic::AtomicBool,
}

impl Session {
    /// Grant a lease and register under it.
    pub async fn open(
        store: &MetadataStore,
        registration: BrokerRegistration,
        ttl_s: u64,
    ) -> Result<Self, StoreError> {
        let sent = Instant::now();
        let lease = register(store, &registration, ttl_s).await?;
        Ok(Self {
            ttl: Duration::from_secs(ttl_s),
            registration,
            current: watch::Sender::new(lease),
            last_renewed: Mutex::new(sent),
            fenced_logged: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn lease(&self) -> Lease {
        *self.current.borrow()
    }

    /// Notified whenever the session moves to a new lease.
    pub fn subscribe(&self) -> watch::Receiver<Lease> {
        self.current.subscribe()
    }

    /// Could etcd still hold our lease? True until one TTL after the last
    /// confirmed renewal was sent; the broker acts as leader or controller only
    /// while this holds.
    pub fn is_live(&self) -> bool {
        self.last_renewed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
            < self.ttl
    }

    /// `sent` is when the confirmed renewal (or registration) left this broker.
    fn renewed(&self, sent: Instant) {
        let mut last = self.last_renewed.lock().unwrap_or_else(|p| p.into_inner());
        if sent > *last {
            *last = sent;
        }
        if self
            .fenced_logged
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::warn!("etcd session renewed: no longer fenced");
        }
    }

    /// Log the moment the session stops being live (once per loss).
    fn note_fencing(&self) {
        if !self.is_live()
            && !self
                .fenced_logged
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::error!(
                ttl_ms = self.ttl.as_millis() as u64,
                "no lease renewal confirmed within the TTL: fenced (not acting as leader or controller)"
            );
        }
    }

    /// Renew the lease every third of its TTL until shutdown; when etcd says
    /// the lease is gone, register again under a new one.
    pub async fn keep_alive(&self, store: &MetadataStore, mut shutdown: watch::Receiver<bool>) {
        let period = (self.ttl / 3).max(Duration::from_millis(200));
        let mut client = store.client();
        let mut stream = None;
        // After a failed renewal the next comes sooner. Renewing every third
        // of the TTL, a failure noticed one period after it was sent and a
        // full period's pause before the next try put that try at the TTL's
        // edge: one renewal lost to a short cut of the etcd link (or a
        // connection reset when it heals) lapsed the lease of a live broker.
        let mut pause = period;
        loop {
            self.note_fencing();
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            pause = period;
            let lease = self.lease();
            let sent = Instant::now();
            let gone = match renew_once(&mut client, &mut stream, lease.id, period).await {
                Ok(true) => {
                    self.renewed(sent);
                    false
                }
                Ok(false) => true,
                Err(e) if lease_not_found(&e) => true,
                Err(e) => {
                    tracing::warn!(%e, "lease renewal failed");
                    stream = None;
                    pause = REOPEN_BACKOFF.min(period);
                    false
                }
            };
            if gone {
                tracing::error!(
                    lease = lease.id,
                    "etcd says the session's lease expired; registering again"
                );
                stream = None;
                if !self.reregister(store, &mut shutdown).await {
                    return;
                }
            }
        }
    }

    /// Runs [`Session::keep_alive`] on a thread of its own, with a
    /// single-threaded runtime and an etcd connection of its own (to
    /// `endpoints`), until shutdown; the returned receiver resolves when it
    /// has stopped.
    ///
    /// Why a thread: the broker's request handling does blocking disk work
    /// (appends, fsyncs, new log directories) on the async runtime's worker
    /// threads, and on a slow disk a few fsyncs can hold every worker for
    /// seconds. A heartbeat queued behind them lapsed the lease of a broker
    /// that was alive and only slow: under ci/stress.sh all three brokers of a
    /// run lost their sessions together while creating a topic's logs, and
    /// the controller moved. ZooKeeper's client pinged from its own
    /// SendThread, so a Kafka broker stuck on its disk kept its session (its
    /// `zookeeper.session.timeout.ms` ran only while the process or its
    /// network was gone); this keeps that. A paused process (SIGSTOP) stops
    /// this thread too, so a pause still lapses the lease.
    pub fn keep_alive_on_own_thread(
        self: std::sync::Arc<Self>,
        endpoints: Vec<String>,
        mut shutdown: watch::Receiver<bool>,
    ) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
        let (done, stopped) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("etcd-session".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        tracing::error!(%e, "the session thread could not start its runtime");
                        return;
                    }
                };
                runtime.block_on(async move {
                    loop {
                        match MetadataStore::connect(&endpoints).await {
                            Ok(store) => {
                                self.keep_alive(&store, shutdown).await;
                                return;
                            }
                            Err(e) => {
                                self.note_fencing();
                                tracing::warn!(%e, "the session's own etcd connection failed; retrying");
                            }
                        }
                        tokio::select! {
                            _ = shutdown.changed() => return,
                            _ = tokio::time::sleep(REOPEN_BACKOFF) => {}
                        }
                    }
                });
                let _ = done.send(());
            })?;
        Ok(stopped)
    }

    /// Open a new lease and register under it, retrying until it works or
    /// shutdown (false).
    async fn reregister(
        &self,
        store: &MetadataStore,
        shutdown: &mut watch::Receiver<bool>,
    ) -> bool {
        loop {
            self.note_fencing();
            let sent = Instant::now();
            match register(store, &self.registration, self.ttl.as_secs()).await {
                Ok(new) => {
                    self.renewed(sent);
                    self.current.send_replace(new);
                    return true;
                }
                Err(e) => tracing::warn!(%e, "re-registration failed; retrying"),
            }
            tokio::select! {
                _ = shutdown.changed() => return false,
                _ = tokio::time::sleep(REOPEN_BACKOFF) => {}
            }
        }
    }
}

type KeepAliveStream = (etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream);

/// One renewal: Ok(true) renewed, Ok(false) etcd answered that the lease has
/// expired (TTL 0), Err otherwise (the stream is dropped and reopened next time).
async fn renew_once(
    client: &mut etcd_client::Client,
    stream: &mut Option<KeepAliveStream>,
    lease: i64,
    wait: Duration,
) -> Result<bool, etcd_client::Error> {
    // One bound on the whole renewal, opening the stream included: on a
    // connection etcd-client is still re-establishing, opening it can hang
    // far past the TTL, and the lease would lapse with the broker alive.
    let answer = tokio::time::timeout(wait, async {
        if stream.is_none() {
            *stream = Some(client.lease_keep_alive(lease).await?);
        }
        let (keeper, responses) = stream.as_mut().expect("opened above");
        keeper.keep_alive().await?;
        responses.message().await
    })
    .await;
    match answer {
        Ok(Ok(Some(resp))) => Ok(resp.ttl() > 0),
        Ok(Ok(None)) => {
            *stream = None;
            Err(etcd_client::Error::LeaseKeepAliveError(
                "keep-alive stream ended".into(),
            ))
        }
        Ok(Err(e)) => {
            *stream = None;
            Err(e)
        }
        Err(_) => {
            // A stream that did not answer in time is not trusted again.
            *stream = None;
            Err(etcd_client::Error::LeaseKeepAliveError(format!(
                "no answer within {wait:?}"
            )))
        }
    }
}

/// etcd's ErrLeaseNotFound, however the client surfaced it (a gRPC NotFound
/// status or the keep-alive stream's own error): the lease expired or was revoked.
fn lease_not_found(e: &etcd_client::Error) -> bool {
    e.to_string().contains("lease not found")
}

async fn register(
    store: &MetadataStore,
    registration: &BrokerRegistration,
    ttl_s: u64,
) -> Result<Lease, StoreError> {
    let id = store.grant_lease(ttl_s).await?;
    let broker_epoch = store.register_broker(registration, id).await?;
    tracing::info!(lease = id, broker_epoch, ttl_s, "registered in etcd");
    Ok(Lease { id, broker_epoch })
}
