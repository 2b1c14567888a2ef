//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups and
//! ListGroups: the classic group protocol's requests, each mapped between its
//! wire versions and the membership state machine ([`crate::group`]).
//!
//! Every request about a group first asks whether this broker coordinates it
//! ([`crate::offsets::OffsetsManager::standing`]): NOT_COORDINATOR sends the
//! client back to FindCoordinator, COORDINATOR_LOAD_IN_PROGRESS makes it
//! retry. While the offsets partition loads Kafka answers a Heartbeat NONE
//! and a SyncGroup REBALANCE_IN_PROGRESS (the member's session is not yet
//! known here), and so does this broker.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse, GroupId, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::group::{
    GroupCoordinator, HeartbeatParams, JoinParams, LeaveParams, LeavingMember, Protocol, SyncParams,
};
use crate::offsets::{OffsetsManager, Standing};

fn text(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

fn owned(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

pub async fn join(
    offsets: &OffsetsManager,
    groups: &GroupCoordinator,
    req: JoinGroupRequest,
    version: i16,
    client_id: &str,
) -> JoinGroupResponse {
    let refused = |code: i16, member_id: StrBytes| {
        let response = JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
            .with_member_id(member_id);
        if version >= 7 {
            response.with_protocol_name(None)
        } else {
            response.with_protocol_name(Some(StrBytes::default()))
        }
    };
    if let Some(e) = offsets.standing(&req.group_id.0).error() {
        return refused(e.code(), req.member_id);
    }
    let params = JoinParams {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        group_instance_id: owned(&req.group_instance_id),
        require_known_member_id: version >= 4,
        client_id: client_id.to_owned(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka waits the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata.clone(),
            })
            .collect(),
    };
    match groups.join(params).await {
        Ok(joined) => JoinGroupResponse::default()
            .with_generation_id(joined.generation_id)
            .with_protocol_type(Some(text(joined.protocol_type)))
            .with_protocol_name(Some(text(joined.protocol_name)))
            .with_leader(text(joined.leader_id))
            .with_member_id(text(joined.member_id))
            .with_members(
                joined
                    .members
                    .into_iter()
                    .map(|m| {
                        // v5+ carries instance ids (KIP-345); an older
                        // leader's answer leaves them out.
                        JoinGroupResponseMember::default()
                            .with_member_id(text(m.member_id))
                            .with_group_instance_id(
                                m.group_instance_id.filter(|_| version >= 5).map(text),
                            )
                            .with_metadata(m.metadata)
                    })
                    .collect(),
            ),
        Err(refusal) => refused(refusal.error.code(), text(refusal.member_id)),
    }
}

pub async fn sync(
    offsets: &OffsetsManager,
    groups: &GroupCoordinator,
    req: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    match offsets.standing(&req.group_id.0) {
        Standing::Ready => {}
        Standing::Loading => {
            return SyncGroupResponse::default()
                .with_error_code(ResponseError::RebalanceInProgress.code());
        }
        Standing::NotCoordinator => {
            return SyncGroupResponse::default()
                .with_error_code(ResponseError::NotCoordinator.code());
        }
    }
    let params = SyncParams {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        generation_id: req.generation_id,
        group_instance_id: owned(&req.group_instance_id),
        protocol_type: owned(&req.protocol_type),
        protocol_name: owned(&req.protocol_name),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    match groups.sync(params).await {
        Ok(synced) => {
            let response = SyncGroupResponse::default().with_assignment(synced.assignment);
            if version >= 5 {
                response
                    .with_protocol_type(Some(text(synced.protocol_type)))
                    .with_protocol_name(Some(text(synced.protocol_name)))
            } else {
                response
            }
        }
        Err(e) => SyncGroupResponse::default()
            .with_error_code(e.code())
            .with_assignment(Bytes::new()),
    }
}

pub fn heartbeat(
    offsets: &OffsetsManager,
    groups: &GroupCoordinator,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    let code = match offsets.standing(&req.group_id.0) {
        Standing::Ready => groups
            .heartbeat(HeartbeatParams {
                group_id: req.group_id.0.to_string(),
                member_id: req.member_id.to_string(),
                generation_id: req.generation_id,
                group_instance_id: owned(&req.group_instance_id),
            })
            .map_or_else(|e| e.code(), |()| 0),
        Standing::Loading => 0,
        Standing::NotCoordinator => ResponseError::NotCoordinator.code(),
    };
    HeartbeatResponse::default().with_error_code(code)
}

pub fn leave(
    offsets: &OffsetsManager,
    groups: &GroupCoordinator,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    if let Some(e) = offsets.standing(&req.group_id.0).error() {
        return LeaveGroupResponse::default().with_error_code(e.code());
    }
    let members = if version >= 3 {
        req.members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: owned(&m.group_instance_id),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: req.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let left = groups.leave(LeaveParams {
        group_id: req.group_id.0.to_string(),
        members,
    });
    match left {
        Err(e) => LeaveGroupResponse::default().with_error_code(e.code()),
        Ok(left) if version < 3 => LeaveGroupResponse::default()
            .with_error_code(left.first().and_then(|m| m.error).map_or(0, |e| e.code())),
        Ok(left) => LeaveGroupResponse::default().with_members(
            left.into_iter()
                .map(|m| {
                    MemberResponse::default()
                        .with_member_id(text(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(text))
                        .with_error_code(m.error.map_or(0, |e| e.code()))
                })
                .collect(),
        ),
    }
}

pub fn describe(
    offsets: &OffsetsManager,
    groups: &GroupCoordinator,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let described = req
        .groups
        .into_iter()
        .map(|group_id| {
            let base = DescribedGroup::default().with_group_id(group_id.clone());
            if let Some(e) = offsets.standing(&group_id.0).error() {
                return base.with_error_code(e.code());
            }
            match groups.describe(&group_id.0) {
                // Kafka describes a group it does not know as Dead, empty.
                None => base.with_group_state(StrBytes::from_static_str("Dead")),
                Some(d) => base
                    .with_group_state(StrBytes::from_static_str(d.state.kafka_name()))
                    .with_protocol_type(text(d.protocol_type))
                    .with_protocol_data(text(d.protocol_name))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(text(m.member_id))
                                    // v4+ carries instance ids (KIP-345).
                                    .with_group_instance_id(
                                        m.group_instance_id.filter(|_| version >= 4).map(text),
                                    )
                                    .with_client_id(text(m.client_id))
                                    .with_client_host(text(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(described)
}

pub fn list(
    offsets: &OffsetsManager,
    groups: &GroupCoordinator,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_string()).collect();
    let listed = groups
        .list(&states)
        .into_iter()
        .filter(|g| offsets.standing(&g.group_id) == Standing::Ready)
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(text(g.group_id)))
                .with_protocol_type(text(g.protocol_type))
                .with_group_state(StrBytes::from_static_str(g.state.kafka_name()))
                .with_group_type(StrBytes::from_static_str("classic"))
        })
        .collect();
    ListGroupsResponse::default().with_groups(listed)
}
