//! StopReplica (controller → broker) for a deleted topic: after the same
//! request-level fences as LeaderAndIsr (`fencing.rs`), every partition named
//! with `delete_partition` has its fetcher stopped and its log removed from
//! disk; each deletion is logged. The controller sends
//! StopReplica only to delete (a replica that merely stops following is
//! told so by LeaderAndIsr here), so one without `delete_partition` is
//! stopped but its log kept, as Kafka does.

use kafka_protocol::messages::stop_replica_response::StopReplicaPartitionError;
use kafka_protocol::messages::{StopReplicaRequest, StopReplicaResponse};

use super::fencing::{self, Control};
use super::topic_name;
use crate::replica::store::TopicPartition;

pub fn handle(
    control: &Control<'_>,
    req: StopReplicaRequest,
    stale_broker_epoch: Option<String>,
) -> StopReplicaResponse {
    let partitions: Vec<(TopicPartition, bool)> = req
        .topic_states
        .iter()
        .flat_map(|t| {
            t.partition_states.iter().map(|p| {
                (
                    TopicPartition::new(t.topic_name.as_str(), p.partition_index),
                    p.delete_partition,
                )
            })
        })
        .collect();
    let _control = control.lock();
    if let Some(refusal) = fencing::refusal(
        control,
        req.controller_epoch,
        req.broker_epoch,
        stale_broker_epoch,
    ) {
        tracing::warn!(reason = %refusal.reason(), "StopReplica refused");
        return StopReplicaResponse::default().with_error_code(refusal.code().code());
    }
    let errors = partitions
        .into_iter()
        .map(|(tp, delete)| {
            control.fetchers.stop(&tp);
            let keeps_log = delete
                && crate::failpoints::hit_or_return(
                    crate::failpoints::Failpoint::StopReplicaKeepsLog,
                );
            let code = if delete && !keeps_log {
                match control.replicas.delete_replica(&tp) {
                    Ok(()) => {
                        control.replicas.topic_configs().forget(&tp.topic);
                        tracing::info!(partition = %tp, "replica deleted (its topic was deleted)");
                        0
                    }
                    Err(e) => {
                        tracing::warn!(partition = %tp, %e, "could not delete the replica");
                        kafka_protocol::ResponseError::KafkaStorageError.code()
                    }
                }
            } else {
                0
            };
            StopReplicaPartitionError::default()
                .with_topic_name(topic_name(&tp.topic))
                .with_partition_index(tp.partition)
                .with_error_code(code)
        })
        .collect();
    StopReplicaResponse::default().with_partition_errors(errors)
}
