//! The state machine driven with a synthetic clock: every timer rule (KIP-62,
//! KIP-134, KIP-394, KAFKA-7610, KAFKA-12890) checked at the exact instants
//! around its deadline, without sleeping. Each tick also checks that no
//! deadline is left in the past, which is what keeps the timer task from
//! spinning.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::api::{
    GroupState, JoinOutcome, JoinParams, Joined, LeavingMember, Protocol, SyncOutcome, SyncParams,
};
use super::config::GroupConfig;
use super::error::GroupError;
use super::state::{Group, Step};

pub(super) const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 60_000;

pub(super) fn config() -> GroupConfig {
    GroupConfig {
        min_session_timeout_ms: 1,
        max_session_timeout_ms: 1_000_000,
        initial_rebalance_delay_ms: 3_000,
        new_member_join_timeout_ms: 300_000,
    }
}

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(super) fn join_params(member_id: &str, protocols: &[&str]) -> JoinParams {
    JoinParams {
        group_id: "g".to_owned(),
        member_id: member_id.to_owned(),
        group_instance_id: None,
        require_known_member_id: false,
        client_id: "client".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".to_owned(),
        protocols: protocols
            .iter()
            .map(|name| Protocol {
                name: (*name).to_owned(),
                metadata: Bytes::from(format!("{name}-metadata")),
            })
            .collect(),
    }
}

pub(super) fn sync_params(
    member_id: &str,
    generation_id: i32,
    assignments: &[(&str, &str)],
) -> SyncParams {
    SyncParams {
        group_id: "g".to_owned(),
        member_id: member_id.to_owned(),
        generation_id,
        group_instance_id: None,
        protocol_type: None,
        protocol_name: None,
        assignments: assignments
            .iter()
            .map(|(m, a)| ((*m).to_owned(), Bytes::from((*a).to_owned())))
            .collect(),
    }
}

pub(super) fn parked<T: std::fmt::Debug>(step: Step<T>) -> oneshot::Receiver<T> {
    match step {
        Step::Parked { answer, .. } => answer,
        Step::Done(answer) => panic!("expected to park, answered {answer:?}"),
    }
}

pub(super) fn done<T>(step: Step<T>) -> T {
    match step {
        Step::Done(answer) => answer,
        Step::Parked { .. } => panic!("expected an answer, parked"),
    }
}

/// The answer if one was sent.
pub(super) fn answered<T>(rx: &mut oneshot::Receiver<T>) -> Option<T> {
    rx.try_recv().ok()
}

pub(super) fn joined(rx: &mut oneshot::Receiver<JoinOutcome>) -> Joined {
    answered(rx)
        .expect("join not answered")
        .expect("join refused")
}

/// Runs the timers at `now` and checks none is left behind.
pub(super) fn tick(group: &mut Group, now: Instant) {
    group.expire(now);
    if let Some(next) = group.next_deadline() {
        assert!(next > now, "deadline {:?} left in the past", now - next);
    }
}

/// A group of `n` members that joined at t0 and are Stable in generation 1,
/// the first the leader. Returns the group, the ids and the instant reached.
fn stable_group(n: usize) -> (Group, Vec<String>, Instant) {
    let t0 = Instant::now();
    let mut group = Group::new("g".to_owned(), config());
    let mut waiters: Vec<_> = (0..n)
        .map(|_| parked(group.join(join_params("", &["range"]), t0)))
        .collect();
    let t = t0 + ms(6_000);
    tick(&mut group, t0 + ms(3_000));
    tick(&mut group, t);
    let ids: Vec<String> = waiters.iter_mut().map(|w| joined(w).member_id).collect();
    let assignments: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "a")).collect();
    let mut synced = parked(group.sync(sync_params(&ids[0], 1, &assignments), t));
    assert!(answered(&mut synced).unwrap().is_ok());
    for id in &ids[1..] {
        assert!(done(group.sync(sync_params(id, 1, &[]), t)).is_ok());
    }
    assert_eq!(group.state(), GroupState::Stable);
    (group, ids, t)
}

#[test]
fn first_rebalance_waits_the_initial_delay_and_extends_it_while_members_arrive() {
    // KIP-134: a 3 s delay, windows extended while members keep coming, never
    // past the 10 s rebalance timeout of the first member.
    let t0 = Instant::now();
    let mut group = Group::new("g".to_owned(), config());
    let mut p = join_params("", &["range"]);
    p.rebalance_timeout_ms = 10_000;
    let mut a = parked(group.join(p.clone(), t0));
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    assert_eq!(group.next_deadline(), Some(t0 + ms(3_000)));
    let mut others = vec![parked(group.join(p.clone(), t0 + ms(1_000)))];
    tick(&mut group, t0 + ms(2_999));
    tick(&mut group, t0 + ms(3_000));
    assert!(
        answered(&mut a).is_none(),
        "a member arrived: wait another window"
    );
    others.push(parked(group.join(p.clone(), t0 + ms(4_000))));
    tick(&mut group, t0 + ms(6_000));
    others.push(parked(group.join(p.clone(), t0 + ms(9_500))));
    tick(&mut group, t0 + ms(9_000));
    tick(&mut group, t0 + ms(9_999));
    assert!(answered(&mut a).is_none());
    // The rebalance timeout cuts the last window although a member just came.
    tick(&mut group, t0 + ms(10_000));
    let leader = joined(&mut a);
    assert_eq!(leader.generation_id, 1);
    assert_eq!(leader.leader_id, leader.member_id, "the first joiner leads");
    assert_eq!(leader.members.len(), 4);
    assert_eq!(leader.members[1].metadata, Bytes::from("range-metadata"));
    for w in &mut others {
        let follower = joined(w);
        assert_eq!((follower.generation_id, follower.members.len()), (1, 0));
        assert_eq!(follower.leader_id, leader.member_id);
        assert_eq!(follower.protocol_name, "range");
    }
    assert_eq!(group.state(), GroupState::CompletingRebalance);
}

#[test]
fn initial_delay_without_newcomers_completes_after_one_window() {
    let t0 = Instant::now();
    let mut group = Group::new("g".to_owned(), config());
    let mut a = parked(group.join(join_params("", &["range"]), t0));
    tick(&mut group, t0 + ms(2_999));
    assert!(answered(&mut a).is_none(), "KIP-134 never completes early");
    tick(&mut group, t0 + ms(3_000));
    assert_eq!(joined(&mut a).generation_id, 1);
}

#[test]
fn rebalance_completes_as_soon_as_every_member_rejoined() {
    let (mut group, ids, t) = stable_group(2);
    // The leader rejoining a Stable group starts a rebalance (Kafka does so
    // that a consumer leader can react to topic changes).
    let mut leader = parked(group.join(join_params(&ids[0], &["range"]), t));
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    assert_eq!(
        group.heartbeat(&ids[1], None, 1, t + ms(1)),
        Err(GroupError::RebalanceInProgress)
    );
    let mut follower = parked(group.join(join_params(&ids[1], &["range"]), t + ms(2)));
    let (l, f) = (joined(&mut leader), joined(&mut follower));
    assert_eq!((l.generation_id, f.generation_id), (2, 2));
    assert_eq!(l.leader_id, ids[0]);
    assert_eq!(group.state(), GroupState::CompletingRebalance);
}

#[test]
fn unchanged_follower_rejoin_in_stable_is_answered_without_a_rebalance() {
    let (mut group, ids, t) = stable_group(2);
    let answer = done(group.join(join_params(&ids[1], &["range"]), t)).unwrap();
    assert_eq!((answer.generation_id, answer.members.len()), (1, 0));
    assert_eq!(group.state(), GroupState::Stable);
    // New metadata does start one.
    let mut changed = join_params(&ids[1], &["range"]);
    changed.protocols[0].metadata = Bytes::from_static(b"new topics");
    let _parked = parked(group.join(changed, t));
    assert_eq!(group.state(), GroupState::PreparingRebalance);
}

#[test]
fn rebalance_timeout_drops_members_that_did_not_rejoin() {
    // KIP-62: the rebalance waits the largest rebalance timeout, not the
    // session timeout; a member that heartbeats but never rejoins is dropped.
    let (mut group, ids, t) = stable_group(2);
    let mut leader = parked(group.join(join_params(&ids[0], &["range"]), t));
    for s in [9_000, 18_000, 27_000, 36_000, 45_000, 54_000] {
        assert_eq!(
            group.heartbeat(&ids[1], None, 1, t + ms(s)),
            Err(GroupError::RebalanceInProgress)
        );
        tick(&mut group, t + ms(s));
    }
    tick(&mut group, t + ms(59_999));
    assert!(answered(&mut leader).is_none());
    tick(&mut group, t + ms(60_000));
    let l = joined(&mut leader);
    assert_eq!((l.generation_id, l.members.len()), (2, 1));
    assert_eq!(
        group.heartbeat(&ids[1], None, 1, t + ms(60_001)),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn session_expiry_removes_a_silent_member_but_spares_one_parked_in_sync() {
    let t0 = Instant::now();
    let mut group = Group::new("g".to_owned(), config());
    let mut a = parked(group.join(join_params("", &["range"]), t0));
    let mut b = parked(group.join(join_params("", &["range"]), t0));
    tick(&mut group, t0 + ms(3_000));
    tick(&mut group, t0 + ms(6_000));
    let (a_id, b_id) = (joined(&mut a).member_id, joined(&mut b).member_id);
    let t = t0 + ms(6_000);
    // The follower syncs and waits; the leader says nothing at all.
    let mut b_sync = parked(group.sync(sync_params(&b_id, 1, &[]), t));
    tick(&mut group, t + ms(SESSION_MS as u64 - 1));
    assert_eq!(group.member_ids(), vec![a_id.clone(), b_id.clone()]);
    tick(&mut group, t + ms(SESSION_MS as u64));
    assert_eq!(
        group.member_ids(),
        vec![b_id.clone()],
        "only the silent leader goes"
    );
    assert_eq!(group.leader_id(), Some(b_id.as_str()));
    // Its removal starts a rebalance, which cancels the parked sync.
    assert_eq!(
        answered(&mut b_sync),
        Some(Err(GroupError::RebalanceInProgress))
    );
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    let mut b_again = parked(group.join(
        join_params(&b_id, &["range"]),
        t + ms(SESSION_MS as u64 + 1),
    ));
    let b_gen = joined(&mut b_again);
    assert_eq!(
        (b_gen.generation_id, b_gen.leader_id.as_str()),
        (2, b_id.as_str())
    );
}

#[test]
fn new_member_parked_in_its_first_join_is_dropped_after_the_new_member_timeout() {
    // KAFKA-7610: a member without an id cannot heartbeat, so its parked join
    // does not keep it alive past the new-member timeout.
    let mut cfg = config();
    cfg.new_member_join_timeout_ms = 1_000;
    let t0 = Instant::now();
    let mut group = Group::new("g".to_owned(), cfg);
    let mut a = parked(group.join(join_params("", &["range"]), t0));
    tick(&mut group, t0 + ms(999));
    assert!(answered(&mut a).is_none());
    tick(&mut group, t0 + ms(1_000));
    let refusal = answered(&mut a).unwrap().unwrap_err();
    assert_eq!(
        (refusal.error, refusal.member_id.as_str()),
        (GroupError::UnknownMemberId, "")
    );
    tick(&mut group, t0 + ms(3_000));
    assert_eq!(group.state(), GroupState::Empty);
    assert_eq!(
        group.generation_id(),
        1,
        "the empty rebalance still ends a generation"
    );
}

#[test]
fn member_id_required_reserves_an_id_that_holds_the_rebalance_until_used() {
    // KIP-394.
    let (mut group, ids, t) = stable_group(1);
    let mut first = join_params("", &["range"]);
    first.require_known_member_id = true;
    let refusal = done(group.join(first.clone(), t)).unwrap_err();
    assert_eq!(refusal.error, GroupError::MemberIdRequired);
    assert!(refusal.member_id.starts_with("client-"));
    assert_eq!(
        group.state(),
        GroupState::Stable,
        "a reserved id changes nothing yet"
    );
    // The leader rejoins; the rebalance waits for the reserved id too.
    let mut leader = parked(group.join(join_params(&ids[0], &["range"]), t));
    tick(&mut group, t + ms(1_000));
    assert!(answered(&mut leader).is_none());
    let mut newcomer =
        parked(group.join(join_params(&refusal.member_id, &["range"]), t + ms(2_000)));
    assert_eq!(joined(&mut newcomer).member_id, refusal.member_id);
    assert_eq!(joined(&mut leader).members.len(), 2);

    // An id never used is forgotten after the session timeout it was asked with.
    let (mut group, ids, t) = stable_group(1);
    let reserved = done(group.join(first, t)).unwrap_err().member_id;
    let mut leader = parked(group.join(join_params(&ids[0], &["range"]), t));
    tick(&mut group, t + ms(SESSION_MS as u64 - 1));
    assert!(answered(&mut leader).is_none());
    tick(&mut group, t + ms(SESSION_MS as u64));
    assert_eq!(joined(&mut leader).members.len(), 1);
    let late = done(group.join(
        join_params(&reserved, &["range"]),
        t + ms(SESSION_MS as u64 + 1),
    ));
    assert_eq!(late.unwrap_err().error, GroupError::UnknownMemberId);
}

#[test]
fn members_that_never_sync_are_removed_when_the_sync_window_closes() {
    // KAFKA-12890: the sync window is the rebalance timeout from the join's end.
    let t0 = Instant::now();
    let mut group = Group::new("g".to_owned(), config());
    let mut a = parked(group.join(join_params("", &["range"]), t0));
    let mut b = parked(group.join(join_params("", &["range"]), t0));
    tick(&mut group, t0 + ms(3_000));
    tick(&mut group, t0 + ms(6_000));
    let (a_id, b_id) = (joined(&mut a).member_id, joined(&mut b).member_id);
    let t = t0 + ms(6_000);
    let mut a_sync = parked(group.sync(sync_params(&a_id, 1, &[(&a_id, "x"), (&b_id, "y")]), t));
    assert_eq!(
        answered(&mut a_sync).unwrap().unwrap().assignment,
        Bytes::from("x")
    );
    assert_eq!(group.state(), GroupState::Stable);
    // B heartbeats (so its session holds) but never syncs.
    for s in (9_000..REBALANCE_MS as u64).step_by(9_000) {
        assert_eq!(group.heartbeat(&a_id, None, 1, t + ms(s)), Ok(()));
        assert_eq!(group.heartbeat(&b_id, None, 1, t + ms(s)), Ok(()));
        tick(&mut group, t + ms(s));
    }
    tick(&mut group, t + ms(REBALANCE_MS as u64));
    assert_eq!(group.member_ids(), vec![a_id.clone()]);
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    assert_eq!(
        group.heartbeat(&a_id, None, 1, t + ms(REBALANCE_MS as u64 + 1)),
        Err(GroupError::RebalanceInProgress)
    );
}

#[test]
fn protocol_selection_counts_each_members_first_common_choice() {
    let t0 = Instant::now();
    let mut group = Group::new("g".to_owned(), config());
    let mut a = parked(group.join(join_params("", &["range", "roundrobin"]), t0));
    let _b = parked(group.join(join_params("", &["roundrobin", "range"]), t0));
    let _c = parked(group.join(join_params("", &["sticky", "range", "roundrobin"]), t0));
    // Every member supports range and roundrobin; sticky is C's alone. Votes:
    // A range, B roundrobin, C range.
    let no_common = done(group.join(join_params("", &["sticky"]), t0)).unwrap_err();
    assert_eq!(no_common.error, GroupError::InconsistentGroupProtocol);
    let mut other_type = join_params("", &["range"]);
    other_type.protocol_type = "connect".to_owned();
    let refused = done(group.join(other_type, t0)).unwrap_err();
    assert_eq!(refused.error, GroupError::InconsistentGroupProtocol);
    tick(&mut group, t0 + ms(3_000));
    tick(&mut group, t0 + ms(6_000));
    let leader = joined(&mut a);
    assert_eq!(leader.protocol_name, "range");
    assert_eq!(leader.members[1].metadata, Bytes::from("range-metadata"));

    // A tie goes to the longest-standing member's preference.
    let mut group = Group::new("g".to_owned(), config());
    let mut a = parked(group.join(join_params("", &["roundrobin", "range"]), t0));
    let _b = parked(group.join(join_params("", &["range", "roundrobin"]), t0));
    tick(&mut group, t0 + ms(3_000));
    tick(&mut group, t0 + ms(6_000));
    assert_eq!(joined(&mut a).protocol_name, "roundrobin");

    // An empty group takes any offer but an empty one.
    let mut group = Group::new("g".to_owned(), config());
    let refused = done(group.join(join_params("", &[]), t0)).unwrap_err();
    assert_eq!(refused.error, GroupError::InconsistentGroupProtocol);
}

#[test]
fn a_second_join_from_a_parked_member_supersedes_the_first() {
    let (mut group, ids, t) = stable_group(2);
    let mut first = parked(group.join(join_params(&ids[0], &["range"]), t));
    let mut second = parked(group.join(join_params(&ids[0], &["range"]), t + ms(1)));
    let superseded = answered(&mut first).unwrap().unwrap_err();
    assert_eq!(superseded.error, GroupError::RebalanceInProgress);
    let _follower = parked(group.join(join_params(&ids[1], &["range"]), t + ms(2)));
    assert_eq!(joined(&mut second).generation_id, 2);
}

#[test]
fn sync_checks_member_generation_and_protocol_before_state() {
    let (mut group, ids, t) = stable_group(2);
    let unknown = done(group.sync(sync_params("nobody", 1, &[]), t));
    assert_eq!(unknown, Err(GroupError::UnknownMemberId));
    let old = done(group.sync(sync_params(&ids[1], 0, &[]), t));
    assert_eq!(old, Err(GroupError::IllegalGeneration));
    let mut wrong_name = sync_params(&ids[1], 1, &[]);
    wrong_name.protocol_name = Some("roundrobin".to_owned());
    assert_eq!(
        done(group.sync(wrong_name, t)),
        Err(GroupError::InconsistentGroupProtocol)
    );
    let mut statically = sync_params(&ids[1], 1, &[]);
    statically.group_instance_id = Some("instance-1".to_owned());
    assert_eq!(
        done(group.sync(statically, t)),
        Err(GroupError::UnknownMemberId)
    );
    let stable: SyncOutcome = done(group.sync(sync_params(&ids[1], 1, &[]), t));
    assert_eq!(stable.unwrap().assignment, Bytes::from("a"));
    let _rejoin = parked(group.join(join_params(&ids[0], &["range"]), t));
    let preparing = done(group.sync(sync_params(&ids[1], 1, &[]), t));
    assert_eq!(preparing, Err(GroupError::RebalanceInProgress));
}

#[test]
fn leaving_members_rebalance_and_the_last_one_empties_the_group() {
    let (mut group, ids, t) = stable_group(2);
    let leave = |id: &str| LeavingMember {
        member_id: id.to_owned(),
        group_instance_id: None,
    };
    let left = group.leave(vec![leave(&ids[0]), leave("nobody")], t);
    assert_eq!(left[0].error, None);
    assert_eq!(left[1].error, Some(GroupError::UnknownMemberId));
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    assert_eq!(
        group.leader_id(),
        Some(ids[1].as_str()),
        "leadership passes on"
    );
    let mut rejoin = parked(group.join(join_params(&ids[1], &["range"]), t));
    assert_eq!(joined(&mut rejoin).generation_id, 2);
    assert_eq!(group.leave(vec![leave(&ids[1])], t)[0].error, None);
    assert_eq!(group.state(), GroupState::Empty);
    assert_eq!(
        group.generation_id(),
        3,
        "leaving the last member ends a generation"
    );
    assert_eq!(group.next_deadline(), None, "an empty group needs no timer");
}
