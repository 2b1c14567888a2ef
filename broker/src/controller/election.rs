//! Controller election: whichever broker creates the leased controller key
//! first is controller, bumps the controller epoch, and runs the controller until
//! it loses the key; everyone else watches the key and campaigns again when it is
//! deleted (ZooKeeper-era Kafka's /controller znode, KAFKA-532 for the epoch).

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};
use tokio::sync::watch;

use super::controller::{Controller, ControllerSettings};
use super::metadata_store::{MetadataStore, controller_key};
use super::session::Session;
use crate::failpoints::{self, Failpoint};

const RETRY_BACKOFF: Duration = Duration::from_millis(300);

/// Campaign for the controller key until `shutdown`.
pub async fn run(
    store: MetadataStore,
    settings: Arc<ControllerSettings>,
    session: Arc<Session>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        // A fenced broker does not campaign: its lease may already be gone.
        if !session.is_live() {
            backoff(&mut shutdown).await;
            continue;
        }
        // A scenario may have this broker sit one election out (failpoints.rs):
        // until another broker holds the key, then until it is vacant again,
        // the next election. Waiting for the key to be held alone returned at
        // once while it was, and a broker sitting every election out
        // re-checked about a thousand times a second for as long as another
        // was controller: etcd reads and log lines that loaded the machine in
        // exactly the windows the scripted cases time.
        if failpoints::hit_or_return(Failpoint::ControllerBeforeCampaign) {
            tracing::warn!("failpoint: sitting this controller election out");
            for want in [Key::Held, Key::Vacant] {
                if let Err(e) = wait_for_key(&store, &mut shutdown, want).await {
                    tracing::warn!(%e, "watching the controller key failed");
                    backoff(&mut shutdown).await;
                    break;
                }
            }
            continue;
        }
        // The session's current lease: after a re-registration, a new one.
        let lease = session.lease().id;
        match store.try_claim_controller(settings.node_id, lease).await {
            Ok(Some(create_revision)) => match store.bump_controller_epoch(create_revision).await {
                Ok(epoch) => {
                    tracing::info!(epoch, "won the controller election");
                    let controller = Controller::new(
                        store.clone(),
                        settings.clone(),
                        session.clone(),
                        epoch,
                        create_revision,
                    );
                    let why = controller.run(shutdown.clone()).await;
                    tracing::info!(epoch, reason = %why, "resigned as controller");
                    release(&store, &session, create_revision, &mut shutdown).await;
                }
                Err(e) => {
                    tracing::warn!(%e, "won the controller key but could not bump the epoch");
                    let _ = store.release_controller(create_revision).await;
                }
            },
            Ok(None) => {
                if let Err(e) = wait_for_key(&store, &mut shutdown, Key::Vacant).await {
                    tracing::warn!(%e, "watching the controller key failed");
                    backoff(&mut shutdown).await;
                }
                continue;
            }
            Err(e) => tracing::warn!(%e, "controller election attempt failed"),
        }
        backoff(&mut shutdown).await;
    }
}

/// Deletes this broker's controller key after it resigned. A resignation
/// caused by a broken etcd connection (a link reset on heal) often finds the
/// first delete failing too, and while the broker's session lives its lease
/// keeps the key: the resigned broker would stay named controller and nobody
/// else could win (ZooKeeper's /controller znode went with the session; this
/// key must go with the controllership). So retry while the session is live;
/// once it is not, the lease takes the key. The delete is conditional on the
/// key's create revision, so only this controllership's key ever goes.
async fn release(
    store: &MetadataStore,
    session: &Session,
    create_revision: i64,
    shutdown: &mut watch::Receiver<bool>,
) {
    let mut attempt = 1u32;
    loop {
        match store.release_controller(create_revision).await {
            Ok(()) => return,
            Err(e) => tracing::warn!(%e, attempt, "could not release the controller key"),
        }
        if !session.is_live() || *shutdown.borrow() {
            return;
        }
        backoff(shutdown).await;
        attempt += 1;
    }
}

async fn backoff(shutdown: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = shutdown.changed() => {}
        _ = tokio::time::sleep(RETRY_BACKOFF) => {}
    }
}

/// What [`wait_for_key`] waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    /// Nobody holds the controller key.
    Vacant,
    /// Somebody does.
    Held,
}

/// Return once the controller key is as `want` (or on shutdown).
async fn wait_for_key(
    store: &MetadataStore,
    shutdown: &mut watch::Receiver<bool>,
    want: Key,
) -> Result<(), super::metadata_store::StoreError> {
    let (current, revision) = store.controller().await?;
    if current.is_some() == (want == Key::Held) {
        return Ok(());
    }
    let mut stream = store
        .client()
        .watch(
            controller_key(),
            Some(WatchOptions::new().with_start_revision(revision + 1)),
        )
        .await?;
    let wanted = match want {
        Key::Vacant => EventType::Delete,
        Key::Held => EventType::Put,
    };
    loop {
        tokio::select! {
            _ = shutdown.changed() => return Ok(()),
            msg = stream.message() => match msg? {
                None => return Ok(()),
                Some(resp) => {
                    if resp.canceled() || resp.events().iter().any(|e| e.event_type() == wanted) {
                        return Ok(());
                    }
                }
            }
        }
    }
}
