//! An application's transaction APIs (KIP-98, KIP-447): InitProducerId (the
//! producer id and epoch a transactional id is given), AddPartitionsToTxn
//! (the partitions a transaction will write), AddOffsetsToTxn (the group
//! whose offsets it will carry), TxnOffsetCommit (those offsets) and EndTxn
//! (commit or abort), each with its answer's error once answered. The
//! session (session/app_txns.rs) strings them, with the transactional
//! Produce requests between them, into one `txn` op per transaction.

use bytes::Bytes;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::Decodable;

use super::wire::{DecodeError, decode_response};

/// A producer id and epoch as a request names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub id: i64,
    pub epoch: i16,
}

/// One InitProducerId: the transactional id it asked for (`None`: an
/// idempotent producer's), and once answered its error and the stamp given.
#[derive(Debug, Clone, PartialEq)]
pub struct InitProducerId {
    pub transactional_id: Option<String>,
    /// (error code, the producer id and epoch given), once answered.
    pub answer: Option<(i16, Stamp)>,
}

/// One AddPartitionsToTxn of a client (versions 0-3: one transaction).
#[derive(Debug, Clone, PartialEq)]
pub struct AddPartitions {
    pub transactional_id: String,
    pub producer: Stamp,
    /// (topic, partition, the answer's error code once answered).
    pub partitions: Vec<(String, i32, Option<i16>)>,
}

/// One AddOffsetsToTxn, and once answered its error.
#[derive(Debug, Clone, PartialEq)]
pub struct AddOffsets {
    pub transactional_id: String,
    pub producer: Stamp,
    pub group: String,
    pub error_code: Option<i16>,
}

/// One TxnOffsetCommit: the offsets a transaction carries for its group.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnOffsetCommit {
    pub transactional_id: String,
    pub producer: Stamp,
    pub group: String,
    /// -1 before version 3, which names no generation.
    pub generation: i32,
    /// (topic, partition, offset, the answer's error code once answered).
    pub partitions: Vec<(String, i32, i64, Option<i16>)>,
}

/// One EndTxn: commit (`committed`) or abort, and once answered its error.
#[derive(Debug, Clone, PartialEq)]
pub struct EndTxn {
    pub transactional_id: String,
    pub producer: Stamp,
    pub committed: bool,
    pub error_code: Option<i16>,
}

pub fn init_request(mut frame: Bytes, version: i16) -> Result<InitProducerId, DecodeError> {
    let request = InitProducerIdRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(InitProducerId {
        transactional_id: request.transactional_id.map(|t| t.0.to_string()),
        answer: None,
    })
}

pub fn init_answer(
    init: &mut InitProducerId,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: InitProducerIdResponse = decode_response(frame, version)?;
    let stamp = Stamp {
        id: response.producer_id.0,
        epoch: response.producer_epoch,
    };
    init.answer = Some((response.error_code, stamp));
    Ok(())
}

pub fn add_partitions_request(
    mut frame: Bytes,
    version: i16,
) -> Result<AddPartitions, DecodeError> {
    let request =
        AddPartitionsToTxnRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    // Version 4 on is the brokers' batched form (KIP-890); a client sends
    // one transaction, read the same way.
    let (transactional_id, producer, topics) = match request.transactions.first() {
        Some(t) => (
            &t.transactional_id,
            (t.producer_id, t.producer_epoch),
            &t.topics,
        ),
        None => (
            &request.v3_and_below_transactional_id,
            (
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
            ),
            &request.v3_and_below_topics,
        ),
    };
    Ok(AddPartitions {
        transactional_id: transactional_id.0.to_string(),
        producer: Stamp {
            id: producer.0.0,
            epoch: producer.1,
        },
        partitions: topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| (t.name.0.to_string(), p, None))
            })
            .collect(),
    })
}

pub fn add_partitions_answer(
    add: &mut AddPartitions,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: AddPartitionsToTxnResponse = decode_response(frame, version)?;
    let topics = response.results_by_topic_v3_and_below.iter().chain(
        response
            .results_by_transaction
            .iter()
            .flat_map(|r| &r.topic_results),
    );
    for topic in topics {
        for answered in &topic.results_by_partition {
            if let Some(p) = add.partitions.iter_mut().find(|(t, p, _)| {
                t.as_str() == topic.name.0.as_str() && *p == answered.partition_index
            }) {
                p.2 = Some(answered.partition_error_code);
            }
        }
    }
    if response.error_code != 0 {
        for p in &mut add.partitions {
            p.2.get_or_insert(response.error_code);
        }
    }
    Ok(())
}

pub fn add_offsets_request(mut frame: Bytes, version: i16) -> Result<AddOffsets, DecodeError> {
    let request = AddOffsetsToTxnRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(AddOffsets {
        transactional_id: request.transactional_id.0.to_string(),
        producer: Stamp {
            id: request.producer_id.0,
            epoch: request.producer_epoch,
        },
        group: request.group_id.0.to_string(),
        error_code: None,
    })
}

pub fn add_offsets_answer(
    add: &mut AddOffsets,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: AddOffsetsToTxnResponse = decode_response(frame, version)?;
    add.error_code = Some(response.error_code);
    Ok(())
}

pub fn offset_commit_request(
    mut frame: Bytes,
    version: i16,
) -> Result<TxnOffsetCommit, DecodeError> {
    let request = TxnOffsetCommitRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(TxnOffsetCommit {
        transactional_id: request.transactional_id.0.to_string(),
        producer: Stamp {
            id: request.producer_id.0,
            epoch: request.producer_epoch,
        },
        group: request.group_id.0.to_string(),
        generation: request.generation_id,
        partitions: request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        p.committed_offset,
                        None,
                    )
                })
            })
            .collect(),
    })
}

pub fn offset_commit_answer(
    commit: &mut TxnOffsetCommit,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: TxnOffsetCommitResponse = decode_response(frame, version)?;
    for topic in &response.topics {
        for answered in &topic.partitions {
            let (topic, partition) = (topic.name.0.as_str(), answered.partition_index);
            super::groups::answer_commit(
                &mut commit.partitions,
                topic,
                partition,
                answered.error_code,
            );
        }
    }
    Ok(())
}

pub fn end_request(mut frame: Bytes, version: i16) -> Result<EndTxn, DecodeError> {
    let request = EndTxnRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(EndTxn {
        transactional_id: request.transactional_id.0.to_string(),
        producer: Stamp {
            id: request.producer_id.0,
            epoch: request.producer_epoch,
        },
        committed: request.committed,
        error_code: None,
    })
}

pub fn end_answer(end: &mut EndTxn, version: i16, frame: Bytes) -> Result<(), DecodeError> {
    let response: EndTxnResponse = decode_response(frame, version)?;
    end.error_code = Some(response.error_code);
    Ok(())
}
