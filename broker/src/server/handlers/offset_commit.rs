//! OffsetCommit: a group's consumed positions, appended to the group's
//! partition of the offsets topic ([`crate::offsets`]) and answered once the
//! replicas hold them as `offsets_commit_acks` asks (Kafka's
//! `offsets.commit.required.acks`, -1 by default: every in-sync replica).
//!
//! Before the append: a partition the cluster does not have is
//! UNKNOWN_TOPIC_OR_PARTITION and left out ([`KnownPartitions`]); a group
//! this broker does not coordinate (or is still loading) is
//! NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS), and a commit
//! from a member of an older generation, an unknown member or a group that is
//! rebalancing is refused as Kafka's `validateOffsetCommit` refuses it; a
//! commit with generation -1 and no member id (a consumer that assigns its
//! partitions itself) is taken while the group has no members. After it, the
//! append's errors are mapped as Kafka's GroupMetadataManager maps them: a
//! partition that lost its ISR is COORDINATOR_NOT_AVAILABLE, one that lost
//! its leader NOT_COORDINATOR, and a commit not acknowledged within
//! `offsets.commit.timeout.ms` (5 s) REQUEST_TIMED_OUT — its outcome unknown
//! to the client, as an acks=all produce's.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use crate::group::GroupCoordinator;
use crate::offsets::{self, CommittedOffset, GroupOffsets, OffsetsManager};
use crate::replica::leader::AckStatus;
use crate::replica::manager::ReplicaManager;
use crate::server::metadata_cache::{ClusterView, MetadataCache};

/// Kafka's `offsets.commit.timeout.ms`.
const COMMIT_TIMEOUT: Duration = Duration::from_millis(5000);
/// A fenced leader's wait is looked at again this often.
const ACK_RECHECK: Duration = Duration::from_millis(50);

/// What a group coordinator's writes touch (OffsetCommit, TxnOffsetCommit,
/// DeleteGroups, OffsetDelete): the offsets partitions this broker leads and
/// their logs, the groups' members a commit or a deletion is checked
/// against, and the cluster's partitions a request may name.
pub struct GroupWrites<'a> {
    pub offsets: &'a OffsetsManager,
    pub groups: &'a GroupCoordinator,
    /// Where the offsets partitions' logs are appended to.
    pub replicas: &'a ReplicaManager,
    /// The partitions the cluster has ([`KnownPartitions`]).
    pub metadata: &'a MetadataCache,
    /// The acks an append to an offsets partition waits for (the broker's
    /// `offsets_commit_acks`).
    pub commit_acks: i16,
}

pub async fn handle(
    writes: &GroupWrites<'_>,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group = req.group_id.0.to_string();
    let known = KnownPartitions::now(writes.metadata);
    let named = req.topics.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(move |p| (t.name.0.as_str(), p.partition_index))
    });
    let code = if !known.any(named) {
        // Nothing to commit: Kafka answers without asking the coordinator.
        0
    } else {
        let refused = writes.offsets.standing(&group).error().or_else(|| {
            writes
                .groups
                .validate_commit(
                    &group,
                    &req.member_id,
                    req.group_instance_id.as_deref(),
                    // v0 has no generation: a simple consumer's commit.
                    if version >= 1 {
                        req.generation_id_or_member_epoch
                    } else {
                        -1
                    },
                )
                .err()
                .map(|e| e.response_error())
        });
        match refused {
            Some(e) => e.code(),
            None => commit(writes, &group, &req, version, &known).await,
        }
    };
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(known.code_for(&name, p.partition_index, code))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// The partitions the cluster has, as this broker's metadata cache last
/// heard from the controller. Kafka's `KafkaApis` answers a commit
/// (OffsetCommit and TxnOffsetCommit alike) for a partition its metadata
/// cache does not hold — a topic that does not exist, or an index past the
/// topic's partition count — UNKNOWN_TOPIC_OR_PARTITION, and commits the
/// others (`metadataCache.contains(topicPartition)` in Kafka 2.x;
/// `getPartitionInfo` per partition in 3.x).
pub(super) struct KnownPartitions(ClusterView);

impl KnownPartitions {
    pub(super) fn now(metadata: &MetadataCache) -> Self {
        KnownPartitions(metadata.snapshot())
    }

    pub(super) fn has(&self, topic: &str, partition: i32) -> bool {
        self.0
            .topics
            .get(topic)
            .is_some_and(|ps| ps.contains_key(&partition))
    }

    /// Whether any of `partitions` is known.
    pub(super) fn any<'a>(&self, mut partitions: impl Iterator<Item = (&'a str, i32)>) -> bool {
        partitions.any(|(topic, partition)| self.has(topic, partition))
    }

    /// What a partition is answered: UNKNOWN_TOPIC_OR_PARTITION when the
    /// cluster does not have it, else the commit's `code`.
    pub(super) fn code_for(&self, topic: &str, partition: i32, code: i16) -> i16 {
        if self.has(topic, partition) {
            code
        } else {
            ResponseError::UnknownTopicOrPartition.code()
        }
    }
}

/// Appends the commit and awaits its acknowledgement; the error code every
/// known partition of the request is answered with (0: committed).
async fn commit(
    writes: &GroupWrites<'_>,
    group: &str,
    req: &OffsetCommitRequest,
    version: i16,
    known: &KnownPartitions,
) -> i16 {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let entries = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
        .filter(|(t, p)| known.has(t.name.0.as_str(), p.partition_index))
        .map(|(t, p)| {
            let leader_epoch = if version >= 6 {
                p.committed_leader_epoch
            } else {
                -1
            };
            let at = (t.name.0.as_str(), p.partition_index);
            entry(
                at,
                p.committed_offset,
                leader_epoch,
                p.committed_metadata.as_ref(),
                now_ms,
            )
        })
        .collect();
    store(writes, group, entries, now_ms, None).await
}

/// One partition's commit as the coordinator keeps it.
pub(super) fn entry(
    (topic, partition): (&str, i32),
    offset: i64,
    leader_epoch: i32,
    metadata: Option<&kafka_protocol::protocol::StrBytes>,
    now_ms: i64,
) -> ((String, i32), CommittedOffset) {
    let committed = CommittedOffset {
        offset,
        leader_epoch,
        metadata: metadata.map(|m| m.to_string()).unwrap_or_default(),
        commit_timestamp_ms: now_ms,
    };
    ((topic.to_owned(), partition), committed)
}

/// Appends `entries` as `group`'s commit — `producer`'s transactional one
/// (TxnOffsetCommit) when given — and awaits its acknowledgement; the error
/// code the request's partitions are answered with (0: stored). A plain
/// commit's offsets are the group's at once, a transactional one's when its
/// transaction commits (`offsets::OffsetsManager::complete_txn`).
pub(super) async fn store(
    writes: &GroupWrites<'_>,
    group: &str,
    entries: GroupOffsets,
    now_ms: i64,
    producer: Option<(i64, i16)>,
) -> i16 {
    if entries.is_empty() {
        return 0;
    }
    let batch = match producer {
        None => offsets::commit_batch(group, &entries, now_ms),
        Some(producer) => offsets::txn_commit_batch(group, &entries, now_ms, producer),
    };
    let epoch = match append_to_group(writes, group, batch, producer.is_some()).await {
        Ok(epoch) => epoch,
        Err(code) => return code,
    };
    match producer {
        None => writes.offsets.committed(group, epoch, entries),
        Some((producer_id, _)) => writes
            .offsets
            .txn_committed(group, epoch, producer_id, entries),
    }
    0
}

/// Appends `batch` to `group`'s offsets partition (as the transaction
/// coordinator's when `transactional`) and awaits its acknowledgement as a
/// commit's: the leader epoch it was appended in, or the error code its
/// request is answered with.
pub(super) async fn append_to_group(
    writes: &GroupWrites<'_>,
    group: &str,
    batch: bytes::Bytes,
    transactional: bool,
) -> Result<i32, i16> {
    let Some(epoch) = writes.offsets.leader_epoch(group) else {
        return Err(ResponseError::NotCoordinator.code());
    };
    let tp = writes.offsets.partition_of(group);
    let acks = writes.commit_acks;
    let appended = if transactional {
        writes.replicas.append_as_coordinator(&tp, batch, acks)
    } else {
        writes.replicas.append_as_leader(&tp, batch, acks)
    };
    let ticket = appended.map_err(|e| append_error(e).code())?;
    if acks == -1 {
        let deadline = tokio::time::Instant::now() + COMMIT_TIMEOUT;
        match writes
            .replicas
            .await_ack(&tp, &ticket, deadline, ACK_RECHECK)
            .await
        {
            Some(AckStatus::Committed) => {}
            Some(AckStatus::NotEnoughReplicasAfterAppend) => {
                return Err(ResponseError::CoordinatorNotAvailable.code());
            }
            Some(AckStatus::NotLeader) => return Err(ResponseError::NotCoordinator.code()),
            Some(AckStatus::Fenced) | Some(AckStatus::Pending) | None => {
                return Err(ResponseError::RequestTimedOut.code());
            }
        }
    }
    Ok(epoch)
}

/// An append's error as the committer hears it (Kafka's mapping in
/// GroupMetadataManager.storeOffsets).
fn append_error(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::UnknownTopicOrPartition
        | ResponseError::NotEnoughReplicas
        | ResponseError::NotEnoughReplicasAfterAppend => ResponseError::CoordinatorNotAvailable,
        ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => {
            ResponseError::NotCoordinator
        }
        ResponseError::MessageTooLarge
        | ResponseError::RecordListTooLarge
        | ResponseError::InvalidFetchSize => ResponseError::InvalidCommitOffsetSize,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::server::test_support::TestBroker;

    /// A commit of offset 5 for each partition named, from a consumer that
    /// assigns its partitions itself (generation -1, no member id).
    fn request(group: &str, topics: &[(&str, &[i32])]) -> OffsetCommitRequest {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                topics
                    .iter()
                    .map(|(name, partitions)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                            .with_partitions(
                                partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitRequestPartition::default()
                                            .with_partition_index(*p)
                                            .with_committed_offset(5)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    }

    fn codes(resp: &OffsetCommitResponse) -> Vec<(String, i32, i16)> {
        resp.topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.name.0.to_string(), p.partition_index, p.error_code))
            })
            .collect()
    }

    /// Kafka's `KafkaApis.handleOffsetCommitRequest` answers a partition its
    /// metadata cache does not hold — a topic that does not exist, or a
    /// partition index past the topic's count — UNKNOWN_TOPIC_OR_PARTITION,
    /// and commits the others; with none of them known, the group is not
    /// even looked at.
    #[tokio::test]
    async fn a_commit_for_a_partition_the_cluster_does_not_have_is_unknown_topic_or_partition() {
        const UNKNOWN: i16 = 3;
        let test = TestBroker::leading(&[("t", 2)]).await;
        test.coordinate("g");
        let resp = handle(
            &test.broker.group_writes(),
            request("g", &[("t", &[0, 1, 2]), ("nope", &[0])]),
            8,
        )
        .await;
        assert_eq!(
            codes(&resp),
            [
                ("t".to_owned(), 0, 0),
                ("t".to_owned(), 1, 0),
                ("t".to_owned(), 2, UNKNOWN),
                ("nope".to_owned(), 0, UNKNOWN),
            ]
        );
        let committed = test.broker.offsets.fetch("g", None).unwrap();
        assert_eq!(
            committed.keys().cloned().collect::<Vec<_>>(),
            [("t".to_owned(), 0), ("t".to_owned(), 1)],
            "only the known partitions are committed"
        );

        // A group this broker does not coordinate: unknown partitions are
        // still UNKNOWN_TOPIC_OR_PARTITION, the known one NOT_COORDINATOR.
        assert_eq!(
            test.broker.offsets.standing("elsewhere"),
            offsets::Standing::NotCoordinator
        );
        let resp = handle(
            &test.broker.group_writes(),
            request("elsewhere", &[("t", &[0, 9])]),
            8,
        )
        .await;
        assert_eq!(
            codes(&resp),
            [
                ("t".to_owned(), 0, ResponseError::NotCoordinator.code()),
                ("t".to_owned(), 9, UNKNOWN)
            ]
        );
        let resp = handle(
            &test.broker.group_writes(),
            request("elsewhere", &[("nope", &[0])]),
            8,
        )
        .await;
        assert_eq!(codes(&resp), [("nope".to_owned(), 0, UNKNOWN)]);
    }
}
