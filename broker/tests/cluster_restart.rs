//! Acceptance (issue 4): records produced with acks=1 under `--flush-messages 1`
//! all read back after the broker is killed with SIGKILL and restarted.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::broker_process::BrokerProcess;
use common::etcd::Etcd;
use common::kafka_client::{KafkaClient, batch};

#[test]
fn cluster_restart_after_kill_9_keeps_every_acked_record() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("b1");
    let mut broker = BrokerProcess::start(
        1,
        &etcd.endpoint,
        &data,
        &["--lease-ttl-s", "2", "--flush-messages", "1"],
    );
    let mut client = KafkaClient::connect(&broker.addr).unwrap();
    assert_eq!(client.create_topic("durable", 1, 1), 0);

    // 200 batches of 5 records, each acknowledged with acks=1.
    let mut acked: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
    for b in 0..200 {
        let values: Vec<Vec<u8>> = (0..5).map(|i| format!("b{b}-r{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let (err, base) = client.produce("durable", 0, batch(&refs), 1).unwrap();
        assert_eq!(err, 0, "produce batch {b}");
        for (i, v) in values.into_iter().enumerate() {
            acked.insert(base + i as i64, v);
        }
    }
    assert_eq!(acked.len(), 1000);

    broker.kill9();
    let killed = Instant::now();
    broker.restart();
    // The old session's controller key lives until its lease (2 s) expires; the
    // restarted broker then wins, and makes itself leader again.
    let mut client = KafkaClient::connect(&broker.addr).unwrap();
    common::await_some(
        "the restarted broker to lead durable-0",
        Duration::from_secs(30),
        || {
            let (err, hw, _) = client.fetch("durable", 0, 0, 0).ok()?;
            (err == 0 && hw >= 1000).then_some(())
        },
    );
    eprintln!("leader again {:?} after kill -9", killed.elapsed());
    let got: BTreeMap<i64, Vec<u8>> = client.fetch_all("durable", 0, 0).into_iter().collect();
    for (offset, value) in &acked {
        assert_eq!(
            got.get(offset),
            Some(value),
            "acked record at offset {offset} after restart"
        );
    }
    assert_eq!(got.len(), acked.len(), "no extra records");
    let (err, base) = client
        .produce("durable", 0, batch(&[b"after restart"]), 1)
        .unwrap();
    assert_eq!(
        (err, base),
        (0, 1000),
        "appends continue at the recovered end"
    );
}
