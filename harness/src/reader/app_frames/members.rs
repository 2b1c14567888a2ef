//! An application's consumer-group membership: JoinGroup (the member id it
//! joins as, the topics its consumer-protocol subscription names; the
//! answer's generation, member id, protocol, leader and, for the leader, how
//! many members it is to assign) and SyncGroup (the generation and member it
//! syncs as; the answer's assignment, read as the consumer protocol's).
//! A group of another protocol type (Kafka Connect's) keeps its generation
//! and member, with no topics or partitions.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, JoinGroupRequest, JoinGroupResponse,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::Decodable;

use super::wire::{DecodeError, decode_response};

/// The consumer protocol's type name (JoinGroup's `protocol_type`).
const CONSUMER: &str = "consumer";

/// One JoinGroup and, once answered, what the coordinator said.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinGroup {
    pub group: String,
    /// The member id it joins as ("" at a first join).
    pub member: String,
    pub protocol_type: String,
    /// The topics its first protocol's subscription names (consumer
    /// protocol only).
    pub topics: Vec<String>,
    pub answer: Option<Joined>,
}

/// JoinGroup's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Joined {
    pub error_code: i16,
    pub generation: i32,
    pub member: String,
    pub leader: String,
    /// The assignor the group chose (`range`, `cooperative-sticky`, ...).
    pub protocol: Option<String>,
    /// How many members the leader is to assign (0 for a follower).
    pub members: usize,
}

/// One SyncGroup and, once answered, the assignment it handed out.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncGroup {
    pub group: String,
    pub generation: i32,
    pub member: String,
    /// How many members' assignments it carried (the leader's).
    pub assignments: usize,
    /// The protocol type it names (version 5 on).
    pub protocol_type: Option<String>,
    /// (error code, the partitions assigned), once answered.
    pub answer: Option<(i16, Vec<(String, i32)>)>,
}

/// A consumer-protocol message: its version, then its body.
fn unversioned<T: Decodable>(mut bytes: Bytes) -> Result<T, DecodeError> {
    if bytes.remaining() < 2 {
        return Err(DecodeError::Body(anyhow::anyhow!(
            "a consumer-protocol message of {} bytes",
            bytes.len()
        )));
    }
    let version = bytes.get_i16();
    // Later versions only append fields an older reader skips.
    T::decode(&mut bytes, version.clamp(0, 3)).map_err(DecodeError::Body)
}

pub fn join_request(mut frame: Bytes, version: i16) -> Result<JoinGroup, DecodeError> {
    let request = JoinGroupRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    let protocol_type = request.protocol_type.to_string();
    let topics = match request.protocols.first() {
        Some(p) if protocol_type == CONSUMER => {
            unversioned::<ConsumerProtocolSubscription>(p.metadata.clone())?
                .topics
                .iter()
                .map(ToString::to_string)
                .collect()
        }
        _ => Vec::new(),
    };
    Ok(JoinGroup {
        group: request.group_id.0.to_string(),
        member: request.member_id.to_string(),
        protocol_type,
        topics,
        answer: None,
    })
}

pub fn join_answer(join: &mut JoinGroup, version: i16, frame: Bytes) -> Result<(), DecodeError> {
    let response: JoinGroupResponse = decode_response(frame, version)?;
    join.answer = Some(Joined {
        error_code: response.error_code,
        generation: response.generation_id,
        member: response.member_id.to_string(),
        leader: response.leader.to_string(),
        protocol: response.protocol_name.map(|p| p.to_string()),
        members: response.members.len(),
    });
    Ok(())
}

pub fn sync_request(mut frame: Bytes, version: i16) -> Result<SyncGroup, DecodeError> {
    let request = SyncGroupRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    Ok(SyncGroup {
        group: request.group_id.0.to_string(),
        generation: request.generation_id,
        member: request.member_id.to_string(),
        assignments: request.assignments.len(),
        protocol_type: request.protocol_type.map(|t| t.to_string()),
        answer: None,
    })
}

/// SyncGroup's answer. Its assignment is read as the consumer protocol's
/// unless the request or the answer names another protocol type (versions
/// before 5 name none); empty bytes: nothing assigned.
pub fn sync_answer(sync: &mut SyncGroup, version: i16, frame: Bytes) -> Result<(), DecodeError> {
    let response: SyncGroupResponse = decode_response(frame, version)?;
    let consumer = sync
        .protocol_type
        .as_deref()
        .or(response.protocol_type.as_deref())
        .is_none_or(|t| t == CONSUMER);
    let partitions = if consumer && response.error_code == 0 && !response.assignment.is_empty() {
        unversioned::<ConsumerProtocolAssignment>(response.assignment)?
            .assigned_partitions
            .iter()
            .flat_map(|tp| tp.partitions.iter().map(|&p| (tp.topic.0.to_string(), p)))
            .collect()
    } else {
        Vec::new()
    };
    sync.answer = Some((response.error_code, partitions));
    Ok(())
}
