//! An application's deletions of committed offsets: OffsetDelete (KIP-496:
//! the group's offsets of the partitions named) and DeleteGroups (KIP-229:
//! each group named, and with it every offset it committed). After either
//! the coordinator answers -1 (no commit) for what it deleted, so the
//! committed-offsets rule must know of them: without them a read of -1
//! after an acknowledged commit is a commit the coordinator lost.

use bytes::Bytes;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};
use kafka_protocol::protocol::Decodable;

use super::wire::{DecodeError, decode_response};

/// One OffsetDelete or DeleteGroups request, and once answered its errors.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetDeletion {
    /// (group, error code once answered): OffsetDelete's one group (its
    /// answer's top-level error), or each group DeleteGroups names.
    pub groups: Vec<(String, Option<i16>)>,
    /// OffsetDelete's (topic, partition, error code once answered); empty
    /// for DeleteGroups.
    pub partitions: Vec<(String, i32, Option<i16>)>,
    /// DeleteGroups: every partition of each group is deleted.
    pub whole_groups: bool,
}

pub fn offset_delete_request(
    mut frame: Bytes,
    version: i16,
) -> Result<OffsetDeletion, DecodeError> {
    let request = OffsetDeleteRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(OffsetDeletion {
        groups: vec![(request.group_id.0.to_string(), None)],
        partitions: request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.0.to_string(), p.partition_index, None))
            })
            .collect(),
        whole_groups: false,
    })
}

pub fn offset_delete_answer(
    deletion: &mut OffsetDeletion,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: OffsetDeleteResponse = decode_response(frame, version)?;
    for group in &mut deletion.groups {
        group.1 = Some(response.error_code);
    }
    for topic in &response.topics {
        for answered in &topic.partitions {
            if let Some(asked) = deletion.partitions.iter_mut().find(|(t, p, _)| {
                t.as_str() == topic.name.0.as_str() && *p == answered.partition_index
            }) {
                asked.2 = Some(answered.error_code);
            }
        }
    }
    Ok(())
}

pub fn delete_groups_request(
    mut frame: Bytes,
    version: i16,
) -> Result<OffsetDeletion, DecodeError> {
    let request = DeleteGroupsRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(OffsetDeletion {
        groups: request
            .groups_names
            .iter()
            .map(|g| (g.0.to_string(), None))
            .collect(),
        partitions: Vec::new(),
        whole_groups: true,
    })
}

pub fn delete_groups_answer(
    deletion: &mut OffsetDeletion,
    version: i16,
    frame: Bytes,
) -> Result<(), DecodeError> {
    let response: DeleteGroupsResponse = decode_response(frame, version)?;
    for result in &response.results {
        if let Some(asked) = deletion
            .groups
            .iter_mut()
            .find(|(g, _)| g.as_str() == result.group_id.0.as_str())
        {
            asked.1 = Some(result.error_code);
        }
    }
    Ok(())
}
