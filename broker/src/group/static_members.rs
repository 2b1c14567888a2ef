//! Static membership (KIP-345, Kafka 2.3): a member that names a group
//! instance id keeps its place in the group across restarts.
//!
//! - A join with no member id and a known instance id replaces the old
//!   member id with a new one (Kafka's `updateStaticMemberAndRebalance`):
//!   the member keeps its assignment and, if it led, the leadership. In a
//!   Stable group whose chosen protocol the new offer does not change, that
//!   is all: the answer is the current generation, with the leader id as it
//!   was before the replacement and no member list, so the rejoined member
//!   never takes itself for the leader and makes an assignment a Stable
//!   group would not hand out (Kafka 2.3–3.1; KIP-814 later changed this
//!   answer). Otherwise (a protocol change, CompletingRebalance, whose
//!   assignment would miss the new id) the group rebalances as for any
//!   rejoin; during PreparingRebalance the join is parked.
//! - A join with no member id and an unknown instance id adds a new member
//!   at once: KIP-394's MEMBER_ID_REQUIRED round trip is for dynamic members
//!   only (Kafka's `requireKnownMemberId` is false with an instance id).
//! - A request naming an instance id held by another member id (the
//!   replaced one) is FENCED_INSTANCE_ID; one naming an instance id no
//!   member holds is UNKNOWN_MEMBER_ID (Kafka's `validateCurrentMember`).
//!   A parked join or sync of the replaced member id is answered
//!   FENCED_INSTANCE_ID at the replacement.
//! - LeaveGroup v3+ may name a member by instance id alone (`sessions.rs`);
//!   a static member's session timeout removes it as any member's does.

use tokio::time::Instant;

use super::api::{GroupState, JoinOutcome, JoinRefusal, Joined};
use super::error::GroupError;
use super::member::generate_member_id;
use super::state::{Group, Offer, Step, refuse};

impl Group {
    /// The member holding `instance_id`, if any.
    pub(super) fn static_member(&self, instance_id: &str) -> Option<usize> {
        self.members
            .iter()
            .position(|m| m.instance_id.as_deref() == Some(instance_id))
    }

    /// Kafka's `validateCurrentMember`: with an instance id, the member
    /// holding it, which must be `member_id` (else FENCED_INSTANCE_ID);
    /// without one, the member `member_id`.
    pub(super) fn current_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<usize, GroupError> {
        match instance_id {
            Some(instance_id) => {
                let index = self
                    .static_member(instance_id)
                    .ok_or(GroupError::UnknownMemberId)?;
                if self.members[index].id != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                Ok(index)
            }
            None => self.index_of(member_id).ok_or(GroupError::UnknownMemberId),
        }
    }

    /// A join with an instance id and no member id.
    pub(super) fn join_static(
        &mut self,
        instance_id: String,
        offer: Offer,
        now: Instant,
    ) -> Step<JoinOutcome> {
        let member_id = generate_member_id(&offer.client_id);
        let Some(index) = self.static_member(&instance_id) else {
            return self.add_member(member_id, Some(instance_id), offer, now);
        };
        let leader_before = self.leader_id.clone().unwrap_or_default();
        self.replace_member_id(index, member_id.clone(), now);
        self.take_offer(index, offer);
        match self.state {
            GroupState::Stable
                if self.protocol_name.as_deref() == Some(&self.select_protocol()) =>
            {
                tracing::info!(group = %self.id, member = %member_id, instance = %instance_id,
                    "static member rejoined; no rebalance");
                let current = self.joined(&member_id);
                Step::Done(Ok(Joined {
                    leader_id: leader_before,
                    members: Vec::new(),
                    ..current
                }))
            }
            GroupState::Stable
            | GroupState::CompletingRebalance
            | GroupState::PreparingRebalance => self.park_rejoin(index, now),
            // A group with a member is neither.
            GroupState::Empty | GroupState::Dead => refuse(GroupError::UnknownMemberId, member_id),
        }
    }

    /// Gives the member at `index` a new member id (Kafka's
    /// `replaceStaticMember`): leadership and an expected sync follow it,
    /// a parked request of the old id is answered FENCED_INSTANCE_ID, and
    /// its session starts again.
    fn replace_member_id(&mut self, index: usize, new_id: String, now: Instant) {
        let member = &mut self.members[index];
        let old_id = std::mem::replace(&mut member.id, new_id.clone());
        if let Some(waiter) = member.join_waiter.take() {
            let _ = waiter.send(Err(JoinRefusal {
                error: GroupError::FencedInstanceId,
                member_id: old_id.clone(),
            }));
        }
        if let Some(waiter) = member.sync_waiter.take() {
            let _ = waiter.send(Err(GroupError::FencedInstanceId));
        }
        member.renew_session(now);
        if self.leader_id.as_deref() == Some(old_id.as_str()) {
            self.leader_id = Some(new_id.clone());
        }
        if self.pending_sync.remove(&old_id) {
            self.pending_sync.insert(new_id.clone());
        }
        tracing::info!(group = %self.id, old = %old_id, new = %new_id, "static member's id replaced");
    }
}
