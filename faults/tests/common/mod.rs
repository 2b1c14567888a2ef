//! Shared by the proxy's integration tests: an in-process `epochal-proxy` on a
//! free port, proxied TCP pairs whose both ends the test holds, deterministic
//! byte patterns, and deadlines for every wait.

#![allow(dead_code)] // each test module uses a different part of this

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use epochal_faults::proxy::{NewProxy, ProxyServer};
use epochal_faults::toxiproxy_client::ToxiproxyClient;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The bound on any wait for something that should happen promptly.
pub const DEADLINE: Duration = Duration::from_secs(20);
/// How long a test watches to prove that *no* byte arrives.
pub const QUIET_WINDOW: Duration = Duration::from_millis(300);

/// Awaits `future`, failing the test with `what` if it takes longer than
/// [`DEADLINE`].
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(DEADLINE, future).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: not done within {DEADLINE:?}"),
    }
}

/// An in-process proxy server on a free port, with a client for it.
pub async fn start_server() -> (ProxyServer, ToxiproxyClient) {
    let server = ProxyServer::start("127.0.0.1:0")
        .await
        .expect("bind the API on a free port");
    let client = ToxiproxyClient::new(server.address().to_string());
    (server, client)
}

/// An upstream listener on a free port.
pub async fn upstream() -> TcpListener {
    TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind an upstream on a free port")
}

/// Creates proxy `name` on a free port in front of `upstream` and returns the
/// address it listens on.
pub async fn create_proxy(
    client: &ToxiproxyClient,
    name: &str,
    upstream: &TcpListener,
) -> SocketAddr {
    let upstream = upstream.local_addr().unwrap().to_string();
    let proxy = client
        .create_proxy(&NewProxy::new(name, "127.0.0.1:0", upstream))
        .await
        .expect("create proxy");
    let listen: SocketAddr = proxy.listen.parse().expect("listen is an address");
    assert_ne!(listen.port(), 0, "a port-0 proxy reports the port it got");
    listen
}

/// Connects through the proxy and accepts the proxied connection at the
/// upstream: `(client end, server end)`.
pub async fn proxied_pair(proxy: SocketAddr, upstream: &TcpListener) -> (TcpStream, TcpStream) {
    within("connect through the proxy", async {
        let client = TcpStream::connect(proxy)
            .await
            .expect("connect to the proxy");
        let (server, _) = upstream.accept().await.expect("the proxy dials upstream");
        client.set_nodelay(true).unwrap();
        server.set_nodelay(true).unwrap();
        (client, server)
    })
    .await
}

/// Asserts that nothing arrives on `reader` for [`QUIET_WINDOW`] (no byte, and
/// no end of stream either: the connection stays open).
pub async fn assert_quiet<R: AsyncRead + Unpin>(reader: &mut R, what: &str) {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(QUIET_WINDOW, reader.read(&mut byte)).await {
        Err(_) => {}
        Ok(Ok(0)) => panic!("{what}: the stream ended, expected it open and silent"),
        Ok(Ok(_)) => panic!("{what}: a byte arrived, expected none"),
        Ok(Err(error)) => {
            panic!("{what}: the stream failed ({error}), expected it open and silent")
        }
    }
}

/// Reads exactly `len` bytes (bounded by [`DEADLINE`]).
pub async fn read_exactly<R: AsyncRead + Unpin>(reader: &mut R, len: usize, what: &str) -> Vec<u8> {
    let mut buffer = vec![0u8; len];
    within(what, reader.read_exact(&mut buffer))
        .await
        .unwrap_or_else(|error| panic!("{what}: {error}"));
    buffer
}

/// Reads until the stream ends or fails; returns how it ended.
pub async fn read_until_closed<R: AsyncRead + Unpin>(
    reader: &mut R,
    what: &str,
) -> io::Result<usize> {
    within(what, async {
        let mut total = 0;
        let mut buffer = [0u8; 4096];
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) => return Ok(total),
                Ok(n) => total += n,
                Err(error) => return Err(error),
            }
        }
    })
    .await
}

/// A deterministic byte stream: block `k` of [`Pattern::BLOCK`] bytes is a
/// xorshift sequence seeded from `(seed, k)`, so writer and checker regenerate
/// it independently without holding the whole stream.
pub struct Pattern {
    seed: u64,
    block: u64,
}

impl Pattern {
    pub const BLOCK: usize = 64 * 1024;

    pub fn new(seed: u64) -> Self {
        Pattern { seed, block: 0 }
    }

    pub fn next_block(&mut self) -> Vec<u8> {
        let mut state = (self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.block) | 1;
        self.block += 1;
        let mut out = Vec::with_capacity(Self::BLOCK);
        while out.len() < Self::BLOCK {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            out.extend_from_slice(&state.to_le_bytes());
        }
        out
    }

    /// The first `len` bytes of the pattern.
    pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
        let mut pattern = Pattern::new(seed);
        let mut out = Vec::with_capacity(len + Self::BLOCK);
        while out.len() < len {
            out.extend(pattern.next_block());
        }
        out.truncate(len);
        out
    }
}

/// Writes `len` bytes of pattern `seed` (`len` a multiple of the block), then
/// closes the write side.
pub async fn send_pattern<W: AsyncWrite + Unpin>(
    mut writer: W,
    seed: u64,
    len: usize,
) -> io::Result<()> {
    let mut pattern = Pattern::new(seed);
    let mut sent = 0;
    while sent < len {
        let block = pattern.next_block();
        writer.write_all(&block).await?;
        sent += block.len();
    }
    writer.shutdown().await
}

/// Reads to the end of the stream and checks it is exactly `len` bytes of
/// pattern `seed`; panics at the first differing offset.
pub async fn expect_pattern<R: AsyncRead + Unpin>(
    mut reader: R,
    seed: u64,
    len: usize,
    what: &str,
) {
    let mut pattern = Pattern::new(seed);
    let mut expected = Vec::new();
    let mut offset = 0usize;
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        let n = reader
            .read(&mut buffer)
            .await
            .unwrap_or_else(|error| panic!("{what}: read failed at offset {offset}: {error}"));
        if n == 0 {
            break;
        }
        assert!(offset + n <= len, "{what}: more than {len} bytes arrived");
        while expected.len() < n {
            expected.extend(pattern.next_block());
        }
        if buffer[..n] != expected[..n] {
            let at = (0..n).find(|&i| buffer[i] != expected[i]).unwrap();
            panic!("{what}: byte {} differs", offset + at);
        }
        expected.drain(..n);
        offset += n;
    }
    assert_eq!(offset, len, "{what}: the stream ended early");
}
