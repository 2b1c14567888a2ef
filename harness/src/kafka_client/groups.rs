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
        self.find_coordinator_of(group, 0, deadline).await
    }

    /// The coordinator of `key` of `key_type` (0 a group; 1 a transactional
    /// id, KIP-98, from FindCoordinator v1).
    pub(super) async fn find_coordinator_of(
        &mut self,
        key: &str,
        key_type: i8,
        deadline: Duration,
    ) -> Result<Coordinator, ClientError> {
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(key.to_owned()))
            .with_key_type(key_type);
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

    /// Commits `offset` of `topic`-`partition` for `group`: as a simple
    /// consumer (generation -1, member id "") or as `member_id` of
    /// `generation` (the coordinator refuses a member of an older
    /// generation, ILLEGAL_GENERATION); the partition's error code as
    /// [`ClientError::Broker`].
    #[allow(clippy::too_many_arguments)]
    pub async fn commit_offset(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        deadline: Duration,
    ) -> Result<(), ClientError> {
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(StrBytes::from_string(member_id.to_owned()))
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

// The membership calls of a subscribed consumer: JoinGroup at the
// connection's version (mod.rs, `JOIN_GROUP_VERSION`).
const SYNC_GROUP_VERSION: i16 = 1;
const HEARTBEAT_VERSION: i16 = 1;
const LEAVE_GROUP_VERSION: i16 = 1;
/// The consumer protocol's encoding of subscriptions and assignments (the
/// bytes inside JoinGroup's metadata and SyncGroup's assignment), version 0:
/// topics and user data only, which every consumer reads.
const CONSUMER_PROTOCOL_VERSION: i16 = 0;

/// What JoinGroup answered a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub generation: i32,
    pub member_id: String,
    pub leader: String,
    /// The leader alone gets every member's subscribed topics.
    pub members: Vec<(String, Vec<String>)>,
}

/// The timeouts a member joins with.
#[derive(Debug, Clone, Copy)]
pub struct MemberTimeouts {
    pub session_ms: i32,
    pub rebalance_ms: i32,
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

/// A consumer-protocol subscription to `topics`, as bytes.
fn subscription(topics: &[String]) -> Result<bytes::Bytes, ClientError> {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    let body = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from_string(t.clone()))
            .collect(),
    );
    versioned(&body)
}

/// A consumer-protocol message prefixed with its version, as the protocol
/// frames it.
fn versioned(body: &impl kafka_protocol::protocol::Encodable) -> Result<bytes::Bytes, ClientError> {
    use bytes::BufMut;
    let mut buf = bytes::BytesMut::new();
    buf.put_i16(CONSUMER_PROTOCOL_VERSION);
    body.encode(&mut buf, CONSUMER_PROTOCOL_VERSION)
        .map_err(|e| ClientError::Protocol(format!("consumer protocol: {e}")))?;
    Ok(buf.freeze())
}

/// Reads a versioned consumer-protocol message (any version the crate
/// reads: a newer member's metadata carries more fields).
fn unversioned<T: kafka_protocol::protocol::Decodable>(
    mut bytes: bytes::Bytes,
    what: &str,
) -> Result<T, ClientError> {
    use bytes::Buf;
    if bytes.remaining() < 2 {
        return Err(ClientError::Protocol(format!(
            "{what}: {} bytes",
            bytes.len()
        )));
    }
    let version = bytes.get_i16();
    T::decode(&mut bytes, version.clamp(0, 3))
        .map_err(|e| ClientError::Protocol(format!("{what} v{version}: {e}")))
}

/// `assignment` (topic → partitions) as consumer-protocol bytes.
pub fn encode_assignment(assignment: &[(String, Vec<i32>)]) -> Result<bytes::Bytes, ClientError> {
    use kafka_protocol::messages::ConsumerProtocolAssignment;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    let body = ConsumerProtocolAssignment::default().with_assigned_partitions(
        assignment
            .iter()
            .map(|(topic, partitions)| {
                TopicPartition::default()
                    .with_topic(topic_name(topic))
                    .with_partitions(partitions.clone())
            })
            .collect(),
    );
    versioned(&body)
}

/// Consumer-protocol assignment bytes as topic → partitions (empty bytes:
/// nothing assigned, as the coordinator sends a member the leader left out).
pub fn decode_assignment(bytes: bytes::Bytes) -> Result<Vec<(String, Vec<i32>)>, ClientError> {
    use kafka_protocol::messages::ConsumerProtocolAssignment;
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let body: ConsumerProtocolAssignment = unversioned(bytes, "assignment")?;
    Ok(body
        .assigned_partitions
        .into_iter()
        .map(|tp| (tp.topic.0.to_string(), tp.partitions))
        .collect())
}

impl KafkaClient {
    /// Joins `group` as `member_id` ("" at a first join) subscribed to
    /// `topics` with the range assignor's name; waits, within `deadline`,
    /// for the coordinator to complete the round. A first join answered
    /// MEMBER_ID_REQUIRED leaves the id it named in `member_id` (the
    /// member's from then on, as the Java consumer keeps it), whatever the
    /// join again with it answers.
    pub async fn join_group(
        &mut self,
        group: &str,
        member_id: &mut String,
        topics: &[String],
        timeouts: MemberTimeouts,
        deadline: Duration,
    ) -> Result<Joined, ClientError> {
        use kafka_protocol::messages::JoinGroupRequest;
        use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
        let req = JoinGroupRequest::default()
            .with_group_id(group_id(group))
            .with_session_timeout_ms(timeouts.session_ms)
            .with_rebalance_timeout_ms(timeouts.rebalance_ms)
            .with_member_id(StrBytes::from_string(member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str("range"))
                    .with_metadata(subscription(topics)?),
            ]);
        let started = std::time::Instant::now();
        let version = self.join_group_version;
        let mut resp = self.call(&req, version, deadline).await?;
        // Below v4 a client does not know the code (KIP-394): it fails.
        if resp.error_code == kafka_protocol::ResponseError::MemberIdRequired.code()
            && member_id.is_empty()
            && version >= 4
        {
            // KIP-394: join again at once with the id the coordinator named,
            // within what is left of the same deadline.
            *member_id = resp.member_id.to_string();
            let again = req.with_member_id(resp.member_id.clone());
            let left = deadline.saturating_sub(started.elapsed());
            resp = self.call(&again, version, left).await?;
        }
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        let mut members = Vec::with_capacity(resp.members.len());
        for m in resp.members {
            use kafka_protocol::messages::ConsumerProtocolSubscription;
            let sub: ConsumerProtocolSubscription = unversioned(m.metadata, "subscription")?;
            members.push((
                m.member_id.to_string(),
                sub.topics.iter().map(|t| t.to_string()).collect(),
            ));
        }
        Ok(Joined {
            generation: resp.generation_id,
            member_id: resp.member_id.to_string(),
            leader: resp.leader.to_string(),
            members,
        })
    }

    /// SyncGroup for `generation`: the leader hands in every member's
    /// assignment, the others none; the answer is this member's.
    pub async fn sync_group(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        assignments: Vec<(String, bytes::Bytes)>,
        deadline: Duration,
    ) -> Result<Vec<(String, Vec<i32>)>, ClientError> {
        use kafka_protocol::messages::SyncGroupRequest;
        use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
        let req = SyncGroupRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_string(member_id.to_owned()))
            .with_assignments(
                assignments
                    .into_iter()
                    .map(|(member, bytes)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(StrBytes::from_string(member))
                            .with_assignment(bytes)
                    })
                    .collect(),
            );
        let resp = self.call(&req, SYNC_GROUP_VERSION, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        decode_assignment(resp.assignment)
    }

    /// A member's heartbeat in `generation`.
    pub async fn heartbeat(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        deadline: Duration,
    ) -> Result<(), ClientError> {
        use kafka_protocol::messages::HeartbeatRequest;
        let req = HeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_string(member_id.to_owned()));
        let resp = self.call(&req, HEARTBEAT_VERSION, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        Ok(())
    }

    /// A member leaving `group` (the end of a run: its partitions go to the
    /// others without a session timeout's wait).
    pub async fn leave_group(
        &mut self,
        group: &str,
        member_id: &str,
        deadline: Duration,
    ) -> Result<(), ClientError> {
        use kafka_protocol::messages::LeaveGroupRequest;
        let req = LeaveGroupRequest::default()
            .with_group_id(group_id(group))
            .with_member_id(StrBytes::from_string(member_id.to_owned()));
        let resp = self.call(&req, LEAVE_GROUP_VERSION, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        Ok(())
    }
}
