//! One hosted partition's leadership state as the controller last decided it —
//! leader, leader epoch, ISR, replicas, controller epoch — and, while this
//! broker leads it, what the leader knows of each follower (its log end offset
//! and when it last caught up), which is what the high watermark and the ISR
//! follow.
//!
//! The state changes only through a LeaderAndIsr that passes the checks in
//! [`Partition::check_leader_and_isr`], or through the leader's own ISR write;
//! the log itself belongs to storage.

use std::collections::BTreeMap;
use std::time::Instant;

use kafka_protocol::ResponseError;

/// The controller's decision for one partition, as carried by LeaderAndIsr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrState {
    pub controller_epoch: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    /// The partition-state key's version in etcd (Kafka's zkVersion).
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
}

/// What a leader knows of one follower (Kafka's remote `Replica`).
#[derive(Clone, Debug)]
pub struct FollowerState {
    /// The offset of the follower's last fetch: its log end. -1 until it fetches
    /// in this leader epoch, which holds the high watermark back.
    pub log_end_offset: i64,
    /// The last time the follower was known to have everything the leader had;
    /// None if never in this leader epoch. ISR shrink follows this.
    pub last_caught_up: Option<Instant>,
    last_fetch: Option<Instant>,
    /// The leader's LEO when the follower last fetched.
    last_fetch_leader_leo: i64,
    /// The follower's run (registration incarnation) its fetches named;
    /// None until one named it (KIP-903).
    pub run: Option<u64>,
    /// The log start offset its last fetch reported (KIP-107); -1 until
    /// one did in this leadership.
    pub log_start_offset: i64,
}

impl FollowerState {
    /// As Kafka's makeLeader resets them: an ISR member counts as caught up now,
    /// so it gets a full lag time before it can be dropped.
    pub fn new(in_isr: bool, now: Instant) -> Self {
        Self {
            log_end_offset: -1,
            last_caught_up: in_isr.then_some(now),
            last_fetch: None,
            last_fetch_leader_leo: -1,
            run: None,
            log_start_offset: -1,
        }
    }

    /// As Kafka 2.x's `makeLeader` resets every remote replica on each
    /// LeaderAndIsr that makes this broker leader, the same leader in a new
    /// epoch included (`Replica.resetLastCaughtUpTime`): an ISR member counts
    /// as caught up now, any other replica as never, so it can rejoin only by
    /// fetching in this epoch (Kafka expands the ISR on a fetch only). Its last
    /// known log end is kept.
    pub fn reset_caught_up(&mut self, in_isr: bool, leader_leo: i64, now: Instant) {
        self.last_caught_up = in_isr.then_some(now);
        self.last_fetch = Some(now);
        self.last_fetch_leader_leo = leader_leo;
    }

    /// The run (registration incarnation) a fetch from the follower named.
    /// Only joins are judged by it (isr.rs): an ISR member's standing is
    /// the controller's to change (KIP-380), as in Kafka.
    pub fn note_run(&mut self, run: Option<u64>) {
        if run.is_some() {
            self.run = run;
        }
    }

    /// Record a fetch at `fetch_offset` made when the leader's LEO was
    /// `leader_leo` (Kafka 2.x `Replica.updateLogReadResult`): caught up now if
    /// it asked for the leader's end; caught up as of its previous fetch if it
    /// asked for at least what the leader had then.
    pub fn on_fetch(&mut self, fetch_offset: i64, leader_leo: i64, now: Instant) {
        if fetch_offset >= leader_leo {
            self.last_caught_up = Some(now);
        } else if fetch_offset >= self.last_fetch_leader_leo
            && let Some(previous) = self.last_fetch
        {
            self.last_caught_up = Some(self.last_caught_up.map_or(previous, |c| c.max(previous)));
        }
        self.log_end_offset = fetch_offset;
        self.last_fetch = Some(now);
        self.last_fetch_leader_leo = leader_leo;
    }
}

/// Local view of one partition.
#[derive(Clone, Debug, Default)]
pub struct Partition {
    /// None until the first LeaderAndIsr since this broker started.
    pub state: Option<LeaderAndIsrState>,
    /// Followers, while this broker leads the partition.
    pub followers: BTreeMap<i32, FollowerState>,
    /// The LEO when this broker became leader in the current epoch: a follower
    /// rejoins the ISR only once it reaches it (Kafka 2.x).
    pub leader_epoch_start_offset: i64,
    /// The etcd lease this broker held when it became leader; a later lease means
    /// the session was lost in between and the leadership is void.
    pub lease: i64,
    /// Which of this broker's leaderships of the partition this is (0: none).
    pub leadership: u64,
    /// An ISR expansion being written to etcd, as (leader epoch, proposed
    /// ISR): until the write is answered, the replicas it adds count toward
    /// the high watermark as if already in the ISR — Kafka's "maximal ISR"
    /// (KIP-497, Kafka 2.7: `PendingExpandIsr`; before it, the ZooKeeper
    /// write happened under the partition's write lock, so no append moved
    /// the HW meanwhile). Without it the HW can pass the joining replica's
    /// log end while the write is in flight, and the replica then joins the
    /// ISR without records already acknowledged to acks=all producers.
    pub pending_expansion: Option<(i32, Vec<i32>)>,
}

impl Partition {
    pub fn is_leader(&self, node_id: i32) -> bool {
        self.state.as_ref().is_some_and(|s| s.leader == node_id)
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state.as_ref().map_or(-1, |s| s.leader_epoch)
    }

    /// Kafka's per-partition rule (ReplicaManager.becomeLeaderOrFollower): a
    /// request whose leader epoch is not newer than the one we hold is stale and
    /// ignored, answered STALE_CONTROLLER_EPOCH. It applies whatever the fencing
    /// setting, because it protects the log, not the controller.
    pub fn check_leader_and_isr(&self, incoming: &LeaderAndIsrState) -> Result<(), ResponseError> {
        match &self.state {
            Some(current) if incoming.leader_epoch <= current.leader_epoch => {
                Err(ResponseError::StaleControllerEpoch)
            }
            _ => Ok(()),
        }
    }

    /// The fetch-side epoch check (KIP-320): an older epoch than ours is fenced,
    /// a newer one we have not heard of yet. -1 (clients before KIP-320) skips it.
    pub fn check_current_leader_epoch(&self, requested: i32) -> Result<(), ResponseError> {
        let ours = self.leader_epoch();
        if requested < 0 || requested == ours {
            Ok(())
        } else if requested < ours {
            Err(ResponseError::FencedLeaderEpoch)
        } else {
            Err(ResponseError::UnknownLeaderEpoch)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_follower_catches_up_by_reaching_the_leaders_end_or_its_previous_end() {
        let t0 = Instant::now();
        let mut f = FollowerState::new(false, t0);
        assert_eq!(f.last_caught_up, None);
        f.on_fetch(5, 10, t0);
        assert_eq!(f.last_caught_up, None, "behind and no earlier fetch");
        let t1 = t0 + Duration::from_millis(100);
        // It now asks for 10, what the leader had at its previous fetch, while
        // the leader moved on to 12: caught up as of the previous fetch.
        f.on_fetch(10, 12, t1);
        assert_eq!(f.last_caught_up, Some(t0));
        let t2 = t1 + Duration::from_millis(100);
        f.on_fetch(12, 12, t2);
        assert_eq!(f.last_caught_up, Some(t2));
        assert_eq!(f.log_end_offset, 12);
    }
}
