//! Produce: append each partition's record batches as leader and answer by
//! `acks` — 0 no response (the connection is closed if a partition failed, as
//! Kafka does), 1 after the local append, -1 (all) once the high watermark passes
//! the appended batches or the request's timeout runs out
//! (REQUEST_TIMED_OUT: the records stay in the log, the outcome is unknown to
//! the client). A batch that fails its CRC is CORRUPT_MESSAGE and nothing of that
//! partition's data is appended.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use crate::broker::Broker;
use crate::replica::store::TopicPartition;

struct Pending {
    topic_index: usize,
    partition_index: usize,
    tp: TopicPartition,
    /// The high watermark must exceed this for the batch to count as committed.
    last_offset: i64,
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

pub async fn handle(broker: &Broker, req: ProduceRequest) -> ProduceOutcome {
    let acks = req.acks;
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
                    Some(records) => broker.replicas.append_as_leader(&tp, records, acks),
                }
            };
            parts.push(match outcome {
                Ok(info) => {
                    if acks == -1 {
                        pending.push(Pending {
                            topic_index: ti,
                            partition_index: pi,
                            tp,
                            last_offset: info.last_offset,
                        });
                    }
                    base.with_base_offset(info.first_offset)
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
    if !pending.is_empty() {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
        loop {
            let notified = broker.replicas.appended().notified();
            pending.retain(|p| {
                broker
                    .replicas
                    .high_watermark(&p.tp)
                    .is_none_or(|hw| hw <= p.last_offset)
            });
            if pending.is_empty() {
                break;
            }
            tokio::select! {
                _ = notified => {}
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
    ProduceOutcome::Respond(ProduceResponse::default().with_responses(responses))
}
