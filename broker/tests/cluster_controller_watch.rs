//! The controller's own writes come back to it through its etcd watch, behind
//! what it has decided since. Campaign seed 2 (ci/stress.sh) found the
//! controller taking such a late event as news: it put an older partition
//! state back in its cache and told the next broker that registered an epoch
//! etcd had already moved past; that broker then never followed the real
//! leader. This pins the order of events it needs:
//!
//! 1. Broker 1 is controller and leads `t-0` (replicas 1, 2, 3). Its failpoint
//!    holds each broker loss for 5 s before the controller handles it.
//! 2. Brokers 2 and 3 stop cleanly (their registrations go at once). The
//!    controller shrinks the ISR twice, each a new leader epoch: e+1 (ISR
//!    [1, 3]), then, 5 s later, e+2 (ISR [1]).
//! 3. Broker 3 starts again between the two writes, so its registration comes
//!    after e+1's state in etcd's order and before e+2's: the controller
//!    handles e+1's event, then broker 3's registration, having already
//!    written e+2. With the live brokers then 1 and 3, the stale state
//!    (leader 1, ISR [1, 3]) looks right to the controller, so nothing it
//!    writes corrects it (had broker 2 come back instead, the ISR's dead
//!    member would have made it write, fail on the revision and re-read).
//!
//! Broker 3 must be told the epoch etcd holds, and rejoin the ISR.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use epochal_broker::controller::metadata_store::broker_key;

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long the controller sits on each broker loss: the window in which
/// broker 3 must register again.
const HOLD_MS: u64 = 5000;

/// The leader epochs of `t-0` broker `id` applied from LeaderAndIsr, in order.
fn applied_epochs(cluster: &Cluster, id: i32) -> Vec<i64> {
    std::fs::read_to_string(cluster.broker(id).data_dir.join("state-change.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|c| {
            c["request"] == "LeaderAndIsr"
                && c["topic"] == "t"
                && c["partition"] == 0
                && c["outcome"] == "applied"
        })
        .filter_map(|c| c["leader_epoch"].as_i64())
        .collect()
}

#[test]
fn cluster_controller_watch_a_broker_back_between_two_elections_is_told_the_newest() {
    let mut cluster = Cluster::start_with_env(
        3,
        &[
            "--replica-fetch-wait-max-ms",
            "100",
            // Only the controller changes the ISR here, until broker 3 is back.
            "--replica-lag-time-max-ms",
            "30000",
        ],
        |_| vec!["--lease-ttl-s".into(), "6".into()],
        |id| {
            if id == 1 {
                vec![(
                    "EPOCHAL_FAILPOINTS",
                    format!("controller-before-broker-loss=sleep({HOLD_MS})"),
                )]
            } else {
                vec![]
            }
        },
    );
    assert_eq!(cluster.client(1).create_topic("t", 1, 3), 0);
    let start = cluster.await_state("a full ISR under broker 1", TIMEOUT, "t", 0, |s| {
        s.leader == 1 && s.isr.len() == 3
    });
    let epoch = start.leader_epoch;

    assert!(
        cluster.broker_mut(2).terminate(TIMEOUT),
        "broker 2 stops cleanly"
    );
    assert!(
        cluster.broker_mut(3).terminate(TIMEOUT),
        "broker 3 stops cleanly"
    );
    let first = cluster.await_state("the first shrink", TIMEOUT, "t", 0, |s| {
        s.leader_epoch > epoch
    });
    assert_eq!(
        (first.leader_epoch, first.isr.clone()),
        (epoch + 1, vec![1, 3])
    );
    cluster.restart(3);
    common::await_some_or(
        "broker 3's registration",
        TIMEOUT,
        || cluster.etcd.get(&broker_key(3)),
        || cluster.logs(),
    );
    // The order this test is about: broker 3 registered before the second
    // shrink was written. A machine too slow for the window fails here, not
    // with a false pass.
    assert_eq!(
        cluster.state("t", 0).map(|s| s.leader_epoch),
        Some(epoch + 1),
        "broker 3 registered after the second shrink: the {HOLD_MS} ms window was missed"
    );
    cluster.await_state("the second shrink", TIMEOUT, "t", 0, |s| {
        s.leader_epoch > epoch + 1
    });
    // What the controller wrote, from etcd's history rather than a poll: once
    // broker 3 follows epoch e+2 and catches up, broker 1 puts it back in the
    // ISR under the same epoch, and a poll on a loaded machine can see only
    // that (ci/stress.sh round 6 saw (e+2, [1, 3]) here).
    let written: Vec<(i32, Vec<i32>)> = cluster
        .state_history("t", 0)
        .into_iter()
        .filter(|s| s.leader_epoch > epoch)
        .map(|s| (s.leader_epoch, s.isr))
        .collect();
    assert_eq!(
        written.get(..2),
        Some(&[(epoch + 1, vec![1, 3]), (epoch + 2, vec![1])][..]),
        "the controller's two shrinks, in etcd's order: {written:?}"
    );

    let rejoined = cluster.await_state("broker 3 back in the ISR", TIMEOUT, "t", 0, |s| {
        s.isr.contains(&3)
    });
    assert_eq!(rejoined.leader_epoch, epoch + 2, "{}", cluster.logs());
    assert_eq!(
        applied_epochs(&cluster, 3).last().copied(),
        Some(i64::from(epoch + 2)),
        "broker 3's last applied LeaderAndIsr for t-0 is etcd's epoch\n{}",
        cluster.logs()
    );
}
