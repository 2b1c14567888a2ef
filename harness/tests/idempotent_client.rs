//! The workload's idempotent producer (`[workload] idempotent = true`,
//! workload/producer.rs) against scripted fake brokers, with a real etcd
//! naming the partition's leader as a cluster's controller would: what it
//! stamps on its batches, what it resends after an unknown outcome and to
//! whom, which outcome makes `ok`, `fail` or `info`, and when a process gets
//! a new producer id. The fakes speak just enough Kafka (ApiVersions,
//! InitProducerId, Produce, through `kafka-protocol`) to be scripted per
//! request; no broker build is needed. Each test starts an etcd, so each is
//! named `cluster_*` (.config/nextest.toml runs two at a time).

use crate::common;

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use epochal::history::{HistoryWriter, Idempotence, Op, OpType, SharedHistory, read_history};
use epochal::node::NodeId;
use epochal::schedule::{Acks, Compression, PartitionRef};
use epochal::workload::client::{Clients, Processes};
use epochal::workload::send_options::SendOptions;
use epochal::workload::view::SharedView;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, InitProducerIdResponse, ProduceRequest, ProduceResponse,
    ProducerId, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol::records::{RecordBatchDecoder, RecordSet};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What a fake does with one produce request.
#[derive(Debug, Clone, Copy)]
enum OnProduce {
    /// Answer this error code; 0 appends at the fake's log end and answers
    /// that offset.
    Answer(i16),
    /// DUPLICATE_SEQUENCE_NUMBER with no offset, as Kafka 1.0 answered.
    Duplicate,
    /// Read the request, then close the connection unanswered.
    Drop,
    /// Read the request and never answer.
    Silent,
}

/// One batch a fake received.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    values: Vec<String>,
}

#[derive(Default)]
struct State {
    /// Taken one per produce; `otherwise` when empty.
    script: VecDeque<OnProduce>,
    otherwise: Option<OnProduce>,
    batches: Vec<Seen>,
    /// Produce requests received.
    requests: usize,
    inits: i64,
    log_end: i64,
}

/// A fake broker: node `id` at `addr`.
struct Fake {
    id: i64,
    addr: String,
    state: Arc<Mutex<State>>,
}

impl Fake {
    /// Starts a fake for node `id`; `init_producer_id`: whether it offers
    /// InitProducerId in ApiVersions (and answers it).
    async fn start(id: i64, init_producer_id: bool) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, id, init_producer_id, shared.clone()));
            }
        });
        Fake { id, addr, state }
    }

    fn script(&self, script: &[OnProduce], otherwise: OnProduce) {
        let mut state = self.state.lock().unwrap();
        state.script = script.iter().copied().collect();
        state.otherwise = Some(otherwise);
    }

    fn batches(&self) -> Vec<Seen> {
        self.state.lock().unwrap().batches.clone()
    }

    fn requests(&self) -> usize {
        self.state.lock().unwrap().requests
    }

    fn inits(&self) -> i64 {
        self.state.lock().unwrap().inits
    }

    /// The id this fake hands out on its `n`-th InitProducerId (from 1).
    fn producer_id(&self, n: i64) -> i64 {
        self.id * 1000 + n
    }
}

async fn serve(mut stream: TcpStream, id: i64, init: bool, state: Arc<Mutex<State>>) {
    loop {
        let Ok(size) = stream.read_i32().await else {
            return;
        };
        let mut body = vec![0u8; size as usize];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        let mut body = Bytes::from(body);
        let (key, version) = (
            ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap(),
            i16::from_be_bytes([body[2], body[3]]),
        );
        let header = RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
        let answer = match key {
            ApiKey::ApiVersions => api_versions(init, version),
            ApiKey::InitProducerId => init_producer_id(id, &state, version),
            ApiKey::Produce => match produce(&mut stream, &mut body, version, &state).await {
                Some(answer) => answer,
                None => return,
            },
            other => panic!("the fake does not answer {other:?}"),
        };
        let frame = response_frame(header.correlation_id, key, version, &answer);
        if stream.write_all(&frame).await.is_err() {
            return;
        }
    }
}

/// The APIs the fake offers, InitProducerId only when `init`.
fn api_versions(init: bool, version: i16) -> Bytes {
    let mut keys = vec![
        (ApiKey::ApiVersions, 0, 3),
        (ApiKey::Metadata, 0, 12),
        (ApiKey::Produce, 3, 9),
        (ApiKey::Fetch, 4, 12),
        (ApiKey::ListOffsets, 1, 7),
        (ApiKey::CreateTopics, 0, 4),
    ];
    if init {
        keys.push((ApiKey::InitProducerId, 0, 4));
    }
    let api_keys = keys
        .into_iter()
        .map(|(k, min, max)| {
            ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    encode(
        &ApiVersionsResponse::default().with_api_keys(api_keys),
        version,
    )
}

/// The fake's next producer id (see [`Fake::producer_id`]), epoch 0.
fn init_producer_id(id: i64, state: &Mutex<State>, version: i16) -> Bytes {
    let n = {
        let mut state = state.lock().unwrap();
        state.inits += 1;
        state.inits
    };
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(id * 1000 + n))
        .with_producer_epoch(0);
    encode(&resp, version)
}

/// Records the request's batches and answers as the script says; `None` when
/// the connection is to end unanswered (`Drop` at once, `Silent` once the
/// client closes it).
async fn produce(
    stream: &mut TcpStream,
    body: &mut Bytes,
    version: i16,
    state: &Mutex<State>,
) -> Option<Bytes> {
    let req = ProduceRequest::decode(body, version).unwrap();
    let topic = &req.topic_data[0];
    let partition = &topic.partition_data[0];
    let mut records = partition.records.clone().unwrap();
    let sets = RecordBatchDecoder::decode_all(&mut records).unwrap();
    let (on, base_offset) = take_produce(state, &sets);
    let (code, offset) = match on {
        OnProduce::Answer(0) => (0, base_offset),
        OnProduce::Answer(code) => (code, -1),
        OnProduce::Duplicate => (46, -1),
        OnProduce::Drop => return None,
        OnProduce::Silent => {
            let mut rest = Vec::new();
            let _ = stream.read_to_end(&mut rest).await;
            return None;
        }
    };
    let resp = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(topic.name.clone())
            .with_partition_responses(vec![
                PartitionProduceResponse::default()
                    .with_index(partition.index)
                    .with_error_code(code)
                    .with_base_offset(offset),
            ]),
    ]);
    Some(encode(&resp, version))
}

/// Counts one produce request and keeps its batches; returns what the script
/// does with it and the log end it found (which an `Answer(0)` moves past
/// its records).
fn take_produce(state: &Mutex<State>, sets: &[RecordSet]) -> (OnProduce, i64) {
    let mut state = state.lock().unwrap();
    state.requests += 1;
    for set in sets {
        let first = &set.records[0];
        state.batches.push(Seen {
            producer_id: first.producer_id,
            producer_epoch: first.producer_epoch,
            base_sequence: first.sequence,
            values: set
                .records
                .iter()
                .map(|r| String::from_utf8_lossy(r.value.as_ref().unwrap()).into())
                .collect(),
        });
    }
    let otherwise = state.otherwise.unwrap_or(OnProduce::Answer(0));
    let on = state.script.pop_front().unwrap_or(otherwise);
    let base_offset = state.log_end;
    if matches!(on, OnProduce::Answer(0)) {
        state.log_end += sets.iter().map(|s| s.records.len() as i64).sum::<i64>();
    }
    (on, base_offset)
}

/// A response frame: size, header for `correlation_id`, then `answer`.
fn response_frame(correlation_id: i32, key: ApiKey, version: i16, answer: &[u8]) -> BytesMut {
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut frame, key.response_header_version(version))
        .unwrap();
    frame.extend_from_slice(answer);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}

fn encode(body: &impl Encodable, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

const STATE_KEY: &str = "/epochal/brokers/topics/t/partitions/0/state";

/// Names `leader` the leader of t-0 in etcd, as a controller would.
async fn lead(etcd: &str, leader: i64) {
    let mut client = etcd_client::Client::connect([etcd], None).await.unwrap();
    let state = format!(
        r#"{{"leader":{leader},"isr":[1,2],"leader_epoch":{leader},"controller_epoch":1}}"#
    );
    client.put(STATE_KEY, state, None).await.unwrap();
}

/// The run's clients over `fakes` (node ids 1, 2, ...), the history in `dir`.
async fn clients(
    etcd: &str,
    addresses: &[&str],
    dir: &Path,
    idempotent: bool,
    request_timeout: Duration,
) -> Clients {
    let addresses: BTreeMap<NodeId, String> = addresses
        .iter()
        .enumerate()
        .map(|(i, a)| (NodeId::new(i as u32 + 1), a.to_string()))
        .collect();
    let etcd = etcd_client::Client::connect([etcd], None).await.unwrap();
    Clients {
        history: SharedHistory::new(HistoryWriter::create(dir.join("history.jsonl")).unwrap()),
        processes: Processes::default(),
        view: SharedView::new(etcd, Duration::from_secs(2)),
        addresses: Arc::new(addresses),
        request_timeout,
        idempotent,
        transaction_timeout: Duration::from_secs(10),
        fetch_version: None,
        fetch_max_wait_ms: None,
        join_group_version: None,
        shared_ids: false,
        lives: Default::default(),
    }
}

fn options() -> SendOptions {
    SendOptions {
        acks: Acks::All,
        records_per_batch: 1,
        compression: Compression::None,
        key: None,
        value_bytes: None,
    }
}

fn t0() -> PartitionRef {
    PartitionRef::new("t", 0)
}

fn b(n: u32) -> Option<NodeId> {
    Some(NodeId::new(n))
}

fn producer(op: &Op) -> Idempotence {
    op.send().unwrap().producer.expect("an idempotent send")
}

fn stamp(id: i64, base_sequence: i32, attempts: u32) -> Idempotence {
    Idempotence {
        id,
        epoch: 0,
        base_sequence,
        attempts: Some(attempts),
    }
}

/// Polls `cond` until it holds, or panics at the deadline.
async fn await_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_an_unknown_send_is_resent_with_the_same_stamp_to_the_new_leader() {
    let etcd = common::etcd::start_etcd().await;
    let (b1, b2) = (Fake::start(1, true).await, Fake::start(2, true).await);
    lead(&etcd.endpoint, 1).await;
    // b1 takes the request and loses the connection, then (deposed) answers
    // NOT_LEADER_OR_FOLLOWER until the client goes where etcd points: b2.
    b1.script(&[OnProduce::Drop], OnProduce::Answer(6));
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(
        &etcd.endpoint,
        &[&b1.addr, &b2.addr],
        dir.path(),
        true,
        Duration::from_secs(1),
    )
    .await;
    let mut client = clients.client("epochal-test");
    let failover = {
        let (state, endpoint) = (b1.state.clone(), etcd.endpoint.clone());
        tokio::spawn(async move {
            await_until("b1's first produce", || state.lock().unwrap().requests > 0).await;
            lead(&endpoint, 2).await;
        })
    };
    let op = client.send(&t0(), vec![1], b(1), options()).await.unwrap();
    failover.await.unwrap();

    assert_eq!(op.kind, OpType::Ok, "{op:?}");
    let sent = b1.requests() + b2.requests();
    assert!(sent >= 2, "{sent}");
    assert_eq!(producer(&op), stamp(b1.producer_id(1), 0, sent as u32));
    assert_eq!(b2.requests(), 1, "b2 acknowledged the first resend it got");
    // Every attempt carried the same batch, stamp and all.
    let first = Seen {
        producer_id: b1.producer_id(1),
        producer_epoch: 0,
        base_sequence: 0,
        values: vec!["1".into()],
    };
    for seen in b1.batches().iter().chain(&b2.batches()) {
        assert_eq!(seen, &first);
    }
    assert_eq!(op.acked_send().unwrap().1.offsets, Some(vec![0]));

    // The next send follows on: same producer, next sequence, one attempt.
    let op = client
        .send(&t0(), vec![2, 3], b(2), options())
        .await
        .unwrap();
    assert_eq!(op.kind, OpType::Ok);
    assert_eq!(producer(&op), stamp(b1.producer_id(1), 1, 1));
    assert_eq!((b1.inits(), b2.inits()), (1, 0));
    let last = b2.batches();
    assert_eq!(
        last[1..]
            .iter()
            .map(|s| s.base_sequence)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );

    // On disk: the invoke names the stamp, the completion adds the attempts.
    let ops = read_history(dir.path().join("history.jsonl")).unwrap();
    assert_eq!(ops[0].kind, OpType::Invoke);
    assert_eq!(
        ops[0].value()["producer"],
        serde_json::json!({"id": b1.producer_id(1), "epoch": 0, "base_sequence": 0})
    );
    assert_eq!(ops[1].value()["producer"]["attempts"], sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_refused_first_attempt_fails_and_its_sequence_is_used_again() {
    let etcd = common::etcd::start_etcd().await;
    let (b1, b2) = (Fake::start(1, true).await, Fake::start(2, true).await);
    lead(&etcd.endpoint, 1).await;
    // NOT_ENOUGH_REPLICAS, success, OUT_OF_ORDER_SEQUENCE_NUMBER, success.
    b1.script(
        &[
            OnProduce::Answer(19),
            OnProduce::Answer(0),
            OnProduce::Answer(45),
        ],
        OnProduce::Answer(0),
    );
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(
        &etcd.endpoint,
        &[&b1.addr, &b2.addr],
        dir.path(),
        true,
        Duration::from_secs(1),
    )
    .await;
    let mut client = clients.client("epochal-test");
    let mut ops = Vec::new();
    for value in 1..=4 {
        ops.push(
            client
                .send(&t0(), vec![value], b(1), options())
                .await
                .unwrap(),
        );
    }
    let kinds: Vec<OpType> = ops.iter().map(|op| op.kind).collect();
    assert_eq!(
        kinds,
        vec![OpType::Fail, OpType::Ok, OpType::Fail, OpType::Ok]
    );
    assert!(
        ops[0].error.as_deref().unwrap().contains("19"),
        "{:?}",
        ops[0]
    );
    // A definite refusal is one attempt; nothing is resent, and b2 hears
    // nothing.
    assert_eq!(b1.requests(), 4);
    assert_eq!(b2.requests(), 0);
    let first = b1.producer_id(1);
    assert_eq!(producer(&ops[0]), stamp(first, 0, 1));
    assert_eq!(
        producer(&ops[1]),
        stamp(first, 0, 1),
        "the refused sequence again"
    );
    assert_eq!(producer(&ops[2]), stamp(first, 1, 1));
    // After OUT_OF_ORDER_SEQUENCE_NUMBER the producer asks for a new id and
    // starts over at 0; a fail retires no process.
    assert_eq!(producer(&ops[3]), stamp(b1.producer_id(2), 0, 1));
    assert!(ops.iter().all(|op| op.process == ops[0].process));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_send_unknown_until_its_deadline_is_info_and_the_next_process_is_a_new_producer()
{
    let etcd = common::etcd::start_etcd().await;
    let (b1, b2) = (Fake::start(1, true).await, Fake::start(2, true).await);
    lead(&etcd.endpoint, 1).await;
    b1.script(
        &[OnProduce::Silent, OnProduce::Silent],
        OnProduce::Answer(0),
    );
    let dir = tempfile::tempdir().unwrap();
    let request_timeout = Duration::from_millis(300);
    let clients = clients(
        &etcd.endpoint,
        &[&b1.addr, &b2.addr],
        dir.path(),
        true,
        request_timeout,
    )
    .await;
    let mut client = clients.client("epochal-test");
    let started = Instant::now();
    let op = client.send(&t0(), vec![1], b(1), options()).await.unwrap();
    let took = started.elapsed();
    assert_eq!(op.kind, OpType::Info, "{op:?}");
    // Each attempt had one request's bound (300 ms + the 2 s margin); the
    // send, twice that.
    assert_eq!(producer(&op), stamp(b1.producer_id(1), 0, 2));
    assert!(
        took >= Duration::from_millis(4_600) && took < Duration::from_secs(8),
        "{took:?}"
    );
    let error = op.error.as_deref().unwrap();
    assert!(
        error.contains("no definite answer to 2 sends within 4600 ms"),
        "{error}"
    );

    // The process retired with its producer: the next send is a new process
    // with a new producer id, from sequence 0.
    let next = client.send(&t0(), vec![2], b(1), options()).await.unwrap();
    assert_eq!(next.kind, OpType::Ok);
    assert_ne!(next.process, op.process);
    assert_eq!(producer(&next), stamp(b1.producer_id(2), 0, 1));

    // An unknown outcome, then a refusal no resend can change: info at once.
    b1.script(
        &[OnProduce::Drop, OnProduce::Answer(45)],
        OnProduce::Answer(0),
    );
    let op = client.send(&t0(), vec![3], b(1), options()).await.unwrap();
    assert_eq!(op.kind, OpType::Info, "{op:?}");
    assert_eq!(producer(&op).attempts, Some(2));
    let error = op.error.as_deref().unwrap();
    assert!(
        error.contains("after a send whose outcome is unknown"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_duplicate_sequence_number_is_a_success_without_offsets() {
    let etcd = common::etcd::start_etcd().await;
    let b1 = Fake::start(1, true).await;
    lead(&etcd.endpoint, 1).await;
    b1.script(&[OnProduce::Duplicate], OnProduce::Answer(0));
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(
        &etcd.endpoint,
        &[&b1.addr],
        dir.path(),
        true,
        Duration::from_secs(1),
    )
    .await;
    let mut client = clients.client("epochal-test");
    let op = client.send(&t0(), vec![1], b(1), options()).await.unwrap();
    assert_eq!(op.kind, OpType::Ok, "{op:?}");
    assert_eq!(op.acked_send().unwrap().1.offsets, None);
    // It counts as written: the next send follows on.
    let op = client.send(&t0(), vec![2], b(1), options()).await.unwrap();
    assert_eq!(producer(&op).base_sequence, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_broker_without_init_producer_id_fails_the_send_and_a_plain_client_is_unchanged()
{
    let etcd = common::etcd::start_etcd().await;
    let b1 = Fake::start(1, false).await;
    lead(&etcd.endpoint, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let idempotent = clients(
        &etcd.endpoint,
        &[&b1.addr],
        dir.path(),
        true,
        Duration::from_secs(1),
    )
    .await;
    let op = idempotent
        .client("epochal-test")
        .send(&t0(), vec![1], b(1), options())
        .await
        .unwrap();
    assert_eq!(op.kind, OpType::Fail);
    assert_eq!(op.send().unwrap().producer, None, "nothing was stamped");
    let error = op.error.as_deref().unwrap();
    assert!(
        error.contains("InitProducerId") && error.contains("offers none"),
        "{error}"
    );
    assert_eq!(b1.requests(), 0);

    // A plain client: no InitProducerId, no producer on the batch, no
    // `producer` in the history.
    let dir = tempfile::tempdir().unwrap();
    let plain = clients(
        &etcd.endpoint,
        &[&b1.addr],
        dir.path(),
        false,
        Duration::from_secs(1),
    )
    .await;
    let op = plain
        .client("epochal-test")
        .send(&t0(), vec![1], b(1), options())
        .await
        .unwrap();
    assert_eq!(op.kind, OpType::Ok);
    assert!(op.value().get("producer").is_none(), "{}", op.value());
    assert_eq!(
        b1.batches(),
        vec![Seen {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            values: vec!["1".into()],
        }]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_the_producer_id_comes_from_another_node_when_the_leader_cannot_answer() {
    let etcd = common::etcd::start_etcd().await;
    let b2 = Fake::start(2, true).await;
    // Nothing listens at b1's address.
    let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let b1_addr = gone.local_addr().unwrap().to_string();
    drop(gone);
    lead(&etcd.endpoint, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let clients = clients(
        &etcd.endpoint,
        &[&b1_addr, &b2.addr],
        dir.path(),
        true,
        Duration::from_secs(1),
    )
    .await;
    let op = clients
        .client("epochal-test")
        .send(&t0(), vec![1], b(1), options())
        .await
        .unwrap();
    // b2 gave the id; the produce to b1 never went out: a definite failure.
    assert_eq!(b2.inits(), 1);
    assert_eq!(op.kind, OpType::Fail, "{op:?}");
    assert_eq!(producer(&op), stamp(b2.producer_id(1), 0, 0));
    assert!(op.error.as_deref().unwrap().contains("refused"), "{op:?}");
}
