//! The broker's etcd session: one lease (ZooKeeper's session), the registration
//! key under it, and the keep-alive loop.
//!
//! Every leased key this broker writes — its registration, the controller key
//! when it wins — hangs off this lease, so a broker that dies loses them all when
//! the TTL runs out, as an expired ZooKeeper session dropped its ephemeral znodes.
//! The session records when it last heard a renewal; replication uses that to
//! fence a broker that cannot reach etcd without waiting to hear from etcd.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::metadata_store::{BrokerRegistration, MetadataStore, StoreError};

pub struct Session {
    pub lease: i64,
    pub ttl: Duration,
    pub broker_epoch: i64,
    last_renewed: Mutex<Instant>,
}

impl Session {
    /// Grant a lease and register under it.
    pub async fn open(
        store: &MetadataStore,
        reg: &BrokerRegistration,
        ttl_s: u64,
    ) -> Result<Self, StoreError> {
        let lease = store.grant_lease(ttl_s).await?;
        let broker_epoch = store.register_broker(reg, lease).await?;
        tracing::info!(lease, broker_epoch, ttl_s, "registered in etcd");
        Ok(Self {
            lease,
            ttl: Duration::from_secs(ttl_s),
            broker_epoch,
            last_renewed: Mutex::new(Instant::now()),
        })
    }

    /// Has a renewal been confirmed within the TTL?
    pub fn is_live(&self) -> bool {
        self.last_renewed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
            < self.ttl
    }

    /// Renew the lease every third of its TTL until shutdown or until etcd says
    /// the lease is gone. Returns when the session is over.
    pub async fn keep_alive(
        &self,
        store: &MetadataStore,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<(), StoreError> {
        let period = (self.ttl / 3).max(Duration::from_millis(200));
        let mut client = store.client();
        let (mut keeper, mut responses) = client.lease_keep_alive(self.lease).await?;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                _ = tokio::time::sleep(period) => {}
            }
            if let Err(e) = keeper.keep_alive().await {
                tracing::warn!(%e, "lease renewal could not be sent");
                continue;
            }
            match tokio::time::timeout(period, responses.message()).await {
                Ok(Ok(Some(resp))) if resp.ttl() > 0 => {
                    *self.last_renewed.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                }
                Ok(Ok(Some(_))) => {
                    tracing::error!(
                        lease = self.lease,
                        "etcd says the lease expired: session lost"
                    );
                    return Err(StoreError::ControllerMoved("session lease expired".into()));
                }
                Ok(Ok(None)) => {
                    tracing::warn!("lease keep-alive stream ended; reopening");
                    (keeper, responses) = client.lease_keep_alive(self.lease).await?;
                }
                Ok(Err(e)) => tracing::warn!(%e, "lease renewal failed"),
                Err(_) => tracing::warn!("no lease renewal answer within {period:?}"),
            }
        }
    }
}
