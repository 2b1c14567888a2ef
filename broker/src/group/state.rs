//! One group's membership state machine (Kafka's `GroupMetadata` with the
//! parts of `GroupCoordinator` that act on it), as a pure function of the
//! requests and of `now`: it never sleeps, spawns or locks. It answers parked
//! requests by sending on their channels, and tells its owner the next instant
//! at which [`Group::expire`] has something to do.
//!
//! States, as Kafka names them:
//! - Empty: no members (new, or every member left). A join starts a rebalance.
//! - PreparingRebalance: joins are parked until every known member has rejoined
//!   or the rebalance timeout passes (KIP-62); heartbeats are answered
//!   REBALANCE_IN_PROGRESS so that members rejoin.
//! - CompletingRebalance: a new generation exists; syncs are parked until the
//!   leader's SyncGroup brings the assignment.
//! - Stable: every sync is answered with the member's assignment.
//! - Dead: unloaded; only ever seen by requests that raced the unload.

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::api::{
    GroupDescription, GroupListing, GroupState, JoinOutcome, JoinParams, JoinRefusal, Joined,
    JoinedMember, MemberDescription, Protocol,
};
use super::config::{GroupConfig, millis};
use super::error::GroupError;
use super::member::{Member, dedup_protocols, generate_member_id};

/// A KIP-394 member id handed out with MEMBER_ID_REQUIRED, not yet used.
pub(super) struct PendingMember {
    pub(super) id: String,
    /// It is forgotten after its session timeout, so ids of clients that never
    /// come back do not pile up (and do not hold up a rebalance forever).
    pub(super) deadline: Instant,
}

/// What ends the current PreparingRebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RebalanceTimer {
    /// KIP-134: the first rebalance out of Empty waits the configured delay and
    /// never completes early; when the window ends and a member arrived during
    /// it, another window starts, cut at `hard_end` = start + max(delay, the
    /// rebalance timeout). That is the arithmetic of Kafka's chained
    /// `InitialDelayedJoin`, stated as an end time.
    InitialDelay {
        window_end: Instant,
        hard_end: Instant,
    },
    /// KIP-62: completes as soon as every member has rejoined and no KIP-394
    /// id is outstanding, or at the deadline (the largest rebalance timeout of
    /// the members), dropping those that did not rejoin.
    Join { deadline: Instant },
}

impl RebalanceTimer {
    pub(super) fn next_wake(self) -> Instant {
        match self {
            RebalanceTimer::InitialDelay { window_end, .. } => window_end,
            RebalanceTimer::Join { deadline } => deadline,
        }
    }

    /// The latest instant at which this rebalance completes.
    fn completes_by(self) -> Instant {
        match self {
            RebalanceTimer::InitialDelay { hard_end, .. } => hard_end,
            RebalanceTimer::Join { deadline } => deadline,
        }
    }
}

/// A request answered at once, or parked with the instant by which the state
/// machine promises to have answered it.
pub(super) enum Step<T> {
    Done(T),
    Parked {
        answer: oneshot::Receiver<T>,
        answer_by: Instant,
    },
}

/// A member's join, as far as the member record needs it.
pub(super) struct Offer {
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    pub(super) protocol_type: String,
    pub(super) protocols: Vec<Protocol>,
}

/// One group. Its fields are open to `sync.rs` and `sessions.rs`, which
/// implement the rest of its methods; nothing outside this folder sees them.
pub(super) struct Group {
    pub(super) id: String,
    pub(super) config: GroupConfig,
    pub(super) state: GroupState,
    pub(super) generation_id: i32,
    /// Set by the first member to join an empty group; kept while Empty so the
    /// group still lists it.
    pub(super) protocol_type: Option<String>,
    /// The chosen protocol; None while Empty.
    pub(super) protocol_name: Option<String>,
    pub(super) leader_id: Option<String>,
    /// In join order, which decides the leader and breaks ties.
    pub(super) members: Vec<Member>,
    pub(super) pending_members: Vec<PendingMember>,
    /// KAFKA-12890: members that have not sent SyncGroup since the join
    /// completed; at `sync_deadline` they are dropped and the group rebalances.
    pub(super) pending_sync: HashSet<String>,
    pub(super) sync_deadline: Option<Instant>,
    pub(super) rebalance: Option<RebalanceTimer>,
    /// A member joined during the current KIP-134 delay window.
    pub(super) new_member_added: bool,
}

pub(super) fn refuse(error: GroupError, member_id: String) -> Step<JoinOutcome> {
    Step::Done(Err(JoinRefusal { error, member_id }))
}

impl Group {
    pub(super) fn new(id: String, config: GroupConfig) -> Group {
        Group {
            id,
            config,
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: Vec::new(),
            pending_members: Vec::new(),
            pending_sync: HashSet::new(),
            sync_deadline: None,
            rebalance: None,
            new_member_added: false,
        }
    }

    pub(super) fn state(&self) -> GroupState {
        self.state
    }

    #[cfg(test)]
    pub(super) fn generation_id(&self) -> i32 {
        self.generation_id
    }

    #[cfg(test)]
    pub(super) fn leader_id(&self) -> Option<&str> {
        self.leader_id.as_deref()
    }

    #[cfg(test)]
    pub(super) fn member_ids(&self) -> Vec<String> {
        self.members.iter().map(|m| m.id.clone()).collect()
    }

    pub(super) fn index_of(&self, member_id: &str) -> Option<usize> {
        self.members.iter().position(|m| m.id == member_id)
    }

    pub(super) fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    /// The group's rebalance timeout: the largest of its members'.
    pub(super) fn rebalance_timeout(&self) -> Duration {
        self.members
            .iter()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Kafka's `supportsProtocols`: an empty group takes any non-empty offer;
    /// otherwise the type must be the group's and one of the offered protocols
    /// must be supported by every member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|p| self.members.iter().all(|m| m.supports(&p.name)))
    }

    /// The members' vote (Kafka's `selectProtocol`): among the protocols every
    /// member supports, each member votes for the one it lists first, and the
    /// most votes win. Kafka breaks a tie by hash-map order; here the longest-
    /// standing member's preference breaks it, so the choice is reproducible.
    pub(super) fn select_protocol(&self) -> String {
        let Some(first) = self.members.first() else {
            return String::new();
        };
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.members.iter().all(|m| m.supports(name)))
            .collect();
        let mut votes: Vec<(&str, usize)> = candidates.iter().map(|c| (*c, 0)).collect();
        for choice in self.members.iter().filter_map(|m| m.vote(&candidates)) {
            if let Some(tally) = votes.iter_mut().find(|(c, _)| *c == choice) {
                tally.1 += 1;
            }
        }
        let winner = votes
            .iter()
            .fold(None, |best: Option<(&str, usize)>, &(c, n)| match best {
                Some((_, most)) if most >= n => best,
                _ => Some((c, n)),
            });
        match winner {
            Some((name, _)) => name.to_owned(),
            None => {
                // Unreachable: joins are refused unless they share a protocol
                // with every member, and a member only ever leaves.
                tracing::error!(group = %self.id, "no protocol common to every member");
                first
                    .protocols
                    .first()
                    .map(|p| p.name.clone())
                    .unwrap_or_default()
            }
        }
    }

    /// The JoinGroup answer for `member_id` in the current generation.
    pub(super) fn joined(&self, member_id: &str) -> Joined {
        let protocol_name = self.protocol_name.clone().unwrap_or_default();
        let members = if self.is_leader(member_id) {
            self.members
                .iter()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    metadata: m.metadata(&protocol_name),
                })
                .collect()
        } else {
            Vec::new()
        };
        Joined {
            member_id: member_id.to_owned(),
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_name,
            leader_id: self.leader_id.clone().unwrap_or_default(),
            members,
        }
    }

    /// JoinGroup, after the coordinator checked the group id, the session
    /// timeout and that the group exists (or may be created).
    pub(super) fn join(&mut self, params: JoinParams, now: Instant) -> Step<JoinOutcome> {
        let offer = Offer {
            client_id: params.client_id,
            client_host: params.client_host,
            session_timeout: millis(params.session_timeout_ms),
            rebalance_timeout: millis(params.rebalance_timeout_ms),
            protocol_type: params.protocol_type,
            protocols: dedup_protocols(params.protocols),
        };
        if !self.supports_protocols(&offer.protocol_type, &offer.protocols) {
            return refuse(GroupError::InconsistentGroupProtocol, params.member_id);
        }
        if params.member_id.is_empty()
            && let Some(instance_id) = params.group_instance_id.clone()
        {
            return self.join_static(instance_id, offer, now);
        }
        if params.member_id.is_empty() {
            let member_id = generate_member_id(&offer.client_id);
            if params.require_known_member_id {
                // KIP-394: the id is only reserved; the member joins with it
                // on its next request.
                self.pending_members.push(PendingMember {
                    id: member_id.clone(),
                    deadline: now + offer.session_timeout,
                });
                return refuse(GroupError::MemberIdRequired, member_id);
            }
            return self.add_member(member_id, None, offer, now);
        }
        if let Some(i) = self
            .pending_members
            .iter()
            .position(|p| p.id == params.member_id && params.group_instance_id.is_none())
        {
            self.pending_members.swap_remove(i);
            return self.add_member(params.member_id, None, offer, now);
        }
        // KIP-345: an instance id held by another member id is fenced.
        let index =
            match self.current_member(&params.member_id, params.group_instance_id.as_deref()) {
                Ok(index) => index,
                Err(error) => return refuse(error, params.member_id),
            };
        let unchanged = self.members[index].protocols == offer.protocols;
        let leader = self.is_leader(&params.member_id);
        match self.state {
            GroupState::PreparingRebalance => self.update_member(index, offer, now),
            // Same metadata: most likely it missed the answer; resend it.
            GroupState::CompletingRebalance if unchanged => {
                Step::Done(Ok(self.joined(&params.member_id)))
            }
            // A follower with nothing new just learns the current generation.
            // The leader rejoining asks for a rebalance: that is how a consumer
            // leader reacts to topic metadata changes its members' metadata
            // does not show.
            GroupState::Stable if unchanged && !leader => {
                Step::Done(Ok(self.joined(&params.member_id)))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.update_member(index, offer, now)
            }
            GroupState::Empty | GroupState::Dead => {
                refuse(GroupError::UnknownMemberId, params.member_id)
            }
        }
    }

    pub(super) fn add_member(
        &mut self,
        id: String,
        instance_id: Option<String>,
        offer: Offer,
        now: Instant,
    ) -> Step<JoinOutcome> {
        let (tx, rx) = oneshot::channel();
        if self.state == GroupState::PreparingRebalance && self.generation_id == 0 {
            self.new_member_added = true;
        }
        if self.members.is_empty() {
            self.protocol_type = Some(offer.protocol_type);
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(id.clone());
        }
        tracing::info!(group = %self.id, member = %id, instance = ?instance_id, "new member joins");
        self.members.push(Member {
            id,
            instance_id,
            client_id: offer.client_id,
            client_host: offer.client_host,
            session_timeout: offer.session_timeout,
            rebalance_timeout: offer.rebalance_timeout,
            protocols: offer.protocols,
            assignment: Bytes::new(),
            join_waiter: Some(tx),
            sync_waiter: None,
            is_new: true,
            session_deadline: Some(now + self.config.new_member_join_timeout()),
        });
        self.maybe_prepare_rebalance(now, "a new member joined");
        self.parked_join(rx, now)
    }

    fn update_member(&mut self, index: usize, offer: Offer, now: Instant) -> Step<JoinOutcome> {
        self.take_offer(index, offer);
        self.park_rejoin(index, now)
    }

    /// A known member's new protocols and timeouts.
    pub(super) fn take_offer(&mut self, index: usize, offer: Offer) {
        let member = &mut self.members[index];
        member.protocols = offer.protocols;
        member.session_timeout = offer.session_timeout;
        member.rebalance_timeout = offer.rebalance_timeout;
    }

    /// A known member's join parked, with a rebalance if none is on.
    pub(super) fn park_rejoin(&mut self, index: usize, now: Instant) -> Step<JoinOutcome> {
        let (tx, rx) = oneshot::channel();
        let member = &mut self.members[index];
        if let Some(superseded) = member.join_waiter.replace(tx) {
            // Kafka drops the earlier request unanswered; answering it keeps
            // every wait bounded, with an error the client retries at once.
            let _ = superseded.send(Err(JoinRefusal {
                error: GroupError::RebalanceInProgress,
                member_id: member.id.clone(),
            }));
        }
        self.maybe_prepare_rebalance(now, "a member rejoined");
        self.parked_join(rx, now)
    }

    fn parked_join(
        &mut self,
        answer: oneshot::Receiver<JoinOutcome>,
        now: Instant,
    ) -> Step<JoinOutcome> {
        self.try_complete_join(now);
        let answer_by = self.rebalance.map_or(now, RebalanceTimer::completes_by);
        Step::Parked { answer, answer_by }
    }

    pub(super) fn maybe_prepare_rebalance(&mut self, now: Instant, reason: &str) {
        if matches!(
            self.state,
            GroupState::Empty | GroupState::Stable | GroupState::CompletingRebalance
        ) {
            self.prepare_rebalance(now, reason);
        }
    }

    pub(super) fn prepare_rebalance(&mut self, now: Instant, reason: &str) {
        if self.state == GroupState::CompletingRebalance {
            // The assignment being made is for a membership that is gone.
            self.fail_syncs(GroupError::RebalanceInProgress, now);
        }
        self.pending_sync.clear();
        self.sync_deadline = None;
        let rebalance_timeout = self.rebalance_timeout();
        self.rebalance = Some(if self.state == GroupState::Empty {
            let delay = self.config.initial_rebalance_delay();
            RebalanceTimer::InitialDelay {
                window_end: now + delay,
                hard_end: now + delay.max(rebalance_timeout),
            }
        } else {
            RebalanceTimer::Join {
                deadline: now + rebalance_timeout,
            }
        });
        tracing::info!(group = %self.id, generation = self.generation_id,
            from = self.state.kafka_name(), reason, "preparing to rebalance");
        self.state = GroupState::PreparingRebalance;
        self.try_complete_join(now);
    }

    pub(super) fn try_complete_join(&mut self, now: Instant) {
        if matches!(self.rebalance, Some(RebalanceTimer::Join { .. }))
            && self.pending_members.is_empty()
            && self.members.iter().all(Member::awaiting_join)
        {
            self.complete_join(now);
        }
    }

    /// The rebalance ends: a new generation of whoever rejoined.
    pub(super) fn complete_join(&mut self, now: Instant) {
        self.rebalance = None;
        let late: Vec<usize> = (0..self.members.len())
            .rev()
            .filter(|&i| !self.members[i].awaiting_join())
            .collect();
        for index in late {
            let member = self.drop_member(index);
            tracing::info!(group = %self.id, member = %member.id, "member did not rejoin in time");
        }
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.state = GroupState::Empty;
            tracing::info!(group = %self.id, generation = self.generation_id, "group is empty");
            return;
        }
        self.protocol_name = Some(self.select_protocol());
        self.state = GroupState::CompletingRebalance;
        tracing::info!(group = %self.id, generation = self.generation_id,
            members = self.members.len(), protocol = ?self.protocol_name, "new generation");
        let answers: Vec<Joined> = self.members.iter().map(|m| self.joined(&m.id)).collect();
        for (member, answer) in self.members.iter_mut().zip(answers) {
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(Ok(answer));
            }
            member.renew_session(now);
            member.is_new = false;
            self.pending_sync.insert(member.id.clone());
        }
        self.sync_deadline = Some(now + self.rebalance_timeout());
    }

    /// Takes a member out, answering whatever of its is parked and handing
    /// leadership on; no state transition (callers decide).
    pub(super) fn drop_member(&mut self, index: usize) -> Member {
        let mut member = self.members.remove(index);
        if let Some(waiter) = member.join_waiter.take() {
            // Kafka's answer to a member removed while its join is parked: it
            // joins again from scratch.
            let _ = waiter.send(Err(JoinRefusal {
                error: GroupError::UnknownMemberId,
                member_id: String::new(),
            }));
        }
        if let Some(waiter) = member.sync_waiter.take() {
            // Kafka leaves such a sync unanswered until the client gives up.
            let _ = waiter.send(Err(GroupError::UnknownMemberId));
        }
        self.pending_sync.remove(&member.id);
        if self.is_leader(&member.id) {
            self.leader_id = self.members.first().map(|m| m.id.clone());
        }
        member
    }

    /// Kafka's `removeMemberAndUpdateGroup`.
    pub(super) fn remove_member(&mut self, index: usize, now: Instant, reason: &str) {
        let member = self.drop_member(index);
        tracing::info!(group = %self.id, member = %member.id, reason, "member removed");
        match self.state {
            GroupState::Empty | GroupState::Dead => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(now, reason)
            }
            GroupState::PreparingRebalance => self.try_complete_join(now),
        }
    }

    /// This broker stops coordinating the group: every parked request is
    /// answered NOT_COORDINATOR so its client looks for the new coordinator.
    pub(super) fn unload(&mut self) {
        tracing::info!(group = %self.id, generation = self.generation_id, "unloading group");
        self.state = GroupState::Dead;
        self.rebalance = None;
        self.sync_deadline = None;
        for member in &mut self.members {
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(Err(JoinRefusal {
                    error: GroupError::NotCoordinator,
                    member_id: member.id.clone(),
                }));
            }
            if let Some(waiter) = member.sync_waiter.take() {
                let _ = waiter.send(Err(GroupError::NotCoordinator));
            }
        }
    }

    pub(super) fn describe(&self) -> GroupDescription {
        let stable_protocol = match (self.state, &self.protocol_name) {
            (GroupState::Stable, Some(name)) => Some(name.as_str()),
            _ => None,
        };
        GroupDescription {
            group_id: self.id.clone(),
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_name: stable_protocol.unwrap_or_default().to_owned(),
            members: self
                .members
                .iter()
                .map(|m| MemberDescription {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: stable_protocol.map(|p| m.metadata(p)).unwrap_or_default(),
                    assignment: stable_protocol
                        .map(|_| m.assignment.clone())
                        .unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// Each member's protocol metadata for the group's protocol (its most
    /// preferred protocol's while none is chosen): a consumer's subscription.
    pub(super) fn member_metadata(&self) -> Vec<Bytes> {
        self.members
            .iter()
            .map(|m| match &self.protocol_name {
                Some(p) => m.metadata(p),
                None => m
                    .protocols
                    .first()
                    .map(|p| p.metadata.clone())
                    .unwrap_or_default(),
            })
            .collect()
    }

    pub(super) fn listing(&self) -> GroupListing {
        GroupListing {
            group_id: self.id.clone(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            state: self.state,
        }
    }
}
