//! Acceptance (issue 5): the leader is cut off from etcd only (a real network
//! cut: its etcd connection runs through a forwarder the test stalls; its links
//! to the other brokers and to clients stay up). Within its lease TTL it fences
//! itself — it stops acknowledging writes, without hearing from etcd — the
//! others elect a new leader with the next epoch, and no write the old leader was
//! sent after its fencing point exists, while every write it acknowledged does.
//! Healed, the old leader registers again, follows, and the logs converge.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::etcd::Etcd;
use common::forwarder::Forwarder;
use common::kafka_client::{KafkaClient, batch};
use epochal_broker::controller::metadata_store::PartitionStateRecord;

const TIMEOUT: Duration = Duration::from_secs(60);
const TTL: Duration = Duration::from_secs(2);
/// Between the broker deciding to acknowledge and the client reading it
/// (generous: two busy cores may deschedule the client for a while).
const DELIVERY_SLACK: Duration = Duration::from_secs(2);

struct Sent {
    value: String,
    sent: Instant,
    done: Instant,
    error_code: i16,
}

/// One forwarder to etcd a broker, so the test can cut one broker off it.
fn forwarders_to(etcd: &Etcd) -> BTreeMap<i32, Forwarder> {
    let upstream = etcd.endpoint.trim_start_matches("http://").to_string();
    (1..=3)
        .map(|id| (id, Forwarder::start(&upstream)))
        .collect()
}

/// Three brokers with a 2 s lease, each reaching etcd through its forwarder.
fn start_cluster(etcd: Etcd, to_etcd: &BTreeMap<i32, Forwarder>) -> Cluster {
    Cluster::start_with(
        3,
        &[
            "--lease-ttl-s",
            "2",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "30000",
        ],
        etcd,
        |id| format!("http://{}", to_etcd[&id].addr),
    )
}

/// One acks=all write of `value`, logged with when it was sent and answered.
fn send(producer: &mut KafkaClient, log: &mut Vec<Sent>, value: String) {
    let sent = Instant::now();
    let (error_code, _) = producer
        .produce("x", 0, batch(&[value.as_bytes()]), -1)
        .unwrap();
    log.push(Sent {
        value,
        sent,
        done: Instant::now(),
        error_code,
    });
}

/// Keeps writing to the old leader until a new leader is elected and the old
/// one has had well past its TTL to fence itself; returns the new state.
fn write_until_a_new_leader(
    cluster: &Cluster,
    producer: &mut KafkaClient,
    log: &mut Vec<Sent>,
    old: i32,
    cut_at: Instant,
) -> PartitionStateRecord {
    let mut i = 0;
    loop {
        send(producer, log, format!("during-{i}"));
        i += 1;
        if let Some(s) = cluster
            .state("x", 0)
            .filter(|s| s.leader != old && s.leader > 0)
            && cut_at.elapsed() > TTL + Duration::from_secs(2)
        {
            break s;
        }
        assert!(
            cut_at.elapsed() < TIMEOUT,
            "no new leader\n{}",
            cluster.logs()
        );
        // Pace the workload; the loop's exit is the state above, not time.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The fencing point is at most one TTL after the cut (the last renewal etcd
/// confirmed was sent before it). Nothing sent after it may be acknowledged,
/// and no acknowledgement may be decided after it; the client reads an
/// acknowledgement a little later than the broker decides it.
fn assert_the_old_leader_fenced(
    cluster: &Cluster,
    log: &[Sent],
    old: i32,
    cut_at: Instant,
    fence_bound: Instant,
) {
    let late_acks: Vec<&Sent> = log
        .iter()
        .filter(|s| {
            s.error_code == 0 && (s.sent > fence_bound || s.done > fence_bound + DELIVERY_SLACK)
        })
        .collect();
    assert!(
        late_acks.is_empty(),
        "acknowledged after the fencing point: {:?}",
        late_acks.iter().map(|s| &s.value).collect::<Vec<_>>()
    );
    let last_ack = log
        .iter()
        .filter(|s| s.error_code == 0)
        .map(|s| s.done)
        .max()
        .unwrap();
    eprintln!(
        "old leader {old}: last acknowledgement {:?} after the cut (TTL {TTL:?}); \
         {} writes answered with an error after it",
        last_ack.saturating_duration_since(cut_at),
        log.iter().filter(|s| s.error_code != 0).count()
    );
    assert!(
        log.iter()
            .any(|s| s.error_code != 0 && s.sent > fence_bound),
        "the fenced leader refused writes"
    );
    assert!(
        cluster.broker(old).log().contains("fenced"),
        "the old leader noticed it is fenced"
    );
}

/// The new leader takes writes; the data is what the old leader acknowledged,
/// and nothing it was sent after fencing.
fn assert_the_new_leader_holds_what_was_acknowledged(
    cluster: &Cluster,
    new_leader: &mut KafkaClient,
    log: &[Sent],
    fence_bound: Instant,
) {
    let (err, _) = common::await_some_or(
        "the new leader to take an acks=all write",
        TIMEOUT,
        || {
            let r = new_leader
                .produce("x", 0, batch(&[b"on the new leader"]), -1)
                .ok()?;
            (r.0 == 0).then_some(r)
        },
        || cluster.logs(),
    );
    assert_eq!(err, 0);
    let records: Vec<String> = new_leader
        .fetch_all("x", 0, 0)
        .into_iter()
        .map(|(_, v)| String::from_utf8(v).unwrap())
        .collect();
    for s in log.iter().filter(|s| s.error_code == 0) {
        assert!(records.contains(&s.value), "acknowledged {} lost", s.value);
    }
    for s in log.iter().filter(|s| s.sent > fence_bound) {
        assert!(
            !records.contains(&s.value),
            "{} was sent to the old leader after its fencing point, yet exists",
            s.value
        );
    }
}

#[test]
fn cluster_fencing_a_leader_cut_from_etcd_stops_acknowledging_within_its_ttl() {
    let etcd = Etcd::start();
    let to_etcd = forwarders_to(&etcd);
    let cluster = start_cluster(etcd, &to_etcd);
    assert_eq!(cluster.client(1).create_topic("x", 1, 3), 0);
    let before = cluster.await_state("a full ISR", TIMEOUT, "x", 0, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    let old = before.leader;
    let mut producer = cluster.client(old);
    let mut log: Vec<Sent> = Vec::new();
    for i in 0..20 {
        send(&mut producer, &mut log, format!("before-{i}"));
    }

    to_etcd[&old].cut();
    let cut_at = Instant::now();
    let after = write_until_a_new_leader(&cluster, &mut producer, &mut log, old, cut_at);
    assert_eq!(after.leader_epoch, before.leader_epoch + 1, "{after:?}");

    let fence_bound = cut_at + TTL;
    assert_the_old_leader_fenced(&cluster, &log, old, cut_at, fence_bound);
    let mut new_leader = cluster.client(after.leader);
    assert_the_new_leader_holds_what_was_acknowledged(&cluster, &mut new_leader, &log, fence_bound);

    // Healed: the old leader registers again, follows and converges.
    to_etcd[&old].heal();
    cluster.await_state("the old leader back in the ISR", TIMEOUT, "x", 0, |s| {
        s.isr.len() == 3 && s.leader == after.leader
    });
    cluster.await_converged(&[1, 2, 3], "x", 0, 1, TIMEOUT);
}
