//! Regression for `suites/found/current-seed-305-stale-leader`: a controller
//! taking over sends every registered broker its partitions' state, a dead one
//! too, and retries the send while that broker is down. When the broker comes
//! back inside its lease (its registration put again), the retried request
//! must not reach its new run: it carries the partition's state from before
//! the restart, so the new run, with its log cut, would lead the old epoch
//! again before the controller moves it to a new one — one leader epoch
//! written by two runs of one broker, which is what leader epochs exist to
//! rule out (KIP-101).
//!
//! Every broker-to-broker link goes through a forwarder, so the controller's
//! retries reach the restarted broker at the address they were queued for, as
//! through the harness's proxies. Two guards hold: the controller drops a
//! restarted broker's queue before re-electing, and the request names the
//! earlier run's broker epoch (the revision of its registration's put), which
//! the new run refuses (KIP-380).

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use epochal_broker::controller::metadata_store::controller_epoch_key;
use epochal_broker::state_change_log::{self, Outcome};

const TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn cluster_takeover_restart_a_retried_request_never_reaches_a_brokers_new_run() {
    // Brokers 1 and 2 on a short lease, so broker 1's death hands the
    // controller to broker 2 quickly; broker 3 on a long one, so its
    // registration outlives its death and the takeover.
    let mut cluster =
        Cluster::start_meshed_with(3, &["--replica-fetch-wait-max-ms", "100"], |id| {
            vec![
                "--lease-ttl-s".into(),
                if id == 3 { "30" } else { "2" }.into(),
            ]
        });
    let mut client = cluster.client(1);
    assert_eq!(client.create_topic("t", 3, 1), 0);
    // A partition broker 3 leads alone (replication factor 1: ISR [3]).
    let (partition, before) = common::await_some_or(
        "a partition of t led by broker 3",
        TIMEOUT,
        || {
            (0..3).find_map(|p| {
                let state = cluster.state("t", p)?;
                (state.leader == 3).then_some((p, state))
            })
        },
        || cluster.logs(),
    );
    let old_epoch = before.leader_epoch;
    // b3's state-change log as its first run left it: its applied
    // LeaderAndIsr for the partition at `old_epoch`.
    let b3_dir = cluster.broker(3).data_dir.clone();
    let first_run = common::await_some_or(
        "broker 3 to apply its leadership",
        TIMEOUT,
        || {
            let changes = state_change_log::read_all(&b3_dir).ok()?;
            changes
                .iter()
                .any(|c| {
                    c.topic == "t"
                        && c.partition == partition
                        && c.leader_epoch == old_epoch
                        && c.outcome == Outcome::Applied
                })
                .then_some(changes.len())
        },
        || cluster.logs(),
    );

    cluster.broker_mut(3).kill9();
    let controller_epoch = cluster
        .etcd
        .get(&controller_epoch_key())
        .expect("controller epoch");
    cluster.broker_mut(1).kill9();
    // Broker 2 takes over once broker 1's lease lapses, and sends broker 3
    // (dead, still registered) its state: the send fails and is retried.
    common::await_some_or(
        "broker 2 to take over and retry a request to the dead broker 3",
        TIMEOUT,
        || {
            let log = cluster.broker(2).log();
            let epoch = cluster.etcd.get(&controller_epoch_key())?;
            (epoch != controller_epoch
                && log.lines().any(|l| {
                    l.contains("control request failed; retrying") && l.contains("broker_id=3")
                }))
            .then_some(())
        },
        || cluster.logs(),
    );

    // Broker 3 again, inside its lease: the controller re-elects it, the
    // sole ISR member, in a new epoch.
    cluster.restart(3);
    let after = cluster.await_state(
        "broker 3 to lead the partition in a new epoch",
        TIMEOUT,
        "t",
        partition,
        |s| s.leader == 3 && s.leader_epoch > old_epoch,
    );
    common::await_some_or(
        "broker 3's new run to apply the new epoch",
        TIMEOUT,
        || {
            let changes = state_change_log::read_all(&b3_dir).ok()?;
            changes[first_run..]
                .iter()
                .any(|c| {
                    c.topic == "t"
                        && c.partition == partition
                        && c.leader_epoch == after.leader_epoch
                        && c.outcome == Outcome::Applied
                })
                .then_some(())
        },
        || cluster.logs(),
    );
    let changes = state_change_log::read_all(&b3_dir).unwrap();
    let stale: Vec<_> = changes[first_run..]
        .iter()
        .filter(|c| {
            c.topic == "t"
                && c.partition == partition
                && c.leader_epoch <= old_epoch
                && c.outcome == Outcome::Applied
        })
        .collect();
    assert!(
        stale.is_empty(),
        "broker 3's new run applied the partition's state from before its restart \
         (epoch {old_epoch}, now {}): {stale:#?}\n{}",
        after.leader_epoch,
        cluster.logs()
    );
}
