//! A clean stop deregisters the broker (`stop`): a broker that shuts down
//! cleanly gives up its registration before it exits — ZooKeeper-era Kafka
//! closes its session, so its ephemeral `/brokers/ids/<id>` goes at once,
//! and this broker revokes its etcd lease — so the controller moves its
//! leaderships in milliseconds rather than after a session timeout (Kafka
//! docs, "Graceful shutdown": leadership migrates before the broker stops,
//! "minimiz[ing] the time each partition is unavailable to a few
//! milliseconds"). A registration that outlives the process keeps every
//! partition it led unavailable until its lease lapses, which no safety rule
//! sees: no write is lost when none is taken.
//!
//! After a `stop` the nemesis reads etcd until each stopped node's
//! registration is gone, within [`BOUND`]; a node still registered then is
//! recorded on the op (`registered_after_stop`), and the `clean-stop`
//! checker names it. A node whose etcd link was cut when it stopped cannot
//! revoke anything and is not held to it, nor is a system whose cluster is
//! seen through Metadata (no registrations to read).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::node::NodeId;
use crate::observe::Observer;
use crate::runtime::plan::Link;
use crate::system::ServiceKind;

/// How long after the process exited the registration may still be read:
/// the revoke is done before the exit, so this only covers a view read a
/// moment early on a busy machine. Below every lease the harness sets (2 s
/// in campaigns, 6 s by default).
pub const BOUND: Duration = Duration::from_millis(1000);
/// The pause between two reads.
const POLL: Duration = Duration::from_millis(20);

/// The nodes of `stopped` whose etcd link was whole (not in `cut`) and whose
/// registration etcd still holds [`BOUND`] after the call began; `None` when
/// the cluster is not seen through etcd or no stopped node could be held to
/// it.
pub async fn still_registered(
    observer: &mut Observer,
    stopped: &[NodeId],
    cut: &BTreeSet<Link>,
) -> Option<Vec<NodeId>> {
    if !observer.source().is_etcd() {
        return None;
    }
    let held: Vec<NodeId> = stopped
        .iter()
        .copied()
        .filter(|&n| !cut.contains(&Link::BrokerToService(n, ServiceKind::Etcd)))
        .collect();
    if held.is_empty() {
        return None;
    }
    let deadline = tokio::time::Instant::now() + BOUND;
    let mut registered = held.clone();
    loop {
        if let Ok(view) = observer.view().await {
            registered.retain(|n| view.brokers.contains(n));
            if registered.is_empty() {
                return Some(Vec::new());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Some(registered);
        }
        tokio::time::sleep(POLL).await;
    }
}
