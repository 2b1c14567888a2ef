//! Every group this broker coordinates, behind one std mutex, and the timers
//! that drive them. Each call takes the lock, runs the state machine
//! (`state.rs`) with the current instant, re-arms the group's timer and lets
//! go; a request that must wait then awaits its answer channel outside the
//! lock, bounded by the deadline the state machine gave it.
//!
//! Timers: a group with a pending deadline (a session, a rebalance, a KIP-394
//! id, the sync window) has one tokio task that sleeps until the earliest of
//! them, runs `Group::expire` and sleeps again; it ends when the group has no
//! deadline left or leaves the map. The task is told of an earlier deadline
//! through a watch channel; the group's slot owns the only sender, so dropping
//! the slot (unload, delete) ends the task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::api::{
    GroupDescription, GroupListing, GroupState, HeartbeatParams, JoinOutcome, JoinParams,
    JoinRefusal, LeaveParams, MemberLeft, SyncOutcome, SyncParams,
};
use super::config::GroupConfig;
use super::error::GroupError;
use super::partition::partition_for;
use super::state::{Group, Step};

/// How long past its promised deadline a parked request is still waited for.
/// The timer task answers at the deadline; this only turns a bug into a
/// logged, retriable answer instead of a request that never returns.
const PARK_GRACE: Duration = Duration::from_secs(5);

/// The least time between two runs of a group's timer, so that a deadline
/// left in the past by a bug costs a wake-up per millisecond, not a spin.
const TIMER_STEP_MIN: Duration = Duration::from_millis(1);

struct Slot {
    group: Group,
    /// The running timer task's deadline; None when no task runs.
    timer: Option<watch::Sender<Instant>>,
}

struct Inner {
    config: GroupConfig,
    groups: Mutex<HashMap<String, Slot>>,
    /// Where timer tasks run: sync calls (heartbeat, leave) may come from
    /// outside the runtime's context.
    runtime: Handle,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // A panic mid-update leaves at worst one group inconsistent; refusing
        // every group's requests for it would be worse.
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The group coordinator: cheap to clone, all clones share the groups.
#[derive(Clone)]
pub struct GroupCoordinator {
    inner: Arc<Inner>,
}

impl GroupCoordinator {
    /// Must be called from within a tokio runtime, where its timers will run.
    pub fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator {
            inner: Arc::new(Inner {
                config,
                groups: Mutex::new(HashMap::new()),
                runtime: Handle::current(),
            }),
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.inner.config
    }

    /// JoinGroup. Parks until the rebalance completes (at most the group's
    /// rebalance timeout, or the KIP-134 delay chain for a group leaving Empty).
    /// A join naming a group instance id is a static member's (KIP-345,
    /// `static_members.rs`).
    pub async fn join(&self, params: JoinParams) -> JoinOutcome {
        let refuse = |error, member_id: &str| {
            Err(JoinRefusal {
                error,
                member_id: member_id.to_owned(),
            })
        };
        if params.group_id.is_empty() {
            return refuse(GroupError::InvalidGroupId, &params.member_id);
        }
        if !self
            .inner
            .config
            .session_timeout_allowed(params.session_timeout_ms)
        {
            return refuse(GroupError::InvalidSessionTimeout, &params.member_id);
        }
        let step = {
            let mut groups = self.inner.lock();
            let group_id = params.group_id.clone();
            // Only a first join creates a group; an id for a group that is not
            // here is from a group this broker forgot (or never had).
            if !groups.contains_key(&group_id) {
                if !params.member_id.is_empty() {
                    return refuse(GroupError::UnknownMemberId, &params.member_id);
                }
                groups.insert(group_id.clone(), self.new_slot(&group_id));
            }
            self.with_group(&mut groups, &group_id, |group, now| group.join(params, now))
        };
        match step {
            Some(step) => {
                settle(step, "JoinGroup", |error| {
                    Err(JoinRefusal {
                        error,
                        member_id: String::new(),
                    })
                })
                .await
            }
            None => refuse(GroupError::UnknownMemberId, ""),
        }
    }

    /// SyncGroup. A member that syncs before its leader is parked until the
    /// leader's assignment arrives or the sync window (the rebalance timeout,
    /// KAFKA-12890) closes.
    pub async fn sync(&self, params: SyncParams) -> SyncOutcome {
        if params.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let group_id = params.group_id.clone();
        let step = {
            let mut groups = self.inner.lock();
            self.with_group(&mut groups, &group_id, |group, now| group.sync(params, now))
        };
        match step {
            Some(step) => settle(step, "SyncGroup", Err).await,
            None => Err(GroupError::UnknownMemberId),
        }
    }

    /// Heartbeat: renews the member's session; REBALANCE_IN_PROGRESS tells it
    /// to rejoin. Never waits.
    pub fn heartbeat(&self, params: HeartbeatParams) -> Result<(), GroupError> {
        if params.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let mut groups = self.inner.lock();
        self.with_group(&mut groups, &params.group_id, |group, now| {
            group.heartbeat(
                &params.member_id,
                params.group_instance_id.as_deref(),
                params.generation_id,
                now,
            )
        })
        .unwrap_or(Err(GroupError::UnknownMemberId))
    }

    /// LeaveGroup: removes each named member (and KIP-394 ids not yet used)
    /// and starts a rebalance. The outer error is the response's top-level one.
    pub fn leave(&self, params: LeaveParams) -> Result<Vec<MemberLeft>, GroupError> {
        if params.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let mut groups = self.inner.lock();
        let members = params.members;
        let left = self.with_group(&mut groups, &params.group_id, |group, now| {
            group.leave(members.clone(), now)
        });
        Ok(left.unwrap_or_else(|| {
            members
                .into_iter()
                .map(|m| MemberLeft {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    error: Some(GroupError::UnknownMemberId),
                })
                .collect()
        }))
    }

    /// May an OffsetCommit from `member_id` at `generation_id` be written?
    /// Kafka's rules (`validateOffsetCommit`): a commit at a negative
    /// generation with no member id (a client that assigns itself partitions)
    /// is allowed while the group has no members, and creates the group, Empty,
    /// if it is not here; a commit for a group that is not here at a
    /// generation ≥ 0 is ILLEGAL_GENERATION; otherwise the member must be
    /// current (UNKNOWN_MEMBER_ID), at the current generation
    /// (ILLEGAL_GENERATION), and not between its join and its assignment
    /// (REBALANCE_IN_PROGRESS). A valid commit renews the member's session.
    ///
    /// The check and the write are not atomic: a rebalance that lands between
    /// them is as if it came just after the commit, which Kafka allows too (it
    /// accepts commits during PreparingRebalance).
    pub fn validate_commit(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        let mut groups = self.inner.lock();
        if !groups.contains_key(group_id) {
            if generation_id >= 0 {
                return Err(GroupError::IllegalGeneration);
            }
            groups.insert(group_id.to_owned(), self.new_slot(group_id));
        }
        self.with_group(&mut groups, group_id, |group, now| {
            group.validate_commit(member_id, group_instance_id, generation_id, now)
        })
        .unwrap_or(Err(GroupError::CoordinatorNotAvailable))
    }

    /// DescribeGroups: None if the group is not here. Kafka answers that as a
    /// Dead group with empty fields before DescribeGroups v6, and
    /// GROUP_ID_NOT_FOUND from v6.
    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        self.inner
            .lock()
            .get(group_id)
            .map(|slot| slot.group.describe())
    }

    /// ListGroups: every group here, or those in one of `states` (ListGroups
    /// v4+, KIP-518, matched case-insensitively as Kafka 3.x does), sorted by id.
    pub fn list(&self, states: &[String]) -> Vec<GroupListing> {
        let wanted: Vec<&str> = states.iter().map(String::as_str).collect();
        let mut listed: Vec<GroupListing> = self
            .inner
            .lock()
            .values()
            .map(|slot| slot.group.listing())
            .filter(|l| {
                wanted.is_empty()
                    || wanted
                        .iter()
                        .any(|w| w.eq_ignore_ascii_case(l.state.kafka_name()))
            })
            .collect();
        listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        listed
    }

    /// DeleteGroups for one group: only an Empty group may go (NON_EMPTY_GROUP
    /// otherwise, GROUP_ID_NOT_FOUND if it is not here). Its offsets are the
    /// caller's to delete.
    pub fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        let mut groups = self.inner.lock();
        match groups.get(group_id).map(|slot| slot.group.state()) {
            None => Err(GroupError::GroupIdNotFound),
            Some(GroupState::Empty) => {
                groups.remove(group_id);
                Ok(())
            }
            Some(_) => Err(GroupError::NonEmptyGroup),
        }
    }

    /// OffsetDelete's view of a group (KIP-496): its state, protocol type
    /// and each member's metadata for its protocol; None if it is not here.
    pub fn members_metadata(&self, group_id: &str) -> Option<(GroupState, String, Vec<Bytes>)> {
        self.inner.lock().get(group_id).map(|slot| {
            let d = slot.group.describe();
            (d.state, d.protocol_type, slot.group.member_metadata())
        })
    }

    /// This broker stops coordinating offsets partition `partition_index` of
    /// `n_partitions`: its groups are forgotten, and their parked joins and
    /// syncs answered NOT_COORDINATOR. Returns how many groups went.
    ///
    /// A request already past the caller's coordinator check when this runs
    /// may still create a group of this partition afterwards; a handler that
    /// cares re-checks ownership after the call.
    pub fn unload_partition(&self, partition_index: u32, n_partitions: u32) -> usize {
        let mut groups = self.inner.lock();
        let unloaded: Vec<String> = groups
            .keys()
            .filter(|id| partition_for(id, n_partitions) == partition_index)
            .cloned()
            .collect();
        for id in &unloaded {
            if let Some(mut slot) = groups.remove(id) {
                slot.group.unload();
            }
        }
        unloaded.len()
    }

    fn new_slot(&self, group_id: &str) -> Slot {
        Slot {
            group: Group::new(group_id.to_owned(), self.inner.config),
            timer: None,
        }
    }

    /// Runs `f` on the group, then makes sure its timer will wake by the
    /// group's next deadline. None if the group is not here.
    fn with_group<T>(
        &self,
        groups: &mut HashMap<String, Slot>,
        group_id: &str,
        f: impl FnOnce(&mut Group, Instant) -> T,
    ) -> Option<T> {
        let slot = groups.get_mut(group_id)?;
        let out = f(&mut slot.group, Instant::now());
        self.rearm(group_id, slot);
        Some(out)
    }

    fn rearm(&self, group_id: &str, slot: &mut Slot) {
        let Some(deadline) = slot.group.next_deadline() else {
            // A running task finds nothing to do when it wakes and ends.
            return;
        };
        match &slot.timer {
            Some(timer) => {
                timer.send_if_modified(|current| {
                    let earlier = deadline < *current;
                    if earlier {
                        *current = deadline;
                    }
                    earlier
                });
            }
            None => {
                let (timer, deadline_rx) = watch::channel(deadline);
                slot.timer = Some(timer);
                let inner = Arc::downgrade(&self.inner);
                self.inner
                    .runtime
                    .spawn(run_timer(inner, group_id.to_owned(), deadline_rx));
            }
        }
    }
}

/// One group's timer task.
async fn run_timer(
    inner: Weak<Inner>,
    group_id: String,
    mut deadline_rx: watch::Receiver<Instant>,
) {
    let mut last_run: Option<Instant> = None;
    loop {
        let deadline = *deadline_rx.borrow_and_update();
        let wake = last_run.map_or(deadline, |last| deadline.max(last + TIMER_STEP_MIN));
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            changed = deadline_rx.changed() => {
                if changed.is_err() {
                    return; // the group left the map
                }
                continue;
            }
        }
        let Some(inner) = inner.upgrade() else { return };
        let mut groups = inner.lock();
        // The sender is gone if the group was unloaded or deleted meanwhile,
        // even if a new group of the same id has taken its place.
        if deadline_rx.has_changed().is_err() {
            return;
        }
        let Some(slot) = groups.get_mut(&group_id) else {
            return;
        };
        let now = Instant::now();
        last_run = Some(now);
        slot.group.expire(now);
        match (slot.group.next_deadline(), &slot.timer) {
            (Some(next), Some(timer)) => {
                timer.send_replace(next);
            }
            _ => {
                slot.timer = None;
                return;
            }
        }
    }
}

/// The answer to a request: at once, or when its parked channel delivers.
async fn settle<T>(step: Step<T>, api: &'static str, fail: impl FnOnce(GroupError) -> T) -> T {
    let (answer, answer_by) = match step {
        Step::Done(answer) => return answer,
        Step::Parked { answer, answer_by } => (answer, answer_by),
    };
    match tokio::time::timeout_at(answer_by + PARK_GRACE, answer).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(oneshot::error::RecvError { .. })) => {
            // The coordinator itself was dropped with the request parked.
            tracing::warn!(api, "parked request lost its answer");
            fail(GroupError::CoordinatorNotAvailable)
        }
        Err(_) => {
            tracing::error!(api, "parked request not answered by its deadline");
            fail(GroupError::RebalanceInProgress)
        }
    }
}
