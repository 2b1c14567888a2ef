//! One replica, asked about itself directly: its high watermark and log end
//! offset over the broker's own port (as Kafka's debugging consumer asks,
//! bypassing every proxy), and the LeaderAndIsr requests its current
//! incarnation applied, from the state-change log in its data directory.

use std::time::Duration;

use crate::kafka_client::{ClientError, KafkaClient};
use crate::node::NodeId;
use crate::reader::state_change::read_state_changes;
use crate::runtime::{Runtime, RuntimeError};
use crate::topic_partition::PartitionRef;

/// Bound on one observation request to a broker's own port.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why one replica's offsets could not be read; a wait reads it as "not
/// yet" and shows it as the last thing seen.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaOffsetsError {
    /// The runtime gives no address for the node: it has no running broker.
    #[error("{node} is not running")]
    NotRunning { node: NodeId },
    /// Connecting to the broker's own port failed.
    #[error("{0}")]
    Connect(#[source] ClientError),
    /// The broker did not answer the offsets request.
    #[error("{0}")]
    Request(#[source] ClientError),
}

/// (HW, LEO) of one replica, asked on the broker's own port.
pub async fn replica_offsets<R: Runtime>(
    runtime: &R,
    node: NodeId,
    partition: &PartitionRef,
) -> Result<(u64, u64), ReplicaOffsetsError> {
    let address = runtime
        .observe_address(node)
        .ok_or(ReplicaOffsetsError::NotRunning { node })?;
    let mut client = KafkaClient::connect(&address, "epochal-observer", PROBE_TIMEOUT)
        .await
        .map_err(ReplicaOffsetsError::Connect)?;
    let offsets = client
        .replica_offsets(&partition.topic, partition.wire_partition())
        .await
        .map_err(ReplicaOffsetsError::Request)?;
    Ok((
        offsets.high_watermark.max(0) as u64,
        offsets.log_end_offset.max(0) as u64,
    ))
}

/// (leader, leader epoch) of every LeaderAndIsr `node`'s latest incarnation
/// applied for `partition`, from its state-change log (lines of earlier
/// incarnations do not count: a restarted broker has applied nothing yet); a
/// log that cannot be read yet reads as empty.
pub(super) fn applied_leader_and_isr<R: Runtime>(
    runtime: &R,
    id: NodeId,
    partition: &PartitionRef,
) -> Result<Vec<(i32, i32)>, RuntimeError> {
    let dir = runtime.data_dir(id)?;
    // Whole milliseconds, as the log writes them; a line written in the same
    // millisecond as the spawn can only be the new incarnation's.
    let since_ms = runtime.started_at(id).map_or(0, |t| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    });
    Ok(read_state_changes(&dir)
        .map(|entries| {
            entries
                .iter()
                .filter(|e| {
                    e.request == "LeaderAndIsr"
                        && e.time_ms >= since_ms
                        && e.applied()
                        && e.topic == partition.topic
                        && e.partition == partition.wire_partition()
                })
                .map(|e| (e.leader, e.leader_epoch))
                .collect()
        })
        .unwrap_or_default())
}
