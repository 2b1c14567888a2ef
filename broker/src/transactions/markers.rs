//! Ending a prepared transaction on its partitions (KIP-98's
//! `TransactionMarkerChannelManager`): once a PrepareCommit or PrepareAbort
//! state is written, WriteTxnMarkers goes to each partition's leader (from
//! this broker's metadata, partitions grouped by leader, this broker
//! included), carrying the transaction-state partition's leader epoch as
//! the coordinator epoch. Partitions whose marker failed are sent again
//! after a short backoff for as long as this broker still coordinates the
//! id in that epoch with the transaction still prepared; when every
//! partition holds its marker the Complete state is written. A partition
//! whose topic is gone is taken as done, as Kafka's channel manager does
//! for a deleted topic. The task also aborts transactions past their
//! timeout (`state::timed_out`), the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, WriteTxnMarkersRequest};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use super::TxnHost;
use super::coordinator::MarkerJob;
use super::state::{self, TxnMetadata};
use super::transition;
use crate::client::Connection;
use crate::client::topic_name;
use crate::server::metadata_cache::MetadataCache;

/// How long one WriteTxnMarkers round trip (connect included) may take:
/// longer than a leader holds a marker waiting for its ISR
/// (`write_txn_markers::REPLICATION_TIMEOUT`, 30 s), so a slow ISR is
/// answered rather than timed out here and the marker appended again.
const MARKER_REQUEST_TIMEOUT: Duration = Duration::from_secs(35);
/// Wait before sending failed partitions' markers again.
const MARKER_RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How often ongoing transactions are looked at for their timeout (Kafka's
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms` is 10 s;
/// shorter here so a test cluster's timeouts act promptly).
const TIMEOUT_SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// WriteTxnMarkers version sent (v1 is v0's flexible encoding).
const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// Runs until `stop`: each prepared transaction handed over is completed by
/// a task of its own, and timed-out transactions are aborted.
pub async fn run<B: TxnHost>(
    broker: Arc<B>,
    mut jobs: UnboundedReceiver<MarkerJob>,
    mut stop: watch::Receiver<bool>,
) {
    let mut scan = tokio::time::interval(TIMEOUT_SCAN_INTERVAL);
    loop {
        tokio::select! {
            job = jobs.recv() => match job {
                Some(job) => {
                    tokio::spawn(complete(broker.clone(), job));
                }
                None => return,
            },
            _ = scan.tick() => abort_timed_out(&*broker).await,
            _ = stop.changed() => return,
        }
    }
}

/// Aborts every loaded ongoing transaction past its timeout: PrepareAbort
/// under a bumped epoch (fencing the producer that let it lapse), then its
/// markers (Kafka's `abortTimedOutTransactions`).
async fn abort_timed_out(broker: &impl TxnHost) {
    let now = transition::now_ms();
    let fence = broker.config().transaction_timeout_fences_producer;
    for (id, _, m) in broker.coordinator().loaded() {
        if state::timed_out(&m, now).is_none() {
            continue;
        }
        let written = transition::write(broker, &id, |current, _| {
            // Only the transaction seen timed out, not a successor.
            let same = current.is_some_and(|c| same_transaction(c, &m));
            let next = current
                .filter(|_| same)
                .and_then(|c| state::timed_out_fencing(c, now, fence));
            Ok((next.clone(), next))
        })
        .await;
        match written {
            Ok(transition::Written {
                outcome: Some(prepared),
                leader_epoch,
            }) => {
                tracing::info!(
                    transactional_id = id,
                    producer_id = prepared.producer_id,
                    "transaction timed out; aborting"
                );
                broker.coordinator().send_markers(MarkerJob {
                    transactional_id: id,
                    coordinator_epoch: leader_epoch,
                    prepared,
                });
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(transactional_id = id, %e, "could not abort a timed-out transaction")
            }
        }
    }
}

/// The same producer and transaction state (timestamps aside).
fn same_transaction(a: &TxnMetadata, b: &TxnMetadata) -> bool {
    (a.producer_id, a.producer_epoch, a.status, &a.partitions)
        == (b.producer_id, b.producer_epoch, b.status, &b.partitions)
}

/// Whether this broker still coordinates `job`'s id in its epoch with the
/// transaction still prepared.
fn still_prepared(broker: &impl TxnHost, job: &MarkerJob) -> bool {
    broker
        .coordinator()
        .lookup(&job.transactional_id)
        .is_ok_and(|c| {
            c.leader_epoch == job.coordinator_epoch
                && c.current
                    .as_ref()
                    .is_some_and(|m| same_transaction(m, &job.prepared))
        })
}

/// Sends `job`'s markers until every partition holds one, then writes the
/// Complete state.
async fn complete<B: TxnHost>(broker: Arc<B>, job: MarkerJob) {
    let mut pending: BTreeSet<(String, i32)> = job.prepared.partitions.clone();
    while !pending.is_empty() {
        if !still_prepared(&*broker, &job) {
            tracing::info!(
                transactional_id = job.transactional_id,
                "markers abandoned: no longer this coordinator's to complete"
            );
            return;
        }
        let by_leader = leaders(broker.metadata(), &mut pending);
        for (leader, partitions) in by_leader {
            match send(&*broker, leader, &job, &partitions).await {
                Ok(done) => done.iter().for_each(|tp| {
                    pending.remove(tp);
                }),
                Err(MarkerError::CoordinatorFenced) => {
                    tracing::info!(
                        transactional_id = job.transactional_id,
                        "markers abandoned: a newer coordinator wrote this producer's markers"
                    );
                    return;
                }
                Err(e) => {
                    tracing::info!(transactional_id = job.transactional_id, leader, %e, "markers not written; retrying")
                }
            }
        }
        if !pending.is_empty() {
            tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
        }
    }
    let prepared = job.prepared.clone();
    let written = transition::write(&*broker, &job.transactional_id, |current, _| {
        let next = current
            .filter(|c| same_transaction(c, &prepared))
            .and_then(|c| state::complete(c, transition::now_ms()));
        Ok((next, ()))
    })
    .await;
    match written {
        Ok(_) => tracing::info!(
            transactional_id = job.transactional_id,
            producer_id = prepared.producer_id,
            status = ?prepared.status,
            "transaction completed"
        ),
        // The next coordinator finds it prepared and sends the markers again.
        Err(e) => {
            tracing::warn!(transactional_id = job.transactional_id, %e, "could not write the transaction's completion")
        }
    }
}

/// The pending partitions grouped by their leader; those whose topic is
/// gone are removed from `pending`, those without a leader wait.
///
/// A topic is gone only by the word of a metadata cache some controller has
/// filled: a broker that has just started, or just taken over as
/// controller, may be told by LeaderAndIsr to lead a transaction-state
/// partition before any UpdateMetadata reached it, and its cache then knows
/// no topic at all. Its prepared transactions' markers wait for the cache.
/// (A campaign found the coordinator dropping a prepared commit's marker as
/// "gone" from that empty cache and completing the commit without it: the
/// partition's share of the transaction was later ended by an abort marker,
/// a torn transaction, on the fixed settings.)
fn leaders(
    metadata: &MetadataCache,
    pending: &mut BTreeSet<(String, i32)>,
) -> BTreeMap<i32, Vec<(String, i32)>> {
    let view = metadata.snapshot();
    let filled = view.controller_id >= 0;
    let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    pending.retain(|(topic, partition)| {
        let Some(partitions) = view.topics.get(topic) else {
            if !filled {
                return true;
            }
            tracing::info!(topic, partition, "marker not sent: the topic is gone");
            return false;
        };
        if let Some(p) = partitions.get(partition).filter(|p| p.leader >= 0) {
            by_leader
                .entry(p.leader)
                .or_default()
                .push((topic.clone(), *partition));
        }
        true
    });
    by_leader
}

/// Why one leader's markers were not all written.
#[derive(Debug, thiserror::Error)]
enum MarkerError {
    #[error("leader {0} is not live")]
    NoAddress(i32),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("a newer coordinator epoch holds the producer")]
    CoordinatorFenced,
}

/// Sends `partitions`' markers to `leader`; the partitions that hold theirs.
async fn send(
    broker: &impl TxnHost,
    leader: i32,
    job: &MarkerJob,
    partitions: &[(String, i32)],
) -> Result<Vec<(String, i32)>, MarkerError> {
    let addr = match broker.config().peers.get(&leader) {
        Some(addr) => addr.clone(),
        None => {
            let view = broker.metadata().snapshot();
            let endpoint = view
                .brokers
                .get(&leader)
                .ok_or(MarkerError::NoAddress(leader))?;
            format!("{}:{}", endpoint.host, endpoint.port)
        }
    };
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        topics.entry(topic).or_default().push(*partition);
    }
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(job.prepared.producer_id))
        .with_producer_epoch(job.prepared.producer_epoch)
        .with_transaction_result(job.prepared.status == state::TxnStatus::PrepareCommit)
        .with_coordinator_epoch(job.coordinator_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    WritableTxnMarkerTopic::default()
                        .with_name(topic_name(t))
                        .with_partition_indexes(ps)
                })
                .collect(),
        );
    let client_id = format!("txn-coordinator-{}", broker.config().node_id);
    let mut conn = Connection::connect(&addr, &client_id, MARKER_REQUEST_TIMEOUT).await?;
    let resp = conn
        .send(
            &WriteTxnMarkersRequest::default().with_markers(vec![marker]),
            WRITE_TXN_MARKERS_VERSION,
        )
        .await?;
    let mut done = Vec::new();
    for t in resp.markers.iter().flat_map(|m| &m.topics) {
        for p in &t.partitions {
            match ResponseError::try_from_code(p.error_code) {
                None => done.push((t.name.0.to_string(), p.partition_index)),
                Some(ResponseError::TransactionCoordinatorFenced) => {
                    return Err(MarkerError::CoordinatorFenced);
                }
                Some(e) => {
                    tracing::info!(topic = %t.name.0, partition = p.partition_index, ?e, "marker refused")
                }
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::metadata_cache::{ClusterView, PartitionMetadata};

    #[test]
    fn markers_wait_for_a_metadata_cache_no_controller_filled_and_drop_only_a_topic_it_lacks() {
        let metadata = MetadataCache::new();
        let mut pending: BTreeSet<(String, i32)> = [("t".to_owned(), 1)].into();

        // Just started (or just took over): nothing is known, nothing is gone.
        assert!(leaders(&metadata, &mut pending).is_empty());
        assert_eq!(pending.len(), 1, "dropped from an empty cache");

        // A controller's view with t-1 led by 2: the marker goes to 2.
        let mut view = ClusterView {
            controller_id: 2,
            ..Default::default()
        };
        view.topics.entry("t".into()).or_default().insert(
            1,
            PartitionMetadata {
                leader: 2,
                leader_epoch: 0,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                offline_replicas: Vec::new(),
            },
        );
        metadata.replace(view);
        let by_leader = leaders(&metadata, &mut pending);
        assert_eq!(by_leader.get(&2), Some(&vec![("t".to_owned(), 1)]));

        // A controller's view without t: the topic was deleted.
        metadata.replace(ClusterView {
            controller_id: 2,
            ..Default::default()
        });
        assert!(leaders(&metadata, &mut pending).is_empty());
        assert!(
            pending.is_empty(),
            "kept for a topic the controller deleted"
        );
    }
}
