//! TxnOffsetCommit (KIP-98; member fields from v3, KIP-447): a
//! transactional producer commits a group's offsets as part of its
//! transaction, at the group's coordinator. The commit is appended to the
//! group's offsets partition as the producer's transactional batch
//! (`offset_commit::store`) and held pending: the group's offsets change
//! only when the transaction's commit marker reaches that partition (the
//! producer's AddOffsetsToTxn put the partition in the transaction), and
//! an abort marker drops it (`offsets::OffsetsManager::complete_txn`).
//!
//! A partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION and
//! left out of the commit, as OffsetCommit's (`offset_commit::KnownPartitions`).
//! A group this broker does not coordinate is NOT_COORDINATOR (or
//! COORDINATOR_LOAD_IN_PROGRESS). Member fields, when a v3+ request carries
//! them, are checked as an OffsetCommit's are (ILLEGAL_GENERATION,
//! UNKNOWN_MEMBER_ID); without them the commit is taken whatever the
//! group's members, as Kafka takes an older producer's.

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::offset_commit::{self, GroupWrites, KnownPartitions};
use crate::offsets::GroupOffsets;

pub async fn handle(
    writes: &GroupWrites<'_>,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let group = req.group_id.0.to_string();
    let member_fields = version >= 3 && (req.generation_id >= 0 || !req.member_id.is_empty());
    let refused = writes.offsets.standing(&group).error().or_else(|| {
        member_fields
            .then(|| {
                writes
                    .groups
                    .validate_commit(
                        &group,
                        &req.member_id,
                        req.group_instance_id.as_deref(),
                        req.generation_id,
                    )
                    .err()
                    .map(|e| e.response_error())
            })
            .flatten()
    });
    let known = KnownPartitions::now(writes.metadata);
    let named = req.topics.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(move |p| (t.name.0.as_str(), p.partition_index))
    });
    let code = match refused {
        // Nothing to commit: Kafka answers without asking the coordinator.
        _ if !known.any(named) => 0,
        Some(e) => e.code(),
        None => {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let entries: GroupOffsets = req
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
                .filter(|(t, p)| known.has(t.name.0.as_str(), p.partition_index))
                .map(|(t, p)| {
                    let leader_epoch = if version >= 2 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    };
                    let at = (t.name.0.as_str(), p.partition_index);
                    let metadata = p.committed_metadata.as_ref();
                    offset_commit::entry(at, p.committed_offset, leader_epoch, metadata, now_ms)
                })
                .collect();
            let producer = (req.producer_id.0, req.producer_epoch);
            offset_commit::store(writes, &group, entries, now_ms, Some(producer)).await
        }
    };
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(known.code_for(t.name.0.as_str(), p.partition_index, code))
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, ProducerId, TopicName, TransactionalId};
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::server::test_support::TestBroker;

    fn text(s: &str) -> StrBytes {
        StrBytes::from_string(s.to_owned())
    }

    /// Producer 7's transactional commit of offset 5 for each partition
    /// named, without member fields.
    fn request(group: &str, topics: &[(&str, &[i32])]) -> TxnOffsetCommitRequest {
        TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(text("tx")))
            .with_group_id(GroupId(text(group)))
            .with_producer_id(ProducerId(7))
            .with_producer_epoch(0)
            .with_generation_id(-1)
            .with_topics(
                topics
                    .iter()
                    .map(|(name, partitions)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(TopicName(text(name)))
                            .with_partitions(
                                partitions
                                    .iter()
                                    .map(|p| {
                                        TxnOffsetCommitRequestPartition::default()
                                            .with_partition_index(*p)
                                            .with_committed_offset(5)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    }

    fn codes(resp: &TxnOffsetCommitResponse) -> Vec<(String, i32, i16)> {
        resp.topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.name.0.to_string(), p.partition_index, p.error_code))
            })
            .collect()
    }

    /// As OffsetCommit: Kafka's `KafkaApis.handleTxnOffsetCommitRequest`
    /// answers a partition its metadata cache does not hold
    /// UNKNOWN_TOPIC_OR_PARTITION and commits only the others.
    #[tokio::test]
    async fn a_transactional_commit_for_a_partition_the_cluster_does_not_have_is_unknown() {
        const UNKNOWN: i16 = 3;
        let test = TestBroker::leading(&[("t", 1)]).await;
        test.coordinate("g");
        let resp = handle(
            &test.broker.group_writes(),
            request("g", &[("t", &[0, 1]), ("nope", &[0])]),
            3,
        )
        .await;
        assert_eq!(
            codes(&resp),
            [
                ("t".to_owned(), 0, 0),
                ("t".to_owned(), 1, UNKNOWN),
                ("nope".to_owned(), 0, UNKNOWN),
            ]
        );
        let pending = [("t".to_owned(), 0)];
        assert!(test.broker.offsets.has_pending("g", Some(&pending)));
        let unknown = [("t".to_owned(), 1), ("nope".to_owned(), 0)];
        assert!(!test.broker.offsets.has_pending("g", Some(&unknown)));
    }
}
