//! An application's consumer-group offsets: OffsetCommit (the offsets it
//! committed, per partition, and each partition's answer) and OffsetFetch
//! (the committed offsets the coordinator answered).

use bytes::Bytes;
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use kafka_protocol::protocol::Decodable;

use super::wire::{DecodeError, decode_response};

/// One OffsetCommit request, and once answered each partition's error.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetCommit {
    pub group: String,
    /// -1 for a commit from outside the group's generations.
    pub generation: i32,
    pub member: String,
    /// (topic, partition, offset, the answer's error code once answered).
    pub partitions: Vec<(String, i32, i64, Option<i16>)>,
}

/// One OffsetFetch request, and once answered each partition's committed
/// offset (-1: none) and error, per group.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetFetch {
    /// The groups asked (one before version 8).
    pub groups: Vec<String>,
    pub require_stable: bool,
    /// (group, topic, partition, committed offset, error code), once answered.
    pub answered: Vec<(String, String, i32, i64, i16)>,
    /// The answer's error for the whole request (before version 8).
    pub error_code: i16,
}

pub fn commit_request(mut frame: Bytes, version: i16) -> Result<OffsetCommit, DecodeError> {
    let request = OffsetCommitRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(OffsetCommit {
        group: request.group_id.0.to_string(),
        generation: request.generation_id_or_member_epoch,
        member: request.member_id.to_string(),
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

pub fn commit_answer(
    commit: &mut OffsetCommit,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: OffsetCommitResponse = decode_response(frame, version)?;
    for topic in &response.topics {
        for answered in &topic.partitions {
            let (topic, partition) = (topic.name.0.as_str(), answered.partition_index);
            answer_commit(
                &mut commit.partitions,
                topic,
                partition,
                answered.error_code,
            );
        }
    }
    Ok(())
}

/// Sets the error code an OffsetCommit or TxnOffsetCommit answer gave one
/// committed partition (topic, partition, offset, its answer).
pub(super) fn answer_commit(
    partitions: &mut [(String, i32, i64, Option<i16>)],
    topic: &str,
    partition: i32,
    error_code: i16,
) {
    if let Some(p) = partitions
        .iter_mut()
        .find(|(t, p, _, _)| t.as_str() == topic && *p == partition)
    {
        p.3 = Some(error_code);
    }
}

pub fn fetch_request(mut frame: Bytes, version: i16) -> Result<OffsetFetch, DecodeError> {
    let request = OffsetFetchRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    let groups = if request.groups.is_empty() {
        vec![request.group_id.0.to_string()]
    } else {
        request
            .groups
            .iter()
            .map(|g| g.group_id.0.to_string())
            .collect()
    };
    Ok(OffsetFetch {
        groups,
        require_stable: request.require_stable,
        answered: Vec::new(),
        error_code: 0,
    })
}

pub fn fetch_answer(
    fetch: &mut OffsetFetch,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: OffsetFetchResponse = decode_response(frame, version)?;
    fetch.error_code = response.error_code;
    if let Some(group) = fetch.groups.first().filter(|_| response.groups.is_empty()) {
        for topic in &response.topics {
            for p in &topic.partitions {
                fetch.answered.push((
                    group.clone(),
                    topic.name.0.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.error_code,
                ));
            }
        }
    }
    for group in &response.groups {
        for topic in &group.topics {
            for p in &topic.partitions {
                let code = if group.error_code == 0 {
                    p.error_code
                } else {
                    group.error_code
                };
                fetch.answered.push((
                    group.group_id.0.to_string(),
                    topic.name.0.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    code,
                ));
            }
        }
    }
    Ok(())
}
