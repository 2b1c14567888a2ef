//! A broker whose request handling holds every async worker thread (as
//! fsyncs on a stalled disk did under ci/stress.sh) keeps its etcd session:
//! the heartbeat runs on a thread and connection of its own
//! (`Session::keep_alive_on_own_thread`), as ZooKeeper's client pinged from
//! its own SendThread. Before, a broker busy on its disk for longer than its
//! lease TTL lost its registration while alive.

use crate::common;

use std::time::{Duration, Instant};

use common::broker_process::BrokerProcess;
use common::etcd::Etcd;
use common::kafka_client::{KafkaClient, batch};
use epochal_broker::controller::metadata_store::broker_key;

#[test]
fn cluster_session_survives_every_worker_blocked_past_the_lease_ttl() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    // Every produce blocks the worker thread that handles it for 3 s (the
    // `fail` crate's sleep is a thread sleep): with at least as many produces
    // in flight as the runtime has workers, none is left for anything else,
    // for three 1 s TTLs and more.
    let broker = BrokerProcess::start_with_env(
        1,
        &etcd.endpoint,
        &dir.path().join("b1"),
        &["--lease-ttl-s", "1"],
        &[("EPOCHAL_FAILPOINTS", "leader-after-append=sleep(3000)")],
    );
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let producers = 2 * workers;
    let mut client = KafkaClient::connect(&broker.addr).unwrap();
    assert_eq!(client.create_topic("s", producers as i32, 1), 0);
    let registered = common::await_some_or(
        "the broker's registration",
        Duration::from_secs(15),
        || etcd.get(&broker_key(1)),
        || broker.log(),
    );

    let started = Instant::now();
    let sends: Vec<_> = (0..producers)
        .map(|partition| {
            let addr = broker.addr.clone();
            std::thread::spawn(move || {
                let mut client = KafkaClient::connect(&addr).unwrap();
                client.produce("s", partition as i32, batch(&[b"slow"]), 1)
            })
        })
        .collect();
    for send in sends {
        let (error, _) = send.join().unwrap().expect("produce answered");
        assert_eq!(error, 0, "{}", broker.log());
    }
    // The workers were held for more than the TTL, or this shows nothing.
    assert!(
        started.elapsed() > Duration::from_secs(3),
        "produces took only {:?}",
        started.elapsed()
    );
    // The registration is still there, and the log shows it never lapsed.
    assert_eq!(
        etcd.get(&broker_key(1)),
        Some(registered),
        "{}",
        broker.log()
    );
    let log = broker.log();
    assert!(
        !log.contains("registering again") && !log.contains("fenced"),
        "the session lapsed while the broker was busy:\n{log}"
    );
}
