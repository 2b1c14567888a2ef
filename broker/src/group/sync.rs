//! The SyncGroup half of a rebalance: after the join, every member asks for
//! its assignment; the leader's request brings all of them. Members that ask
//! first are parked until the leader's arrives, or until the sync window ends
//! (`sessions.rs`), or until a new rebalance cancels the assignment.

use std::collections::HashMap;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::api::{GroupState, SyncOutcome, SyncParams, Synced};
use super::error::GroupError;
use super::state::{Group, Step};

impl Group {
    /// Kafka's `resetAndPropagateAssignmentError`.
    pub(super) fn fail_syncs(&mut self, error: GroupError, now: Instant) {
        for member in &mut self.members {
            member.assignment = Bytes::new();
            if let Some(waiter) = member.sync_waiter.take() {
                let _ = waiter.send(Err(error));
                member.renew_session(now);
            }
        }
    }

    pub(super) fn sync(&mut self, params: SyncParams, now: Instant) -> Step<SyncOutcome> {
        let index =
            match self.current_member(&params.member_id, params.group_instance_id.as_deref()) {
                Ok(index) => index,
                Err(e) => return Step::Done(Err(e)),
            };
        if params.generation_id != self.generation_id {
            return Step::Done(Err(GroupError::IllegalGeneration));
        }
        let type_differs = params
            .protocol_type
            .as_ref()
            .is_some_and(|t| self.protocol_type.as_ref() != Some(t));
        let name_differs = params
            .protocol_name
            .as_ref()
            .is_some_and(|n| self.protocol_name.as_ref() != Some(n));
        if type_differs || name_differs {
            return Step::Done(Err(GroupError::InconsistentGroupProtocol));
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => Step::Done(Err(GroupError::UnknownMemberId)),
            GroupState::PreparingRebalance => Step::Done(Err(GroupError::RebalanceInProgress)),
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(superseded) = self.members[index].sync_waiter.replace(tx) {
                    let _ = superseded.send(Err(GroupError::RebalanceInProgress));
                }
                self.synced(&params.member_id);
                if self.is_leader(&params.member_id) {
                    self.complete_sync(params.assignments, now);
                }
                let answer_by = self
                    .sync_deadline
                    .unwrap_or_else(|| now + self.rebalance_timeout());
                Step::Parked {
                    answer: rx,
                    answer_by,
                }
            }
            GroupState::Stable => {
                self.synced(&params.member_id);
                let member = &mut self.members[index];
                member.renew_session(now);
                Step::Done(Ok(Synced {
                    protocol_type: self.protocol_type.clone().unwrap_or_default(),
                    protocol_name: self.protocol_name.clone().unwrap_or_default(),
                    assignment: member.assignment.clone(),
                }))
            }
        }
    }

    fn synced(&mut self, member_id: &str) {
        self.pending_sync.remove(member_id);
        if self.pending_sync.is_empty() {
            self.sync_deadline = None;
        }
    }

    /// The leader's SyncGroup: store and hand out the assignment.
    fn complete_sync(&mut self, assignments: Vec<(String, Bytes)>, now: Instant) {
        // A member named twice keeps its last entry, as Kafka's `toMap` does.
        let mut by_member: HashMap<String, Bytes> = assignments.into_iter().collect();
        for member in &mut self.members {
            member.assignment = by_member.remove(&member.id).unwrap_or_else(|| {
                tracing::warn!(group = %self.id, member = %member.id, "no assignment from the leader");
                Bytes::new()
            });
        }
        self.state = GroupState::Stable;
        let protocol_type = self.protocol_type.clone().unwrap_or_default();
        let protocol_name = self.protocol_name.clone().unwrap_or_default();
        for member in &mut self.members {
            if let Some(waiter) = member.sync_waiter.take() {
                let _ = waiter.send(Ok(Synced {
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    assignment: member.assignment.clone(),
                }));
                member.renew_session(now);
            }
        }
        tracing::info!(group = %self.id, generation = self.generation_id, "group is stable");
    }
}
