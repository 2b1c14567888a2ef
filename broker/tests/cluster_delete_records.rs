//! DeleteRecords (KIP-107) on a three-broker cluster: the leader moves the
//! log start, the answer waits until both followers hold the same start
//! (they learn it from the leader's fetch answers and report theirs back),
//! a fetch below it is OFFSET_OUT_OF_RANGE, ListOffsets earliest answers it
//! on every replica, an offset past the high watermark is refused, a
//! follower keeps its start across a kill -9, and a follower whose log ends
//! below the leader's start restarts its log there.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, batch, topic};
use kafka_protocol::messages::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};

const DEBUGGING_REPLICA_ID: i32 = -2;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// DeleteRecords v2 for partition 0 of `name`: (error code, low watermark).
fn delete_records(c: &mut KafkaClient, name: &str, offset: i64) -> (i16, i64) {
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name(topic(name))
                .with_partitions(vec![
                    DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(offset),
                ]),
        ]);
    let resp = c.send(&req, 2).unwrap();
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

fn produce_n(c: &mut KafkaClient, name: &str, n: usize) {
    for i in 0..n {
        let value = format!("v{i}");
        let (err, _) = c.produce(name, 0, batch(&[value.as_bytes()]), -1).unwrap();
        assert_eq!(err, 0, "produce {i}");
    }
}

#[test]
fn cluster_delete_records_moves_every_replicas_log_start() {
    let mut cluster = Cluster::start(
        3,
        &["--lease-ttl-s", "3", "--replica-fetch-wait-max-ms", "100"],
    );
    assert_eq!(cluster.client(1).create_topic("dr", 1, 3), 0);
    let state = cluster.await_state(
        "a leader with all three replicas in the ISR",
        Duration::from_secs(30),
        "dr",
        0,
        |s| s.leader > 0 && s.isr.len() == 3,
    );
    let mut leader = cluster.client(state.leader);
    produce_n(&mut leader, "dr", 10);
    let followers: Vec<i32> = state
        .isr
        .iter()
        .copied()
        .filter(|id| *id != state.leader)
        .collect();

    assert_eq!(
        delete_records(&mut leader, "dr", 11),
        (OFFSET_OUT_OF_RANGE, -1)
    );
    assert_eq!(delete_records(&mut leader, "dr", -5).0, OFFSET_OUT_OF_RANGE);
    assert_eq!(
        delete_records(&mut cluster.client(followers[0]), "dr", 4).0,
        NOT_LEADER_OR_FOLLOWER
    );
    // Answered once every ISR member's start reached it.
    assert_eq!(delete_records(&mut leader, "dr", 4), (0, 4));
    for id in [state.leader, followers[0], followers[1]] {
        assert_eq!(
            cluster
                .client(id)
                .list_offset_as(DEBUGGING_REPLICA_ID, "dr", 0, -2)
                .unwrap(),
            (0, 4),
            "broker {id}'s log start\n{}",
            cluster.logs()
        );
    }
    assert_eq!(leader.list_offset_as(-1, "dr", 0, -2).unwrap(), (0, 4));
    let (err, _, _) = leader.fetch_as(-1, "dr", 0, 3, 0).unwrap();
    assert_eq!(err, OFFSET_OUT_OF_RANGE, "a fetch below the start");
    let (err, _, records) = leader.fetch_as(-1, "dr", 0, 4, 0).unwrap();
    assert_eq!(err, 0);
    assert_eq!(records.first().map(|(o, _)| *o), Some(4));
    // -1: the high watermark.
    assert_eq!(delete_records(&mut leader, "dr", -1), (0, 10));

    // A follower killed and restarted keeps its start (the checkpoint).
    let restarted = followers[0];
    let checkpoint = cluster
        .broker(restarted)
        .data_dir
        .join("log-start-offset-checkpoint");
    assert_eq!(
        std::fs::read_to_string(&checkpoint).unwrap(),
        "0\n1\ndr 0 10\n"
    );
    cluster.restart(restarted);
    common::await_some_or(
        "the restarted follower to serve its log start",
        Duration::from_secs(30),
        || {
            let answer = KafkaClient::connect(&cluster.broker(restarted).addr)
                .ok()?
                .list_offset_as(DEBUGGING_REPLICA_ID, "dr", 0, -2)
                .ok()?;
            (answer == (0, 10)).then_some(())
        },
        || cluster.logs(),
    );

    // A follower that misses records past the new start: stopped, the
    // leader moves on, and at its return it restarts its log at the start.
    let behind = followers[1];
    cluster.broker_mut(behind).kill9();
    let state = cluster.await_state(
        "the stopped follower out of the ISR",
        Duration::from_secs(60),
        "dr",
        0,
        |s| !s.isr.contains(&behind),
    );
    let mut leader = cluster.client(state.leader);
    produce_n(&mut leader, "dr", 5);
    assert_eq!(delete_records(&mut leader, "dr", -1), (0, 15));
    cluster.restart(behind);
    cluster.await_state(
        "the returned follower back in the ISR",
        Duration::from_secs(60),
        "dr",
        0,
        |s| s.isr.contains(&behind),
    );
    assert_eq!(
        cluster
            .client(behind)
            .list_offset_as(DEBUGGING_REPLICA_ID, "dr", 0, -2)
            .unwrap(),
        (0, 15),
        "{}",
        cluster.logs()
    );
}
