//! Idempotent producers against real brokers (KIP-98): InitProducerId hands out
//! ids unique across brokers and restarts, a retried batch is answered with its
//! original offset and held once, a sequence gap is refused — and with
//! `--producer-state-recovery kafka-5435` a replica that restarted before any
//! producer-state snapshot forgets the producer, so once it leads, the retry of
//! a batch it holds is appended a second time.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, idempotent_batch};
use epochal_broker::state_change_log;

const TIMEOUT: Duration = Duration::from_secs(60);
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const NOT_COORDINATOR: i16 = 16;

/// A fresh producer id from `client`, asserting the answer is clean.
fn producer_id(client: &mut KafkaClient, version: i16) -> i64 {
    let (err, id, epoch) = client.init_producer_id(version, None).unwrap();
    assert_eq!((err, epoch), (0, 0), "InitProducerId v{version}");
    id
}

fn values_in(client: &mut KafkaClient, topic: &str) -> Vec<(i64, String)> {
    client
        .fetch_all(topic, 0, 0)
        .into_iter()
        .map(|(offset, value)| (offset, String::from_utf8(value).unwrap()))
        .collect()
}

#[test]
fn cluster_idempotent_retries_are_written_once_and_producer_ids_never_repeat() {
    let mut cluster = Cluster::start(
        2,
        &["--lease-ttl-s", "2", "--replica-fetch-wait-max-ms", "100"],
    );
    let (mut c1, mut c2) = (cluster.client(1), cluster.client(2));

    // Each broker claims its own block of 1000 ids in etcd; every version a
    // client may send is answered alike.
    let first = producer_id(&mut c1, 0);
    assert_eq!(first, 0, "the first block starts at 0");
    for version in 1..=5 {
        assert_eq!(producer_id(&mut c1, version), first + i64::from(version));
    }
    let other = producer_id(&mut c2, 4);
    assert_eq!(other, 1000, "broker 2's block follows broker 1's");
    let (err, id, epoch) = c1.init_producer_id(4, Some("tx")).unwrap();
    assert_eq!(
        (err, id, epoch),
        (NOT_COORDINATOR, -1, -1),
        "a transactional id is its coordinator's, and none is elected before FindCoordinator"
    );

    assert_eq!(c1.create_topic("idem", 1, 2), 0);
    let state = cluster.await_state("a full ISR", TIMEOUT, "idem", 0, |s| {
        s.leader > 0 && s.isr.len() == 2
    });
    let mut leader = cluster.client(state.leader);
    let pid = first;
    let (err, base) = leader
        .produce("idem", 0, idempotent_batch(pid, 0, 0, &[b"a", b"b"]), -1)
        .unwrap();
    assert_eq!((err, base), (0, 0));
    let (err, base) = leader
        .produce("idem", 0, idempotent_batch(pid, 0, 2, &[b"c"]), -1)
        .unwrap();
    assert_eq!((err, base), (0, 2));
    // The producer never saw the first answer and sends the batch again.
    let (err, base) = leader
        .produce("idem", 0, idempotent_batch(pid, 0, 0, &[b"a", b"b"]), -1)
        .unwrap();
    assert_eq!((err, base), (0, 0), "answered with the original offset");
    let (err, _) = leader
        .produce("idem", 0, idempotent_batch(pid, 0, 5, &[b"gap"]), -1)
        .unwrap();
    assert_eq!(err, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(
        values_in(&mut leader, "idem"),
        [(0, "a".into()), (1, "b".into()), (2, "c".into())],
        "each batch once"
    );

    // A restarted broker claims a block after every block claimed so far.
    let follower = if state.leader == 1 { 2 } else { 1 };
    cluster.restart(follower);
    let mut restarted = cluster.client(follower);
    let after = producer_id(&mut restarted, 3);
    assert_eq!(after, 2000, "a new block, not the rest of the old one");
}

/// A replica that holds the producer's first batch is restarted before any
/// producer-state snapshot exists, then becomes leader; the producer retries
/// that batch. Returns the log as the new leader holds it.
fn retry_after_a_restarted_replica_leads(recovery: &str) -> Vec<(i64, String)> {
    let mut cluster = Cluster::start(
        2,
        &[
            "--lease-ttl-s",
            "2",
            "--replica-fetch-wait-max-ms",
            "100",
            "--producer-state-recovery",
            recovery,
        ],
    );
    let mut c = cluster.client(1);
    let pid = producer_id(&mut c, 4);
    assert_eq!(c.create_topic("idem", 1, 2), 0);
    let before = cluster.await_state("a full ISR", TIMEOUT, "idem", 0, |s| {
        s.leader > 0 && s.isr.len() == 2
    });
    let old = before.leader;
    let survivor = if old == 1 { 2 } else { 1 };
    let (err, base) = cluster
        .client(old)
        .produce("idem", 0, idempotent_batch(pid, 0, 0, &[b"x1", b"x2"]), -1)
        .unwrap();
    assert_eq!((err, base), (0, 0), "acks=all: both replicas hold it");

    // The follower crashes and comes back: its log was never rolled nor
    // cleanly closed, so it has no producer-state snapshot to start from.
    let applied = |cluster: &Cluster| {
        state_change_log::read_all(&cluster.broker(survivor).data_dir)
            .unwrap_or_default()
            .iter()
            .filter(|c| c.request == "LeaderAndIsr" && c.topic == "idem")
            .count()
    };
    let applied_before = applied(&cluster);
    cluster.restart(survivor);
    // Back as a follower (a LeaderAndIsr applied since the restart, so any ISR
    // shrink its re-registration caused is written), then back in the ISR.
    common::await_some_or(
        "the restarted replica to be told its role",
        TIMEOUT,
        || (applied(&cluster) > applied_before).then_some(()),
        || cluster.logs(),
    );
    cluster.await_state(
        "the restarted replica back in the ISR",
        TIMEOUT,
        "idem",
        0,
        |s| s.leader == old && s.isr.len() == 2,
    );
    // The leader dies; the restarted replica takes over.
    cluster.broker_mut(old).kill9();
    let after = cluster.await_state("the restarted replica to lead", TIMEOUT, "idem", 0, |s| {
        s.leader == survivor
    });
    assert!(after.leader_epoch > before.leader_epoch);

    // The producer's retry of the batch whose answer it never saw.
    let mut new_leader = cluster.client(survivor);
    common::await_some_or(
        "the new leader to take the retry",
        TIMEOUT,
        || {
            let (err, _) = new_leader
                .produce("idem", 0, idempotent_batch(pid, 0, 0, &[b"x1", b"x2"]), -1)
                .ok()?;
            (err == 0).then_some(())
        },
        || cluster.logs(),
    );
    values_in(&mut new_leader, "idem")
}

#[test]
fn cluster_current_recovery_rebuilds_producer_state_so_a_retry_after_failover_is_held_once() {
    let log = retry_after_a_restarted_replica_leads("current");
    assert_eq!(log, [(0, "x1".into()), (1, "x2".into())]);
}

#[test]
fn cluster_kafka_5435_recovery_forgets_the_producer_so_a_retry_after_failover_is_held_twice() {
    let log = retry_after_a_restarted_replica_leads("kafka-5435");
    assert_eq!(
        log,
        [
            (0, "x1".into()),
            (1, "x2".into()),
            (2, "x1".into()),
            (3, "x2".into()),
        ]
    );
}
