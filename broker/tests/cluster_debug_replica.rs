//! Kafka's debugging replica id (-2, `Request.DebuggingConsumerId`): a Fetch or
//! ListOffsets carrying it is answered by any replica, follower included, from
//! that replica's own log — Fetch up to its HW and with its HW, ListOffsets
//! latest as its log end offset — while an ordinary client (-1) is still sent
//! to the leader.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::batch;

const DEBUGGING_REPLICA_ID: i32 = -2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

#[test]
fn cluster_debug_replica_id_reads_a_followers_own_hw_and_leo() {
    let cluster = Cluster::start(
        3,
        &["--lease-ttl-s", "3", "--replica-fetch-wait-max-ms", "100"],
    );
    assert_eq!(cluster.client(1).create_topic("d", 1, 3), 0);
    let state = cluster.await_state(
        "a leader with all three replicas in the ISR",
        Duration::from_secs(30),
        "d",
        0,
        |s| s.leader > 0 && s.isr.len() == 3,
    );
    let mut leader = cluster.client(state.leader);
    let mut expected = Vec::new();
    for b in 0..10 {
        let values: Vec<Vec<u8>> = (0..3).map(|i| format!("b{b}-r{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let (err, base) = leader.produce("d", 0, batch(&refs), -1).unwrap();
        assert_eq!(err, 0, "produce batch {b}\n{}", cluster.logs());
        assert_eq!(base, expected.len() as i64);
        expected.extend(values);
    }
    let end = expected.len() as i64;
    let follower = *state.isr.iter().find(|id| **id != state.leader).unwrap();
    let mut f = cluster.client(follower);

    // acks=all: the follower had appended everything before the answer, so its
    // LEO is the end at once; it learns the HW on a later fetch of its own.
    assert_eq!(
        f.list_offset_as(DEBUGGING_REPLICA_ID, "d", 0, -1).unwrap(),
        (0, end),
        "the follower's LEO"
    );
    assert_eq!(
        f.list_offset_as(DEBUGGING_REPLICA_ID, "d", 0, -2).unwrap(),
        (0, 0),
        "the follower's log start"
    );
    common::await_some_or(
        "the follower's own HW to reach the end",
        Duration::from_secs(30),
        || {
            let (err, hw, recs) = f.fetch_as(DEBUGGING_REPLICA_ID, "d", 0, end, 0).unwrap();
            assert_eq!(err, 0, "debug fetch at the LEO");
            assert!(recs.is_empty(), "nothing at the LEO: {recs:?}");
            assert!(hw <= end, "HW {hw} above the LEO {end}");
            (hw == end).then_some(())
        },
        || cluster.logs(),
    );
    // Reading it from the start gives what was produced, with the follower's HW.
    let (err, hw, recs) = f.fetch_as(DEBUGGING_REPLICA_ID, "d", 0, 0, 0).unwrap();
    assert_eq!((err, hw), (0, end));
    let got: Vec<(i64, Vec<u8>)> = recs;
    let want: Vec<(i64, Vec<u8>)> = expected
        .iter()
        .enumerate()
        .map(|(o, v)| (o as i64, v.clone()))
        .collect();
    assert_eq!(got, want);

    // An ordinary client is still refused by the follower, answered by the leader.
    let (err, _, recs) = f.fetch_as(-1, "d", 0, 0, 0).unwrap();
    assert_eq!(
        err, NOT_LEADER_OR_FOLLOWER,
        "client fetch from the follower"
    );
    assert!(recs.is_empty());
    assert_eq!(
        f.list_offset_as(-1, "d", 0, -1).unwrap().0,
        NOT_LEADER_OR_FOLLOWER,
        "client ListOffsets from the follower"
    );
    assert_eq!(leader.list_offset_as(-1, "d", 0, -1).unwrap(), (0, end));
    assert_eq!(
        leader
            .list_offset_as(DEBUGGING_REPLICA_ID, "d", 0, -1)
            .unwrap(),
        (0, end)
    );

    // A partition nobody hosts is unknown to the debugging id too.
    let (err, _, _) = f.fetch_as(DEBUGGING_REPLICA_ID, "nope", 0, 0, 0).unwrap();
    assert_eq!(err, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(
        f.list_offset_as(DEBUGGING_REPLICA_ID, "nope", 0, -1)
            .unwrap()
            .0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
}
