//! Applying the controller's decisions (LeaderAndIsr) to the hosted partitions:
//! the controller-epoch check every control request passes first (KAFKA-532),
//! the per-partition leader-epoch check, and the role each applied partition
//! takes — leader (recording its epoch at election under `current`, KAFKA-7415;
//! resetting what it knows of its followers' catching up) or follower (and
//! whether it truncates before fetching, KAFKA-7164).
//!
//! A decision is bound to the etcd lease the broker holds when it applies it: a
//! role granted under a lease that has since lapsed is no role at all.

use std::sync::atomic::Ordering;
use std::time::Instant;

use kafka_protocol::ResponseError;

use super::leader::maybe_advance_hw;
use super::manager::{Inner, ReplicaManager, storage_error_code};
use super::partition::{FollowerState, LeaderAndIsrState, Partition};
use super::store::{PartitionLog, StorageError, TopicPartition};
use super::truncation;

/// What this broker does for a partition after a LeaderAndIsr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Fetch from `leader`; first truncate if `truncate`.
    Follower {
        leader: i32,
        leader_epoch: i32,
        truncate: bool,
    },
}

/// The per-partition outcome of one LeaderAndIsr.
#[derive(Debug, Clone)]
pub struct Decision {
    pub tp: TopicPartition,
    pub state: LeaderAndIsrState,
    pub result: Result<Role, ResponseError>,
    pub reason: Option<String>,
}

/// Whether a control request addressed to registration `requested` (the
/// revision of its put) names a newer registration than `ours`, the one this
/// broker's session has switched to. -1 (unknown) is never ahead.
fn registration_ahead(ours: i64, requested: i64) -> bool {
    requested > ours
}

/// KIP-380's refusal (Kafka 2.2, `KafkaApis.isBrokerEpochStale`): a control
/// request addressed to a registration older than this broker's. -1 (a
/// request that names none) is never stale.
fn registration_behind(ours: i64, requested: i64) -> bool {
    requested != -1 && requested < ours
}

/// How the registration a control request addresses compares with this
/// broker's (see [`ReplicaManager::registration_addressed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressed {
    /// This broker's registration, or none named (-1), or no session to tell.
    Ours,
    /// An older registration than the session's (`ours`).
    Older { ours: i64 },
    /// A newer one, which the session did not switch to within a lease TTL.
    Unreached { ours: i64 },
}

impl ReplicaManager {
    /// The broker-epoch comparison every control request (LeaderAndIsr,
    /// UpdateMetadata) goes through before anything else, the controller-epoch
    /// check included (KIP-380: Kafka checks it in `KafkaApis` before the
    /// replica manager sees the request). `broker_epoch` is the registration
    /// the controller addressed (the revision of its put as the controller saw
    /// it; -1 when unknown). The dispatcher decides what to refuse (see
    /// `server::dispatch`).
    ///
    /// A newer one than the session's is usually this broker's own: it
    /// registered again under a new lease and the controller saw the put before
    /// the put's answer reached the broker. Applied now, the decision would be
    /// bound to the old lease and the role it grants dead on arrival, with
    /// nothing ever resending it, so this waits (at most one lease TTL) for the
    /// session to switch.
    pub async fn registration_addressed(&self, broker_epoch: i64) -> Addressed {
        let Some(session) = &self.session else {
            return Addressed::Ours;
        };
        let ours = session.lease().broker_epoch;
        if registration_behind(ours, broker_epoch) {
            return Addressed::Older { ours };
        }
        if !registration_ahead(ours, broker_epoch) {
            return Addressed::Ours;
        }
        tracing::info!(
            broker_epoch,
            ours,
            "control request for a registration the session has not switched to yet; waiting"
        );
        let mut leases = session.subscribe();
        let caught_up = leases.wait_for(|l| !registration_ahead(l.broker_epoch, broker_epoch));
        match tokio::time::timeout(session.ttl, caught_up).await {
            Ok(_) => Addressed::Ours,
            Err(_) => Addressed::Unreached {
                ours: session.lease().broker_epoch,
            },
        }
    }

    /// The controller-epoch check every control request passes first (KAFKA-532):
    /// older than the newest seen is stale. With fencing off it always passes.
    pub fn observe_controller_epoch(
        &self,
        controller_epoch: i32,
        fencing: bool,
    ) -> Result<(), ResponseError> {
        let mut inner = self.lock();
        if fencing && controller_epoch < inner.controller_epoch {
            return Err(ResponseError::StaleControllerEpoch);
        }
        inner.controller_epoch = inner.controller_epoch.max(controller_epoch);
        Ok(())
    }

    /// Apply the partition states of one LeaderAndIsr (after the request-level
    /// controller-epoch check). Each partition is applied or rejected on its own;
    /// an applied one says what this broker now does for it.
    pub fn apply_leader_and_isr(
        &self,
        states: Vec<(TopicPartition, LeaderAndIsrState)>,
    ) -> Vec<Decision> {
        let mut guard = self.lock();
        let lease = self.current_lease();
        let decisions = states
            .into_iter()
            .map(|(tp, state)| {
                let result = self.apply_partition(&mut guard, lease, &tp, &state);
                Decision::new(tp, state, result)
            })
            .collect();
        drop(guard);
        self.appended.notify_waiters();
        decisions
    }

    /// One partition of a LeaderAndIsr, in three passes: checked (its leader
    /// epoch; this broker one of its replicas), its log opened (created if
    /// new), and the role it gives this broker taken. Refused, nothing of it is
    /// kept; the error is the partition's code and the reason state-change.log
    /// records.
    fn apply_partition(
        &self,
        inner: &mut Inner,
        lease: i64,
        tp: &TopicPartition,
        state: &LeaderAndIsrState,
    ) -> Result<Role, Refusal> {
        let current = inner.partitions.get(tp).cloned().unwrap_or_default();
        self.check_partition(&current, lease, state)?;
        let log = inner.logs.get_or_create(tp).map_err(Refusal::storage)?;
        let mut next = Partition {
            state: Some(state.clone()),
            lease,
            ..Default::default()
        };
        let role = if state.leader == self.node_id {
            self.lead(&current, state, &mut next, log)?;
            Role::Leader
        } else {
            self.follow(&current, state)
        };
        inner.partitions.insert(tp.clone(), next);
        Ok(role)
    }

    /// Whether the partition's state may be applied: its leader epoch newer
    /// than the one held (or the same one resent after a session change), and
    /// this broker one of its replicas.
    fn check_partition(
        &self,
        current: &Partition,
        lease: i64,
        state: &LeaderAndIsrState,
    ) -> Result<(), Refusal> {
        // A broker whose session expired and was re-registered lost its role
        // with the old lease. If no other controller decision intervened,
        // the next controller resends the same epoch (it cannot know the
        // session moved); that must reinstate the role, not be ignored.
        let reinstated = current.state.is_some()
            && current.lease != lease
            && state.leader_epoch == current.leader_epoch();
        // The slip a test arms on purpose: any epoch is taken.
        let reinstated = reinstated
            || crate::failpoints::hit_or_return(
                crate::failpoints::Failpoint::LeaderAndIsrSkipsEpochCheck,
            );
        if let Err(code) = current
            .check_leader_and_isr(state)
            .or_else(|e| if reinstated { Ok(()) } else { Err(e) })
        {
            let reason = format!(
                "leader epoch {} is not newer than the current {}",
                state.leader_epoch,
                current.leader_epoch()
            );
            return Err(Refusal { code, reason });
        }
        if !state.replicas.contains(&self.node_id) {
            return Err(Refusal {
                code: ResponseError::UnknownTopicOrPartition,
                reason: "this broker is not a replica".into(),
            });
        }
        Ok(())
    }

    /// This broker leads the partition in `state` (`next`, under the current
    /// lease): the epoch recorded at election (KAFKA-7415, where the setting
    /// says so), the followers' catching up carried over or started, the
    /// epoch's start offset, and the high watermark as the ISR allows.
    fn lead(
        &self,
        current: &Partition,
        state: &LeaderAndIsrState,
        next: &mut Partition,
        log: &mut PartitionLog,
    ) -> Result<(), Refusal> {
        let node_id = self.node_id;
        let leo = log.log_end_offset();
        if truncation::records_epoch_at_election(self.truncation) {
            log.leader_epoch_cache_mut()
                .assign(state.leader_epoch, leo)
                .map_err(Refusal::storage)?;
        }
        let now = Instant::now();
        if current.is_leader(node_id) && current.lease == next.lease {
            // Same leadership, new epoch (e.g. the controller dropped a
            // lost follower): keep what we know of the followers, but
            // not that one caught up before this epoch (Kafka 2.x
            // makeLeader): a follower the controller dropped because
            // it is gone must not be taken straight back into the ISR
            // on the strength of a fetch it made before it died.
            next.followers = current.followers.clone();
            for (id, follower) in &mut next.followers {
                follower.reset_caught_up(state.isr.contains(id), leo, now);
            }
            next.leadership = current.leadership;
        } else {
            next.leadership = self.leaderships.fetch_add(1, Ordering::Relaxed);
        }
        for id in state.replicas.iter().filter(|id| **id != node_id) {
            next.followers
                .entry(*id)
                .or_insert_with(|| FollowerState::new(state.isr.contains(id), now));
        }
        next.followers.retain(|id, _| state.replicas.contains(id));
        next.leader_epoch_start_offset = leo;
        maybe_advance_hw(node_id, next, log);
        Ok(())
    }

    /// This broker follows the partition: whether it truncates before it
    /// fetches is the setting's (KAFKA-7164: also when the leader did not change).
    fn follow(&self, current: &Partition, state: &LeaderAndIsrState) -> Role {
        let previous_leader = current.state.as_ref().map(|s| s.leader);
        let leader_changed = previous_leader != Some(state.leader);
        Role::Follower {
            leader: state.leader,
            leader_epoch: state.leader_epoch,
            truncate: leader_changed
                || truncation::truncates_when_leader_unchanged(self.truncation),
        }
    }
}

/// A partition refused: its error code, and the reason state-change.log records.
struct Refusal {
    code: ResponseError,
    reason: String,
}

impl Refusal {
    /// A storage failure, answered with the code it maps to.
    fn storage(e: StorageError) -> Refusal {
        Refusal {
            code: storage_error_code(&e),
            reason: e.to_string(),
        }
    }
}

impl Decision {
    fn new(tp: TopicPartition, state: LeaderAndIsrState, result: Result<Role, Refusal>) -> Self {
        let (result, reason) = match result {
            Ok(role) => (Ok(role), None),
            Err(Refusal { code, reason }) => (Err(code), Some(reason)),
        };
        Decision {
            tp,
            state,
            result,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Truncation;
    use crate::replica::test_support::{batch, epochs, manager, manager_on, state, tp};

    #[test]
    fn a_request_for_a_registration_the_session_has_not_reached_waits() {
        assert!(registration_ahead(5, 17));
        assert!(!registration_ahead(17, 17));
        assert!(!registration_ahead(17, 5));
        assert!(!registration_ahead(17, -1));
    }

    #[test]
    fn a_request_for_an_older_registration_is_stale_and_one_naming_none_is_not() {
        assert!(registration_behind(17, 5));
        assert!(!registration_behind(17, 17));
        assert!(!registration_behind(5, 17));
        assert!(!registration_behind(17, -1));
    }

    #[tokio::test]
    async fn without_a_session_every_request_is_addressed_to_this_broker() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        assert_eq!(rm.registration_addressed(i64::MAX).await, Addressed::Ours);
        assert_eq!(rm.registration_addressed(1).await, Addressed::Ours);
    }

    /// The controller drops follower 2 (its registration went) in a new epoch
    /// with the same leader. 2 had caught up before, but until it fetches in
    /// the new epoch the leader must not put it back (Kafka 2.x makeLeader
    /// resets lastCaughtUpTime; the ISR expands only on a fetch).
    #[test]
    fn a_follower_dropped_by_the_controller_rejoins_only_by_fetching_again() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        let lag = Duration::from_secs(60);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        rm.append_as_leader(&tp(), batch(1), 1).unwrap();
        // 2 fetches at the leader's end: caught up, HW 1.
        rm.read(&tp(), 1, 1 << 20, 2, 0).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(1));
        assert!(rm.pending_isr_changes(lag).is_empty());

        let mut shrunk = state(1, 1, vec![1]);
        shrunk.partition_epoch = 1;
        let d = rm.apply_leader_and_isr(vec![(tp(), shrunk)]);
        assert!(d[0].result.is_ok());
        assert!(
            rm.pending_isr_changes(lag).is_empty(),
            "a follower that has not fetched in epoch 1 is not proposed back"
        );

        // 2 fetches in epoch 1 at the leader's end: now it rejoins.
        rm.read(&tp(), 1, 1 << 20, 2, 1).unwrap();
        let changes = rm.pending_isr_changes(lag);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].isr, vec![1, 2]);
        assert_eq!(changes[0].leader_epoch, 1);
    }

    /// The directory is named from the request's topic: a name Kafka would
    /// refuse (`../x`, `a/b`) or a negative partition is refused with
    /// INVALID_TOPIC_EXCEPTION and nothing is created, inside the data dir or
    /// out of it (found by fuzzing the broker's dispatch).
    #[test]
    fn a_leader_and_isr_for_a_topic_name_kafka_refuses_creates_nothing() {
        let parent = tempfile::tempdir().unwrap();
        let data = parent.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let rm = manager(&data, 1);
        let before = std::fs::read_dir(&data).unwrap().count();
        for (topic, partition) in [("../escape", 0), ("a/b", 0), ("..", 0), ("t", -1)] {
            let bad = TopicPartition {
                topic: topic.into(),
                partition,
            };
            let d = rm.apply_leader_and_isr(vec![(bad, state(1, 0, vec![1]))]);
            assert_eq!(
                d[0].result,
                Err(ResponseError::InvalidTopicException),
                "{topic}-{partition}"
            );
        }
        assert_eq!(std::fs::read_dir(&data).unwrap().count(), before);
        let outside: Vec<_> = std::fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(outside, vec![std::ffi::OsString::from("data")]);
    }

    #[test]
    fn a_leader_and_isr_not_newer_than_the_current_epoch_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 3, vec![1]))]);
        for epoch in [2, 3] {
            let d = rm.apply_leader_and_isr(vec![(tp(), state(2, epoch, vec![2]))]);
            assert_eq!(
                d[0].result,
                Err(ResponseError::StaleControllerEpoch),
                "leader epoch {epoch}"
            );
        }
        let d = rm.apply_leader_and_isr(vec![(tp(), state(2, 4, vec![2]))]);
        assert!(d[0].result.is_ok());
    }

    #[test]
    fn controller_epochs_below_the_newest_seen_are_stale_only_with_fencing() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.observe_controller_epoch(5, true).unwrap();
        assert_eq!(
            rm.observe_controller_epoch(4, true),
            Err(ResponseError::StaleControllerEpoch)
        );
        assert!(
            rm.observe_controller_epoch(5, true).is_ok(),
            "the same epoch is not stale"
        );
        assert!(
            rm.observe_controller_epoch(4, false).is_ok(),
            "before KAFKA-532 nothing is checked"
        );
        assert_eq!(rm.controller_epoch(), 5);
    }

    #[test]
    fn only_current_records_the_leader_epoch_at_election() {
        for (truncation, expected) in [
            (Truncation::Current, vec![(0, 0)]),
            (Truncation::Kip279, vec![]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let rm = manager_on(1, dir.path(), truncation);
            rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1]))]);
            assert_eq!(epochs(&rm), expected, "{truncation:?}");
        }
    }

    #[test]
    fn a_follower_the_controller_dropped_rejoins_only_after_fetching_in_the_new_epoch() {
        // KIP-101's unclean-election case starts so: follower 2 is caught up
        // (both logs empty) and stops; the controller keeps leader 1 in epoch
        // 1 with ISR [1]. 2's last position (0) equals the HW, but it has not
        // fetched since: the leader must not take it back (Kafka's makeLeader
        // resets a non-ISR replica's caught-up time; expansion needs a fetch).
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        rm.read(&tp(), 0, 1 << 20, 2, 0).unwrap();
        let lag = Duration::from_secs(60);
        assert!(rm.pending_isr_changes(lag).is_empty(), "2 is in sync");
        rm.apply_leader_and_isr(vec![(tp(), state(1, 1, vec![1]))]);
        assert!(
            rm.pending_isr_changes(lag).is_empty(),
            "2 has not fetched in epoch 1"
        );
        // Its fetch in epoch 1 at the leader's end brings it back.
        rm.read(&tp(), 0, 1 << 20, 2, 1).unwrap();
        let changes = rm.pending_isr_changes(lag);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!((changes[0].leader_epoch, &changes[0].isr), (1, &vec![1, 2]));
    }
}
