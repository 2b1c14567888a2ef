//! The `kafka_requests` toxic on real TCP: Kafka requests encoded with the
//! `kafka-protocol` crate go from a client through an in-process proxy to a
//! test peer in the broker's place, which reads each frame and answers it
//! with the request's correlation id, in order, as a Kafka broker does. Hold,
//! delay, drop and duplicate are each judged by what the peer received and
//! what the client got back; every toxic is added to a connection that has
//! already carried requests, so the framing is followed from its first byte.

use crate::common;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use epochal_faults::proxy::{Stream, ToxicJson, ToxicKind};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, EndTxnRequest, ProduceRequest, ProducerId, RequestHeader,
    TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const PRODUCE: i16 = ApiKey::Produce as i16;
const END_TXN: i16 = ApiKey::EndTxn as i16;
const API_VERSIONS: i16 = ApiKey::ApiVersions as i16;

/// A request as a client frames it: size, header v1/v2, body.
fn frame<R: Request>(request: &R, version: i16, correlation_id: i32) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("proxy-requests")));
    let mut out = BytesMut::new();
    out.put_u32(0);
    header
        .encode(&mut out, R::header_version(version))
        .expect("encode the header");
    request.encode(&mut out, version).expect("encode the body");
    let size = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    out.to_vec()
}

fn produce(correlation_id: i32) -> Vec<u8> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000);
    frame(&request, 3, correlation_id)
}

fn end_txn(correlation_id: i32) -> Vec<u8> {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_static_str("txn")))
        .with_producer_id(ProducerId(7))
        .with_producer_epoch(0)
        .with_committed(true);
    frame(&request, 1, correlation_id)
}

fn api_versions(correlation_id: i32) -> Vec<u8> {
    frame(&ApiVersionsRequest::default(), 0, correlation_id)
}

/// A request as the peer read it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    api_key: i16,
    correlation_id: i32,
    body: Vec<u8>,
}

/// Reads one frame off `reader`.
async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R, what: &str) -> Vec<u8> {
    let size = read_exactly(reader, 4, what).await;
    let size = u32::from_be_bytes(size.try_into().unwrap()) as usize;
    read_exactly(reader, size, what).await
}

/// The peer reads one request and answers it (header v0: the correlation
/// id, then a body of the request's API key, so the client can tell answers
/// apart).
async fn serve_one(server: &mut TcpStream) -> Seen {
    let body = read_frame(server, "a request reaches the peer").await;
    let mut buffer = Bytes::from(body.clone());
    let api_key = i16::from_be_bytes([body[0], body[1]]);
    let version = i16::from_be_bytes([body[2], body[3]]);
    let header_version = ApiKey::try_from(api_key)
        .unwrap()
        .request_header_version(version);
    let header = RequestHeader::decode(&mut buffer, header_version).expect("a request header");
    let mut answer = Vec::new();
    answer.extend_from_slice(&6u32.to_be_bytes());
    answer.extend_from_slice(&header.correlation_id.to_be_bytes());
    answer.extend_from_slice(&api_key.to_be_bytes());
    server.write_all(&answer).await.unwrap();
    Seen {
        api_key,
        correlation_id: header.correlation_id,
        body,
    }
}

/// The answers the client got: (correlation id, api key).
async fn answer(client: &mut TcpStream) -> (i32, i16) {
    let body = read_frame(client, "an answer reaches the client").await;
    assert_eq!(body.len(), 6);
    (
        i32::from_be_bytes(body[..4].try_into().unwrap()),
        i16::from_be_bytes(body[4..].try_into().unwrap()),
    )
}

fn requests_toxic(api_key: i16, action: &str, delay_ms: u64) -> ToxicJson {
    let kind = ToxicKind::from_attributes(
        "kafka_requests",
        &json!({"api_key": api_key, "action": action, "delay_ms": delay_ms}),
    )
    .unwrap();
    ToxicJson::new(Stream::Upstream, &kind).named(format!("requests_{api_key}"))
}

/// A proxy in front of a fresh peer, and one connection through it that has
/// carried one request and its answer before any toxic.
struct Setup {
    server: epochal_faults::proxy::ProxyServer,
    api: epochal_faults::toxiproxy_client::ToxiproxyClient,
    name: String,
    proxy: std::net::SocketAddr,
    upstream: tokio::net::TcpListener,
    client: TcpStream,
    peer: TcpStream,
}

async fn setup(name: &str) -> Setup {
    let (server, api) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&api, name, &upstream).await;
    let (mut client, mut peer) = proxied_pair(proxy, &upstream).await;
    client.write_all(&api_versions(0)).await.unwrap();
    assert_eq!(serve_one(&mut peer).await.api_key, API_VERSIONS);
    assert_eq!(answer(&mut client).await, (0, API_VERSIONS));
    Setup {
        server,
        api,
        name: name.to_owned(),
        proxy,
        upstream,
        client,
        peer,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_request_holds_its_connection_until_released_and_no_other() {
    let mut s = setup("hold").await;
    s.api
        .add_toxic(&s.name, &requests_toxic(END_TXN, "hold", 0))
        .await
        .unwrap();
    // Pipelined: a Produce, the EndTxn, a Produce behind it.
    let mut burst = produce(1);
    burst.extend(end_txn(2));
    burst.extend(produce(3));
    s.client.write_all(&burst).await.unwrap();
    assert_eq!(serve_one(&mut s.peer).await.correlation_id, 1);
    assert_eq!(answer(&mut s.client).await, (1, PRODUCE));
    assert_quiet(&mut s.peer, "the EndTxn and the Produce behind it are held").await;

    // Another connection is not held, EndTxn or not, until it sends one.
    let (mut other, mut other_peer) = proxied_pair(s.proxy, &s.upstream).await;
    other.write_all(&produce(10)).await.unwrap();
    assert_eq!(serve_one(&mut other_peer).await.correlation_id, 10);
    assert_eq!(answer(&mut other).await, (10, PRODUCE));

    s.api
        .remove_toxic(&s.name, &format!("requests_{END_TXN}"))
        .await
        .unwrap();
    let end = serve_one(&mut s.peer).await;
    assert_eq!((end.api_key, end.correlation_id), (END_TXN, 2));
    assert_eq!(end.body, end_txn(2)[4..], "delivered byte for byte");
    assert_eq!(serve_one(&mut s.peer).await.correlation_id, 3);
    assert_eq!(answer(&mut s.client).await, (2, END_TXN));
    assert_eq!(answer(&mut s.client).await, (3, PRODUCE));
    s.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_request_goes_after_its_delay_and_others_do_not_wait() {
    let mut s = setup("delay").await;
    const DELAY: Duration = Duration::from_millis(400);
    s.api
        .add_toxic(
            &s.name,
            &requests_toxic(PRODUCE, "delay", DELAY.as_millis() as u64),
        )
        .await
        .unwrap();
    let sent = Instant::now();
    s.client.write_all(&api_versions(1)).await.unwrap();
    assert_eq!(serve_one(&mut s.peer).await.correlation_id, 1);
    assert!(sent.elapsed() < DELAY, "another API passes at once");
    let sent = Instant::now();
    s.client.write_all(&produce(2)).await.unwrap();
    assert_eq!(serve_one(&mut s.peer).await.correlation_id, 2);
    let took = sent.elapsed();
    assert!(
        took >= DELAY,
        "the Produce arrived after {took:?}, before its delay"
    );
    assert_eq!(answer(&mut s.client).await, (1, API_VERSIONS));
    assert_eq!(answer(&mut s.client).await, (2, PRODUCE));
    s.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_request_never_reaches_the_broker_and_is_never_answered() {
    let mut s = setup("drop").await;
    s.api
        .add_toxic(&s.name, &requests_toxic(END_TXN, "drop", 0))
        .await
        .unwrap();
    let mut burst = produce(1);
    burst.extend(end_txn(2));
    burst.extend(produce(3));
    s.client.write_all(&burst).await.unwrap();
    assert_eq!(serve_one(&mut s.peer).await.correlation_id, 1);
    let next = serve_one(&mut s.peer).await;
    assert_eq!((next.api_key, next.correlation_id), (PRODUCE, 3));
    assert_eq!(answer(&mut s.client).await, (1, PRODUCE));
    assert_eq!(answer(&mut s.client).await, (3, PRODUCE));
    assert_quiet(&mut s.peer, "nothing more reaches the peer").await;
    assert_quiet(&mut s.client, "nothing answers the dropped EndTxn").await;
    s.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicated_request_reaches_the_broker_twice_and_is_answered_once() {
    let mut s = setup("duplicate").await;
    s.api
        .add_toxic(&s.name, &requests_toxic(PRODUCE, "duplicate", 0))
        .await
        .unwrap();
    let mut burst = produce(1);
    burst.extend(end_txn(2));
    s.client.write_all(&burst).await.unwrap();
    let first = serve_one(&mut s.peer).await;
    let copy = serve_one(&mut s.peer).await;
    assert_eq!(first.correlation_id, 1);
    assert_eq!(copy.api_key, PRODUCE);
    assert!(
        copy.correlation_id < 0,
        "the copy carries the proxy's own id, not {}",
        copy.correlation_id
    );
    // The same request but for the correlation id (bytes 4..8 of the body).
    assert_eq!(first.body[..4], copy.body[..4]);
    assert_eq!(first.body[8..], copy.body[8..]);
    assert_eq!(serve_one(&mut s.peer).await.api_key, END_TXN);
    // One answer per request the client sent, the copy's removed.
    assert_eq!(answer(&mut s.client).await, (1, PRODUCE));
    assert_eq!(answer(&mut s.client).await, (2, END_TXN));
    assert_quiet(&mut s.client, "the copy's answer is swallowed").await;

    // Removed: requests go once again, answers all pass.
    s.api
        .remove_toxic(&s.name, &format!("requests_{PRODUCE}"))
        .await
        .unwrap();
    s.client.write_all(&produce(3)).await.unwrap();
    assert_eq!(serve_one(&mut s.peer).await.correlation_id, 3);
    assert_eq!(answer(&mut s.client).await, (3, PRODUCE));
    assert_quiet(&mut s.peer, "sent once").await;
    s.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_is_not_kafka_passes_untouched() {
    let (server, api) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&api, "not-kafka", &upstream).await;
    api.add_toxic("not-kafka", &requests_toxic(0x5052, "drop", 0))
        .await
        .unwrap();
    let (mut client, mut peer) = proxied_pair(proxy, &upstream).await;
    // HTTP/2's preface, as etcd's gRPC clients open: no Kafka frame's size.
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    client.write_all(preface).await.unwrap();
    let got = read_exactly(&mut peer, preface.len(), "the preface passes").await;
    assert_eq!(got, preface);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_refuses_the_toxic_on_responses() {
    let (server, api) = start_server().await;
    let upstream = upstream().await;
    create_proxy(&api, "responses", &upstream).await;
    let kind = ToxicKind::from_attributes("kafka_requests", &json!({"api_key": 0})).unwrap();
    let refused = api
        .add_toxic("responses", &ToxicJson::new(Stream::Downstream, &kind))
        .await
        .unwrap_err();
    assert_eq!(refused.status(), Some(400), "{refused}");
    server.shutdown().await;
}

/// The size of each request in the blocked stream below: no divisor of the
/// proxy's read sizes, so a stream stopped anywhere but a request's end shows.
const BLOCKED_FRAME_BYTES: usize = 60_000;
/// More than the kernel's buffers on the way can absorb (Linux grows a
/// socket's buffers up to `tcp_wmem`/`tcp_rmem`'s maxima, 4 and 6 MiB by
/// default), so the proxy is left holding a write it cannot make.
const BLOCKED_FRAMES: usize = 840;

/// A Produce request padded to [`BLOCKED_FRAME_BYTES`]: only its size and
/// header matter to the proxy.
fn padded_produce(correlation_id: i32) -> Vec<u8> {
    let mut request = produce(correlation_id);
    request.resize(BLOCKED_FRAME_BYTES, 0);
    let size = (BLOCKED_FRAME_BYTES - 4) as u32;
    request[..4].copy_from_slice(&size.to_be_bytes());
    request
}

/// A hold added while the proxy waits on a full destination: the request
/// already under way goes out whole, and nothing after it until the release
/// — the stream stops exactly at a request's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_added_while_a_write_is_blocked_holds_from_the_next_request() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncReadExt;

    let (server, api) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&api, "blocked", &upstream).await;
    let (client, mut peer) = proxied_pair(proxy, &upstream).await;
    let (_client_read, mut client_write) = client.into_split();
    let written = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&written);
    let writer = tokio::spawn(async move {
        for i in 0..BLOCKED_FRAMES {
            client_write.write_all(&padded_produce(i as i32)).await?;
            counted.fetch_add(BLOCKED_FRAME_BYTES, Ordering::SeqCst);
        }
        client_write.shutdown().await
    });
    // The peer does not read: once the client's writes stop moving, every
    // buffer on the way is full and the proxy's write is blocked.
    within("the client's writes stall", async {
        let mut last = written.load(Ordering::SeqCst);
        loop {
            tokio::time::sleep(QUIET_WINDOW).await;
            let now = written.load(Ordering::SeqCst);
            if now == last {
                return;
            }
            last = now;
        }
    })
    .await;
    api.add_toxic("blocked", &requests_toxic(PRODUCE, "hold", 0))
        .await
        .unwrap();

    let total = BLOCKED_FRAMES * BLOCKED_FRAME_BYTES;
    let mut buffer = vec![0u8; 256 * 1024];
    let mut received = 0usize;
    // Everything the proxy may still pass: read until nothing comes.
    loop {
        match tokio::time::timeout(QUIET_WINDOW, peer.read(&mut buffer)).await {
            Err(_) => break,
            Ok(Ok(0)) => panic!("the stream ended while held"),
            Ok(Ok(n)) => received += n,
            Ok(Err(error)) => panic!("the peer's read failed: {error}"),
        }
    }
    assert!(
        received < total,
        "all {total} bytes arrived under the hold: nothing was blocked, so nothing was tested"
    );
    assert_eq!(
        received % BLOCKED_FRAME_BYTES,
        0,
        "the hold stopped the stream {} bytes into a request",
        received % BLOCKED_FRAME_BYTES
    );

    api.remove_toxic("blocked", &format!("requests_{PRODUCE}"))
        .await
        .unwrap();
    within("the rest arrives after the release", async {
        while received < total {
            let n = peer.read(&mut buffer).await.unwrap();
            assert_ne!(n, 0, "the stream ended after {received} of {total} bytes");
            received += n;
        }
    })
    .await;
    within("the writer finishes", writer)
        .await
        .unwrap()
        .expect("the client sends every request");
    server.shutdown().await;
}
