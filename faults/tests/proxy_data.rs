//! The proxy's data path over real TCP: bytes arrive intact and in order, and
//! each toxic does to a live connection what it promises.

use crate::common;

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use common::*;
use epochal_faults::proxy::toxics::{LimitData, Slicer, Timeout};
use epochal_faults::proxy::{
    HELD_CHUNKS_MAX, OnHeal, READ_CHUNK_BYTES, Stream, ToxicJson, ToxicKind,
};
use epochal_faults::toxiproxy_client::ToxiproxyClient;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BULK_BYTES: usize = 64 * 1024 * 1024;

/// Sends [`BULK_BYTES`] each way at once through `proxy` and checks both
/// streams byte for byte; returns the time it took.
async fn bulk_both_ways(client: &ToxiproxyClient, name: &str, toxics: &[ToxicJson]) -> Duration {
    let upstream = upstream().await;
    let proxy = create_proxy(client, name, &upstream).await;
    for toxic in toxics {
        client.add_toxic(name, toxic).await.expect("add toxic");
    }
    let (client_end, server_end) = proxied_pair(proxy, &upstream).await;
    let (client_read, client_write) = client_end.into_split();
    let (server_read, server_write) = server_end.into_split();
    let started = Instant::now();
    within("64 MiB each way", async {
        let (up, down, (), ()) = tokio::join!(
            send_pattern(client_write, 1, BULK_BYTES),
            send_pattern(server_write, 2, BULK_BYTES),
            expect_pattern(server_read, 1, BULK_BYTES, "client to server"),
            expect_pattern(client_read, 2, BULK_BYTES, "server to client"),
        );
        up.expect("client sends");
        down.expect("server sends");
    })
    .await;
    started.elapsed()
}

fn report_throughput(what: &str, took: Duration) {
    let mib = (2 * BULK_BYTES) as f64 / (1024.0 * 1024.0);
    println!(
        "{what}: 2 x 64 MiB in {:.2} s = {:.0} MiB/s total",
        took.as_secs_f64(),
        mib / took.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_each_way_arrive_byte_exact_without_toxics() {
    let (server, client) = start_server().await;
    let took = bulk_both_ways(&client, "bulk", &[]).await;
    report_throughput("no toxics", took);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_each_way_arrive_byte_exact_through_slicer() {
    let (server, client) = start_server().await;
    let slicer = ToxicKind::Slicer(Slicer {
        average_size: 4096,
        size_variation: 3000,
        delay: 0,
    });
    let took = bulk_both_ways(
        &client,
        "sliced",
        &[
            ToxicJson::new(Stream::Upstream, &slicer),
            ToxicJson::new(Stream::Downstream, &slicer),
        ],
    )
    .await;
    report_throughput("slicer", took);
    server.shutdown().await;
}

#[tokio::test]
async fn slicer_cuts_a_write_into_small_reads() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "slices", &upstream).await;
    let slicer = ToxicKind::Slicer(Slicer {
        average_size: 10,
        size_variation: 0,
        delay: 20_000,
    });
    client
        .add_toxic("slices", &ToxicJson::new(Stream::Upstream, &slicer))
        .await
        .unwrap();
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client_end.write_all(&[7u8; 100]).await.unwrap();
    // 20 ms between 10-byte pieces: the first read cannot hold all 100 bytes.
    let mut buffer = [0u8; 100];
    let first = within("first slice", server_end.read(&mut buffer))
        .await
        .unwrap();
    assert!(
        first <= 10,
        "a read got {first} bytes, expected a slice of 10"
    );
    let rest = read_exactly(&mut server_end, 100 - first, "the other slices").await;
    assert!(rest.iter().all(|&b| b == 7));
    server.shutdown().await;
}

#[tokio::test]
async fn latency_delays_every_round_trip_by_at_least_its_value() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "slow", &upstream).await;
    let latency =
        ToxicKind::from_attributes("latency", &json!({"latency": 50, "jitter": 0})).unwrap();
    client
        .add_toxic("slow", &ToxicJson::new(Stream::Downstream, &latency))
        .await
        .unwrap();
    let (mut client_end, server_end) = proxied_pair(proxy, &upstream).await;
    let echo = tokio::spawn(async move {
        let (mut read, mut write) = server_end.into_split();
        let _ = tokio::io::copy(&mut read, &mut write).await;
    });

    let mut round_trips = Vec::new();
    for i in 0..20u8 {
        let ping = [i; 16];
        let started = Instant::now();
        client_end.write_all(&ping).await.unwrap();
        let pong = read_exactly(&mut client_end, 16, "echo").await;
        round_trips.push(started.elapsed());
        assert_eq!(pong, ping);
    }
    round_trips.sort();
    let median = round_trips[round_trips.len() / 2];
    println!(
        "latency 50 ms: min {:?}, median {median:?}, max {:?}",
        round_trips[0],
        round_trips[round_trips.len() - 1]
    );
    assert!(
        round_trips[0] >= Duration::from_millis(50),
        "a round trip took {:?}, under the 50 ms latency",
        round_trips[0]
    );
    assert!(
        median < Duration::from_millis(150),
        "median round trip {median:?}"
    );
    drop(client_end);
    echo.abort();
    server.shutdown().await;
}

#[tokio::test]
async fn timeout_zero_passes_no_byte_and_keeps_the_connection_open() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "stall", &upstream).await;
    let timeout = ToxicKind::Timeout(Timeout { timeout: 0 });
    client
        .add_toxic("stall", &ToxicJson::new(Stream::Upstream, &timeout))
        .await
        .unwrap();
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client_end.write_all(b"swallowed").await.unwrap();
    assert_quiet(&mut server_end, "upstream under timeout 0").await;
    // Open: the client can still write, and the other stream still carries bytes.
    client_end.write_all(b"still open").await.unwrap();
    server_end.write_all(b"pong").await.unwrap();
    assert_eq!(
        read_exactly(&mut client_end, 4, "downstream").await,
        b"pong"
    );
    assert_quiet(&mut server_end, "upstream under timeout 0, later").await;
    server.shutdown().await;
}

#[tokio::test]
async fn timeout_with_a_value_closes_the_connection() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "expire", &upstream).await;
    let timeout = ToxicKind::Timeout(Timeout { timeout: 100 });
    client
        .add_toxic("expire", &ToxicJson::new(Stream::Upstream, &timeout))
        .await
        .unwrap();
    let (mut client_end, _server_end) = proxied_pair(proxy, &upstream).await;
    let ended = read_until_closed(&mut client_end, "the proxy closes after 100 ms").await;
    assert!(matches!(ended, Ok(0)) || ended.is_err());
    server.shutdown().await;
}

#[tokio::test]
async fn partition_holds_bytes_then_resumes_them_all_in_order() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "cut", &upstream).await;
    let (client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    let (mut client_read, mut client_write) = client_end.into_split();

    client_write.write_all(b"before|").await.unwrap();
    assert_eq!(
        read_exactly(&mut server_end, 7, "before the cut").await,
        b"before|"
    );

    client
        .partition("cut", Stream::Upstream, OnHeal::Resume)
        .await
        .unwrap();
    // More than the proxy and the kernel's buffers can hold, so TCP flow
    // control blocks the writer; nothing is lost.
    let held_len = more_than_a_cut_absorbs();
    let writer = tokio::spawn(async move {
        let held = Pattern::bytes(7, held_len);
        client_write.write_all(&held).await.unwrap();
        client_write.write_all(b"|after").await.unwrap();
        client_write
    });
    assert_quiet(&mut server_end, "upstream while cut").await;
    // One-way: the other stream still flows.
    server_end.write_all(b"reply").await.unwrap();
    assert_eq!(
        read_exactly(&mut client_read, 5, "downstream while upstream is cut").await,
        b"reply"
    );
    assert_quiet(&mut server_end, "upstream still cut").await;
    assert!(
        !writer.is_finished(),
        "{held_len} bytes cannot all be absorbed while cut"
    );

    client.heal("cut", Stream::Upstream).await.unwrap();
    let held = read_exactly(&mut server_end, held_len, "held bytes after heal").await;
    assert!(
        held == Pattern::bytes(7, held_len),
        "held bytes arrive intact and in order"
    );
    assert_eq!(
        read_exactly(&mut server_end, 6, "bytes sent after").await,
        b"|after"
    );
    within("writer finishes", writer).await.unwrap();
    server.shutdown().await;
}

/// More bytes than a cut upstream stream can take in before its writer
/// blocks: what the proxy holds (HELD_CHUNKS_MAX chunks and one in hand), plus
/// the client's send buffer and the proxy's receive buffer, which Linux grows
/// up to `tcp_wmem` and `tcp_rmem`'s maximum, plus a margin. A fixed 8 MiB
/// left about 200 KiB to spare on a machine whose `tcp_rmem` allows 32 MiB,
/// and was now and then absorbed whole when the receive buffer grew.
fn more_than_a_cut_absorbs() -> usize {
    let sysctl_max = |name: &str| -> usize {
        let path = format!("/proc/sys/net/ipv4/{name}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        let max = text.split_whitespace().nth(2).expect("min, default, max");
        max.parse().unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let proxy_holds = (HELD_CHUNKS_MAX + 1) * READ_CHUNK_BYTES;
    let margin = 1024 * 1024;
    proxy_holds + sysctl_max("tcp_wmem") + sysctl_max("tcp_rmem") + margin
}

#[tokio::test]
async fn partition_holds_the_close_too() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "fin", &upstream).await;
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client
        .partition("fin", Stream::Upstream, OnHeal::Resume)
        .await
        .unwrap();
    client_end.write_all(b"last words").await.unwrap();
    client_end.shutdown().await.unwrap();
    assert_quiet(&mut server_end, "neither bytes nor FIN cross the cut").await;
    client.heal("fin", Stream::Upstream).await.unwrap();
    assert_eq!(
        read_exactly(&mut server_end, 10, "held bytes").await,
        b"last words"
    );
    assert_eq!(
        read_until_closed(&mut server_end, "then the FIN")
            .await
            .unwrap(),
        0
    );
    server.shutdown().await;
}

#[tokio::test]
async fn partition_removed_with_reset_resets_its_connections() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "long-cut", &upstream).await;
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client
        .partition("long-cut", Stream::Downstream, OnHeal::Reset)
        .await
        .unwrap();
    server_end.write_all(b"never delivered").await.unwrap();
    assert_quiet(&mut client_end, "downstream while cut").await;
    client.heal("long-cut", Stream::Downstream).await.unwrap();
    let ended = read_until_closed(&mut client_end, "client sees the reset").await;
    assert_eq!(ended.map_err(|e| e.kind()), Err(ErrorKind::ConnectionReset));
    let ended = read_until_closed(&mut server_end, "server sees the reset").await;
    assert_eq!(ended.map_err(|e| e.kind()), Err(ErrorKind::ConnectionReset));
    server.shutdown().await;
}

#[tokio::test]
async fn partition_holds_new_connections_too() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "cut-early", &upstream).await;
    client
        .partition("cut-early", Stream::Upstream, OnHeal::Resume)
        .await
        .unwrap();
    // The handshake completes at the proxy even though the link is cut.
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client_end.write_all(b"hello").await.unwrap();
    assert_quiet(&mut server_end, "upstream of a connection made while cut").await;
    client.heal("cut-early", Stream::Upstream).await.unwrap();
    assert_eq!(
        read_exactly(&mut server_end, 5, "after heal").await,
        b"hello"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn reset_peer_resets_the_connection() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "rst", &upstream).await;
    let reset = ToxicKind::from_attributes("reset_peer", &json!({"timeout": 0})).unwrap();
    client
        .add_toxic("rst", &ToxicJson::new(Stream::Upstream, &reset))
        .await
        .unwrap();
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client_end.write_all(b"trigger").await.unwrap();
    let ended = read_until_closed(&mut client_end, "client sees the reset").await;
    assert_eq!(ended.map_err(|e| e.kind()), Err(ErrorKind::ConnectionReset));
    let ended = read_until_closed(&mut server_end, "server sees the reset").await;
    assert_eq!(ended.map_err(|e| e.kind()), Err(ErrorKind::ConnectionReset));
    server.shutdown().await;
}

#[tokio::test]
async fn limit_data_passes_that_many_bytes_then_closes() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "limited", &upstream).await;
    let limit = ToxicKind::LimitData(LimitData { bytes: 10 });
    client
        .add_toxic("limited", &ToxicJson::new(Stream::Downstream, &limit))
        .await
        .unwrap();
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    server_end.write_all(&[1u8; 100]).await.unwrap();
    assert_eq!(
        read_exactly(&mut client_end, 10, "the first 10 bytes").await,
        [1u8; 10]
    );
    let rest = read_until_closed(&mut client_end, "then the close").await;
    assert!(matches!(rest, Ok(0)) || rest.is_err(), "{rest:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn disabling_refuses_new_connections_and_closes_live_ones() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "switch", &upstream).await;
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client_end.write_all(b"ping").await.unwrap();
    assert_eq!(
        read_exactly(&mut server_end, 4, "before disable").await,
        b"ping"
    );

    let shown = client.set_enabled("switch", false).await.unwrap();
    assert!(!shown.enabled);
    let ended = read_until_closed(&mut client_end, "client end closed by disable").await;
    assert!(matches!(ended, Ok(0)) || ended.is_err(), "{ended:?}");
    let ended = read_until_closed(&mut server_end, "server end closed by disable").await;
    assert!(matches!(ended, Ok(0)) || ended.is_err(), "{ended:?}");
    let refused = TcpStream::connect(proxy).await;
    assert_eq!(
        refused.map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::ConnectionRefused)
    );

    let shown = client.set_enabled("switch", true).await.unwrap();
    assert_eq!(
        shown.listen,
        proxy.to_string(),
        "re-enabled on the same port"
    );
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client_end.write_all(b"again").await.unwrap();
    assert_eq!(
        read_exactly(&mut server_end, 5, "after enable").await,
        b"again"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_upstream_that_refuses_ends_that_connection_only() {
    let (server, client) = start_server().await;
    let gone = upstream().await;
    let proxy = create_proxy(&client, "flaky", &gone).await;
    let address = gone.local_addr().unwrap();
    drop(gone);
    let mut client_end = within("connect", TcpStream::connect(proxy)).await.unwrap();
    let ended = read_until_closed(&mut client_end, "closed when upstream refuses").await;
    assert!(matches!(ended, Ok(0)) || ended.is_err(), "{ended:?}");

    // The upstream comes back on the same address: the proxy serves again.
    let back = tokio::net::TcpListener::bind(address).await.unwrap();
    let (mut client_end, mut server_end) = proxied_pair(proxy, &back).await;
    client_end.write_all(b"ok").await.unwrap();
    assert_eq!(
        read_exactly(&mut server_end, 2, "after upstream returns").await,
        b"ok"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn bandwidth_paces_a_stream() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "narrow", &upstream).await;
    // 100 KB/s: 30 000 bytes go out as three 100 ms pieces.
    let narrow = ToxicKind::from_attributes("bandwidth", &json!({"rate": 100})).unwrap();
    client
        .add_toxic("narrow", &ToxicJson::new(Stream::Upstream, &narrow))
        .await
        .unwrap();
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    let started = Instant::now();
    client_end.write_all(&[3u8; 30_000]).await.unwrap();
    read_exactly(&mut server_end, 30_000, "paced bytes").await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(190),
        "30 KB at 100 KB/s took {took:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn slow_close_delays_the_close() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "lingering", &upstream).await;
    let slow = ToxicKind::from_attributes("slow_close", &json!({"delay": 200})).unwrap();
    client
        .add_toxic("lingering", &ToxicJson::new(Stream::Downstream, &slow))
        .await
        .unwrap();
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    server_end.write_all(b"bye").await.unwrap();
    let started = Instant::now();
    server_end.shutdown().await.unwrap();
    assert_eq!(
        read_exactly(&mut client_end, 3, "bytes before the close").await,
        b"bye"
    );
    assert_eq!(
        read_until_closed(&mut client_end, "the close")
            .await
            .unwrap(),
        0
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(190),
        "the close came after {took:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn toxicity_zero_spares_every_connection() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "lucky", &upstream).await;
    let timeout = ToxicKind::Timeout(Timeout { timeout: 0 });
    client
        .add_toxic(
            "lucky",
            &ToxicJson::new(Stream::Upstream, &timeout).with_toxicity(0.0),
        )
        .await
        .unwrap();
    for _ in 0..5 {
        let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
        client_end.write_all(b"spared").await.unwrap();
        assert_eq!(
            read_exactly(&mut server_end, 6, "untouched").await,
            b"spared"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn latency_added_to_a_live_connection_applies_at_once() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "live", &upstream).await;
    let (mut client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    client_end.write_all(b"fast").await.unwrap();
    read_exactly(&mut server_end, 4, "before the toxic").await;
    let latency = ToxicKind::from_attributes("latency", &json!({"latency": 200})).unwrap();
    client
        .add_toxic("live", &ToxicJson::new(Stream::Upstream, &latency))
        .await
        .unwrap();
    let started = Instant::now();
    client_end.write_all(b"slow").await.unwrap();
    read_exactly(&mut server_end, 4, "after the toxic").await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    client
        .remove_toxic("live", "latency_upstream")
        .await
        .unwrap();
    let started = Instant::now();
    client_end.write_all(b"fast").await.unwrap();
    read_exactly(&mut server_end, 4, "after removal").await;
    assert!(started.elapsed() < Duration::from_millis(150));
    server.shutdown().await;
}

#[tokio::test]
async fn an_upstream_reset_resets_that_client_only() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "sturdy", &upstream).await;
    let (mut doomed_client, doomed_server) = proxied_pair(proxy, &upstream).await;
    let (mut other_client, mut other_server) = proxied_pair(proxy, &upstream).await;
    doomed_server.set_zero_linger().unwrap();
    drop(doomed_server);
    let ended = read_until_closed(&mut doomed_client, "the reset reaches the client").await;
    assert_eq!(ended.map_err(|e| e.kind()), Err(ErrorKind::ConnectionReset));

    other_client.write_all(b"unaffected").await.unwrap();
    assert_eq!(
        read_exactly(&mut other_server, 10, "the other connection").await,
        b"unaffected"
    );
    let (mut new_client, mut new_server) = proxied_pair(proxy, &upstream).await;
    new_client.write_all(b"new").await.unwrap();
    assert_eq!(
        read_exactly(&mut new_server, 3, "a new connection").await,
        b"new"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_holds_and_resumes_many_connections() {
    const CONNECTIONS: u64 = 20;
    const BYTES: usize = 256 * 1024;
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let proxy = create_proxy(&client, "crowd", &upstream).await;
    let mut pairs = Vec::new();
    for _ in 0..CONNECTIONS {
        pairs.push(proxied_pair(proxy, &upstream).await);
    }
    client
        .partition("crowd", Stream::Upstream, OnHeal::Resume)
        .await
        .unwrap();
    // Every receiver first watches its stream stay quiet, then waits for the heal.
    let (quiet_tx, mut quiet_rx) = tokio::sync::mpsc::channel(CONNECTIONS as usize);
    let mut receivers = Vec::new();
    for (seed, (client_end, mut server_end)) in (0..CONNECTIONS).zip(pairs) {
        tokio::spawn(send_pattern(client_end, seed, BYTES));
        let quiet_tx = quiet_tx.clone();
        receivers.push(tokio::spawn(async move {
            assert_quiet(&mut server_end, "held").await;
            quiet_tx.send(()).await.unwrap();
            expect_pattern(server_end, seed, BYTES, "resumed").await;
        }));
    }
    for _ in 0..CONNECTIONS {
        within("every stream stays quiet while cut", quiet_rx.recv())
            .await
            .expect("a receiver failed");
    }
    client.heal("crowd", Stream::Upstream).await.unwrap();
    for receiver in receivers {
        within("every held stream resumes", receiver).await.unwrap();
    }
    server.shutdown().await;
}
