//! Acceptance (issue 5): three brokers replicate a topic with replication
//! factor 3. After 1000 records produced with acks=all, the three replicas'
//! segment files are byte-identical and their leader-epoch files equal — the
//! followers fetched the leader's batches as they were written, offsets and
//! epochs included. Every replica's periodic high-watermark checkpoint then
//! reaches the end (a follower learns the HW one fetch after the leader).

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::batch;

#[test]
fn cluster_replication_three_replicas_hold_identical_logs_after_acks_all() {
    let cluster = Cluster::start(
        3,
        &[
            "--lease-ttl-s",
            "3",
            "--replica-fetch-wait-max-ms",
            "100",
            "--hw-checkpoint-interval-ms",
            "200",
        ],
    );
    assert_eq!(cluster.client(1).create_topic("r", 1, 3), 0);
    let state = cluster.await_state(
        "a leader with all three replicas in the ISR",
        Duration::from_secs(30),
        "r",
        0,
        |s| s.leader > 0 && s.isr.len() == 3,
    );
    let mut leader = cluster.client(state.leader);
    // 200 batches of 5 records, each acknowledged with acks=all: every
    // acknowledgement means all three replicas have the batch.
    let mut next = 0i64;
    for b in 0..200 {
        let values: Vec<Vec<u8>> = (0..5).map(|i| format!("b{b}-r{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let (err, base) = leader.produce("r", 0, batch(&refs), -1).unwrap();
        assert_eq!(err, 0, "produce batch {b}\n{}", cluster.logs());
        assert_eq!(base, next);
        next += 5;
    }
    let read = leader.fetch_all("r", 0, 0);
    assert_eq!(read.len(), 1000, "a client reads every acknowledged record");
    cluster.await_converged(&[1, 2, 3], "r", 0, 1, Duration::from_secs(30));
    let epochs = cluster.epoch_file(1, "r", 0);
    assert_eq!(epochs, "0\n1\n0 0\n", "one epoch, starting at offset 0");
    let state = cluster.state("r", 0).unwrap();
    assert_eq!(state.isr.len(), 3, "nobody left the ISR: {state:?}");
    for id in 1..=3 {
        common::await_some_or(
            &format!("broker {id}'s HW checkpoint to reach 1000"),
            Duration::from_secs(30),
            || {
                let text = std::fs::read_to_string(
                    cluster
                        .broker(id)
                        .data_dir
                        .join("replication-offset-checkpoint"),
                )
                .ok()?;
                text.lines().any(|l| l == "r 0 1000").then_some(())
            },
            || cluster.logs(),
        );
    }
}
