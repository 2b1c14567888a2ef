//! Static membership (KIP-345) driven with a synthetic clock: a rejoin that
//! replaces a member id without a rebalance, the fencing of the old id on
//! every request, the cases that do rebalance, and the session timeout that
//! still removes a static member.

use tokio::time::Instant;

use super::api::{GroupState, JoinParams, LeavingMember};
use super::error::GroupError;
use super::state::Group;
use super::state_tests::{
    SESSION_MS, answered, config, done, join_params, joined, ms, parked, sync_params, tick,
};

fn static_join(member_id: &str, instance_id: &str, protocols: &[&str]) -> JoinParams {
    let mut params = join_params(member_id, protocols);
    params.group_instance_id = Some(instance_id.to_owned());
    // KIP-394 asks dynamic members only: a static first join is not refused.
    params.require_known_member_id = true;
    params
}

/// Static members `i0`, `i1` offering `protocols`, Stable in generation 1
/// with assignments `a0`, `a1`, `i0` leading. Returns the group, the member
/// ids and the instant.
fn stable_with(protocols: &[&str]) -> (Group, Vec<String>, Instant) {
    let t0 = Instant::now();
    let mut group = Group::new("g".to_owned(), config());
    let mut waiters: Vec<_> = ["i0", "i1"]
        .iter()
        .map(|i| parked(group.join(static_join("", i, protocols), t0)))
        .collect();
    let t = t0 + ms(6_000);
    tick(&mut group, t0 + ms(3_000));
    tick(&mut group, t);
    let answers: Vec<_> = waiters.iter_mut().map(joined).collect();
    let leaders_view: Vec<_> = answers[0]
        .members
        .iter()
        .map(|m| m.group_instance_id.clone())
        .collect();
    assert_eq!(leaders_view, [Some("i0".to_owned()), Some("i1".to_owned())]);
    let ids: Vec<String> = answers.into_iter().map(|j| j.member_id).collect();
    let assignments = [(ids[0].as_str(), "a0"), (ids[1].as_str(), "a1")];
    let mut synced = parked(group.sync(sync_params(&ids[0], 1, &assignments), t));
    assert!(answered(&mut synced).unwrap().is_ok());
    assert!(done(group.sync(sync_params(&ids[1], 1, &[]), t)).is_ok());
    assert_eq!(group.state(), GroupState::Stable);
    (group, ids, t)
}

fn static_stable_group() -> (Group, Vec<String>, Instant) {
    stable_with(&["range"])
}

#[test]
fn a_restarted_static_member_takes_its_place_back_without_a_rebalance() {
    let (mut group, ids, t) = static_stable_group();
    let rejoined = done(group.join(static_join("", "i1", &["range"]), t)).unwrap();
    assert_ne!(rejoined.member_id, ids[1]);
    assert_eq!(rejoined.generation_id, 1);
    assert_eq!(rejoined.leader_id, ids[0]);
    assert!(rejoined.members.is_empty());
    assert_eq!(group.state(), GroupState::Stable);
    let mut sync = sync_params(&rejoined.member_id, 1, &[]);
    sync.group_instance_id = Some("i1".to_owned());
    let synced = done(group.sync(sync, t)).unwrap();
    assert_eq!(synced.assignment, bytes::Bytes::from("a1"));
    assert_eq!(
        group.heartbeat(&rejoined.member_id, Some("i1"), 1, t),
        Ok(())
    );
    assert_eq!(group.generation_id(), 1);
}

#[test]
fn the_replaced_member_id_is_fenced_on_every_request() {
    let (mut group, ids, t) = static_stable_group();
    let old = ids[1].as_str();
    let new = done(group.join(static_join("", "i1", &["range"]), t))
        .unwrap()
        .member_id;
    let fenced = Err(GroupError::FencedInstanceId);
    assert_eq!(group.heartbeat(old, Some("i1"), 1, t), fenced);
    let refusal = done(group.join(static_join(old, "i1", &["range"]), t)).unwrap_err();
    assert_eq!(refusal.error, GroupError::FencedInstanceId);
    let mut sync = sync_params(old, 1, &[]);
    sync.group_instance_id = Some("i1".to_owned());
    assert_eq!(
        done(group.sync(sync, t)).unwrap_err(),
        GroupError::FencedInstanceId
    );
    assert_eq!(group.validate_commit(old, Some("i1"), 1, t), fenced);
    // Without the instance id the old id is simply unknown.
    assert_eq!(
        group.heartbeat(old, None, 1, t),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        group.heartbeat(old, Some("nobody"), 1, t),
        Err(GroupError::UnknownMemberId)
    );
    let leave = |member_id: &str, instance: &str| LeavingMember {
        member_id: member_id.to_owned(),
        group_instance_id: Some(instance.to_owned()),
    };
    let left = group.leave(vec![leave(old, "i1"), leave("", "nobody")], t);
    assert_eq!(left[0].error, Some(GroupError::FencedInstanceId));
    assert_eq!(left[1].error, Some(GroupError::UnknownMemberId));
    assert_eq!(group.state(), GroupState::Stable);
    // LeaveGroup v3+ by instance id alone removes the member: a rebalance.
    assert_eq!(group.leave(vec![leave("", "i1")], t)[0].error, None);
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    assert!(!group.member_ids().contains(&new));
}

#[test]
fn a_restarted_static_leader_is_answered_the_old_leader_id_and_keeps_leading() {
    let (mut group, ids, t) = static_stable_group();
    let rejoined = done(group.join(static_join("", "i0", &["range"]), t)).unwrap();
    // It must not take itself for the leader of a Stable group.
    assert_eq!(rejoined.leader_id, ids[0]);
    assert_eq!(group.leader_id(), Some(rejoined.member_id.as_str()));
    assert_eq!(group.state(), GroupState::Stable);
}

#[test]
fn a_changed_protocol_or_an_unfinished_generation_rebalances() {
    let (mut group, ids, t) = stable_with(&["range", "roundrobin"]);
    // New metadata for the same chosen protocol: no rebalance (Kafka's
    // check is the protocol the group would choose next).
    let mut same_choice = static_join("", "i1", &["range", "roundrobin"]);
    same_choice.protocols[0].metadata = bytes::Bytes::from("other");
    let i1 = done(group.join(same_choice, t)).unwrap().member_id;
    assert_eq!(group.state(), GroupState::Stable);
    // Offering only roundrobin changes the choice: a rebalance.
    let mut rejoin = parked(group.join(static_join("", "i1", &["roundrobin"]), t));
    assert!(!group.member_ids().contains(&i1));
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    let mut leader = parked(group.join(static_join(&ids[0], "i0", &["range", "roundrobin"]), t));
    let generation = joined(&mut rejoin);
    assert_eq!(generation.generation_id, 2);
    assert_eq!(joined(&mut leader).generation_id, 2);
    assert_eq!(group.state(), GroupState::CompletingRebalance);
    // Replaced while CompletingRebalance: the assignment being made would
    // miss the new id, so the group rebalances, and the old id's parked
    // sync is fenced.
    let mut sync = sync_params(&generation.member_id, 2, &[]);
    sync.group_instance_id = Some("i1".to_owned());
    let mut old_sync = parked(group.sync(sync, t));
    let _again = parked(group.join(static_join("", "i1", &["roundrobin"]), t));
    assert_eq!(
        answered(&mut old_sync).unwrap().unwrap_err(),
        GroupError::FencedInstanceId
    );
    assert_eq!(group.state(), GroupState::PreparingRebalance);
}

#[test]
fn a_static_members_session_timeout_still_removes_it() {
    let (mut group, ids, t) = static_stable_group();
    let session = ms(SESSION_MS as u64);
    assert!(
        group
            .heartbeat(&ids[0], Some("i0"), 1, t + session / 2)
            .is_ok()
    );
    tick(&mut group, t + session);
    assert_eq!(group.member_ids(), vec![ids[0].clone()]);
    assert_eq!(group.state(), GroupState::PreparingRebalance);
}
