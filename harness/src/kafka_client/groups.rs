//! The group calls a consumer that assigns its own partitions makes ([groups]):
//! FindCoordinator for a group, OffsetCommit as a simple consumer (generation
//! -1, no member id: Kafka takes it while the group has no members) and
//! OffsetFetch of one partition. Low versions (FindCoordinator v1,
//! OffsetCommit v2, OffsetFetch v1), which every Kafka since 0.11 and the
//! reference broker accept, and not part of the connect-time version check:
//! a broker without groups closes the connection on them, which the op
//! records as its failure.

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, OffsetCommitRequest, OffsetFetchRequest,
};

use super::*;

const FIND_COORDINATOR_VERSION: i16 = 1;
const OFFSET_COMMIT_VERSION: i16 = 2;
const OFFSET_FETCH_VERSION: i16 = 1;

/// Where a group's coordinator is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

impl KafkaClient {
    /// The coordinator of `group`, as the broker this client is connected to
    /// names it; its error code as [`ClientError::Broker`].
    pub async fn find_coordinator(
        &mut self,
        group: &str,
        deadline: Duration,
    ) -> Result<Coordinator, ClientError> {
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(group.to_owned()))
            .with_key_type(0);
        let resp = self.call(&req, FIND_COORDINATOR_VERSION, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        Ok(Coordinator {
            node_id: resp.node_id.0,
            host: resp.host.to_string(),
            port: resp.port,
        })
    }

    /// Commits `offset` of `topic`-`partition` for `group` as a simple
    /// consumer; the partition's error code as [`ClientError::Broker`].
    pub async fn commit_offset(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        deadline: Duration,
    ) -> Result<(), ClientError> {
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::default())
            .with_retention_time_ms(-1)
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(partition)
                            .with_committed_offset(offset)
                            .with_committed_metadata(Some(StrBytes::default())),
                    ]),
            ]);
        let resp = self.call(&req, OFFSET_COMMIT_VERSION, deadline).await?;
        let code = resp
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition)
            .map(|p| p.error_code)
            .ok_or_else(|| ClientError::Protocol("OffsetCommit answered no partition".into()))?;
        if code != 0 {
            return Err(ClientError::broker(code));
        }
        Ok(())
    }

    /// `group`'s committed offset of `topic`-`partition` (-1: none).
    pub async fn committed_offset(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        deadline: Duration,
    ) -> Result<i64, ClientError> {
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(topic_name(topic))
                    .with_partition_indexes(vec![partition]),
            ]));
        let resp = self.call(&req, OFFSET_FETCH_VERSION, deadline).await?;
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
