//! Start-up against a coordinator that is not there yet, or never comes, and a
//! data directory another broker holds: the broker waits for etcd within
//! `--etcd-connect-timeout-ms` (as ZooKeeper-era Kafka waited
//! `zookeeper.connection.timeout.ms`), gives up with one line naming etcd's
//! address, and refuses a locked data directory (Kafka's `.lock`).

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::broker_process::BrokerProcess;
use common::etcd::{Etcd, free_port};
use common::kafka_client::KafkaClient;
use epochal_broker::controller::metadata_store::broker_key;

/// Runs the broker binary with `args` until it exits (bounded by `within`);
/// returns its exit code and stderr.
fn run_to_exit(args: &[&str], within: Duration) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_epochal-broker"))
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("EPOCHAL_FAILPOINTS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            return (status.code(), stderr, started.elapsed());
        }
        if started.elapsed() > within {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "broker still running after {within:?}; stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn cluster_startup_a_broker_started_before_etcd_waits_and_joins() {
    // The broker dials a port where etcd starts 2 s later (a delay the test
    // keeps on purpose: "started together, etcd a little slower").
    let dir = tempfile::tempdir().unwrap();
    let etcd = loop {
        let port = free_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let data = dir.path().join(format!("b1-{port}"));
        let broker = std::thread::spawn(move || BrokerProcess::start(1, &endpoint, &data, &[]));
        std::thread::sleep(Duration::from_secs(2));
        if let Some(etcd) = Etcd::try_start(port) {
            let broker = broker.join().expect("the broker joined once etcd came");
            break (etcd, broker);
        }
        // Someone took the port meanwhile: the broker gives up within its
        // default deadline; try again on another.
        let _ = broker.join();
    };
    let (etcd, broker) = etcd;
    assert!(
        etcd.get(&broker_key(1)).is_some(),
        "b1 registered; log:\n{}",
        broker.log()
    );
    assert!(
        broker.log().contains("etcd not reachable yet; retrying"),
        "{}",
        broker.log()
    );
    // It serves.
    let mut client = KafkaClient::connect(&broker.addr).unwrap();
    assert_eq!(client.create_topic("t", 1, 1), 0);
}

#[test]
fn cluster_startup_without_etcd_the_broker_exits_within_its_deadline_naming_the_address() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let data = dir.path().join("b1");
    let (code, stderr, took) = run_to_exit(
        &[
            "--node-id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
            "--etcd",
            &endpoint,
            "--etcd-connect-timeout-ms",
            "1500",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("epochal-broker: error: ")
            && last.contains(&format!("etcd at {endpoint} not reachable within")),
        "{stderr}"
    );
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
    assert!(
        took >= Duration::from_millis(1000),
        "gave up too soon: {took:?}"
    );
    assert!(
        stderr.matches("etcd not reachable yet; retrying").count() >= 2,
        "{stderr}"
    );
}

#[test]
fn cluster_startup_a_second_broker_on_a_locked_data_dir_exits_and_the_first_serves_on() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("shared");
    let first = BrokerProcess::start(1, &etcd.endpoint, &data, &[]);
    let (code, stderr, _) = run_to_exit(
        &[
            "--node-id",
            "2",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
            "--etcd",
            &etcd.endpoint,
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!(
            "data directory {} is in use by another broker",
            data.display()
        )) && last.contains(".lock is locked"),
        "{stderr}"
    );
    // The second broker never registered; the first still answers.
    assert!(etcd.get(&broker_key(2)).is_none());
    let mut client = KafkaClient::connect(&first.addr).unwrap();
    assert_eq!(client.create_topic("t", 1, 1), 0);
}
