//! The `follower-truncate-to-hw` failpoint removes the KIP-101 fix on purpose:
//! armed, a follower on `current` cuts its log to its high watermark at once
//! instead of asking the leader; disarmed, the same follower asks. Alone in its
//! test binary because the failpoint registry is process-wide.

#[path = "support/storage.rs"]
mod support;

use epochal_broker::config::Truncation;
use epochal_broker::failpoints::Failpoint;
use epochal_broker::replica::follower::TruncationProgress;
use epochal_broker::replica::isr::IsrChange;
use epochal_broker::replica::leader_and_isr::Role;
use epochal_broker::replica::manager::ReplicaManager;
use epochal_broker::replica::partition::LeaderAndIsrState;
use epochal_broker::replica::store::LogManager;
use epochal_broker::storage::LogConfig;
use support::{producer_batch, tp};

fn state(leader: i32, leader_epoch: i32, isr: Vec<i32>) -> LeaderAndIsrState {
    LeaderAndIsrState {
        controller_epoch: 1,
        leader,
        leader_epoch,
        isr,
        partition_epoch: 0,
        replicas: vec![1, 2],
    }
}

/// Broker 2 on `current`, which led epoch 0 and holds [0, 3) with its HW at 1
/// (broker 1 joined its ISR and never fetched), now told to follow broker 1 in
/// epoch 1. Returns its first truncation move and its log end after it.
fn follower_starts_truncating() -> (TruncationProgress, i64) {
    let dir = tempfile::tempdir().unwrap();
    let logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    let rm = ReplicaManager::new(2, 1, Truncation::Current, logs, None);
    rm.apply_leader_and_isr(vec![(tp(), state(2, 0, vec![2]))]);
    rm.append_as_leader(&tp(), producer_batch(&["v0"]), 1)
        .unwrap();
    let change = IsrChange {
        tp: tp(),
        leader_epoch: 0,
        controller_epoch: 1,
        expected_version: 1,
        isr: vec![2, 1],
        joining: vec![(1, None)],
    };
    rm.isr_written(&change, 1);
    rm.append_as_leader(&tp(), producer_batch(&["v0", "v1"]), 1)
        .unwrap();
    assert_eq!(rm.offsets(&tp()), Some((3, 1)), "(LEO, HW) before");
    let d = rm.apply_leader_and_isr(vec![(tp(), state(1, 1, vec![1, 2]))]);
    assert!(matches!(
        d[0].result,
        Ok(Role::Follower { truncate: true, .. })
    ));
    let progress = rm.truncation_start(&tp(), 1).unwrap();
    (progress, rm.offsets(&tp()).unwrap().0)
}

#[test]
fn armed_a_current_follower_truncates_to_its_high_watermark_and_disarmed_it_asks() {
    assert_eq!(
        follower_starts_truncating(),
        (TruncationProgress::Ask(0), 3),
        "the fix in place: ask about epoch 0, cut nothing yet"
    );
    let name = Failpoint::FollowerTruncateToHw.name();
    fail::cfg(name, "return").unwrap();
    let armed = follower_starts_truncating();
    fail::remove(name);
    assert_eq!(
        armed,
        (TruncationProgress::Done, 1),
        "the fix removed: cut to the HW without asking"
    );
}
