//! A broker paused past its lease TTL loses its etcd session (registration and
//! controller key vanish, as an expired ZooKeeper session's ephemeral znodes
//! did); resumed, it registers again under a new lease, wins the controller
//! again with a higher epoch, and serves its partition again once the new
//! controller has reinstated its leadership.

use crate::common;

use std::time::Duration;

use common::broker_process::BrokerProcess;
use common::etcd::Etcd;
use common::kafka_client::{KafkaClient, batch};
use epochal_broker::controller::metadata_store::{
    broker_key, controller_epoch_key, controller_key,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

#[test]
fn cluster_session_expired_by_a_pause_is_reopened_on_resume() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProcess::start(
        1,
        &etcd.endpoint,
        &dir.path().join("b1"),
        &["--lease-ttl-s", "1"],
    );
    let mut client = KafkaClient::connect(&broker.addr).unwrap();
    assert_eq!(client.create_topic("s", 1, 1), 0);
    assert_eq!(etcd.get(&controller_epoch_key()).as_deref(), Some("1"));

    let pid = Pid::from_raw(broker.pid() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    common::await_some(
        "the paused broker's registration to expire",
        Duration::from_secs(15),
        || etcd.get(&broker_key(1)).is_none().then_some(()),
    );
    assert!(
        etcd.get(&controller_key()).is_none(),
        "the controller key went with the lease"
    );
    kill(pid, Signal::SIGCONT).unwrap();

    common::await_some_or(
        "re-registration",
        Duration::from_secs(15),
        || etcd.get(&broker_key(1)),
        || broker.log(),
    );
    common::await_some_or(
        "a new controller epoch",
        Duration::from_secs(15),
        || (etcd.get(&controller_epoch_key()).as_deref() == Some("2")).then_some(()),
        || broker.log(),
    );
    // Its leadership lapsed with the old lease (a fenced leader acknowledges
    // nothing); the new controller's LeaderAndIsr, right after the epoch bump,
    // reinstates it.
    common::await_some_or(
        "the partition to take writes again",
        Duration::from_secs(15),
        || {
            let (err, _) = client
                .produce("s", 0, batch(&[b"after the pause"]), 1)
                .ok()?;
            (err == 0).then_some(())
        },
        || broker.log(),
    );
    assert!(broker.log().contains("registering again"));
}
