//! What the request handlers hand the coordinator and get back: plain structs
//! with no wire version in them, so the state machine is tested without
//! encoding and each handler does its own version mapping.

use bytes::Bytes;

use super::error::GroupError;

/// One protocol a member offers, e.g. the consumer's assignor name and its
/// subscription bytes. Order in a member's list is its preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Debug, Clone)]
pub struct JoinParams {
    pub group_id: String,
    /// Empty on a member's first join.
    pub member_id: String,
    /// JoinGroup v5+: a static member's instance id (KIP-345,
    /// `static_members.rs`).
    pub group_instance_id: Option<String>,
    /// KIP-394: `version >= 4`. A first join then gets MEMBER_ID_REQUIRED and a
    /// member id to join again with, instead of being added at once (a
    /// static member's never does).
    pub require_known_member_id: bool,
    pub client_id: String,
    /// The client's address as Kafka prints it (`InetAddress.toString`, e.g.
    /// "/127.0.0.1"); only echoed by DescribeGroups.
    pub client_host: String,
    pub session_timeout_ms: i32,
    /// KIP-62 (v1+): how long a rebalance waits for this member to rejoin. A v0
    /// request has none; Kafka uses its session timeout for both.
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
}

/// A member as the leader sees it in its JoinGroup answer: its metadata for
/// the chosen protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    /// A static member's instance id (KIP-345).
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A successful JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub member_id: String,
    pub generation_id: i32,
    pub protocol_type: String,
    pub protocol_name: String,
    pub leader_id: String,
    /// Every member with its metadata if this member is the leader; empty for
    /// everyone else.
    pub members: Vec<JoinedMember>,
}

/// A refused JoinGroup. `member_id` is what the response's member id carries:
/// the new id with MEMBER_ID_REQUIRED, "" for a refused first join or a member
/// dropped while parked, otherwise the id the request named. The response's
/// generation is then -1, leader "", protocol name "" (v0–6) or null (v7+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRefusal {
    pub error: GroupError,
    pub member_id: String,
}

pub type JoinOutcome = Result<Joined, JoinRefusal>;

#[derive(Debug, Clone)]
pub struct SyncParams {
    pub group_id: String,
    pub member_id: String,
    pub generation_id: i32,
    pub group_instance_id: Option<String>,
    /// SyncGroup v5+ (KIP-559): checked against the group's when present.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment, member id → bytes; followers send none. A
    /// member missing from it gets an empty assignment, as in Kafka.
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    pub protocol_type: String,
    pub protocol_name: String,
    pub assignment: Bytes,
}

/// On error the response carries an empty assignment and (v5+) null protocol
/// type and name.
pub type SyncOutcome = Result<Synced, GroupError>;

#[derive(Debug, Clone)]
pub struct HeartbeatParams {
    pub group_id: String,
    pub member_id: String,
    pub generation_id: i32,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct LeaveParams {
    pub group_id: String,
    /// One member for LeaveGroup v0–2, a batch from v3 (KIP-345).
    pub members: Vec<LeavingMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// One member's answer in a LeaveGroup v3+ response; for v0–2 the response's
/// only error is its single member's (Kafka's `LeaveGroupResponse` does the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberLeft {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error: Option<GroupError>,
}

/// DescribeGroups' view of one group (Kafka's `GroupSummary`). Protocol name,
/// member metadata and assignments are filled in only while Stable, as Kafka does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// ListGroups' view of one group (Kafka's `GroupOverview`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
}

/// A group's state, by the name DescribeGroups and ListGroups give it; what
/// each state means and how a group moves between them is `state.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub const ALL: [GroupState; 5] = [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
    ];

    /// The name DescribeGroups and ListGroups carry (Kafka's `GroupState.toString`).
    pub fn kafka_name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// An entry of ListGroups v4+'s states filter (KIP-518); Kafka 3.x matches
    /// it case-insensitively.
    pub fn from_kafka_name(name: &str) -> Option<GroupState> {
        GroupState::ALL
            .into_iter()
            .find(|s| s.kafka_name().eq_ignore_ascii_case(name))
    }
}
