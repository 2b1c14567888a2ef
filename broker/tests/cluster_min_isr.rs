//! Acceptance (issue 5): with min.insync.replicas=2 and the follower gone from
//! the ISR, acks=all produce is refused with NOT_ENOUGH_REPLICAS (acks=1 still
//! works). The follower leaves through the leader's own ISR shrink — it is
//! paused past `--replica-lag-time-max-ms`, the leader writes the smaller ISR by
//! compare-and-swap — and rejoins through the leader's expand once resumed.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::batch;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TIMEOUT: Duration = Duration::from_secs(60);
const NOT_ENOUGH_REPLICAS: i16 = 19;

#[test]
fn cluster_min_isr_refuses_acks_all_when_only_the_leader_is_in_sync() {
    let cluster = Cluster::start(
        2,
        &[
            // Long enough that the paused follower keeps its session: only the
            // leader's lag check takes it out of the ISR.
            "--lease-ttl-s",
            "20",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "2000",
            "--min-insync-replicas",
            "2",
        ],
    );
    assert_eq!(cluster.client(1).create_topic("m", 1, 2), 0);
    let full = cluster.await_state("a full ISR", TIMEOUT, "m", 0, |s| {
        s.leader > 0 && s.isr.len() == 2
    });
    let leader = full.leader;
    let follower = 3 - leader;
    let mut client = cluster.client(leader);
    common::await_some_or(
        "an acks=all write with both in sync",
        TIMEOUT,
        || {
            let (err, _) = client.produce("m", 0, batch(&[b"both in sync"]), -1).ok()?;
            (err == 0).then_some(())
        },
        || cluster.logs(),
    );

    let pid = Pid::from_raw(cluster.broker(follower).pid() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let shrunk = cluster.await_state("the leader to shrink the ISR", TIMEOUT, "m", 0, |s| {
        s.isr == vec![leader]
    });
    assert_eq!(
        shrunk.leader_epoch, full.leader_epoch,
        "the leader's own ISR write keeps the epoch"
    );
    // The leader adopts the ISR it wrote a moment after etcd has it; a write
    // in between waits for the paused follower and times out (7), so poll.
    common::await_some_or(
        "NOT_ENOUGH_REPLICAS",
        TIMEOUT,
        || {
            let (err, _) = client.produce("m", 0, batch(&[b"refused"]), -1).ok()?;
            (err == NOT_ENOUGH_REPLICAS).then_some(())
        },
        || cluster.logs(),
    );
    assert_eq!(
        client
            .produce("m", 0, batch(&[b"acks=1 is fine"]), 1)
            .unwrap()
            .0,
        0,
        "min.insync.replicas binds acks=all only"
    );

    kill(pid, Signal::SIGCONT).unwrap();
    cluster.await_state("the follower to rejoin the ISR", TIMEOUT, "m", 0, |s| {
        s.isr.len() == 2
    });
    let (err, _) = common::await_some_or(
        "acks=all to work again",
        TIMEOUT,
        || {
            let r = client
                .produce("m", 0, batch(&[b"in sync again"]), -1)
                .ok()?;
            (r.0 == 0).then_some(r)
        },
        || cluster.logs(),
    );
    assert_eq!(err, 0);
    assert!(cluster.broker(leader).log().contains("ISR updated"));
}
