//! Acceptance (issue 4): garbage bytes, a frame claiming 2 GiB, an unknown API
//! key and truncated requests each close only their own connection (logged),
//! while a second client connected alongside keeps producing and fetching. A
//! batch with a bad CRC is answered CORRUPT_MESSAGE on a connection that stays open.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::BytesMut;
use common::broker_process::BrokerProcess;
use common::etcd::Etcd;
use common::kafka_client::{KafkaClient, PRODUCE_VERSION, batch};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, ProduceRequest, ResponseHeader,
};
use kafka_protocol::protocol::Decodable;

/// Send `bytes` on a fresh connection and assert the broker closes it.
fn assert_closes(addr: &str, what: &str, bytes: &[u8], half_close: bool) {
    let mut c = KafkaClient::connect(addr).unwrap();
    c.write_raw(bytes).unwrap();
    if half_close {
        c.shutdown_write();
    }
    assert!(
        c.is_closed_by_peer(),
        "{what}: the broker kept the connection open"
    );
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// The second client: produces one record and reads it back, in a loop, on
/// one connection opened before any bad request is sent.
struct Steady {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    thread: JoinHandle<u64>,
}

impl Steady {
    fn start(addr: &str) -> Steady {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let thread = {
            let (addr, stop, rounds) = (addr.to_owned(), stop.clone(), rounds.clone());
            std::thread::spawn(move || steady_rounds(&addr, &stop, &rounds))
        };
        Steady {
            stop,
            rounds,
            thread,
        }
    }

    /// Waits for five more rounds after `what`.
    fn progress(&self, what: &str) {
        let before = self.rounds.load(Ordering::SeqCst);
        common::await_some(
            &format!("the steady client to progress after {what}"),
            Duration::from_secs(10),
            || (self.rounds.load(Ordering::SeqCst) >= before + 5).then_some(()),
        );
    }

    /// Stops it; returns the rounds it made.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the steady client failed")
    }
}

fn steady_rounds(addr: &str, stop: &AtomicBool, rounds: &AtomicU64) -> u64 {
    let mut c = KafkaClient::connect(addr).unwrap();
    let mut round = 0u64;
    let mut last_offset = -1i64;
    while !stop.load(Ordering::SeqCst) {
        let value = format!("v{round}");
        let (err, offset) = c
            .produce("steady", 0, batch(&[value.as_bytes()]), 1)
            .expect("steady produce");
        assert_eq!(err, 0, "steady produce");
        assert!(
            offset > last_offset,
            "offsets rise: {offset} after {last_offset}"
        );
        last_offset = offset;
        let (err, _hw, recs) = c.fetch("steady", 0, offset, 500).expect("steady fetch");
        assert_eq!(err, 0, "steady fetch");
        assert_eq!(recs.first().map(|r| r.1.clone()), Some(value.into_bytes()));
        round += 1;
        rounds.store(round, Ordering::SeqCst);
    }
    round
}

/// Garbage: an HTTP request line reads as a ~1.2 GB frame size; a short
/// frame of noise reads as an unknown API key.
fn assert_garbage_closes(addr: &str) {
    assert_closes(
        addr,
        "HTTP garbage",
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        false,
    );
    assert_closes(
        addr,
        "framed noise",
        &frame(b"\xde\xad\xbe\xef garbage bytes"),
        false,
    );
}

/// A frame claiming 2 GiB (the largest i32) is refused before any body is
/// read; so is a negative size.
fn assert_oversized_frames_close(addr: &str) {
    assert_closes(addr, "2 GiB frame", &0x7fff_ffffi32.to_be_bytes(), false);
    assert_closes(addr, "negative frame", &(-1i32).to_be_bytes(), false);
}

/// An API key Kafka does not define: a well-formed header, key 9999.
fn assert_unknown_api_key_closes(addr: &str) {
    let mut unknown = vec![0x27, 0x0f, 0, 0, 0, 0, 0, 7, 0, 0];
    unknown.extend_from_slice(b"");
    assert_closes(addr, "unknown API key", &frame(&unknown), false);
}

/// A body declaring an absurd array length: Metadata v4 with 2^31-1 topics
/// in a 14-byte body, and flexible CreateTopics v5 with a 2^32-2 compact
/// array. Decoding runs out of bytes; the broker must not try to back the
/// array's declared size (see src/huge_alloc.rs).
fn assert_giant_arrays_close(addr: &str) {
    let mut giant = vec![0, 3, 0, 4, 0, 0, 0, 9, 0xff, 0xff];
    giant.extend_from_slice(&i32::MAX.to_be_bytes());
    assert_closes(addr, "2^31 topics", &frame(&giant), false);
    let mut giant = vec![0, 19, 0, 5, 0, 0, 0, 10, 0xff, 0xff, 0];
    giant.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert_closes(addr, "2^32 compact topics", &frame(&giant), false);
}

/// A Produce to steady/0 with `acks` and these records.
fn produce_request(acks: i16, records: bytes::Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(1000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(common::kafka_client::topic("steady"))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ])
}

/// Truncated: a Produce whose frame size matches a body cut in half (does not
/// decode), and a frame whose sender stops halfway and half-closes; `c` only
/// frames the request.
fn assert_truncated_requests_close(addr: &str, c: &mut KafkaClient) {
    let req = produce_request(1, batch(&[&b"x"[..]; 10]));
    let (_, full) = c.frame(&req, PRODUCE_VERSION);
    let body = &full[4..];
    assert_closes(
        addr,
        "truncated body",
        &frame(&body[..body.len() / 2]),
        false,
    );
    assert_closes(addr, "frame cut short", &full[..full.len() / 2], true);
}

/// ApiVersions at a version the broker does not know is answered (KIP-511):
/// v0 with UNSUPPORTED_VERSION and the supported ranges, connection open.
fn assert_unknown_api_versions_version_answered(c: &mut KafkaClient) {
    let (_, mut f) = c.frame(&ApiVersionsRequest::default(), 3);
    f[6..8].copy_from_slice(&99i16.to_be_bytes());
    c.write_raw(&f).unwrap();
    let mut resp = c.read_frame().unwrap();
    ResponseHeader::decode(&mut resp, 0).unwrap();
    let versions = ApiVersionsResponse::decode(&mut resp, 0).unwrap();
    assert_eq!(versions.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(
        versions
            .api_keys
            .iter()
            .any(|k| k.api_key == 0 && k.min_version == 3)
    );
}

/// `batch(values)` with its last byte flipped, so its CRC does not match.
fn corrupt_batch(values: &[&[u8]]) -> bytes::Bytes {
    let mut bad = BytesMut::from(&batch(values)[..]);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    bad.freeze()
}

/// A batch whose CRC does not match: CORRUPT_MESSAGE, nothing appended, and
/// the same connection keeps working.
fn assert_bad_crc_answered_corrupt_message(c: &mut KafkaClient) {
    let (err, _) = c
        .produce("steady", 0, corrupt_batch(&[b"corrupt me"]), 1)
        .unwrap();
    assert_eq!(err, 2, "CORRUPT_MESSAGE");
    let (err, _) = c.produce("steady", 0, batch(&[b"fine"]), 1).unwrap();
    assert_eq!(err, 0);
}

/// acks=0: a good batch gets no response (the next request's answer is the
/// next frame on the wire); a corrupt one closes the connection, the only
/// signal an acks=0 producer gets (Kafka's behaviour).
fn assert_acks0_unanswered_and_corrupt_closes(c: &mut KafkaClient) {
    let (_, f) = c.frame(
        &produce_request(0, batch(&[b"fire and forget"])),
        PRODUCE_VERSION,
    );
    c.write_raw(&f).unwrap();
    let (err, _) = c.produce("steady", 0, batch(&[b"answered"]), 1).unwrap();
    assert_eq!(
        err, 0,
        "the acks=1 answer follows the unanswered acks=0 request"
    );
    let bad = corrupt_batch(&[b"corrupt, acks=0"]);
    let (_, f) = c.frame(&produce_request(0, bad), PRODUCE_VERSION);
    c.write_raw(&f).unwrap();
    assert!(
        c.is_closed_by_peer(),
        "a failed acks=0 produce closes the connection"
    );
}

/// Each closed connection's reason is in the broker's log.
fn assert_reasons_logged(broker: &BrokerProcess) {
    let log = broker.log();
    for reason in [
        "outside 0..=104857600",
        "unknown API key 9999",
        "cut short",
        "malformed Produce",
    ] {
        assert!(log.contains(reason), "broker log lacks {reason:?}:\n{log}");
    }
}

#[test]
fn cluster_malformed_requests_close_only_their_own_connection() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProcess::start(
        1,
        &etcd.endpoint,
        &dir.path().join("b1"),
        &["--lease-ttl-s", "2"],
    );
    let mut admin = KafkaClient::connect(&broker.addr).unwrap();
    assert_eq!(admin.create_topic("steady", 1, 1), 0);

    let steady = Steady::start(&broker.addr);
    steady.progress("start");
    assert_garbage_closes(&broker.addr);
    steady.progress("garbage");
    assert_oversized_frames_close(&broker.addr);
    steady.progress("oversized frame");
    assert_unknown_api_key_closes(&broker.addr);
    steady.progress("unknown API key");
    assert_giant_arrays_close(&broker.addr);
    steady.progress("giant arrays");
    let mut c = KafkaClient::connect(&broker.addr).unwrap();
    assert_truncated_requests_close(&broker.addr, &mut c);
    steady.progress("truncated requests");

    assert_unknown_api_versions_version_answered(&mut c);
    assert_bad_crc_answered_corrupt_message(&mut c);
    assert_acks0_unanswered_and_corrupt_closes(&mut c);

    let produced = steady.stop();
    assert!(produced >= 30, "steady client made {produced} rounds");
    assert_reasons_logged(&broker);
}
