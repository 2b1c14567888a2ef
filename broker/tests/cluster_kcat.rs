//! Acceptance (issue 4): a real etcd and one broker; a topic created through
//! CreateTopics; then the real `kcat` lists it, produces 1000 messages and reads
//! back exactly those 1000, in order; then the same for each compression codec.

use crate::common;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::broker_process::BrokerProcess;
use common::etcd::Etcd;
use common::kafka_client::KafkaClient;

/// Run kcat with `stdin`, killing it if it has not finished within `timeout`.
fn kcat(args: &[&str], stdin: &[u8], timeout: Duration) -> Output {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat must be installed (Debian: kcat)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_err() {
                return;
            }
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    });
    let out = child.wait_with_output().unwrap();
    drop(watchdog);
    out
}

/// `-C -e -q` from the beginning of partition 0 of `topic`, within 60 s.
fn kcat_consume(addr: &str, topic: &str) -> Output {
    kcat(
        &[
            "-C",
            "-b",
            addr,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
        ],
        b"",
        Duration::from_secs(60),
    )
}

/// kcat's stdout, a message a line.
fn lines(out: Output) -> Vec<String> {
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// -L: the broker and the topic (all topics listed), as JSON.
fn assert_kcat_lists_the_topic(broker: &BrokerProcess, topic: &str) {
    let out = kcat(
        &["-L", "-J", "-b", &broker.addr],
        b"",
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "kcat -L failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(meta["brokers"][0]["id"], 1);
    assert_eq!(meta["brokers"][0]["name"], broker.addr);
    assert_eq!(meta["controllerid"], 1);
    let listed = meta["topics"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{meta}");
    assert_eq!(listed[0]["topic"], topic);
    assert_eq!(listed[0]["partitions"][0]["leader"], 1);
    assert_eq!(
        listed[0]["partitions"][0]["isrs"],
        serde_json::json!([{"id": 1}])
    );
}

/// -P: 1000 messages, acks=all (librdkafka's default), one per line; returns
/// them and how long kcat took.
fn kcat_produces_1000(broker: &BrokerProcess, topic: &str) -> (Vec<String>, Duration) {
    let messages: Vec<String> = (0..1000).map(|i| format!("message-{i:04}")).collect();
    let input = messages.join("\n") + "\n";
    let started = Instant::now();
    let out = kcat(
        &["-P", "-b", &broker.addr, "-t", topic, "-p", "0"],
        input.as_bytes(),
        Duration::from_secs(60),
    );
    let produce_time = started.elapsed();
    assert!(
        out.status.success(),
        "kcat -P failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (messages, produce_time)
}

/// -C -e: exactly those 1000, in order; returns how long kcat took.
fn kcat_consumes_them(broker: &BrokerProcess, topic: &str, messages: &[String]) -> Duration {
    let started = Instant::now();
    let out = kcat_consume(&broker.addr, topic);
    let consume_time = started.elapsed();
    assert!(
        out.status.success(),
        "kcat -C failed: {}\nbroker log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        broker.log()
    );
    let got = lines(out);
    assert_eq!(got.len(), 1000, "consumed {} messages", got.len());
    assert_eq!(got, messages);
    consume_time
}

/// Compressed batches are stored as sent and read back by the client: 100
/// messages with `codec` to a topic of their own, read back in order.
fn assert_codec_round_trips(broker: &BrokerProcess, client: &mut KafkaClient, codec: &str) {
    let topic = format!("kcat-{codec}");
    assert_eq!(client.create_topic(&topic, 1, 1), 0);
    let messages: Vec<String> = (0..100).map(|i| format!("{codec}-{i:03}")).collect();
    let input = messages.join("\n") + "\n";
    let out = kcat(
        &[
            "-P",
            "-b",
            &broker.addr,
            "-t",
            &topic,
            "-p",
            "0",
            "-z",
            codec,
        ],
        input.as_bytes(),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "kcat -P -z {codec}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kcat_consume(&broker.addr, &topic);
    assert!(
        out.status.success(),
        "kcat -C ({codec}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(lines(out), messages, "{codec}");
}

#[test]
fn cluster_kcat_lists_produces_and_consumes_1000_messages() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProcess::start(
        1,
        &etcd.endpoint,
        &dir.path().join("b1"),
        &["--lease-ttl-s", "2"],
    );
    let topic = "kcat-round-trip";
    let mut client = KafkaClient::connect(&broker.addr).unwrap();
    assert_eq!(
        client.create_topic(topic, 1, 1),
        0,
        "CreateTopics; broker log:\n{}",
        broker.log()
    );

    assert_kcat_lists_the_topic(&broker, topic);
    let (messages, produce_time) = kcat_produces_1000(&broker, topic);
    let consume_time = kcat_consumes_them(&broker, topic, &messages);
    eprintln!("kcat 1000 messages: produce {produce_time:?}, consume {consume_time:?}");
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        assert_codec_round_trips(&broker, &mut client, codec);
    }
}
