//! A transactional producer's requests to its coordinator (KIP-98):
//! AddPartitionsToTxn (v0–v3; v4+ is KIP-890's batched and verifying form,
//! not offered), AddOffsetsToTxn (the group's offsets partition joins the
//! transaction, so the offsets TxnOffsetCommit writes are ended by its
//! markers) and EndTxn (PrepareCommit / PrepareAbort written, answered, then
//! the markers). Each is one transition of `transactions::state`, written by
//! `transactions::transition` before it is answered.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse,
};

use crate::offsets::OffsetsManager;
use crate::transactions::TxnHost;
use crate::transactions::coordinator::MarkerJob;
use crate::transactions::state::{self, End};
use crate::transactions::transition::{self, Written};

/// KIP-588: the version from which each API may answer PRODUCER_FENCED
/// (INVALID_PRODUCER_EPOCH before, as Kafka's `KafkaApis` maps it).
const FENCED_FROM_VERSION: i16 = 2;

/// Adds `partitions` to the transaction of `transactional_id`; the error
/// every partition is answered with, if any.
async fn add(
    host: &impl TxnHost,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &BTreeSet<(String, i32)>,
    version: i16,
) -> Option<ResponseError> {
    let now = transition::now_ms();
    transition::write(host, transactional_id, |current, _| {
        let next = state::add_partitions(current, producer_id, producer_epoch, partitions, now)?;
        Ok((next, ()))
    })
    .await
    .err()
    .map(|e| e.code(version >= FENCED_FROM_VERSION))
}

pub async fn add_partitions(
    host: &impl TxnHost,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let view = host.metadata().snapshot();
    let wanted: Vec<(String, i32)> = req
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect();
    // Kafka's `TransactionCoordinator.handleAddPartitionsToTransaction`: a
    // partition this cluster does not know fails the request, the rest are
    // OPERATION_NOT_ATTEMPTED.
    let unknown: BTreeSet<&(String, i32)> = wanted
        .iter()
        .filter(|(t, p)| view.topics.get(t).is_none_or(|ps| !ps.contains_key(p)))
        .collect();
    let code_of = |tp: &(String, i32), error: Option<ResponseError>| -> i16 {
        if unknown.is_empty() {
            error.map_or(0, |e| e.code())
        } else if unknown.contains(tp) {
            ResponseError::UnknownTopicOrPartition.code()
        } else {
            ResponseError::OperationNotAttempted.code()
        }
    };
    let error = if unknown.is_empty() {
        add(
            host,
            &req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            &wanted.iter().cloned().collect(),
            version,
        )
        .await
    } else {
        None
    };
    let results = req
        .v3_and_below_topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(code_of(&(t.name.0.to_string(), *p), error))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name)
                .with_results_by_partition(partitions)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

/// `offsets` only names the group's offsets partition, the one added.
pub async fn add_offsets(
    host: &impl TxnHost,
    offsets: &OffsetsManager,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let tp = offsets.partition_of(&req.group_id);
    let partitions = BTreeSet::from([(tp.topic, tp.partition)]);
    let error = add(
        host,
        &req.transactional_id,
        req.producer_id.0,
        req.producer_epoch,
        &partitions,
        version,
    )
    .await;
    AddOffsetsToTxnResponse::default().with_error_code(error.map_or(0, |e| e.code()))
}

pub async fn end(host: &impl TxnHost, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    let transactional_id = req.transactional_id.to_string();
    let now = transition::now_ms();
    let written = transition::write(host, &transactional_id, |current, _| match state::end_txn(
        current,
        req.producer_id.0,
        req.producer_epoch,
        req.committed,
        now,
    )? {
        End::Prepare(m) => Ok((Some(m.clone()), Some(m))),
        End::AlreadyDone => Ok((None, None)),
    })
    .await;
    let code = match written {
        Ok(Written {
            outcome: Some(prepared),
            leader_epoch,
        }) => {
            // Answered once the Prepare state is written; the markers
            // follow (Kafka's `endTransaction`).
            host.coordinator().send_markers(MarkerJob {
                transactional_id,
                coordinator_epoch: leader_epoch,
                prepared,
            });
            0
        }
        Ok(_) => 0,
        Err(e) => e.code(version >= FENCED_FROM_VERSION).code(),
    };
    EndTxnResponse::default().with_error_code(code)
}
