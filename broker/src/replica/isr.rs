//! The leader's ISR changes (Kafka's `Partition.maybeShrinkIsr` / `maybeExpandIsr`
//! and `updateIsr`): which followers should leave or join the ISR of each
//! partition this broker leads (decided by the replica manager, from what the
//! leader knows of its followers), and the periodic task that writes each change
//! to the partition-state key by compare-and-swap on its version (the zkVersion
//! check) and hands the outcome back.
//!
//! A lost compare-and-swap is never retried blindly: the leader re-reads the
//! key and carries on only if it still names this broker leader in the same
//! epoch (taking the stored ISR and version); otherwise it waits for the
//! controller's LeaderAndIsr. A fenced leader proposes nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::leader::maybe_advance_hw;
use super::manager::ReplicaManager;
use super::store::TopicPartition;
use crate::controller::metadata_store::{MetadataStore, PartitionStateRecord, StoreError};

/// An ISR change a leader wants written to etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub tp: TopicPartition,
    pub leader_epoch: i32,
    pub controller_epoch: i32,
    /// The partition-state key's version the write must find (zkVersion + 1).
    pub expected_version: i64,
    pub isr: Vec<i32>,
    /// The replicas it takes in, each with the run its fetches named.
    pub joining: Vec<(i32, Option<u64>)>,
}

impl ReplicaManager {
    /// ISR changes the leader should write: followers that caught up join
    /// (their LEO reached the HW and this epoch's start offset, Kafka 2.x), ISR
    /// members that have not caught up within `lag` leave. A fenced leader
    /// proposes nothing.
    pub fn pending_isr_changes(&self, lag: Duration) -> Vec<IsrChange> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let now = Instant::now();
        let mut changes = Vec::new();
        for (tp, partition) in inner.partitions.iter_mut() {
            let Some(state) = &partition.state else {
                continue;
            };
            if state.leader != self.node_id || !self.lease_valid(partition) {
                continue;
            }
            let Some(log) = inner.logs.get(tp) else {
                continue;
            };
            let hw = log.high_watermark();
            let isr: Vec<i32> = state
                .replicas
                .iter()
                .copied()
                .filter(|id| {
                    if *id == self.node_id {
                        return true;
                    }
                    let Some(f) = partition.followers.get(id) else {
                        return false;
                    };
                    // Kafka decides both on the follower's fetches; checking
                    // periodically, "caught up within the lag" stands in for
                    // "is fetching", so a paused follower whose last position
                    // equals the HW is not taken straight back in.
                    let recent = f
                        .last_caught_up
                        .is_some_and(|t| now.saturating_duration_since(t) <= lag);
                    if state.isr.contains(id) {
                        recent
                    } else {
                        recent
                            && f.log_end_offset >= hw
                            && f.log_end_offset >= partition.leader_epoch_start_offset
                    }
                })
                .collect();
            let mut current = state.isr.clone();
            current.sort_unstable();
            let mut proposed = isr.clone();
            proposed.sort_unstable();
            if proposed != current {
                // Joining replicas count toward the HW from now until the
                // write is answered (KIP-497's maximal ISR).
                partition.pending_expansion = isr
                    .iter()
                    .any(|id| !state.isr.contains(id))
                    .then(|| (state.leader_epoch, isr.clone()));
                let joining = isr
                    .iter()
                    .filter(|id| !state.isr.contains(id))
                    .map(|id| (*id, partition.followers.get(id).and_then(|f| f.run)))
                    .collect();
                changes.push(IsrChange {
                    tp: tp.clone(),
                    leader_epoch: state.leader_epoch,
                    controller_epoch: state.controller_epoch,
                    expected_version: state.partition_epoch as i64 + 1,
                    isr,
                    joining,
                });
            }
        }
        changes
    }

    /// A fetch from `replica` of these partitions named its run `run`
    /// (fetch.rs): recorded under one hold of the lock.
    pub fn note_follower_run(
        &self,
        partitions: impl Iterator<Item = TopicPartition>,
        replica: i32,
        run: u64,
    ) {
        let mut inner = self.lock();
        for tp in partitions {
            if let Some(f) = inner
                .partitions
                .get_mut(&tp)
                .and_then(|p| p.followers.get_mut(&replica))
            {
                f.note_run(Some(run));
            }
        }
    }

    /// The leader's ISR write succeeded at `version`: adopt it if we still lead
    /// in the same epoch (a shrink may let the HW advance).
    pub fn isr_written(&self, change: &IsrChange, version: i64) {
        self.adopt_isr(&change.tp, change.leader_epoch, &change.isr, version);
    }

    /// The leader's ISR write lost its compare-and-swap. Kafka's rule: do not
    /// retry blindly; re-read, and only if the stored state still names us leader
    /// in the same epoch take its ISR and version and carry on. Otherwise wait
    /// for the controller's LeaderAndIsr. Returns whether we carried on.
    pub fn isr_conflict(
        &self,
        change: &IsrChange,
        stored_leader: i32,
        stored_leader_epoch: i32,
        stored_isr: &[i32],
        stored_version: i64,
    ) -> bool {
        if stored_leader != self.node_id || stored_leader_epoch != change.leader_epoch {
            tracing::info!(
                topic = %change.tp.topic,
                partition = change.tp.partition,
                stored_leader,
                stored_leader_epoch,
                "ISR write lost to a newer decision; waiting for LeaderAndIsr"
            );
            self.isr_write_failed(change);
            return false;
        }
        self.adopt_isr(&change.tp, change.leader_epoch, stored_isr, stored_version)
    }

    /// Whether `change` proposes the ISR the partition has now.
    pub fn isr_unchanged(&self, change: &IsrChange) -> bool {
        let inner = self.lock();
        let Some(state) = inner
            .partitions
            .get(&change.tp)
            .and_then(|p| p.state.as_ref())
        else {
            return true;
        };
        let mut now = state.isr.clone();
        now.sort_unstable();
        let mut proposed = change.isr.clone();
        proposed.sort_unstable();
        now == proposed
    }

    /// The leader's ISR write failed (etcd unreachable, say): the expansion
    /// is no longer in flight, so its replicas stop counting toward the HW;
    /// the next check proposes it again.
    pub fn isr_write_failed(&self, change: &IsrChange) {
        let mut inner = self.lock();
        if let Some(partition) = inner.partitions.get_mut(&change.tp)
            && partition
                .pending_expansion
                .as_ref()
                .is_some_and(|(epoch, _)| *epoch == change.leader_epoch)
        {
            partition.pending_expansion = None;
        }
    }

    fn adopt_isr(&self, tp: &TopicPartition, leader_epoch: i32, isr: &[i32], version: i64) -> bool {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(partition) = inner.partitions.get_mut(tp) else {
            return false;
        };
        let Some(state) = partition.state.as_mut() else {
            return false;
        };
        if state.leader != self.node_id || state.leader_epoch != leader_epoch {
            return false;
        }
        state.isr = isr.to_vec();
        state.partition_epoch = (version - 1) as i32;
        partition.pending_expansion = None;
        if let Some(log) = inner.logs.get_mut(tp) {
            maybe_advance_hw(self.node_id, partition, log);
        }
        drop(guard);
        self.appended.notify_waiters();
        true
    }
}

/// How often the ISR is checked: often enough that a caught-up follower rejoins
/// promptly (Kafka expands on the fetch itself), bounded by the lag time.
fn check_interval(lag: Duration) -> Duration {
    (lag / 4).clamp(Duration::from_millis(20), Duration::from_millis(100))
}

pub async fn run(
    replicas: Arc<ReplicaManager>,
    store: MetadataStore,
    lag: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(check_interval(lag)) => {}
        }
        for change in replicas.pending_isr_changes(lag) {
            if let Err(e) = write(&replicas, &store, &change).await {
                tracing::warn!(topic = %change.tp.topic, partition = change.tp.partition, %e, "ISR write failed");
                replicas.isr_write_failed(&change);
            }
        }
    }
}

/// KIP-903 (Kafka 3.5, after KAFKA-14139: a broker whose disk was replaced
/// taken back into an ISR on a fetch its earlier run had sent, then elected,
/// losing committed data): a replica joins only if the run its fetches named
/// is the one etcd registers now. Returns the change with every other
/// joiner left out, and the registrations' revisions the write must still
/// find, so a restart between this read and the write loses it too.
async fn fence_joins(
    store: &MetadataStore,
    change: &IsrChange,
) -> Result<(IsrChange, Vec<(i32, i64)>), StoreError> {
    let mut kept = change.clone();
    let mut revisions = Vec::new();
    for &(id, run) in &change.joining {
        let registered = store.broker_registration(id).await?;
        match registered {
            Some((reg, revision)) if Some(reg.incarnation) == run => {
                revisions.push((id, revision));
            }
            other => {
                tracing::info!(
                    topic = %change.tp.topic,
                    partition = change.tp.partition,
                    replica = id,
                    fetched_by_run = ?run,
                    registered_run = ?other.map(|(r, _)| r.incarnation),
                    "not taken into the ISR: its fetches are not from its registered run (KIP-903)"
                );
                kept.isr.retain(|r| *r != id);
                kept.joining.retain(|(r, _)| *r != id);
            }
        }
    }
    Ok((kept, revisions))
}

/// Writes one proposed change to etcd (the ISR task's, each round), and
/// takes what the write found back into the replica manager.
pub async fn write(
    replicas: &ReplicaManager,
    store: &MetadataStore,
    change: &IsrChange,
) -> Result<(), StoreError> {
    let (fenced, revisions);
    let change = if replicas.isr_join_fencing && !change.joining.is_empty() {
        (fenced, revisions) = fence_joins(store, change).await?;
        if fenced.joining.len() < change.joining.len() {
            // The refused joiners no longer count toward the HW.
            replicas.isr_write_failed(change);
            if replicas.isr_unchanged(&fenced) {
                return Ok(());
            }
        }
        &fenced
    } else {
        revisions = Vec::new();
        change
    };
    let record = PartitionStateRecord {
        leader: replicas.node_id(),
        leader_epoch: change.leader_epoch,
        isr: change.isr.clone(),
        controller_epoch: change.controller_epoch,
    };
    match store
        .write_partition_state_checked(
            &change.tp.topic,
            change.tp.partition,
            &record,
            change.expected_version,
            &revisions,
        )
        .await
    {
        Ok(version) => {
            tracing::info!(topic = %change.tp.topic, partition = change.tp.partition, isr = ?change.isr, leader_epoch = change.leader_epoch, "ISR updated");
            replicas.isr_written(change, version);
            Ok(())
        }
        Err(StoreError::StaleVersion { .. }) => {
            let stored = store
                .partition_state(&change.tp.topic, change.tp.partition)
                .await?;
            if let Some(stored) = stored {
                tracing::info!(topic = %change.tp.topic, partition = change.tp.partition, expected_version = change.expected_version, stored_version = stored.version, "cached partition-state version differs from etcd; re-read");
                replicas.isr_conflict(
                    change,
                    stored.value.leader,
                    stored.value.leader_epoch,
                    &stored.value.isr,
                    stored.version,
                );
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::leader::AckStatus;
    use crate::replica::test_support::{batch, manager, state, tp};

    #[test]
    fn a_lost_isr_compare_and_swap_carries_on_only_in_the_same_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 3, vec![1, 2]))]);
        let change = IsrChange {
            tp: tp(),
            leader_epoch: 3,
            controller_epoch: 1,
            expected_version: 1,
            isr: vec![1],
            joining: vec![],
        };
        assert!(
            !rm.isr_conflict(&change, 2, 4, &[2], 5),
            "a newer epoch: wait"
        );
        assert!(rm.isr_conflict(&change, 1, 3, &[1], 5), "same epoch: adopt");
        let inner = rm.lock();
        let s = inner.partitions[&tp()].state.clone().unwrap();
        assert_eq!((s.isr, s.partition_epoch), (vec![1], 4));
    }

    /// t-0 led by 1 in epoch 0 with ISR [1, 2] and replicas 1, 2, 3, two
    /// records long, and 2 (in the ISR) and 3 (not) both at its end.
    fn three_replicas_at_two(rm: &ReplicaManager) {
        use crate::replica::test_support::batch;
        let mut s = state(1, 0, vec![1, 2]);
        s.replicas = vec![1, 2, 3];
        rm.apply_leader_and_isr(vec![(tp(), s)]);
        rm.append_as_leader(&tp(), batch(2), -1).unwrap();
        for follower in [2, 3] {
            rm.read(&tp(), 2, 1 << 20, follower, 0).unwrap();
        }
    }

    #[test]
    fn a_replica_joining_the_isr_holds_the_high_watermark_until_the_write_is_answered() {
        use crate::replica::test_support::batch;
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        // 2 (in the ISR) and 3 (not) both reach the log end: HW 2.
        three_replicas_at_two(&rm);
        assert_eq!(rm.high_watermark(&tp()), Some(2));
        // The leader decides 3 has caught up and writes ISR [1, 2, 3].
        let changes = rm.pending_isr_changes(Duration::from_secs(10));
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].isr, vec![1, 2, 3]);
        // While that write is in flight two more records come and 2 fetches
        // them: without the maximal ISR the HW would reach 4 with 3 at 2, and
        // 3 would join the ISR lacking two acknowledged records.
        rm.append_as_leader(&tp(), batch(2), -1).unwrap();
        rm.read(&tp(), 4, 1 << 20, 2, 0).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(2), "3 holds the HW");
        rm.isr_written(&changes[0], 2);
        assert_eq!(rm.high_watermark(&tp()), Some(2));
        rm.read(&tp(), 4, 1 << 20, 3, 0).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(4));
    }

    #[test]
    fn a_failed_expansion_stops_holding_the_high_watermark() {
        use crate::replica::test_support::batch;
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        three_replicas_at_two(&rm);
        let changes = rm.pending_isr_changes(Duration::from_secs(10));
        rm.append_as_leader(&tp(), batch(2), -1).unwrap();
        rm.read(&tp(), 4, 1 << 20, 2, 0).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(2));
        // The write failed: 3 is not joining after all, and 2's next fetch
        // moves the HW as the ISR [1, 2] allows.
        rm.isr_write_failed(&changes[0]);
        rm.read(&tp(), 4, 1 << 20, 2, 0).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(4));
    }

    #[test]
    fn acks_all_completes_as_committed_or_not_enough_replicas_after_append() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 2);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        let first = rm.append_as_leader(&tp(), batch(2), -1).unwrap();
        assert_eq!(rm.ack_status(&tp(), &first), AckStatus::Pending);
        rm.read(&tp(), 2, 1 << 20, 2, 0).unwrap();
        assert_eq!(rm.ack_status(&tp(), &first), AckStatus::Committed);
        // The ISR shrinks to the leader after the next append: the HW passes it,
        // but with fewer in sync than min.insync.replicas.
        let second = rm.append_as_leader(&tp(), batch(1), -1).unwrap();
        let change = IsrChange {
            tp: tp(),
            leader_epoch: 0,
            controller_epoch: 1,
            expected_version: 1,
            isr: vec![1],
            joining: vec![],
        };
        rm.isr_written(&change, 2);
        assert_eq!(
            rm.ack_status(&tp(), &second),
            AckStatus::NotEnoughReplicasAfterAppend
        );
        // Leadership moving away answers the waiter NOT_LEADER_OR_FOLLOWER.
        rm.apply_leader_and_isr(vec![(tp(), state(2, 1, vec![2]))]);
        assert_eq!(rm.ack_status(&tp(), &second), AckStatus::NotLeader);
    }
}
