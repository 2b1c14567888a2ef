//! A consumer's offsets sent to a transaction (KIP-98, KIP-447): the
//! producer's AddOffsetsToTxn to its transaction coordinator (the group's
//! offsets partition joins the transaction, so the transaction's markers end
//! the commit), TxnOffsetCommit to the group's coordinator (the offsets are
//! written as part of the transaction, pending until its commit marker
//! reaches the offsets partition; an abort marker drops them), and the
//! stable OffsetFetch a read_committed consumer resumes with (KIP-447's
//! `require_stable`: answered UNSTABLE_OFFSET_COMMIT while a transaction's
//! offsets for the partition are pending, never the offset from before
//! them). Like the other transactional calls the client keeps no state: the
//! workload (workload/txn_subscribe.rs) decides what to send.
//!
//! Versions: AddOffsetsToTxn v1 (v0's fields; PRODUCER_FENCED, KIP-588,
//! comes from v2 and arrives here as INVALID_PRODUCER_EPOCH, definite either
//! way), TxnOffsetCommit v3 (KIP-447's generation and member id, so the
//! group's coordinator fences a member of an older generation as an
//! OffsetCommit's, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID), OffsetFetch v7
//! (the first with `require_stable`). The reference broker offers
//! AddOffsetsToTxn 0-3, TxnOffsetCommit 0-3 and OffsetFetch 0-8.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, GroupId, OffsetFetchRequest, ProducerId, TransactionalId,
    TxnOffsetCommitRequest,
};

use super::*;

const ADD_OFFSETS_TO_TXN_VERSION: i16 = 1;
const TXN_OFFSET_COMMIT_VERSION: i16 = 3;
const OFFSET_FETCH_STABLE_VERSION: i16 = 7;

/// The member a transaction's offsets are committed as (KIP-447): its
/// generation and member id, checked by the group's coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMember {
    pub generation: i32,
    pub member_id: String,
}

/// One offset sent to a transaction: the next record to consume of
/// `topic`-`partition`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

impl KafkaClient {
    /// AddOffsetsToTxn at the transactional id's coordinator: `group`'s
    /// offsets partition joins the ongoing transaction (beginning it, if this
    /// is its first add).
    pub async fn add_offsets_to_txn(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        group: &str,
        deadline: Duration,
    ) -> Result<(), ClientError> {
        let req = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            )))
            .with_producer_id(ProducerId(producer.producer_id))
            .with_producer_epoch(producer.producer_epoch)
            .with_group_id(group_id(group));
        let resp = self
            .call(&req, ADD_OFFSETS_TO_TXN_VERSION, deadline)
            .await?;
        match resp.error_code {
            0 => Ok(()),
            code => Err(ClientError::broker(code)),
        }
    }

    /// TxnOffsetCommit at `group`'s coordinator: `offsets` written as part of
    /// the producer's transaction, as `member` (or, with `None`, as no member:
    /// generation -1, which the coordinator takes whatever the group's
    /// members). The first partition error as [`ClientError::Broker`].
    pub async fn txn_offset_commit(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        group: &str,
        member: Option<&TxnMember>,
        offsets: &[TxnOffset],
        deadline: Duration,
    ) -> Result<(), ClientError> {
        let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
        for o in offsets {
            let partition = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(o.partition)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(StrBytes::default()));
            match topics.iter_mut().find(|t| t.name.0.as_str() == o.topic) {
                Some(t) => t.partitions.push(partition),
                None => topics.push(
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(topic_name(&o.topic))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            )))
            .with_group_id(group_id(group))
            .with_producer_id(ProducerId(producer.producer_id))
            .with_producer_epoch(producer.producer_epoch)
            .with_generation_id(member.map_or(-1, |m| m.generation))
            .with_member_id(StrBytes::from_string(
                member.map(|m| m.member_id.clone()).unwrap_or_default(),
            ))
            .with_topics(topics);
        let resp = self.call(&req, TXN_OFFSET_COMMIT_VERSION, deadline).await?;
        let code = resp
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .find(|&c| c != 0);
        match code {
            None if resp.topics.is_empty() && !offsets.is_empty() => Err(ClientError::Protocol(
                "TxnOffsetCommit answered no partition".into(),
            )),
            None => Ok(()),
            Some(code) => Err(ClientError::broker(code)),
        }
    }

    /// `group`'s committed offset of `topic`-`partition` (-1: none) as a
    /// read_committed consumer asks for it (KIP-447's `require_stable`): a
    /// partition with a transaction's offsets pending is answered
    /// UNSTABLE_OFFSET_COMMIT (88), as [`ClientError::Broker`]; ask again.
    pub async fn committed_offset_stable(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        deadline: Duration,
    ) -> Result<i64, ClientError> {
        let req = OffsetFetchRequest::default()
            .with_group_id(group_id(group))
            .with_require_stable(true)
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(topic_name(topic))
                    .with_partition_indexes(vec![partition]),
            ]));
        let resp = self
            .call(&req, OFFSET_FETCH_STABLE_VERSION, deadline)
            .await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        let found = resp
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::Protocol("OffsetFetch answered no partition".into()))?;
        if found.error_code != 0 {
            return Err(ClientError::broker(found.error_code));
        }
        Ok(found.committed_offset)
    }
}
