//! Two brokers share one controller: each gets LeaderAndIsr for the partitions
//! it replicates (leader or not), every broker answers Metadata with both brokers
//! and every leader, any broker accepts CreateTopics, and when the controller
//! stops cleanly the other broker takes over with the next controller epoch.
//! (Replication between them is issue [replication]'s.)

use crate::common;

use std::time::Duration;

use common::broker_process::BrokerProcess;
use common::etcd::Etcd;
use common::kafka_client::{KafkaClient, batch};
use epochal_broker::controller::metadata_store::controller_epoch_key;
use epochal_broker::state_change_log::{self, Outcome};

#[test]
fn cluster_two_brokers_share_a_controller_and_hand_it_over() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let mut b1 = BrokerProcess::start(
        1,
        &etcd.endpoint,
        &dir.path().join("b1"),
        &["--lease-ttl-s", "2"],
    );
    common::await_some(
        "broker 1 to become controller",
        Duration::from_secs(15),
        || etcd.get(&controller_epoch_key()),
    );
    let b2 = BrokerProcess::start(
        2,
        &etcd.endpoint,
        &dir.path().join("b2"),
        &["--lease-ttl-s", "2"],
    );
    let mut c1 = KafkaClient::connect(&b1.addr).unwrap();
    let mut c2 = KafkaClient::connect(&b2.addr).unwrap();
    common::await_some("broker 1 to know broker 2", Duration::from_secs(15), || {
        (c1.metadata(None).brokers.len() == 2).then_some(())
    });

    // CreateTopics through the broker that is not the controller.
    assert_eq!(c2.create_topic("pair", 2, 2), 0, "b2 log:\n{}", b2.log());
    for c in [&mut c1, &mut c2] {
        // CreateTopics answers once the broker that took it (b2) knows every
        // partition's leader, as Kafka's does; the other broker learns them
        // from the controller's UpdateMetadata a moment later (seen empty on
        // b1 under ci/stress.sh).
        let meta = common::await_some(
            "both partitions of pair with a leader in the broker's metadata",
            Duration::from_secs(15),
            || {
                let meta = c.metadata(Some(&["pair"]));
                let parts = &meta.topics.first()?.partitions;
                (parts.len() == 2 && parts.iter().all(|p| p.leader_id.0 >= 0)).then_some(meta)
            },
        );
        assert_eq!(meta.controller_id.0, 1);
        let parts = &meta.topics[0].partitions;
        assert_eq!(parts[0].leader_id.0, 1);
        assert_eq!(
            parts[0]
                .replica_nodes
                .iter()
                .map(|b| b.0)
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(parts[1].leader_id.0, 2);
        assert_eq!(
            parts[1]
                .replica_nodes
                .iter()
                .map(|b| b.0)
                .collect::<Vec<_>>(),
            vec![2, 1]
        );
    }
    let applied: Vec<(i32, i32)> = state_change_log::read_all(&b2.data_dir)
        .unwrap()
        .into_iter()
        .filter(|c| {
            c.request == "LeaderAndIsr" && c.topic == "pair" && c.outcome == Outcome::Applied
        })
        .map(|c| (c.partition, c.leader))
        .collect();
    assert_eq!(
        applied,
        vec![(0, 1), (1, 2)],
        "broker 2 applied both partitions' states"
    );
    assert_eq!(
        c2.produce("pair", 1, batch(&[b"led by 2"]), 1).unwrap().0,
        0
    );
    assert_eq!(
        c2.produce("pair", 0, batch(&[b"led by 1"]), 1).unwrap().0,
        6,
        "NOT_LEADER_OR_FOLLOWER"
    );

    // The controller stops cleanly (its lease revoked): broker 2 takes over.
    assert!(
        b1.terminate(Duration::from_secs(15)),
        "b1 log:\n{}",
        b1.log()
    );
    common::await_some_or(
        "broker 2 to become controller with epoch 2",
        Duration::from_secs(15),
        || {
            let meta = c2.metadata(None);
            (meta.controller_id.0 == 2 && meta.brokers.len() == 1).then_some(())
        },
        || b2.log(),
    );
    assert_eq!(etcd.get(&controller_epoch_key()).as_deref(), Some("2"));
}
