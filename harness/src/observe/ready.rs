//! Readiness: when a cluster is up, judged from etcd read directly, never from
//! a runtime's or a broker's own word. A cluster is ready when etcd shows a
//! controller, every broker registered, and every partition led with its full
//! replica set in the ISR. (etcd itself is ready when it answers a read:
//! runtime/etcd_probe.rs, which the runtimes poll while starting it.)

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::error::ObserveError;
use super::etcd::ClusterView;
use super::source::ViewSource;
use crate::node::NodeId;
use crate::runtime::RuntimeError;

/// How often the view is read again.
const POLL: Duration = Duration::from_millis(20);

/// Awaits a ready cluster of `nodes`, read from etcd at `endpoint`, and
/// returns the view that was ready. The error is the runtime's (a cluster that
/// never comes up fails a start like a broker that never listens) and names
/// what was still missing at the deadline.
pub async fn await_ready(
    endpoint: &str,
    nodes: impl IntoIterator<Item = NodeId>,
    timeout: Duration,
) -> Result<ClusterView, RuntimeError> {
    let client = etcd_client::Client::connect([endpoint], None).await?;
    await_ready_from(&client.into(), nodes, timeout).await
}

/// [`await_ready`] from any source of views. An etcd that fails a read ends
/// the wait; brokers that do not answer Metadata yet are not ready yet.
pub async fn await_ready_from(
    source: &ViewSource,
    nodes: impl IntoIterator<Item = NodeId>,
    timeout: Duration,
) -> Result<ClusterView, RuntimeError> {
    let all: BTreeSet<NodeId> = nodes.into_iter().collect();
    let deadline = Instant::now() + timeout;
    loop {
        let missing = match source.read().await {
            Ok(view) => match view.ready(&all) {
                Ok(()) => return Ok(view),
                Err(missing) => missing.to_string(),
            },
            Err(ObserveError::Etcd(e)) => return Err(e.into()),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            return Err(RuntimeError::Timeout {
                what: "cluster ready".into(),
                timeout,
                detail: Some(missing),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}
