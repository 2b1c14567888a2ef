//! WriteTxnMarkers (KIP-98): the transaction coordinator asks each
//! partition's leader to end a producer's transaction there. Each marker is
//! appended as a control batch (`replica::txn`) and answered once the ISR
//! holds it, as Kafka appends markers with acks=all; a partition this broker
//! does not lead answers NOT_LEADER_OR_FOLLOWER, an older producer epoch
//! INVALID_PRODUCER_EPOCH, an older coordinator epoch
//! TRANSACTION_COORDINATOR_FENCED, so the coordinator retries or stops.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use crate::offsets::{OFFSETS_TOPIC, OffsetsManager};
use crate::replica::manager::ReplicaManager;
use crate::replica::store::TopicPartition;
use crate::storage::txn::Marker;

/// How long a marker waits for the ISR before it is answered REQUEST_TIMED_OUT
/// (the coordinator then sends it again).
const REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a pending marker's replication is looked at besides appends.
const ACK_RECHECK: Duration = Duration::from_millis(100);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Appends markers through `replicas`; a marker on an offsets partition
/// also ends its transaction's offset commits in `offsets`.
pub async fn handle(
    replicas: &ReplicaManager,
    offsets: &OffsetsManager,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let deadline = tokio::time::Instant::now() + REPLICATION_TIMEOUT;
    let mut markers = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = Marker {
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let mut partitions = Vec::with_capacity(t.partition_indexes.len());
            for p in t.partition_indexes {
                let tp = TopicPartition::new(t.name.as_str(), p);
                let code = match replicas.append_marker(
                    &tp,
                    m.producer_id.0,
                    m.producer_epoch,
                    marker,
                    now_ms(),
                ) {
                    Err(e) => e.code(),
                    Ok(ticket) => replicas
                        .await_ack(&tp, &ticket, deadline, ACK_RECHECK)
                        .await
                        .and_then(|status| status.code())
                        .unwrap_or(ResponseError::RequestTimedOut.code()),
                };
                if code == 0 && tp.topic == OFFSETS_TOPIC {
                    // The transaction's offset commits on this partition
                    // end with it (Kafka's `onTransactionCompleted`).
                    offsets.complete_txn(p, m.producer_id.0, m.transaction_result);
                }
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}
