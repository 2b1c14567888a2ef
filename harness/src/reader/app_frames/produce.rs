//! An application's Produce request and its answer: per partition, the
//! records' values and the producer's stamp (KIP-98) of its first batch,
//! then the base offset and error the broker answered.

use bytes::Bytes;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::Decodable;

use super::wire::{DecodeError, decode_response, whole_batches};

/// One Produce request, and once answered what each partition's answer said.
#[derive(Debug, Clone, PartialEq)]
pub struct Produce {
    /// -1 (all), 0 or 1.
    pub acks: i16,
    pub transactional_id: Option<String>,
    pub partitions: Vec<ProducedPartition>,
}

/// What one partition of a Produce carried, and what it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducedPartition {
    pub topic: String,
    pub partition: i32,
    /// Each record's value, in order (`None`: a null value).
    pub values: Vec<Option<Bytes>>,
    /// The first batch's producer id, epoch and base sequence (-1 each for
    /// a producer that is not idempotent).
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// Whether the batches are a transaction's.
    pub transactional: bool,
    /// The answer's error code and base offset, once answered.
    pub answer: Option<(i16, i64)>,
}

/// The request's body in `frame` (its header read) at `version`.
pub fn request(mut frame: Bytes, version: i16) -> Result<Produce, DecodeError> {
    let request = ProduceRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    let mut partitions = Vec::new();
    for topic in &request.topic_data {
        for data in &topic.partition_data {
            let sets = whole_batches(data.records.clone().unwrap_or_default())?;
            let first = sets.iter().flat_map(|s| &s.records).next();
            partitions.push(ProducedPartition {
                topic: topic.name.0.to_string(),
                partition: data.index,
                values: sets
                    .iter()
                    .flat_map(|s| &s.records)
                    .map(|r| r.value.clone())
                    .collect(),
                producer_id: first.map_or(-1, |r| r.producer_id),
                producer_epoch: first.map_or(-1, |r| r.producer_epoch),
                base_sequence: first.map_or(-1, |r| r.sequence),
                transactional: first.is_some_and(|r| r.transactional),
                answer: None,
            });
        }
    }
    Ok(Produce {
        acks: request.acks,
        transactional_id: request.transactional_id.map(|t| t.0.to_string()),
        partitions,
    })
}

/// Reads the answer in `frame` into `produce`.
pub fn answer(produce: &mut Produce, version: i16, frame: Bytes) -> Result<(), DecodeError> {
    let response: ProduceResponse = decode_response(frame, version)?;
    for topic in &response.responses {
        for answered in &topic.partition_responses {
            if let Some(p) = produce
                .partitions
                .iter_mut()
                .find(|p| p.topic == topic.name.0.as_str() && p.partition == answered.index)
            {
                p.answer = Some((answered.error_code, answered.base_offset));
            }
        }
    }
    Ok(())
}
