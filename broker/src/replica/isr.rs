//! The leader's ISR writes (Kafka's `Partition.maybeShrinkIsr` / `maybeExpandIsr`
//! and `updateIsr`): a periodic task asks the replica manager which followers
//! should leave or join the ISR of each partition this broker leads and writes
//! each change to the partition-state key by compare-and-swap on its version
//! (the zkVersion check).
//!
//! A lost compare-and-swap is never retried blindly: the leader re-reads the
//! key and carries on only if it still names this broker leader in the same
//! epoch (taking the stored ISR and version); otherwise it waits for the
//! controller's LeaderAndIsr. A fenced leader proposes nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::replica_manager::{IsrChange, ReplicaManager};
use crate::controller::metadata_store::{MetadataStore, PartitionStateRecord, StoreError};

/// How often the ISR is checked: often enough that a caught-up follower rejoins
/// promptly (Kafka expands on the fetch itself), bounded by the lag time.
fn check_interval(lag: Duration) -> Duration {
    (lag / 4).clamp(Duration::from_millis(20), Duration::from_millis(100))
}

pub async fn run(
    replicas: Arc<ReplicaManager>,
    store: MetadataStore,
    lag: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(check_interval(lag)) => {}
        }
        for change in replicas.pending_isr_changes(lag) {
            if let Err(e) = write(&replicas, &store, &change).await {
                tracing::warn!(topic = %change.tp.topic, partition = change.tp.partition, %e, "ISR write failed");
            }
        }
    }
}

async fn write(
    replicas: &ReplicaManager,
    store: &MetadataStore,
    change: &IsrChange,
) -> Result<(), StoreError> {
    let record = PartitionStateRecord {
        leader: replicas.node_id(),
        leader_epoch: change.leader_epoch,
        isr: change.isr.clone(),
        controller_epoch: change.controller_epoch,
    };
    match store
        .write_partition_state_at_version(
            &change.tp.topic,
            change.tp.partition,
            &record,
            change.expected_version,
        )
        .await
    {
        Ok(version) => {
            tracing::info!(topic = %change.tp.topic, partition = change.tp.partition, isr = ?change.isr, leader_epoch = change.leader_epoch, "ISR updated");
            replicas.isr_written(change, version);
            Ok(())
        }
        Err(StoreError::StaleVersion { .. }) => {
            let stored = store
                .partition_state(&change.tp.topic, change.tp.partition)
                .await?;
            if let Some(stored) = stored {
                tracing::info!(topic = %change.tp.topic, partition = change.tp.partition, expected_version = change.expected_version, stored_version = stored.version, "cached partition-state version differs from etcd; re-read");
                replicas.isr_conflict(
                    change,
                    stored.value.leader,
                    stored.value.leader_epoch,
                    &stored.value.isr,
                    stored.version,
                );
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}
