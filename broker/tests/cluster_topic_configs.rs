//! Per-topic configs take effect ([clients]): `unclean.leader.election.enable`
//! set on one topic lets it elect an out-of-sync replica when its last ISR
//! member dies, while a topic on the broker's default (off) goes offline in
//! the same failure — decided by a controller that took over after the
//! failure and read the configs from etcd; `segment.bytes` set on a topic
//! rolls its segments at that size, the broker's default leaving another
//! topic's in one.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, batch, topic};
use kafka_protocol::messages::CreateTopicsRequest;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::protocol::StrBytes;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Creates `name` (1 partition, `rf` replicas) with `configs`; its error code.
fn create_with(c: &mut KafkaClient, name: &str, rf: i16, configs: &[(&str, &str)]) -> i16 {
    let req = CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(topic(name))
                .with_num_partitions(1)
                .with_replication_factor(rf)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string((*k).to_owned()))
                                .with_value(Some(StrBytes::from_string((*v).to_owned())))
                        })
                        .collect(),
                ),
        ])
        .with_timeout_ms(15_000);
    c.send(&req, 5).unwrap().topics[0].error_code
}

#[test]
fn cluster_topic_configs_unclean_election_is_decided_per_topic() {
    let mut cluster = Cluster::start(
        2,
        &[
            "--lease-ttl-s",
            "4",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "1000",
            "--unclean-leader-election",
            "false",
        ],
    );
    let mut c = cluster.client(1);
    assert_eq!(
        create_with(
            &mut c,
            "unclean",
            2,
            &[("unclean.leader.election.enable", "true")]
        ),
        0
    );
    assert_eq!(create_with(&mut c, "clean", 2, &[]), 0);
    assert_eq!(
        create_with(
            &mut c,
            "bad",
            2,
            &[("unclean.leader.election.enable", "yes")]
        ),
        40
    );
    for t in ["unclean", "clean"] {
        cluster.await_state("a full ISR", TIMEOUT, t, 0, |s| {
            s.leader == 1 && s.isr.len() == 2
        });
    }
    let pid = Pid::from_raw(cluster.broker(2).pid() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    for t in ["unclean", "clean"] {
        cluster.await_state("the ISR to shrink to the leader", TIMEOUT, t, 0, |s| {
            s.isr == vec![1]
        });
        let (err, _) = c.produce(t, 0, batch(&[b"only on 1"]), -1).unwrap();
        assert_eq!(err, 0);
    }
    cluster.broker_mut(1).kill9();
    kill(pid, Signal::SIGCONT).unwrap();
    let unclean = cluster.await_state("an unclean election", TIMEOUT, "unclean", 0, |s| {
        s.leader == 2
    });
    assert_eq!(unclean.isr, vec![2]);
    let clean = cluster.await_state("the default topic offline", TIMEOUT, "clean", 0, |s| {
        s.leader_epoch > 1 || s.leader == -1
    });
    assert_eq!(
        (clean.leader, clean.isr.clone()),
        (-1, vec![1]),
        "{clean:?}"
    );
}

#[test]
fn cluster_topic_configs_segment_bytes_rolls_one_topic_s_segments() {
    let cluster = Cluster::start(1, &["--lease-ttl-s", "2"]);
    let mut c = cluster.client(1);
    assert_eq!(
        create_with(&mut c, "small", 1, &[("segment.bytes", "1024")]),
        0
    );
    assert_eq!(create_with(&mut c, "large", 1, &[]), 0);
    for t in ["small", "large"] {
        cluster.await_state("a leader", TIMEOUT, t, 0, |s| s.leader == 1);
        for i in 0..12 {
            let value = format!("{i:0>200}");
            let (err, _) = common::await_some("a produce", TIMEOUT, || {
                let r = c.produce(t, 0, batch(&[value.as_bytes()]), -1).ok()?;
                (r.0 == 0).then_some(r)
            });
            assert_eq!(err, 0);
        }
    }
    let segments = |t: &str| cluster.segments(1, t, 0).len();
    assert!(
        segments("small") >= 3,
        "small rolled: {}",
        segments("small")
    );
    assert_eq!(segments("large"), 1);
}
