//! What keeps a member in its group and what takes it out: heartbeats and
//! offset commits renew its session; LeaveGroup, a session that runs out, a
//! rebalance it does not rejoin in time (KIP-62) or a sync it never sends
//! (KAFKA-12890) remove it. [`Group::expire`] acts on every deadline that has
//! passed; [`Group::next_deadline`] tells the coordinator's timer when to call it.

use tokio::time::Instant;

use super::api::{GroupState, LeavingMember, MemberLeft};
use super::error::GroupError;
use super::member::Member;
use super::state::{Group, RebalanceTimer};

impl Group {
    pub(super) fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        let index = self.current_member(member_id, instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.members[index].renew_session(now);
                Ok(())
            }
            GroupState::PreparingRebalance => {
                self.members[index].renew_session(now);
                Err(GroupError::RebalanceInProgress)
            }
        }
    }

    pub(super) fn leave(&mut self, leaving: Vec<LeavingMember>, now: Instant) -> Vec<MemberLeft> {
        leaving
            .into_iter()
            .map(|m| {
                let error = self.leave_one(&m, now).err();
                MemberLeft {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    error,
                }
            })
            .collect()
    }

    fn leave_one(&mut self, leaving: &LeavingMember, now: Instant) -> Result<(), GroupError> {
        if let Some(i) = self
            .pending_members
            .iter()
            .position(|p| !leaving.member_id.is_empty() && p.id == leaving.member_id)
        {
            self.pending_members.swap_remove(i);
            if self.state == GroupState::PreparingRebalance {
                self.try_complete_join(now);
            }
            return Ok(());
        }
        // KIP-345: an empty member id names a static member by its instance
        // id alone; a member id that is not the instance's is fenced.
        let index = match leaving.group_instance_id.as_deref() {
            Some(instance_id) if leaving.member_id.is_empty() => self
                .static_member(instance_id)
                .ok_or(GroupError::UnknownMemberId)?,
            instance_id => self.current_member(&leaving.member_id, instance_id)?,
        };
        self.remove_member(index, now, "member left the group");
        Ok(())
    }

    /// Kafka's `validateOffsetCommit` and the state check of `doCommitOffsets`,
    /// for a group that exists. A commit by a member also renews its session.
    pub(super) fn validate_commit(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        // A client that assigns itself partitions (generation -1) may commit
        // while the group has no members.
        if generation_id < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.current_member(member_id, instance_id)?;
            if generation_id != self.generation_id {
                return Err(GroupError::IllegalGeneration);
            }
        } else if self.state != GroupState::Empty {
            // Only members may commit for a group that has members.
            return Err(GroupError::UnknownMemberId);
        }
        match self.state {
            GroupState::Empty => Ok(()),
            // Committing while a rebalance is prepared is allowed: the member
            // learns of the rebalance from its next heartbeat.
            GroupState::Stable | GroupState::PreparingRebalance => {
                if let Some(index) = self.index_of(member_id) {
                    self.members[index].renew_session(now);
                }
                Ok(())
            }
            // It has its new generation but no assignment yet.
            GroupState::CompletingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::Dead => Err(GroupError::CoordinatorNotAvailable),
        }
    }

    /// Acts on every deadline that has passed by `now`. Afterwards no deadline
    /// that already passed is left in place unless acting on it made progress
    /// (a member removed, a window advanced), so the timer never spins.
    pub(super) fn expire(&mut self, now: Instant) {
        let due = |m: &Member| m.session_deadline.is_some_and(|d| d <= now);
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|m| due(m))
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            // Earlier removals may have completed a rebalance that dropped or
            // renewed this member.
            let Some(index) = self.index_of(&id) else {
                continue;
            };
            let member = &mut self.members[index];
            if !due(member) {
                continue;
            }
            if member.excused_from_heartbeat() {
                member.session_deadline = None;
            } else {
                self.remove_member(index, now, "session timed out");
            }
        }
        let pending_before = self.pending_members.len();
        self.pending_members.retain(|p| p.deadline > now);
        if self.pending_members.len() != pending_before
            && self.state == GroupState::PreparingRebalance
        {
            self.try_complete_join(now);
        }
        if self.sync_deadline.is_some_and(|d| d <= now) {
            self.sync_deadline = None;
            if matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            ) && !self.pending_sync.is_empty()
            {
                let late: Vec<String> = self.pending_sync.drain().collect();
                for id in &late {
                    if let Some(index) = self.index_of(id) {
                        self.drop_member(index);
                    }
                }
                tracing::info!(group = %self.id, members = ?late, "members did not sync in time");
                self.prepare_rebalance(now, "members did not sync in time");
            }
        }
        // A loop because the next KIP-134 window may also have passed (a zero
        // delay, or a late wake-up); the flag is cleared on the first round, so
        // the second completes.
        while let Some(timer) = self.rebalance.filter(|t| t.next_wake() <= now) {
            match timer {
                RebalanceTimer::InitialDelay {
                    window_end,
                    hard_end,
                } if self.new_member_added && window_end < hard_end => {
                    self.new_member_added = false;
                    let next = (window_end + self.config.initial_rebalance_delay()).min(hard_end);
                    self.rebalance = Some(RebalanceTimer::InitialDelay {
                        window_end: next,
                        hard_end,
                    });
                }
                RebalanceTimer::InitialDelay { .. } | RebalanceTimer::Join { .. } => {
                    self.complete_join(now)
                }
            }
        }
    }

    /// When [`Group::expire`] next has something to do.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let sessions = self.members.iter().filter_map(|m| m.session_deadline);
        let pending = self.pending_members.iter().map(|p| p.deadline);
        let rebalance = self.rebalance.map(RebalanceTimer::next_wake);
        sessions
            .chain(pending)
            .chain(self.sync_deadline)
            .chain(rebalance)
            .min()
    }
}
