//! Transaction markers over the wire (KIP-98), the partition side of
//! transactions on three real brokers: a transactional batch holds a
//! read_committed fetch at its first offset (the last stable offset) while
//! read_uncommitted reads it; WriteTxnMarkers from the coordinator ends it —
//! answered once the ISR holds the marker — after which read_committed reads
//! past it and is told the aborted transaction, not the committed one; a
//! marker from an older coordinator epoch, or to a broker that does not lead
//! the partition, is refused; every replica's `.txnindex` holds the abort.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, topic, transactional_batch};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, WriteTxnMarkersRequest};

const TIMEOUT: Duration = Duration::from_secs(60);
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const TRANSACTION_COORDINATOR_FENCED: i16 = 52;

/// (high watermark, last stable offset, aborted (pid, first offset), whether records came).
fn fetch_committed(c: &mut KafkaClient, isolation_level: i8) -> (i64, i64, Vec<(i64, i64)>, bool) {
    let f = c.fetch_isolated("t", 0, isolation_level);
    (
        f.high_watermark,
        f.last_stable_offset,
        f.aborted,
        !f.records.is_empty(),
    )
}

fn marker(c: &mut KafkaClient, pid: i64, commit: bool, coordinator_epoch: i32) -> i16 {
    let req = WriteTxnMarkersRequest::default().with_markers(vec![
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(0)
            .with_transaction_result(commit)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(topic("t"))
                    .with_partition_indexes(vec![0]),
            ]),
    ]);
    let resp = c.send(&req, 1).unwrap();
    resp.markers[0].topics[0].partitions[0].error_code
}

#[test]
fn cluster_txn_markers_end_transactions_and_read_committed_reads_to_the_last_stable_offset() {
    let cluster = Cluster::start(
        3,
        &["--lease-ttl-s", "2", "--replica-fetch-wait-max-ms", "50"],
    );
    assert_eq!(cluster.client(1).create_topic("t", 1, 3), 0);
    let state = cluster.await_state("a full ISR", TIMEOUT, "t", 0, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    let mut leader = cluster.client(state.leader);
    let (err, base) = leader
        .produce("t", 0, transactional_batch(7, 0, 0, &[b"x", b"y"]), -1)
        .unwrap();
    assert_eq!((err, base), (0, 0));
    let (hw, lso, aborted, _) = fetch_committed(&mut leader, 1);
    assert_eq!(
        (hw, lso, aborted),
        (2, 0, vec![]),
        "the open transaction bounds the LSO"
    );
    assert!(
        fetch_committed(&mut leader, 0).3,
        "read_uncommitted reads it"
    );
    assert!(
        !fetch_committed(&mut leader, 1).3,
        "read_committed does not"
    );

    assert_eq!(marker(&mut leader, 7, false, 3), 0, "abort");
    let (_, base) = leader
        .produce("t", 0, transactional_batch(8, 0, 0, &[b"z"]), -1)
        .unwrap();
    assert_eq!(base, 3);
    assert_eq!(marker(&mut leader, 8, true, 3), 0, "commit");
    let (hw, lso, aborted, batches) = fetch_committed(&mut leader, 1);
    assert_eq!((hw, lso), (5, 5));
    assert_eq!(aborted, vec![(7, 0)], "the abort, not the commit");
    assert!(batches);

    assert_eq!(
        marker(&mut leader, 8, true, 2),
        TRANSACTION_COORDINATOR_FENCED
    );
    let other = (1..=3).find(|b| *b != state.leader).unwrap();
    assert_eq!(
        marker(&mut cluster.client(other), 8, true, 3),
        NOT_LEADER_OR_FOLLOWER
    );

    // Answered only once the ISR held the marker: every replica indexed the abort.
    for id in 1..=3 {
        let path = cluster
            .partition_dir(id, "t", 0)
            .join("00000000000000000000.txnindex");
        let index = common::await_some(&format!("b{id}'s .txnindex"), TIMEOUT, || {
            std::fs::read(&path).ok().filter(|b| !b.is_empty())
        });
        assert_eq!(index.len(), 34, "b{id}: one aborted transaction");
    }
}
