//! A partition added while the proxy is blocked writing to a full destination.
//!
//! The proxy holds bytes it read but could not yet write (its destination is
//! not reading and every kernel buffer on the way is full) when the cut comes.
//! The cut must hold those bytes: once the API has answered, the destination
//! may receive exactly the bytes that were already in the kernel, between the
//! proxy's socket and the destination's, and not one more until the heal; then
//! the whole stream arrives intact and in order. Both of the proxy's paths are
//! covered: a link with no toxic on its stream (the direct copy) and one with a
//! toxic that changes nothing (the toxic path).
//!
//! What is in the kernel is read from `/proc/net/tcp` (Linux): a socket's
//! `tx_queue` is what its owner wrote and its peer has not acknowledged, its
//! `rx_queue` what arrived and its owner has not read. Bytes received but not
//! yet acknowledged would count twice, so every measurement waits for the
//! queues to stop changing for longer than the kernel delays an ACK (200 ms);
//! all four ends are on this host, so nothing else is in flight.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use epochal_faults::proxy::{OnHeal, Stream, ToxicJson, ToxicKind};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};
use tokio::time::Instant;

/// What the client sends: enough that the proxy is left holding bytes it
/// cannot write, i.e. more than its socket towards the destination queues
/// (Linux grows a send buffer up to `tcp_wmem`'s maximum, 4 MiB by default),
/// the destination's small receive buffer and, on the toxic path, the proxy's
/// 4 MiB of held chunks. The client's side may take in all the rest (the
/// proxy's receive buffer grows up to `tcp_rmem`'s maximum); the test checks
/// that the proxy held bytes at the cut and fails if it held none.
const STREAM_BYTES: usize = 32 * 1024 * 1024;
/// The destination's receive buffer (the kernel doubles it): small, so its
/// window closes soon.
const DESTINATION_RCVBUF_BYTES: u32 = 16 * 1024;
/// The queues must stay unchanged this long to count as settled: longer than
/// Linux's longest delayed ACK (200 ms), so no byte is counted twice.
const SETTLED_FOR: Duration = Duration::from_millis(500);
/// How often the queues are read while waiting for them to settle.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_holds_a_write_blocked_on_a_full_destination_without_toxics() {
    cut_while_blocked("blocked-direct", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_holds_a_write_blocked_on_a_full_destination_on_the_toxic_path() {
    // A latency of zero names the stream (so the link takes the toxic path) and
    // delays nothing.
    let zero = ToxicKind::from_attributes("latency", &json!({"latency": 0})).unwrap();
    cut_while_blocked(
        "blocked-toxic",
        Some(ToxicJson::new(Stream::Upstream, &zero)),
    )
    .await;
}

async fn cut_while_blocked(name: &str, toxic: Option<ToxicJson>) {
    let (server, client) = start_server().await;
    let upstream = small_window_upstream();
    let proxy = create_proxy(&client, name, &upstream).await;
    if let Some(toxic) = &toxic {
        client.add_toxic(name, toxic).await.expect("add toxic");
    }
    let (client_end, mut server_end) = proxied_pair(proxy, &upstream).await;
    // The proxy's socket towards the destination is the destination's peer;
    // its socket from the client is the proxy's listen port.
    let path = Path {
        client: client_end.local_addr().unwrap(),
        proxy_listen: proxy,
        proxy_out: server_end.peer_addr().unwrap(),
        destination: server_end.local_addr().unwrap(),
    };
    let (_client_read, client_write) = client_end.into_split();
    let written = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(send_counted(client_write, Arc::clone(&written)));

    // The destination does not read: the proxy fills its socket, then holds.
    let before = settled(&path, &written, "the stream to block").await;
    client
        .partition(name, Stream::Upstream, OnHeal::Resume)
        .await
        .expect("add the partition");
    // Measured after the API answered: from here the proxy may write nothing,
    // so what the destination can still receive is what the kernel holds.
    let cut = settled(&path, &written, "the queues to settle after the cut").await;
    let in_kernel = cut.towards_destination();
    let held_by_proxy = cut
        .written
        .checked_sub(cut.towards_proxy() + in_kernel)
        .unwrap_or_else(|| panic!("more bytes in the kernel than the client wrote: {cut:?}"));
    println!(
        "blocked: {before:?}\ncut: {cut:?}\n{in_kernel} bytes in the kernel towards the \
         destination, {held_by_proxy} held in the proxy"
    );
    assert!(
        held_by_proxy > 0,
        "the proxy held no unwritten byte at the cut, so nothing was tested: \
         {STREAM_BYTES} bytes were all absorbed by the buffers ({cut:?})"
    );
    assert_eq!(
        cut.towards_destination(),
        before.towards_destination(),
        "nothing moved towards the destination while it was not reading"
    );

    // The destination reads: the bytes already in the kernel arrive, then none.
    let mut expected = Expected::new(PATTERN_SEED);
    let mut buffer = vec![0u8; 256 * 1024];
    let mut received = 0u64;
    within("the bytes in the kernel at the cut arrive", async {
        while received < in_kernel {
            let want = buffer.len().min((in_kernel - received) as usize);
            let n = server_end.read(&mut buffer[..want]).await.unwrap();
            assert_ne!(n, 0, "the stream ended while cut");
            expected.check(&buffer[..n]);
            received += n as u64;
        }
    })
    .await;
    assert_quiet(
        &mut server_end,
        &format!(
            "after the {in_kernel} bytes in the kernel at the cut, of the {held_by_proxy} \
             the proxy held"
        ),
    )
    .await;

    // Healed, the rest follows in order, to the end of the stream.
    client
        .heal(name, Stream::Upstream)
        .await
        .expect("remove the partition");
    within("the whole stream arrives after the heal", async {
        loop {
            let n = server_end.read(&mut buffer).await.unwrap();
            if n == 0 {
                break;
            }
            expected.check(&buffer[..n]);
        }
    })
    .await;
    assert_eq!(
        expected.offset, STREAM_BYTES as u64,
        "the stream ended early"
    );
    within("the writer finishes", writer)
        .await
        .unwrap()
        .expect("the client sends the whole stream");
    server.shutdown().await;
}

const PATTERN_SEED: u64 = 22;

/// An upstream listener whose accepted sockets have a small receive buffer.
fn small_window_upstream() -> TcpListener {
    let socket = TcpSocket::new_v4().unwrap();
    // Set before listen, so accepted sockets inherit it (and its window scale).
    socket
        .set_recv_buffer_size(DESTINATION_RCVBUF_BYTES)
        .unwrap();
    socket
        .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .unwrap();
    socket.listen(16).unwrap()
}

/// Writes [`STREAM_BYTES`] of the pattern, counting every byte the kernel
/// took, then closes the write side.
async fn send_counted(
    mut writer: tokio::net::tcp::OwnedWriteHalf,
    written: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let mut pattern = Pattern::new(PATTERN_SEED);
    let mut sent = 0;
    while sent < STREAM_BYTES {
        let block = pattern.next_block();
        let mut at = 0;
        while at < block.len() {
            let n = writer.write(&block[at..]).await?;
            at += n;
            written.fetch_add(n as u64, Ordering::SeqCst);
        }
        sent += block.len();
    }
    writer.shutdown().await
}

/// The four sockets on the way: client → proxy, proxy → destination.
struct Path {
    client: SocketAddr,
    proxy_listen: SocketAddr,
    proxy_out: SocketAddr,
    destination: SocketAddr,
}

/// The kernel's queues along the path at one moment, and what the client had
/// written by then.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    written: u64,
    client_tx: u64,
    proxy_in_rx: u64,
    proxy_out_tx: u64,
    destination_rx: u64,
}

impl Snapshot {
    /// Bytes written by the client that the proxy has not read.
    fn towards_proxy(&self) -> u64 {
        self.client_tx + self.proxy_in_rx
    }

    /// Bytes written by the proxy that the destination has not read.
    fn towards_destination(&self) -> u64 {
        self.proxy_out_tx + self.destination_rx
    }
}

fn snapshot(path: &Path, written: &AtomicU64) -> Snapshot {
    let table = std::fs::read_to_string("/proc/net/tcp")
        .expect("read /proc/net/tcp (this test needs Linux)");
    let written = written.load(Ordering::SeqCst);
    let queues = |local: SocketAddr, remote: SocketAddr| {
        table
            .lines()
            .skip(1)
            .find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                (parse_address(fields[1]) == Some(local)
                    && parse_address(fields[2]) == Some(remote))
                .then(|| {
                    let (tx, rx) = fields[4].split_once(':').unwrap();
                    (
                        u64::from_str_radix(tx, 16).unwrap(),
                        u64::from_str_radix(rx, 16).unwrap(),
                    )
                })
            })
            .unwrap_or_else(|| panic!("no socket {local} -> {remote} in /proc/net/tcp"))
    };
    Snapshot {
        written,
        client_tx: queues(path.client, path.proxy_listen).0,
        proxy_in_rx: queues(path.proxy_listen, path.client).1,
        proxy_out_tx: queues(path.proxy_out, path.destination).0,
        destination_rx: queues(path.destination, path.proxy_out).1,
    }
}

/// `0100007F:1F90`: the address as the kernel holds it in memory, then the port.
fn parse_address(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let ip = u32::from_str_radix(ip, 16).ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddr::from((Ipv4Addr::from(ip.to_ne_bytes()), port)))
}

/// Waits (bounded by [`DEADLINE`]) until the snapshot has not changed for
/// [`SETTLED_FOR`], and returns it.
async fn settled(path: &Path, written: &AtomicU64, what: &str) -> Snapshot {
    within(what, async {
        let mut last = snapshot(path, written);
        let mut since = Instant::now();
        loop {
            tokio::time::sleep(POLL_INTERVAL).await;
            let now = snapshot(path, written);
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= SETTLED_FOR {
                return last;
            }
        }
    })
    .await
}

/// Checks a stream against the pattern as it arrives.
struct Expected {
    pattern: Pattern,
    pending: Vec<u8>,
    offset: u64,
}

impl Expected {
    fn new(seed: u64) -> Self {
        Expected {
            pattern: Pattern::new(seed),
            pending: Vec::new(),
            offset: 0,
        }
    }

    fn check(&mut self, data: &[u8]) {
        assert!(
            self.offset + data.len() as u64 <= STREAM_BYTES as u64,
            "more than {STREAM_BYTES} bytes arrived"
        );
        while self.pending.len() < data.len() {
            self.pending.extend(self.pattern.next_block());
        }
        if let Some(at) = (0..data.len()).find(|&i| data[i] != self.pending[i]) {
            panic!(
                "byte {} differs from what was sent",
                self.offset + at as u64
            );
        }
        self.pending.drain(..data.len());
        self.offset += data.len() as u64;
    }
}
