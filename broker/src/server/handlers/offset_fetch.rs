//! OffsetFetch: a group's committed offsets, from the coordinator's memory of
//! its offsets partition ([`crate::offsets`]). A partition with no commit
//! answers offset -1; a group this broker does not coordinate, or whose
//! partition it is still loading, answers NOT_COORDINATOR or
//! COORDINATOR_LOAD_IN_PROGRESS (the client finds the coordinator again or
//! retries). v0–v7 ask for one group, v8+ for several (KIP-709); a null topic
//! list (v2+) asks for every partition the group committed.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::offsets::{GroupOffsets, OffsetsManager};

/// One partition's answer: index, offset, leader epoch, metadata, error.
type PartitionAnswer = (i32, i64, i32, String, i16);
/// One group's answer: per topic, per partition, or the group's error.
type Answer = Result<Vec<(String, Vec<PartitionAnswer>)>, ResponseError>;

/// The request's topics as (name, partitions); v0–7 and v8+ name the same
/// fields on different types, so this and [`topics!`] are macros.
macro_rules! wanted {
    ($topics:expr) => {
        $topics.map(|topics| {
            topics
                .into_iter()
                .map(|t| (t.name.0.to_string(), t.partition_indexes))
                .collect()
        })
    };
}

/// An answer's topics as the response version's topic and partition types.
macro_rules! topics {
    ($topics:expr, $topic:ident, $partition:ident) => {
        $topics
            .into_iter()
            .map(|(name, partitions)| {
                $topic::default()
                    .with_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(p, o, e, m, code)| {
                                $partition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(o)
                                    .with_committed_leader_epoch(e)
                                    .with_metadata(Some(StrBytes::from_string(m)))
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect()
    };
}

pub fn handle(
    offsets: &OffsetsManager,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let answer = answer(
                    offsets,
                    &g.group_id.0,
                    wanted!(g.topics),
                    req.require_stable,
                );
                let mut group = OffsetFetchResponseGroup::default().with_group_id(g.group_id);
                match answer {
                    Ok(topics) => {
                        group.topics = topics!(
                            topics,
                            OffsetFetchResponseTopics,
                            OffsetFetchResponsePartitions
                        );
                    }
                    Err(e) => group.error_code = e.code(),
                }
                group
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    // A group-level error leaves no topics to answer (v0 and v1, which have
    // no group-level error field, answer it with no partitions).
    let (topics, error) = match answer(
        offsets,
        &req.group_id.0,
        wanted!(req.topics),
        req.require_stable,
    ) {
        Ok(topics) => (topics, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    OffsetFetchResponse::default()
        .with_topics(topics!(
            topics,
            OffsetFetchResponseTopic,
            OffsetFetchResponsePartition
        ))
        .with_error_code(error.map_or(0, |e| e.code()))
}

/// `group`'s offsets for `wanted` (every committed one when `None`).
fn answer(
    offsets: &OffsetsManager,
    group: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Answer {
    let keys: Option<Vec<(String, i32)>> = wanted.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |&p| (t.clone(), p)))
            .collect()
    });
    let found: GroupOffsets = offsets.fetch(group, keys.as_deref())?;
    // KIP-447: a consumer that requires stable offsets is told to wait while
    // a transaction's commit of the partition is neither committed nor
    // aborted (UNSTABLE_OFFSET_COMMIT, retriable).
    let unstable = |key: &(String, i32)| {
        require_stable && offsets.has_pending(group, Some(std::slice::from_ref(key)))
    };
    let entry = |key: &(String, i32)| {
        if unstable(key) {
            let code = ResponseError::UnstableOffsetCommit.code();
            return (key.1, -1, -1, String::new(), code);
        }
        match found.get(key) {
            Some(c) => (key.1, c.offset, c.leader_epoch, c.metadata.clone(), 0),
            None => (key.1, -1, -1, String::new(), 0),
        }
    };
    Ok(match wanted {
        Some(topics) => topics
            .into_iter()
            .map(|(t, ps)| {
                let partitions = ps.into_iter().map(|p| entry(&(t.clone(), p))).collect();
                (t, partitions)
            })
            .collect(),
        None => {
            let mut by_topic: Vec<(String, Vec<PartitionAnswer>)> = Vec::new();
            for key in found.keys() {
                match by_topic.last_mut() {
                    Some((t, ps)) if *t == key.0 => ps.push(entry(key)),
                    _ => by_topic.push((key.0.clone(), vec![entry(key)])),
                }
            }
            by_topic
        }
    })
}
