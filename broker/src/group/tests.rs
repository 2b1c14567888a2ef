//! The coordinator as the request handlers use it: real tokio timers and
//! parked requests. The workspace's tokio has no `test-util` (no paused clock),
//! so these use short real timeouts with wide margins; the exact timer
//! arithmetic is pinned with a synthetic clock in `state_tests.rs`.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;

use super::{
    GroupConfig, GroupCoordinator, GroupError, GroupState, HeartbeatParams, JoinOutcome,
    JoinParams, Joined, LeaveParams, LeavingMember, Protocol, SyncParams, partition_for,
};

/// Every wait in these tests is bounded by this.
const AWAIT_MS_MAX: u64 = 10_000;

fn config() -> GroupConfig {
    GroupConfig {
        min_session_timeout_ms: 1,
        max_session_timeout_ms: 600_000,
        initial_rebalance_delay_ms: 100,
        new_member_join_timeout_ms: 60_000,
    }
}

fn join_params(group_id: &str, member_id: &str) -> JoinParams {
    JoinParams {
        group_id: group_id.to_owned(),
        member_id: member_id.to_owned(),
        group_instance_id: None,
        require_known_member_id: false,
        client_id: "consumer-1".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 5_000,
        protocol_type: "consumer".to_owned(),
        protocols: vec![Protocol {
            name: "range".to_owned(),
            metadata: Bytes::from_static(b"subscription"),
        }],
    }
}

fn sync_params(group_id: &str, joined: &Joined, assignments: Vec<(String, Bytes)>) -> SyncParams {
    SyncParams {
        group_id: group_id.to_owned(),
        member_id: joined.member_id.clone(),
        generation_id: joined.generation_id,
        group_instance_id: None,
        protocol_type: Some("consumer".to_owned()),
        protocol_name: Some(joined.protocol_name.clone()),
        assignments,
    }
}

fn heartbeat(c: &GroupCoordinator, group_id: &str, j: &Joined) -> Result<(), GroupError> {
    c.heartbeat(HeartbeatParams {
        group_id: group_id.to_owned(),
        member_id: j.member_id.clone(),
        generation_id: j.generation_id,
        group_instance_id: None,
    })
}

async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_millis(AWAIT_MS_MAX), future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {AWAIT_MS_MAX} ms"))
}

/// Polls `future` once: a request that parks has registered with the group
/// by the time this returns Pending.
async fn poll_once<F: Future>(future: &mut Pin<Box<F>>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// Awaits `probe` returning Some, checking every 10 ms, for at most AWAIT_MS_MAX.
async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(AWAIT_MS_MAX);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {AWAIT_MS_MAX} ms"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn ok(outcome: JoinOutcome) -> Joined {
    outcome.unwrap_or_else(|refusal| panic!("join refused: {refusal:?}"))
}

/// Three members join at once and sync; returns them leader first.
async fn stable_group(c: &GroupCoordinator, group_id: &str) -> Vec<Joined> {
    let (a, b, d) = bounded("three joins", async {
        tokio::join!(
            c.join(join_params(group_id, "")),
            c.join(join_params(group_id, "")),
            c.join(join_params(group_id, ""))
        )
    })
    .await;
    let mut members = vec![ok(a), ok(b), ok(d)];
    members.sort_by_key(|j| j.members.is_empty());
    let assignments = members
        .iter()
        .map(|j| {
            (
                j.member_id.clone(),
                Bytes::from(format!("for {}", j.member_id)),
            )
        })
        .collect();
    bounded(
        "leader sync",
        c.sync(sync_params(group_id, &members[0], assignments)),
    )
    .await
    .unwrap();
    for follower in &members[1..] {
        bounded(
            "follower sync",
            c.sync(sync_params(group_id, follower, vec![])),
        )
        .await
        .unwrap();
    }
    members
}

#[tokio::test]
async fn three_members_join_one_generation_with_one_leader() {
    let c = GroupCoordinator::new(config());
    let members = stable_group(&c, "g").await;
    let leader = &members[0];
    assert_eq!(leader.leader_id, leader.member_id);
    assert_eq!(leader.members.len(), 3, "the leader sees every member");
    for m in &members {
        assert_eq!(
            (m.generation_id, m.leader_id.as_str()),
            (1, leader.leader_id.as_str())
        );
        assert_eq!(
            (m.protocol_type.as_str(), m.protocol_name.as_str()),
            ("consumer", "range")
        );
        assert!(m.member_id.starts_with("consumer-1-"), "{}", m.member_id);
    }
    assert!(members[1..].iter().all(|m| m.members.is_empty()));
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);
}

#[tokio::test]
async fn sync_parks_followers_until_the_leader_hands_out_the_assignment() {
    let c = GroupCoordinator::new(config());
    let (a, b) = bounded("joins", async {
        tokio::join!(c.join(join_params("g", "")), c.join(join_params("g", "")))
    })
    .await;
    let (a, b) = (ok(a), ok(b));
    let (leader, follower) = if a.members.is_empty() { (b, a) } else { (a, b) };
    let mut early = Box::pin(c.sync(sync_params("g", &follower, vec![])));
    assert!(
        poll_once(&mut early).await.is_pending(),
        "the follower waits for the leader"
    );
    // The leader names only itself: a member it left out gets an empty assignment.
    let only_leader = vec![(leader.member_id.clone(), Bytes::from_static(b"p0,p1"))];
    let led = bounded(
        "leader sync",
        c.sync(sync_params("g", &leader, only_leader)),
    )
    .await;
    assert_eq!(led.unwrap().assignment, Bytes::from_static(b"p0,p1"));
    let followed = bounded("parked sync", early).await.unwrap();
    assert_eq!(
        (followed.assignment.len(), followed.protocol_name.as_str()),
        (0, "range")
    );
    let described = c.describe("g").unwrap();
    assert_eq!(
        (described.state, described.protocol_name.as_str()),
        (GroupState::Stable, "range")
    );
    let leader_row = described
        .members
        .iter()
        .find(|m| m.member_id == leader.member_id)
        .unwrap();
    assert_eq!(leader_row.assignment, Bytes::from_static(b"p0,p1"));
    assert_eq!(leader_row.client_host, "/127.0.0.1");
}

#[tokio::test]
async fn session_expiry_rebalances_and_the_others_rejoin_in_a_new_generation() {
    let c = GroupCoordinator::new(config());
    let mut short = join_params("g", "");
    short.session_timeout_ms = 300;
    let (a, b, s) = bounded("joins", async {
        tokio::join!(
            c.join(join_params("g", "")),
            c.join(join_params("g", "")),
            c.join(short)
        )
    })
    .await;
    let (a, b, s) = (ok(a), ok(b), ok(s));
    let leader = [&a, &b, &s]
        .into_iter()
        .find(|j| !j.members.is_empty())
        .unwrap()
        .clone();
    let assignments = vec![(s.member_id.clone(), Bytes::from_static(b"x"))];
    bounded(
        "leader sync",
        c.sync(sync_params("g", &leader, assignments)),
    )
    .await
    .unwrap();
    // The short-session member goes silent; the others see the rebalance.
    eventually("rebalance after the session expired", || {
        (heartbeat(&c, "g", &a) == Err(GroupError::RebalanceInProgress)).then_some(())
    })
    .await;
    let (a2, b2) = bounded("rejoins", async {
        tokio::join!(
            c.join(join_params("g", &a.member_id)),
            c.join(join_params("g", &b.member_id))
        )
    })
    .await;
    let (a2, b2) = (ok(a2), ok(b2));
    assert_eq!((a2.generation_id, b2.generation_id), (2, 2));
    assert_eq!(
        a2.members.len() + b2.members.len(),
        2,
        "the new leader sees two members"
    );
    assert_eq!(heartbeat(&c, "g", &s), Err(GroupError::UnknownMemberId));
    assert_eq!(heartbeat(&c, "g", &a), Err(GroupError::IllegalGeneration));
}

#[tokio::test]
async fn heartbeat_answers_follow_kafka() {
    let c = GroupCoordinator::new(config());
    let members = stable_group(&c, "g").await;
    assert_eq!(heartbeat(&c, "g", &members[1]), Ok(()));
    let mut stale = members[1].clone();
    stale.generation_id = 0;
    assert_eq!(
        heartbeat(&c, "g", &stale),
        Err(GroupError::IllegalGeneration)
    );
    let mut stranger = members[1].clone();
    stranger.member_id = "consumer-1-unknown".to_owned();
    assert_eq!(
        heartbeat(&c, "g", &stranger),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        heartbeat(&c, "other", &members[1]),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        heartbeat(&c, "", &members[1]),
        Err(GroupError::InvalidGroupId)
    );
    // A newcomer's join starts a rebalance: members are told to rejoin.
    let mut newcomer = Box::pin(c.join(join_params("g", "")));
    assert!(poll_once(&mut newcomer).await.is_pending());
    assert_eq!(
        heartbeat(&c, "g", &members[1]),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(
        c.describe("g").unwrap().state,
        GroupState::PreparingRebalance
    );
}

#[tokio::test]
async fn leave_rebalances_and_the_last_leave_empties_the_group() {
    let c = GroupCoordinator::new(config());
    let (a, b) = bounded("joins", async {
        tokio::join!(c.join(join_params("g", "")), c.join(join_params("g", "")))
    })
    .await;
    let (a, b) = (ok(a), ok(b));
    let leaving = |ids: &[&str]| LeaveParams {
        group_id: "g".to_owned(),
        members: ids
            .iter()
            .map(|id| LeavingMember {
                member_id: (*id).to_owned(),
                group_instance_id: None,
            })
            .collect(),
    };
    // LeaveGroup v3+: a batch, answered member by member.
    let left = c
        .leave(leaving(&[&a.member_id, "consumer-1-unknown"]))
        .unwrap();
    assert_eq!(left[0].error, None);
    assert_eq!(left[1].error, Some(GroupError::UnknownMemberId));
    assert_eq!(heartbeat(&c, "g", &b), Err(GroupError::RebalanceInProgress));
    let b2 = ok(bounded("rejoin", c.join(join_params("g", &b.member_id))).await);
    assert_eq!(
        (b2.generation_id, b2.leader_id.as_str()),
        (2, b.member_id.as_str())
    );
    assert_eq!(c.leave(leaving(&[&b.member_id])).unwrap()[0].error, None);
    let described = c.describe("g").unwrap();
    assert_eq!(
        (described.state, described.members.len()),
        (GroupState::Empty, 0)
    );
    let committed = c.validate_commit("g", &b.member_id, None, 3);
    assert_eq!(
        committed,
        Err(GroupError::UnknownMemberId),
        "generation 3 exists, the member not"
    );
    let absent = c.leave(LeaveParams {
        group_id: "nowhere".to_owned(),
        ..leaving(&["x"])
    });
    assert_eq!(absent.unwrap()[0].error, Some(GroupError::UnknownMemberId));
}

#[tokio::test]
async fn first_join_at_v4_is_told_member_id_required_then_joins_with_it() {
    let c = GroupCoordinator::new(config());
    let mut first = join_params("g", "");
    first.require_known_member_id = true;
    let refusal = bounded("first join", c.join(first)).await.unwrap_err();
    assert_eq!(refusal.error, GroupError::MemberIdRequired);
    assert_eq!(refusal.error.code(), 79);
    assert!(refusal.member_id.starts_with("consumer-1-"));
    let joined = ok(bounded("second join", c.join(join_params("g", &refusal.member_id))).await);
    assert_eq!(
        (joined.member_id, joined.generation_id),
        (refusal.member_id, 1)
    );
}

#[tokio::test]
async fn joins_outside_the_rules_are_refused() {
    let c = GroupCoordinator::new(config());
    let mut too_short = join_params("g", "");
    too_short.session_timeout_ms = 0;
    let refusal = c.join(too_short).await.unwrap_err();
    assert_eq!(refusal.error, GroupError::InvalidSessionTimeout);
    let mut too_long = join_params("g", "");
    too_long.session_timeout_ms = 600_001;
    assert_eq!(
        c.join(too_long).await.unwrap_err().error,
        GroupError::InvalidSessionTimeout
    );
    let unknown = c
        .join(join_params("g", "consumer-1-made-up"))
        .await
        .unwrap_err();
    assert_eq!(
        (unknown.error, unknown.member_id.as_str()),
        (GroupError::UnknownMemberId, "consumer-1-made-up")
    );
    assert_eq!(
        c.join(join_params("", "")).await.unwrap_err().error,
        GroupError::InvalidGroupId
    );
    assert!(c.describe("g").is_none(), "refused joins create no group");
}

/// Two members joined (generation 1, CompletingRebalance); returns them
/// leader first.
async fn joined_pair(c: &GroupCoordinator, group_id: &str) -> (Joined, Joined) {
    let (a, b) = bounded("joins", async {
        tokio::join!(
            c.join(join_params(group_id, "")),
            c.join(join_params(group_id, ""))
        )
    })
    .await;
    let (a, b) = (ok(a), ok(b));
    if a.members.is_empty() { (b, a) } else { (a, b) }
}

#[tokio::test]
async fn unload_answers_parked_requests_not_coordinator() {
    let c = GroupCoordinator::new(config());
    let ids: Vec<String> = (0..20).map(|i| format!("group-{i}")).collect();
    let in_partition = |p| {
        ids.iter()
            .filter(move |id| partition_for(id, 2) == p)
            .cloned()
    };
    let ours: Vec<String> = in_partition(0).take(2).collect();
    let elsewhere = in_partition(1).next().unwrap();
    // A join parked in a rebalance that waits for the follower (up to 5 s).
    let (leader, _follower) = joined_pair(&c, &ours[0]).await;
    bounded("sync", c.sync(sync_params(&ours[0], &leader, vec![])))
        .await
        .unwrap();
    let mut parked_join = Box::pin(c.join(join_params(&ours[0], &leader.member_id)));
    assert!(poll_once(&mut parked_join).await.is_pending());
    // A follower's sync parked until its leader syncs.
    let (_leader, follower) = joined_pair(&c, &ours[1]).await;
    let mut parked_sync = Box::pin(c.sync(sync_params(&ours[1], &follower, vec![])));
    assert!(poll_once(&mut parked_sync).await.is_pending());
    assert_eq!(c.validate_commit(&elsewhere, "", None, -1), Ok(()));
    assert_eq!(c.list(&[]).len(), 3);

    assert_eq!(c.unload_partition(0, 2), 2);
    let join_answer = bounded("unloaded join", parked_join).await.unwrap_err();
    assert_eq!(
        (join_answer.error, join_answer.member_id),
        (GroupError::NotCoordinator, leader.member_id)
    );
    let sync_answer = bounded("unloaded sync", parked_sync).await;
    assert_eq!(sync_answer, Err(GroupError::NotCoordinator));
    assert!(c.describe(&ours[0]).is_none() && c.describe(&ours[1]).is_none());
    assert_eq!(
        c.describe(&elsewhere).unwrap().state,
        GroupState::Empty,
        "other partitions stay"
    );
    // Requests after the unload find no group.
    assert_eq!(
        heartbeat(&c, &ours[1], &follower),
        Err(GroupError::UnknownMemberId)
    );
}

#[tokio::test]
async fn validate_commit_follows_kafkas_rules() {
    let c = GroupCoordinator::new(config());
    // No group: a client that assigns itself partitions may commit (and the
    // group appears, Empty); a commit claiming a generation may not.
    assert_eq!(
        c.validate_commit("g", "", None, 5),
        Err(GroupError::IllegalGeneration)
    );
    assert!(c.describe("g").is_none());
    assert_eq!(c.validate_commit("g", "", None, -1), Ok(()));
    assert_eq!(c.describe("g").unwrap().state, GroupState::Empty);

    let (leader, follower) = joined_pair(&c, "g").await;
    // Generation 1 exists but its assignment does not yet.
    assert_eq!(
        c.validate_commit("g", &follower.member_id, None, 1),
        Err(GroupError::RebalanceInProgress)
    );
    bounded("sync", c.sync(sync_params("g", &leader, vec![])))
        .await
        .unwrap();
    assert_eq!(c.validate_commit("g", &follower.member_id, None, 1), Ok(()));
    assert_eq!(
        c.validate_commit("g", &follower.member_id, None, 0),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        c.validate_commit("g", "consumer-1-unknown", None, 1),
        Err(GroupError::UnknownMemberId)
    );
    // With members, a commit from outside the group is refused.
    assert_eq!(
        c.validate_commit("g", "", None, -1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        c.validate_commit("g", &follower.member_id, Some("instance-1"), 1),
        Err(GroupError::UnknownMemberId),
        "an instance id no member holds"
    );
    // While a rebalance is prepared the current generation may still commit.
    let mut rejoin = Box::pin(c.join(join_params("g", &leader.member_id)));
    assert!(poll_once(&mut rejoin).await.is_pending());
    assert_eq!(c.validate_commit("g", &follower.member_id, None, 1), Ok(()));
}

#[tokio::test]
async fn list_filters_by_state_and_delete_takes_only_empty_groups() {
    let c = GroupCoordinator::new(config());
    let (leader, _follower) = joined_pair(&c, "busy").await;
    bounded("sync", c.sync(sync_params("busy", &leader, vec![])))
        .await
        .unwrap();
    assert_eq!(c.validate_commit("idle", "", None, -1), Ok(()));
    let all = c.list(&[]);
    let names: Vec<(&str, GroupState)> =
        all.iter().map(|l| (l.group_id.as_str(), l.state)).collect();
    assert_eq!(
        names,
        [("busy", GroupState::Stable), ("idle", GroupState::Empty)]
    );
    assert_eq!(
        (all[0].protocol_type.as_str(), all[1].protocol_type.as_str()),
        ("consumer", "")
    );
    let stable = c.list(&["stable".to_owned()]);
    assert_eq!(stable.len(), 1, "KIP-518 states match case-insensitively");
    assert_eq!(
        GroupState::from_kafka_name("completingrebalance"),
        Some(GroupState::CompletingRebalance)
    );
    assert_eq!(c.delete_group("busy"), Err(GroupError::NonEmptyGroup));
    assert_eq!(c.delete_group("idle"), Ok(()));
    assert_eq!(c.delete_group("idle"), Err(GroupError::GroupIdNotFound));
    assert!(c.describe("idle").is_none());
}
