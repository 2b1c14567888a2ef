//! DeleteGroups (KIP-229) and OffsetDelete (KIP-496): a group's committed
//! offsets taken away by tombstones appended to its offsets partition
//! ([`crate::offsets::tombstone_batch`]), so a coordinator that loads the
//! partition later (after a move or a restart) does not bring them back.
//!
//! As Kafka's `GroupCoordinator.handleDeleteGroups` answers each group: a
//! group this broker does not coordinate is NOT_COORDINATOR (or
//! COORDINATOR_LOAD_IN_PROGRESS), an empty group id INVALID_GROUP_ID, a group
//! neither in the membership state machine nor holding offsets
//! GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP; an Empty group (or
//! one known by its offsets alone, which Kafka loads as an Empty group) goes
//! with all its offsets.
//!
//! OffsetDelete as `handleDeleteOffsets` (KIP-496): the group's errors as
//! above, except that a consumer group with members may lose the offsets of
//! topics no member subscribes to; a partition of a subscribed topic is
//! GROUP_SUBSCRIBED_TO_TOPIC, and a group of another protocol with members
//! NON_EMPTY_GROUP. A partition the cluster does not have is
//! UNKNOWN_TOPIC_OR_PARTITION (Kafka's `KafkaApis` checks its metadata
//! cache first); a partition without a committed offset is answered NONE.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};

use crate::group::{GroupError, GroupState};
use crate::offsets;
use crate::server::handlers::offset_commit::{GroupWrites, KnownPartitions, append_to_group};

/// Kafka's `ConsumerProtocol.PROTOCOL_TYPE`.
const CONSUMER: &str = "consumer";

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Appends tombstones for `group`'s offsets of `keys` and, once
/// acknowledged, forgets them (all the group's, and the group, when `whole`).
async fn tombstone(
    writes: &GroupWrites<'_>,
    group: &str,
    keys: &[(String, i32)],
    whole: bool,
) -> i16 {
    if !keys.is_empty() {
        let batch = offsets::tombstone_batch(group, keys, now_ms());
        match append_to_group(writes, group, batch, false).await {
            Ok(epoch) => {
                writes
                    .offsets
                    .deleted(group, epoch, if whole { None } else { Some(keys) })
            }
            Err(code) => return code,
        }
    } else if whole && let Some(epoch) = writes.offsets.leader_epoch(group) {
        writes.offsets.deleted(group, epoch, None);
    }
    0
}

/// Deletes one group; the code it is answered with.
async fn delete_one(writes: &GroupWrites<'_>, group: &str) -> i16 {
    if group.is_empty() {
        return ResponseError::InvalidGroupId.code();
    }
    if let Some(e) = writes.offsets.standing(group).error() {
        return e.code();
    }
    let stored = match writes.offsets.fetch(group, None) {
        Ok(stored) => stored,
        Err(e) => return e.code(),
    };
    match writes.groups.delete_group(group) {
        Ok(()) => {}
        Err(GroupError::GroupIdNotFound) if !stored.is_empty() => {}
        Err(e) => return e.response_error().code(),
    }
    let keys: Vec<(String, i32)> = stored.into_keys().collect();
    let code = tombstone(writes, group, &keys, true).await;
    tracing::info!(%group, offsets = keys.len(), code, "group deleted");
    code
}

pub async fn delete_groups(
    writes: &GroupWrites<'_>,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for group_id in req.groups_names {
        let code = delete_one(writes, &group_id.0).await;
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}

/// The topics a consumer's subscription (`ConsumerProtocolSubscription`,
/// every version: an int16 version, then an int32 count of int16-length
/// names) names; none when it cannot be read.
pub fn subscribed_topics(metadata: &[u8]) -> Vec<String> {
    fn read(mut buf: &[u8]) -> Option<Vec<String>> {
        let take = |buf: &mut &[u8], n: usize| -> Option<Vec<u8>> {
            let (head, rest) = (buf.get(..n)?.to_vec(), buf.get(n..)?);
            *buf = rest;
            Some(head)
        };
        take(&mut buf, 2)?;
        let count = i32::from_be_bytes(take(&mut buf, 4)?.try_into().ok()?);
        let mut topics = Vec::new();
        for _ in 0..count.max(0) {
            let len = i16::from_be_bytes(take(&mut buf, 2)?.try_into().ok()?);
            topics.push(String::from_utf8(take(&mut buf, len.max(0) as usize)?).ok()?);
        }
        Some(topics)
    }
    read(metadata).unwrap_or_default()
}

/// Which of a group's offsets OffsetDelete may take: every one (`None`)
/// or those of topics outside `Some(subscribed)`; or the group's error.
fn deletable(
    writes: &GroupWrites<'_>,
    group: &str,
) -> Result<Option<BTreeSet<String>>, ResponseError> {
    if group.is_empty() {
        return Err(ResponseError::InvalidGroupId);
    }
    if let Some(e) = writes.offsets.standing(group).error() {
        return Err(e);
    }
    match writes.groups.members_metadata(group) {
        None | Some((GroupState::Dead, _, _)) => {
            if writes.offsets.fetch(group, None)?.is_empty() {
                Err(ResponseError::GroupIdNotFound)
            } else {
                Ok(None)
            }
        }
        Some((GroupState::Empty, _, _)) => Ok(None),
        Some((_, protocol_type, members)) if protocol_type == CONSUMER => Ok(Some(
            members.iter().flat_map(|m| subscribed_topics(m)).collect(),
        )),
        Some(_) => Err(ResponseError::NonEmptyGroup),
    }
}

pub async fn offset_delete(
    writes: &GroupWrites<'_>,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group = req.group_id.0.to_string();
    let subscribed = match deletable(writes, &group) {
        Ok(s) => s,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    let known = KnownPartitions::now(writes.metadata);
    let subscribed_to = |topic: &str| subscribed.as_ref().is_some_and(|s| s.contains(topic));
    let keys: Vec<(String, i32)> = req
        .topics
        .iter()
        .filter(|t| !subscribed_to(&t.name.0))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index))
        })
        .filter(|(t, p)| known.has(t, *p))
        .collect();
    let stored = match writes.offsets.fetch(&group, Some(&keys)) {
        Ok(stored) => stored,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    // Kafka writes tombstones only for offsets the group has.
    let held: Vec<(String, i32)> = stored.into_keys().collect();
    let code = tombstone(writes, &group, &held, false).await;
    tracing::info!(%group, offsets = held.len(), code, "offsets deleted");
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let code = if !known.has(&t.name.0, p.partition_index) {
                        ResponseError::UnknownTopicOrPartition.code()
                    } else if subscribed_to(&t.name.0) {
                        ResponseError::GroupSubscribedToTopic.code()
                    } else {
                        code
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_names_its_topics() {
        // ConsumerProtocolSubscription v1: version, topics, user data, owned
        // partitions (only the topics are read).
        let mut bytes = vec![0, 1, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c'];
        bytes.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(
            subscribed_topics(&bytes),
            vec!["a".to_owned(), "bc".to_owned()]
        );
        assert!(
            subscribed_topics(&[0, 1, 0, 0, 0, 3, 0, 1, b'a']).is_empty(),
            "cut short"
        );
    }
}

#[cfg(test)]
#[path = "group_deletion_tests.rs"]
mod group_deletion_tests;
