//! TxnOffsetCommit (KIP-98; member fields from v3, KIP-447): a
//! transactional producer commits a group's offsets as part of its
//! transaction, at the group's coordinator. The commit is appended to the
//! group's offsets partition as the producer's transactional batch
//! (`offset_commit::store`) and held pending: the group's offsets change
//! only when the transaction's commit marker reaches that partition (the
//! producer's AddOffsetsToTxn put the partition in the transaction), and
//! an abort marker drops it (`offsets::OffsetsManager::complete_txn`).
//!
//! A group this broker does not coordinate is NOT_COORDINATOR (or
//! COORDINATOR_LOAD_IN_PROGRESS). Member fields, when a v3+ request carries
//! them, are checked as an OffsetCommit's are (ILLEGAL_GENERATION,
//! UNKNOWN_MEMBER_ID); without them the commit is taken whatever the
//! group's members, as Kafka takes an older producer's.

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::offset_commit;
use crate::offsets::GroupOffsets;
use crate::server::context::Broker;

pub async fn handle(
    broker: &Broker,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let group = req.group_id.0.to_string();
    let member_fields = version >= 3 && (req.generation_id >= 0 || !req.member_id.is_empty());
    let refused = broker.offsets.standing(&group).error().or_else(|| {
        member_fields
            .then(|| {
                broker
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
    let code = match refused {
        Some(e) => e.code(),
        None => {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let entries: GroupOffsets = req
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
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
            offset_commit::store(broker, &group, entries, now_ms, Some(producer)).await
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
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
