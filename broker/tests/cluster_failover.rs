//! Acceptance (issue 5): kill -9 the leader. The controller (a survivor, once
//! the dead broker's lease expires) elects a new leader from the ISR with the
//! leader epoch raised by exactly one, which takes acks=all writes; the failover
//! time is printed, not asserted. The old leader held a batch no follower had
//! (acknowledged with acks=1 while every link to it was cut, so no fetch
//! response could carry it); restarted, it truncates that batch away by
//! OffsetsForLeaderEpoch, rejoins the ISR, and all three logs converge byte for
//! byte.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::kafka_client::batch;
use epochal_broker::state_change_log;

const TIMEOUT: Duration = Duration::from_secs(60);

fn produce_all(c: &mut common::kafka_client::KafkaClient, prefix: &str, batches: usize) -> i64 {
    let mut last = -1;
    for b in 0..batches {
        let values: Vec<Vec<u8>> = (0..5)
            .map(|i| format!("{prefix}-b{b}-r{i}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let (err, base) = c.produce("f", 0, batch(&refs), -1).unwrap();
        assert_eq!(err, 0, "{prefix} batch {b}");
        last = base + 4;
    }
    last
}

#[test]
fn cluster_failover_after_kill_9_elects_epoch_plus_one_and_the_old_leader_converges() {
    let mut cluster = Cluster::start_meshed(
        3,
        &[
            "--lease-ttl-s",
            "2",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "30000",
        ],
    );
    assert_eq!(cluster.client(1).create_topic("f", 1, 3), 0);
    let before = cluster.await_state("a full ISR", TIMEOUT, "f", 0, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    let old = before.leader;
    let mut leader = cluster.client(old);
    produce_all(&mut leader, "first", 20);

    // A batch only the leader gets: nothing the leader sends to another broker
    // passes the cut (the test's client talks to it directly), acks=1.
    cluster.peers[&old].cut();
    let (err, doomed) = leader
        .produce("f", 0, batch(&[b"only on the old leader"]), 1)
        .unwrap();
    assert_eq!(err, 0);
    cluster.broker_mut(old).kill9();
    let killed = Instant::now();

    let after = cluster.await_state("a new leader", TIMEOUT, "f", 0, |s| {
        s.leader > 0 && s.leader != old
    });
    assert_eq!(after.leader_epoch, before.leader_epoch + 1, "{after:?}");
    assert!(!after.isr.contains(&old), "the dead leader left the ISR");
    let mut new_leader = cluster.client(after.leader);
    let (err, base) = common::await_some_or(
        "the new leader to take an acks=all write",
        TIMEOUT,
        || {
            let r = new_leader
                .produce("f", 0, batch(&[b"first on the new leader"]), -1)
                .ok()?;
            (r.0 == 0).then_some(r)
        },
        || cluster.logs(),
    );
    let failover = killed.elapsed();
    eprintln!(
        "failover: {failover:?} from kill -9 of broker {old} to the first acks=all write \
         acknowledged by broker {} (leader epoch {}; lease TTL 2 s)",
        after.leader, after.leader_epoch
    );
    assert_eq!(
        (err, base),
        (0, doomed),
        "the new leader continues where the ISR ended"
    );
    produce_all(&mut new_leader, "second", 20);

    cluster.restart(old);
    cluster.peers[&old].heal();
    cluster.await_state("the old leader back in the ISR", TIMEOUT, "f", 0, |s| {
        s.isr.len() == 3 && s.leader == after.leader
    });
    cluster.await_converged(&[1, 2, 3], "f", 0, 1, TIMEOUT);
    let log = cluster.broker(old).log();
    assert!(
        log.contains("follower truncated its log"),
        "the old leader truncated:\n{log}"
    );
    let records = new_leader.fetch_all("f", 0, 0);
    assert!(
        records.iter().all(|(_, v)| v != b"only on the old leader"),
        "the unreplicated acks=1 batch is gone"
    );
    assert_eq!(records.len(), 100 + 1 + 100);
    let epochs = cluster.epoch_file(old, "f", 0);
    assert_eq!(
        epochs,
        format!("0\n2\n0 0\n{} {}\n", after.leader_epoch, doomed),
        "epoch 0 from 0, the new epoch from where the old leader's batch was cut"
    );
    let applied = state_change_log::read_all(&cluster.broker(old).data_dir).unwrap();
    assert!(
        applied
            .iter()
            .any(|c| c.request == "LeaderAndIsr" && c.leader == after.leader),
        "the restarted broker was told who leads"
    );
}
