//! The workload client against a real etcd and a real `epochal-broker`
//! process (started by path: the harness never links the broker crate).
//! Every wait polls a condition under a deadline; processes are killed and
//! reaped by Drop guards, on panics too.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use epochal::kafka_client::{
    ClientError, Compression, FetchOptions, KafkaClient, OffsetSpec, ProduceOptions, ProduceRecord,
    ReplicaOffsets,
};
use tempfile::TempDir;

use crate::common;
use common::etcd::{Etcd, Reaped, start_etcd};

const CALL: Duration = Duration::from_secs(10);
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Between two looks at a condition we are awaiting (never a wait for a state
/// by itself: each loop also has a deadline).
const POLL: Duration = Duration::from_millis(20);

/// The built `epochal-broker`: beside the test executable's `deps/` folder
/// (target/debug), or under `$CARGO_TARGET_DIR/debug`.
fn broker_binary() -> PathBuf {
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe()
        && let Some(profile_dir) = exe.parent().and_then(Path::parent)
    {
        candidates.push(profile_dir.join("epochal-broker"));
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(dir).join("debug").join("epochal-broker"));
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "epochal-broker is not built (looked at {candidates:?}); \
                 run `cargo build -p epochal-broker` first"
            )
        })
}

struct Broker {
    child: Reaped,
    addr: String,
    dir: TempDir,
}

impl Broker {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// State `T` (stopped) in `/proc/<pid>/stat`: the field after the
    /// parenthesised command name.
    fn is_stopped(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.0.id()))
            .unwrap_or_default();
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.0.id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
    }
}

async fn start_broker(etcd: &Etcd) -> Broker {
    start_broker_as(etcd, 1, &[]).await
}

/// Broker `node_id` with the flags `extra` besides the usual ones.
async fn start_broker_as(etcd: &Etcd, node_id: i32, extra: &[&str]) -> Broker {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let log = std::fs::File::create(dir.path().join("broker.log")).unwrap();
    let child = Command::new(broker_binary())
        .args(["--node-id", &node_id.to_string(), "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(&data)
        .args(["--etcd", &etcd.endpoint, "--lease-ttl-s", "2"])
        .args(extra)
        .env_remove("EPOCHAL_FAILPOINTS")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn epochal-broker");
    let mut broker = Broker {
        child: Reaped(child),
        addr: String::new(),
        dir,
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(text) = std::fs::read_to_string(data.join("listening"))
            && !text.trim().is_empty()
        {
            broker.addr = text.trim().to_string();
            return broker;
        }
        if let Ok(Some(status)) = broker.child.0.try_wait() {
            panic!(
                "broker exited during start ({status}); log:\n{}",
                broker.log()
            );
        }
        assert!(
            Instant::now() < deadline,
            "broker wrote no listening file within {START_TIMEOUT:?}; log:\n{}",
            broker.log()
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Await `cond` on fresh metadata, under a deadline.
async fn await_metadata(
    client: &mut KafkaClient,
    what: &str,
    cond: impl Fn(&epochal::kafka_client::Metadata) -> bool,
) {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let md = client.metadata(None, CALL).await.expect("metadata");
        if cond(&md) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not so within {START_TIMEOUT:?}; last {md:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

fn values(prefix: &str, n: usize) -> Vec<ProduceRecord> {
    (0..n)
        .map(|i| {
            let value = Bytes::from(format!("{prefix}-{i}").repeat(8));
            if i % 2 == 0 {
                ProduceRecord::keyed(format!("k{i}"), value)
            } else {
                ProduceRecord::value(value)
            }
        })
        .collect()
}

/// Broker 1 becomes controller and creates `t` (1 partition, RF 1), refuses
/// it a second time, and leads it alone.
async fn create_t_led_by_broker_1(c: &mut KafkaClient) {
    await_metadata(c, "broker 1 is controller", |md| md.controller_id == 1).await;
    c.create_topic("t", 1, 1, 10_000, CALL)
        .await
        .expect("create t");
    let again = c.create_topic("t", 1, 1, 10_000, CALL).await.unwrap_err();
    assert_eq!(again.code(), Some(36), "TOPIC_ALREADY_EXISTS, got {again}");
    await_metadata(c, "t-0 led by 1", |md| {
        md.partition("t", 0).is_some_and(|p| p.leader == 1)
    })
    .await;
    let md = c.metadata(Some(&["t"]), CALL).await.unwrap();
    assert_eq!(md.brokers.len(), 1);
    assert_eq!(md.brokers[0].node_id, 1);
    assert_eq!(md.partition("t", 0).unwrap().isr, vec![1]);
}

/// Every codec, acks=all and acks=1, several batches in one request; returns
/// every record with the offset it was given.
async fn produce_every_codec_and_acks(c: &mut KafkaClient) -> Vec<(i64, ProduceRecord)> {
    let mut expected: Vec<(i64, ProduceRecord)> = Vec::new();
    for compression in Compression::ALL {
        for acks in [-1, 1] {
            let records = values(&format!("{compression:?}{acks}"), 7);
            let options = ProduceOptions {
                acks,
                records_per_batch: 3,
                compression,
                timeout_ms: 10_000,
            };
            let produced = c
                .produce("t", 0, &records, &options, CALL)
                .await
                .unwrap_or_else(|e| panic!("produce {compression:?} acks={acks}: {e}"));
            assert_eq!(produced.base_offset, expected.len() as i64);
            for r in records {
                expected.push((expected.len() as i64, r));
            }
        }
    }
    expected
}

/// On disk (through the harness's own reader): 7 records cut 3 + 3 + 1 per
/// request, each batch in the asked codec, non-idempotent (no producer id,
/// base sequence -1), as a Java producer without idempotence writes them.
fn assert_batches_on_disk(broker: &Broker) {
    let state = epochal::reader::read_data_dir(&broker.dir.path().join("data")).unwrap();
    let replica = state.replica("t", 0).expect("t-0 on disk");
    let batches: Vec<_> = replica.batches().collect();
    let mut want = Vec::new();
    for compression in Compression::ALL {
        for _acks in [-1, 1] {
            for count in [3, 3, 1] {
                want.push((format!("{compression:?}"), count));
            }
        }
    }
    let got: Vec<_> = batches
        .iter()
        .map(|b| (format!("{:?}", b.codec), b.records_count))
        .collect();
    assert_eq!(got, want);
    for b in &batches {
        assert!(b.intact, "{b:?}");
        assert_eq!((b.producer_id, b.base_sequence), (-1, -1), "{b:?}");
    }
}

/// Read everything back from offset 0, and from the middle of a compressed
/// batch (which the broker returns whole).
async fn assert_fetches_everything_back(
    c: &mut KafkaClient,
    expected: &[(i64, ProduceRecord)],
    end: i64,
) {
    for start in [0, 4] {
        let mut got = Vec::new();
        let mut offset = start;
        let deadline = Instant::now() + START_TIMEOUT;
        while offset < end {
            assert!(Instant::now() < deadline, "fetch did not reach {end}");
            let fetched = c
                .fetch("t", 0, offset, &FetchOptions::default(), CALL)
                .await
                .expect("fetch");
            assert_eq!(fetched.high_watermark, end);
            for r in fetched.records {
                assert_eq!(r.offset, offset, "records arrive in order, none skipped");
                offset += 1;
                got.push(r);
            }
        }
        assert_eq!(got.len() as i64, end - start);
        for (r, (o, want)) in got.iter().zip(&expected[start as usize..]) {
            assert_eq!(r.offset, *o);
            assert_eq!(r.key, want.key);
            assert_eq!(r.value.as_ref(), Some(&want.value));
        }
    }
}

/// acks=0 gets no answer, yet the record lands (the log end moves past `end`).
async fn assert_acks0_lands(c: &mut KafkaClient, end: i64) {
    let produced = c
        .produce(
            "t",
            0,
            &values("fire-and-forget", 1),
            &ProduceOptions {
                acks: 0,
                ..ProduceOptions::default()
            },
            CALL,
        )
        .await
        .unwrap();
    assert_eq!(produced.base_offset, -1);
    let deadline = Instant::now() + START_TIMEOUT;
    while c
        .list_offset("t", 0, OffsetSpec::Latest, CALL)
        .await
        .unwrap()
        != end + 1
    {
        assert!(
            Instant::now() < deadline,
            "acks=0 record never became visible"
        );
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test]
async fn cluster_client_produces_fetches_and_lists_offsets_on_a_real_broker() {
    let etcd = start_etcd().await;
    let broker = start_broker(&etcd).await;
    let mut c = KafkaClient::connect(&broker.addr, "epochal-test", CALL)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}; log:\n{}", broker.log()));
    create_t_led_by_broker_1(&mut c).await;

    assert_eq!(
        c.list_offset("t", 0, OffsetSpec::Earliest, CALL)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        c.list_offset("t", 0, OffsetSpec::Latest, CALL)
            .await
            .unwrap(),
        0
    );

    let expected = produce_every_codec_and_acks(&mut c).await;
    let end = expected.len() as i64;
    assert_eq!(
        c.list_offset("t", 0, OffsetSpec::Latest, CALL)
            .await
            .unwrap(),
        end
    );
    assert_batches_on_disk(&broker);
    assert_fetches_everything_back(&mut c, &expected, end).await;
    assert_acks0_lands(&mut c, end).await;

    // A broker error is a typed code, and the connection stays usable.
    let err = c
        .fetch("no-such-topic", 0, 0, &FetchOptions::default(), CALL)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Broker { .. }), "{err}");
    assert!(c.is_connected());
}

#[tokio::test]
async fn cluster_client_reports_timeout_on_a_paused_broker_and_dropped_or_refused_on_a_killed_one()
{
    let etcd = start_etcd().await;
    let mut broker = start_broker(&etcd).await;
    let mut c = KafkaClient::connect(&broker.addr, "epochal-test", CALL)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}; log:\n{}", broker.log()));
    await_metadata(&mut c, "broker 1 is controller", |md| md.controller_id == 1).await;
    c.create_topic("t", 1, 1, 10_000, CALL)
        .await
        .expect("create t");
    await_metadata(&mut c, "t-0 led by 1", |md| {
        md.partition("t", 0).is_some_and(|p| p.leader == 1)
    })
    .await;
    let mut second = KafkaClient::connect(&broker.addr, "epochal-test-2", CALL)
        .await
        .unwrap();

    // Paused (SIGSTOP): the kernel keeps the connection, nobody answers.
    broker.signal(nix::sys::signal::Signal::SIGSTOP);
    // kill(2) returns before the stop takes effect: await state T in /proc.
    let deadline = Instant::now() + START_TIMEOUT;
    while !broker.is_stopped() {
        assert!(Instant::now() < deadline, "SIGSTOP took no effect");
        tokio::time::sleep(POLL).await;
    }
    let short = Duration::from_millis(300);
    let err = c
        .produce(
            "t",
            0,
            &values("paused", 1),
            &ProduceOptions::default(),
            short,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Timeout { deadline_ms: 300 }),
        "{err}"
    );
    // The timed-out connection is discarded: a late answer cannot be mistaken
    // for the next request's.
    assert!(!c.is_connected());
    let err = c.metadata(None, CALL).await.unwrap_err();
    assert!(matches!(err, ClientError::Closed), "{err}");

    // Killed: the open connection drops, a new one is refused.
    broker.child.0.kill().unwrap();
    broker.child.0.wait().unwrap();
    let err = second.metadata(None, CALL).await.unwrap_err();
    assert!(matches!(err, ClientError::Dropped(_)), "{err}");
    let err = KafkaClient::connect(&broker.addr, "epochal-test-3", CALL)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Refused { .. }), "{err}");
}

/// `replica_offsets` asks the broker it is connected to about its own replica
/// with the debugging replica id (-2), so a follower answers too: its LEO at
/// once after an acks=all produce, its HW once it has learnt it. A client's
/// fetch from that follower is still refused.
#[tokio::test]
async fn cluster_client_replica_offsets_reads_a_followers_own_hw_and_leo() {
    const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    let fast = ["--replica-fetch-wait-max-ms", "100"];
    let etcd = start_etcd().await;
    let b1 = start_broker_as(&etcd, 1, &fast).await;
    let mut c1 = KafkaClient::connect(&b1.addr, "epochal-test", CALL)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}; log:\n{}", b1.log()));
    await_metadata(&mut c1, "broker 1 is controller", |md| {
        md.controller_id == 1
    })
    .await;
    let b2 = start_broker_as(&etcd, 2, &fast).await;
    await_metadata(&mut c1, "both brokers registered", |md| {
        md.brokers.len() == 2
    })
    .await;
    c1.create_topic("r", 1, 2, 10_000, CALL)
        .await
        .expect("create r");
    // Placement by id: replicas [1, 2], broker 1 leads, 2 follows.
    await_metadata(&mut c1, "r-0 led by 1 with ISR [1, 2]", |md| {
        md.partition("r", 0)
            .is_some_and(|p| p.leader == 1 && p.isr == [1, 2])
    })
    .await;
    let mut c2 = KafkaClient::connect(&b2.addr, "epochal-test-2", CALL)
        .await
        .unwrap();

    // The follower answers once it has its role and log.
    let empty = ReplicaOffsets {
        high_watermark: 0,
        log_end_offset: 0,
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match c2.replica_offsets("r", 0).await {
            Ok(o) if o == empty => break,
            other => assert!(
                Instant::now() < deadline,
                "follower's empty replica: last {other:?}; log:\n{}",
                b2.log()
            ),
        }
        tokio::time::sleep(POLL).await;
    }

    let records = values("debug", 7);
    let produced = c1
        .produce("r", 0, &records, &ProduceOptions::default(), CALL)
        .await
        .expect("produce acks=all");
    assert_eq!(produced.base_offset, 0);
    let end = records.len() as i64;
    // acks=all: the follower appended everything before the answer.
    let o = c2.replica_offsets("r", 0).await.expect("follower offsets");
    assert_eq!(o.log_end_offset, end, "{o:?}");
    assert!(o.high_watermark <= end, "{o:?}");
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let o = c2.replica_offsets("r", 0).await.expect("follower offsets");
        if o.high_watermark == end {
            assert_eq!(o.log_end_offset, end);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "follower's HW never reached {end}: {o:?}"
        );
        tokio::time::sleep(POLL).await;
    }
    assert_eq!(
        c1.replica_offsets("r", 0).await.expect("leader offsets"),
        ReplicaOffsets {
            high_watermark: end,
            log_end_offset: end,
        }
    );

    // A client is still sent to the leader; errors are the broker's codes and
    // leave the connection usable.
    let err = c2
        .fetch("r", 0, 0, &FetchOptions::default(), CALL)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(NOT_LEADER_OR_FOLLOWER), "{err}");
    let err = c2
        .list_offset("r", 0, OffsetSpec::Latest, CALL)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(NOT_LEADER_OR_FOLLOWER), "{err}");
    let err = c2.replica_offsets("nope", 0).await.unwrap_err();
    assert_eq!(err.code(), Some(UNKNOWN_TOPIC_OR_PARTITION), "{err}");
    assert!(c2.is_connected());
}
