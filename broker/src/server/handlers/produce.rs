//! Produce: append each partition's record batches as leader and answer by
//! `acks` — 0 no response (the connection is closed if a partition failed, as
//! Kafka does), 1 after the local append, -1 (all) once the high watermark passes
//! the appended batches or the request's timeout runs out
//! (REQUEST_TIMED_OUT: the records stay in the log, the outcome is unknown to
//! the client). acks=all is refused with NOT_ENOUGH_REPLICAS when the ISR is
//! below min.insync.replicas before the append, and answered
//! NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank below it by the time the HW
//! passed the batch. A leader that loses leadership while waiting answers
//! NOT_LEADER_OR_FOLLOWER; one that fences itself answers REQUEST_TIMED_OUT. A batch that fails its CRC is CORRUPT_MESSAGE and nothing of that
//! partition's data is appended; so is a batch the topic's configs refuse —
//! larger than `max.message.bytes` (MESSAGE_TOO_LARGE), or holding a record
//! without a key for a compacted topic (INVALID_RECORD; `storage::record_batch`
//! `RecordRules`). An idempotent producer's retry of a batch the
//! log holds is answered with the original base offset (and, for acks=all,
//! once the original batch is committed); a fenced epoch or a sequence out of
//! order is INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER (KIP-98; the
//! rules are in `storage/producer_state.rs`), and so is a transactional
//! producer its coordinator has fenced (`transactions::verify`).

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use crate::failpoints::{self, Failpoint};
use crate::replica::leader::AppendTicket;
use crate::replica::store::TopicPartition;
use crate::storage::record_batch;
use crate::transactions::{TxnHost, verify};

/// A fenced leader's pending acks=all waits are re-checked at least this often,
/// since fencing is a matter of time, not of an event that wakes them.
const ACK_RECHECK: Duration = Duration::from_millis(50);

struct Pending {
    topic_index: usize,
    partition_index: usize,
    tp: TopicPartition,
    /// The high watermark must pass this append for it to count as committed.
    ticket: AppendTicket,
}

/// What the connection does after a produce.
pub enum ProduceOutcome {
    Respond(ProduceResponse),
    /// acks=0 and every partition succeeded: Kafka sends nothing.
    Silent,
    /// acks=0 and a partition failed: Kafka closes the connection, the only
    /// signal an acks=0 producer gets that something went wrong.
    Close(String),
}

/// KIP-890 part 1: a transactional batch that would open its producer's
/// transaction on `tp` is appended only once the coordinator confirms the
/// partition is in that transaction (`transactions::verify`); a batch that
/// continues an open one, a non-transactional batch, a request naming no
/// transactional id (nothing to ask about: Kafka verifies only requests
/// that name one), or a broker with `transaction_partition_verification`
/// off appends unasked.
async fn verify_transaction(
    host: &impl TxnHost,
    transactional_id: Option<&str>,
    tp: &TopicPartition,
    records: &bytes::Bytes,
) -> Result<(), ResponseError> {
    let Some(id) = transactional_id.filter(|_| host.config().transaction_partition_verification)
    else {
        return Ok(());
    };
    let Ok(header) = record_batch::parse_header(records) else {
        // Malformed: the append refuses it with its own error.
        return Ok(());
    };
    if !header.is_transactional()
        || host
            .replicas()
            .has_ongoing_txn(tp, header.producer_id, header.producer_epoch)
    {
        return Ok(());
    }
    verify::verify_partition(host, id, header.producer_id, header.producer_epoch, tp).await
}

/// Appends through `host`'s replicas; a transactional batch that would open
/// its transaction on a partition is first verified with its coordinator
/// (`verify_transaction`), which is why the handler is given the
/// coordinator's host and not the replicas alone.
pub async fn handle(host: &impl TxnHost, req: ProduceRequest) -> ProduceOutcome {
    let replicas = host.replicas();
    let acks = req.acks;
    let transactional_id: Option<String> = req.transactional_id.as_ref().map(|id| id.0.to_string());
    let mut pending = Vec::new();
    let mut responses: Vec<TopicProduceResponse> = Vec::with_capacity(req.topic_data.len());
    for (ti, topic) in req.topic_data.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let mut parts = Vec::with_capacity(topic.partition_data.len());
        for (pi, data) in topic.partition_data.into_iter().enumerate() {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: data.index,
            };
            let base = PartitionProduceResponse::default().with_index(data.index);
            let outcome = if !matches!(acks, -1..=1) {
                Err(ResponseError::InvalidRequiredAcks)
            } else {
                match data.records {
                    None => Err(ResponseError::CorruptMessage),
                    Some(records) => {
                        match verify_transaction(host, transactional_id.as_deref(), &tp, &records)
                            .await
                        {
                            Ok(()) => replicas.append_as_leader(&tp, records, acks),
                            Err(e) => Err(e),
                        }
                    }
                }
            };
            if outcome.is_ok() {
                failpoints::hit(Failpoint::LeaderAfterAppend);
            }
            parts.push(match outcome {
                Ok(ticket) => {
                    if acks == -1 {
                        pending.push(Pending {
                            topic_index: ti,
                            partition_index: pi,
                            tp,
                            ticket,
                        });
                    }
                    base.with_base_offset(ticket.first_offset)
                }
                Err(e) => base.with_error_code(e.code()).with_base_offset(-1),
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(parts),
        );
    }
    if acks == 0 {
        let failed: Vec<String> = responses
            .iter()
            .flat_map(|t| {
                t.partition_responses
                    .iter()
                    .filter(|p| p.error_code != 0)
                    .map(move |p| format!("{}-{}: error {}", t.name.0, p.index, p.error_code))
            })
            .collect();
        return if failed.is_empty() {
            ProduceOutcome::Silent
        } else {
            ProduceOutcome::Close(format!("acks=0 produce failed ({})", failed.join(", ")))
        };
    }
    let waited_for_acks = !pending.is_empty();
    if waited_for_acks {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
        loop {
            let notified = replicas.appended().notified();
            pending.retain(|p| {
                let Some(code) = replicas.ack_status(&p.tp, &p.ticket).code() else {
                    return true;
                };
                responses[p.topic_index].partition_responses[p.partition_index].error_code = code;
                false
            });
            if pending.is_empty() {
                break;
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(ACK_RECHECK) => {}
                _ = tokio::time::sleep_until(deadline) => {
                    for p in &pending {
                        responses[p.topic_index].partition_responses[p.partition_index].error_code =
                            ResponseError::RequestTimedOut.code();
                    }
                    break;
                }
            }
        }
    }
    if waited_for_acks {
        failpoints::hit(Failpoint::LeaderBeforeAck);
    }
    ProduceOutcome::Respond(ProduceResponse::default().with_responses(responses))
}

#[cfg(test)]
#[path = "produce_tests.rs"]
mod tests;
