//! KIP-890 part 1 (Kafka 3.6.0): a partition leader asks the transaction
//! coordinator before it appends a transactional batch that would open a
//! transaction on the partition, so a produce that arrives after its
//! transaction ended — delayed on the network, retried late — is refused
//! instead of opening a transaction no coordinator will ever end (a
//! "hanging" transaction: KAFKA-14402; the partition's last stable offset,
//! and every read_committed consumer, stop there).
//!
//! The leader's side is [`verify_partition`]: answered at once when this
//! broker is the id's coordinator, else by AddPartitionsToTxn v4 with
//! `verify_only` to the coordinator (the leader of the id's
//! transaction-state partition), one connection per check. The
//! coordinator's side is [`answer_verify_only`]. Kafka batches checks per
//! coordinator (`AddPartitionsToTxnManager`) and re-checks at append time
//! with a verification guard so a marker written between the check and the
//! append voids it; this broker does neither — the window between the check
//! and the append is one produce request's handling, and the setting's
//! purpose is the late produce, which the check refuses.
//! `transaction_partition_verification = false` skips the check: the
//! leader appends unasked, as every release before 3.6 did.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::TxnHost;
use super::state;
use crate::client::Connection;
use crate::client::topic_name;
use crate::replica::store::TopicPartition;

/// The version a leader asks in: v4 is the first with `verify_only`.
const VERIFY_VERSION: i16 = 4;
/// One check's round trip, connect included. A produce waits on it, so it
/// is well inside a client's request timeout.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// The error a transactional batch for `tp` is refused with, if it is: the
/// coordinator of `transactional_id` must have `tp` in the ongoing
/// transaction of `producer_id` at `producer_epoch`; an older epoch is
/// INVALID_PRODUCER_EPOCH ([`produce_answer`]). A coordinator that
/// cannot be asked — none elected, loading, unreachable — is
/// NOT_ENOUGH_REPLICAS, a retriable error every producer knows, as Kafka's
/// `AddPartitionsToTxnManager` answers for older clients.
pub async fn verify_partition(
    broker: &impl TxnHost,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    tp: &TopicPartition,
) -> Result<(), ResponseError> {
    let partition = (tp.topic.clone(), tp.partition);
    let verdict = match broker.coordinator().lookup(transactional_id) {
        Ok(coordinating) => Ok(state::verify(
            coordinating.current.as_ref(),
            producer_id,
            producer_epoch,
            &partition,
        )
        .err()
        .map(state::TxnError::code)),
        Err(e @ ResponseError::CoordinatorLoadInProgress) => Ok(Some(e)),
        Err(_) => ask_coordinator(broker, transactional_id, producer_id, producer_epoch, tp).await,
    };
    produce_answer(verdict, transactional_id, tp)
}

/// What a produce is answered given the coordinator's verdict on its
/// partition: the error it answered, if any, or why it could not be asked.
fn produce_answer(
    verdict: Result<Option<ResponseError>, AskError>,
    transactional_id: &str,
    tp: &TopicPartition,
) -> Result<(), ResponseError> {
    match verdict {
        Ok(None) => Ok(()),
        // A produce has always answered a fenced epoch INVALID_PRODUCER_EPOCH,
        // and clients take only that as fatal there (librdkafka among them):
        // Kafka's `AddPartitionsToTxnManager` turns the coordinator's
        // PRODUCER_FENCED into it for produce (KAFKA-14402, KIP-890 part 1).
        Ok(Some(ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch)) => {
            Err(ResponseError::InvalidProducerEpoch)
        }
        Ok(Some(
            e @ (ResponseError::InvalidTxnState | ResponseError::InvalidProducerIdMapping),
        )) => Err(e),
        Ok(Some(other)) => {
            tracing::info!(
                transactional_id,
                partition = %tp,
                ?other,
                "transaction verification not answered; produce refused retriably"
            );
            Err(ResponseError::NotEnoughReplicas)
        }
        Err(e) => {
            tracing::info!(transactional_id, partition = %tp, %e, "transaction coordinator not reached for verification");
            Err(ResponseError::NotEnoughReplicas)
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error("no live coordinator for the id's transaction-state partition")]
    NoCoordinator,
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
}

/// Sends the verify-only AddPartitionsToTxn to the id's coordinator; the
/// error it answered for `tp`, if any.
async fn ask_coordinator(
    broker: &impl TxnHost,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    tp: &TopicPartition,
) -> Result<Option<ResponseError>, AskError> {
    let state_tp = broker.coordinator().partition_of(transactional_id);
    let view = broker.metadata().snapshot();
    let leader = view
        .topics
        .get(&state_tp.topic)
        .and_then(|ps| ps.get(&state_tp.partition))
        .map(|p| p.leader)
        .filter(|l| *l >= 0)
        .ok_or(AskError::NoCoordinator)?;
    let addr = match broker.config().peers.get(&leader) {
        Some(addr) => addr.clone(),
        None => {
            let endpoint = view.brokers.get(&leader).ok_or(AskError::NoCoordinator)?;
            format!("{}:{}", endpoint.host, endpoint.port)
        }
    };
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            )))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_verify_only(true)
            .with_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(&tp.topic))
                    .with_partitions(vec![tp.partition]),
            ]),
    ]);
    let client_id = format!("txn-verifier-{}", broker.config().node_id);
    let mut conn = Connection::connect(&addr, &client_id, VERIFY_TIMEOUT).await?;
    let resp = conn.send(&request, VERIFY_VERSION).await?;
    if let Some(e) = ResponseError::try_from_code(resp.error_code) {
        return Ok(Some(e));
    }
    let code = resp
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .filter(|t| t.name.0.as_str() == tp.topic)
        .flat_map(|t| &t.results_by_partition)
        .find(|p| p.partition_index == tp.partition)
        .map_or(ResponseError::UnknownServerError.code(), |p| {
            p.partition_error_code
        });
    Ok(ResponseError::try_from_code(code))
}

/// The coordinator's answer to an AddPartitionsToTxn of v4 or later: each
/// transaction's partitions checked ([`state::verify`]) when it is
/// `verify_only`. A v4 add that is not verify-only is a broker batching
/// clients' adds, which no broker here does: refused INVALID_REQUEST.
pub fn answer_verify_only(
    broker: &impl TxnHost,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let results = req
        .transactions
        .into_iter()
        .map(|txn| {
            let id = txn.transactional_id.0.to_string();
            let error = |topic: &str, partition: i32| -> i16 {
                if !txn.verify_only {
                    return ResponseError::InvalidRequest.code();
                }
                let coordinating = match broker.coordinator().lookup(&id) {
                    Ok(c) => c,
                    Err(e) => return e.code(),
                };
                state::verify(
                    coordinating.current.as_ref(),
                    txn.producer_id.0,
                    txn.producer_epoch,
                    &(topic.to_owned(), partition),
                )
                .err()
                .map_or(0, |e| e.code().code())
            };
            let topic_results = txn
                .topics
                .iter()
                .map(|t| {
                    AddPartitionsToTxnTopicResult::default()
                        .with_name(t.name.clone())
                        .with_results_by_partition(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    AddPartitionsToTxnPartitionResult::default()
                                        .with_partition_index(*p)
                                        .with_partition_error_code(error(t.name.0.as_str(), *p))
                                })
                                .collect(),
                        )
                })
                .collect();
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id)
                .with_topic_results(topic_results)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    /// A fenced producer's produce is INVALID_PRODUCER_EPOCH, the error a
    /// produce answers for a fenced epoch (librdkafka takes only it as fatal
    /// there): Kafka's `AddPartitionsToTxnManager` turns the coordinator's
    /// PRODUCER_FENCED into it for produce (KAFKA-14402, KIP-890), whether
    /// the coordinator is this broker or another.
    #[test]
    fn a_fenced_producer_s_produce_is_invalid_producer_epoch() {
        assert_eq!(
            produce_answer(Ok(Some(ResponseError::ProducerFenced)), "tx", &tp()),
            Err(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            produce_answer(Ok(Some(ResponseError::InvalidProducerEpoch)), "tx", &tp()),
            Err(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            produce_answer(Ok(Some(ResponseError::InvalidTxnState)), "tx", &tp()),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(
            produce_answer(
                Ok(Some(ResponseError::CoordinatorLoadInProgress)),
                "tx",
                &tp()
            ),
            Err(ResponseError::NotEnoughReplicas)
        );
        assert_eq!(produce_answer(Ok(None), "tx", &tp()), Ok(()));
    }
}
