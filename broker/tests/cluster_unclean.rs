//! `--unclean-leader-election`: when the leader dies and no other ISR member is
//! live, a partition goes offline (leader -1, the ISR keeping its last member)
//! unless unclean election is on, in which case a live out-of-sync replica
//! leads with an ISR of itself. Either way the leader epoch rises by one; an
//! offline partition comes back, with the next epoch, when its last ISR member
//! returns.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::batch;
use epochal_broker::controller::metadata_store::PartitionStateRecord;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Two brokers; the follower drops out of the ISR (paused past the lag time),
/// then the leader (broker 1, also the controller) is killed and the follower
/// resumed. Returns the cluster and the state before the kill.
fn leader_dies_alone_in_the_isr(unclean: bool) -> (Cluster, PartitionStateRecord) {
    let unclean = unclean.to_string();
    let mut cluster = Cluster::start(
        2,
        &[
            "--lease-ttl-s",
            "4",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "1000",
            "--unclean-leader-election",
            &unclean,
        ],
    );
    assert_eq!(cluster.client(1).create_topic("u", 1, 2), 0);
    cluster.await_state("a full ISR", TIMEOUT, "u", 0, |s| {
        s.leader == 1 && s.isr.len() == 2
    });
    let pid = Pid::from_raw(cluster.broker(2).pid() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let alone = cluster.await_state("the ISR to shrink to the leader", TIMEOUT, "u", 0, |s| {
        s.isr == vec![1]
    });
    // Acknowledged by the leader alone: only broker 1 has it.
    let mut leader = cluster.client(1);
    let (err, _) = common::await_some_or(
        "an acks=all write with the leader alone in the ISR",
        TIMEOUT,
        || {
            let r = leader.produce("u", 0, batch(&[b"only on 1"]), -1).ok()?;
            (r.0 == 0).then_some(r)
        },
        || cluster.logs(),
    );
    assert_eq!(err, 0);
    cluster.broker_mut(1).kill9();
    kill(pid, Signal::SIGCONT).unwrap();
    (cluster, alone)
}

#[test]
fn cluster_unclean_off_leaves_the_partition_offline_until_the_last_isr_member_returns() {
    let (mut cluster, before) = leader_dies_alone_in_the_isr(false);
    let offline = cluster.await_state("the partition to go offline", TIMEOUT, "u", 0, |s| {
        s.leader_epoch > before.leader_epoch
    });
    assert_eq!(
        (offline.leader, offline.leader_epoch, offline.isr.clone()),
        (-1, before.leader_epoch + 1, vec![1]),
        "{offline:?}"
    );
    let (err, _) = cluster
        .client(2)
        .produce("u", 0, batch(&[b"refused"]), -1)
        .unwrap();
    assert_ne!(err, 0, "no leader, no write");

    cluster.restart(1);
    let back = cluster.await_state("the last ISR member to lead again", TIMEOUT, "u", 0, |s| {
        s.leader == 1
    });
    assert_eq!(back.leader_epoch, offline.leader_epoch + 1, "{back:?}");
    let mut leader = cluster.client(1);
    let records = common::await_some_or(
        "the returned leader to serve its data",
        TIMEOUT,
        || {
            let (err, hw, _) = leader.fetch("u", 0, 0, 0).ok()?;
            (err == 0 && hw >= 1).then(|| leader.fetch_all("u", 0, 0))
        },
        || cluster.logs(),
    );
    assert!(
        records.iter().any(|(_, v)| v == b"only on 1"),
        "the acknowledged write survived"
    );
}

#[test]
fn cluster_unclean_on_elects_an_out_of_sync_replica() {
    let (cluster, before) = leader_dies_alone_in_the_isr(true);
    let after = cluster.await_state("an unclean leader", TIMEOUT, "u", 0, |s| s.leader == 2);
    assert_eq!(
        (after.leader_epoch, after.isr.clone()),
        (before.leader_epoch + 1, vec![2]),
        "{after:?}"
    );
    let mut leader = cluster.client(2);
    let (err, _) = common::await_some_or(
        "the unclean leader to take an acks=all write",
        TIMEOUT,
        || {
            let r = leader.produce("u", 0, batch(&[b"on 2"]), -1).ok()?;
            (r.0 == 0).then_some(r)
        },
        || cluster.logs(),
    );
    assert_eq!(err, 0);
    let records = leader.fetch_all("u", 0, 0);
    assert!(
        records.iter().all(|(_, v)| v != b"only on 1"),
        "the write only broker 1 had is lost, as unclean election allows"
    );
}
