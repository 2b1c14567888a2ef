//! Acceptance (issue 4): state-change.log holds the LeaderAndIsr that made the
//! broker leader, carrying the controller epoch stored in etcd; after a clean
//! restart the new controller's epoch is one higher, in etcd and in the log.

use crate::common;

use std::time::Duration;

use common::broker_process::BrokerProcess;
use common::etcd::Etcd;
use common::kafka_client::{KafkaClient, batch};
use epochal_broker::controller::metadata_store::{
    broker_key, controller_epoch_key, partition_state_key,
};
use epochal_broker::state_change_log::{self, Outcome, StateChange};

fn made_leader(changes: &[StateChange], topic: &str, epoch: i32) -> Option<StateChange> {
    changes
        .iter()
        .find(|c| {
            c.request == "LeaderAndIsr"
                && c.topic == topic
                && c.partition == 0
                && c.leader == 1
                && c.outcome == Outcome::Applied
                && c.controller_epoch == epoch
        })
        .cloned()
}

#[test]
fn cluster_state_change_log_records_the_leader_and_isr_with_the_etcd_controller_epoch() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("b1");
    let mut broker = BrokerProcess::start(1, &etcd.endpoint, &data, &["--lease-ttl-s", "2"]);
    let mut client = KafkaClient::connect(&broker.addr).unwrap();
    assert_eq!(client.create_topic("t", 1, 1), 0);

    let stored: i32 = etcd
        .get(&controller_epoch_key())
        .expect("controller epoch in etcd")
        .parse()
        .unwrap();
    assert_eq!(
        stored, 1,
        "the first controller's epoch (KAFKA-532's InitialControllerEpoch)"
    );
    // The partition state the controller wrote, by compare-and-swap, in etcd.
    let state: serde_json::Value = serde_json::from_str(
        &etcd
            .get(&partition_state_key("t", 0))
            .expect("partition state in etcd"),
    )
    .unwrap();
    assert_eq!(
        state,
        serde_json::json!({"leader": 1, "leader_epoch": 0, "isr": [1], "controller_epoch": 1})
    );
    let registration: serde_json::Value =
        serde_json::from_str(&etcd.get(&broker_key(1)).expect("registration in etcd")).unwrap();
    assert_eq!(
        registration["port"].to_string(),
        broker.addr.rsplit_once(':').unwrap().1
    );
    let changes = state_change_log::read_all(&data).unwrap();
    let line = made_leader(&changes, "t", stored).unwrap_or_else(|| {
        panic!("no applied LeaderAndIsr for t-0 at epoch {stored}: {changes:#?}")
    });
    assert_eq!(line.controller_id, 1);
    assert_eq!(line.leader_epoch, 0);
    assert_eq!(line.isr, vec![1]);
    let (err, _) = client
        .produce("t", 0, batch(&[b"before restart"]), 1)
        .unwrap();
    assert_eq!(err, 0);

    // SIGTERM: a clean stop gives the lease back, so the restarted broker wins
    // the controller key at once and bumps the epoch.
    assert!(
        broker.terminate(Duration::from_secs(15)),
        "clean shutdown; log:\n{}",
        broker.log()
    );
    assert!(
        data.join(".kafka_cleanshutdown").exists(),
        "clean-shutdown marker"
    );
    let hw = std::fs::read_to_string(data.join("replication-offset-checkpoint")).unwrap();
    assert_eq!(
        hw, "0\n1\nt 0 1\n",
        "high-watermark checkpoint written at shutdown"
    );
    broker.restart();
    let epoch = common::await_some(
        "controller epoch 2 in etcd",
        Duration::from_secs(15),
        || {
            etcd.get(&controller_epoch_key())
                .and_then(|v| v.parse::<i32>().ok())
                .filter(|e| *e == 2)
        },
    );
    let line = common::await_some(
        "LeaderAndIsr at controller epoch 2",
        Duration::from_secs(15),
        || made_leader(&state_change_log::read_all(&data).ok()?, "t", epoch),
    );
    assert_eq!(line.leader, 1);
}
