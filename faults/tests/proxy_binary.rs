//! The `epochal-proxy` binary as a launcher runs it: `--listen 127.0.0.1:0`,
//! read the bound address from the first stdout line, drive it, stop it.

use crate::common;

use std::net::SocketAddr;
use std::process::Stdio;

use common::*;
use epochal_faults::proxy::{NewProxy, OnHeal, Stream};
use epochal_faults::toxiproxy_client::ToxiproxyClient;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

#[tokio::test]
async fn the_binary_prints_its_address_serves_the_api_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_epochal-proxy"))
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start epochal-proxy");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = within("the first stdout line", stdout.next_line())
        .await
        .unwrap()
        .expect("epochal-proxy printed a line");
    let api: SocketAddr = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .parse()
        .expect("an address after 'listening on '");
    assert_ne!(api.port(), 0);

    let client = ToxiproxyClient::new(api.to_string());
    let upstream = upstream().await;
    let proxy = client
        .create_proxy(&NewProxy::new(
            "via-binary",
            "127.0.0.1:0",
            upstream.local_addr().unwrap().to_string(),
        ))
        .await
        .unwrap();
    let listen: SocketAddr = proxy.listen.parse().unwrap();
    let (mut client_end, mut server_end) = proxied_pair(listen, &upstream).await;
    client
        .partition("via-binary", Stream::Upstream, OnHeal::Resume)
        .await
        .unwrap();
    client_end.write_all(b"held").await.unwrap();
    assert_quiet(&mut server_end, "cut by the binary").await;
    client.heal("via-binary", Stream::Upstream).await.unwrap();
    assert_eq!(read_exactly(&mut server_end, 4, "healed").await, b"held");

    // SIGTERM: a clean exit that closes the proxies it served.
    let pid = child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let status = within("epochal-proxy exits on SIGTERM", child.wait())
        .await
        .unwrap();
    assert!(status.success(), "exit status {status}");
    let ended = read_until_closed(&mut client_end, "proxied connection closed at exit").await;
    assert!(matches!(ended, Ok(0)) || ended.is_err(), "{ended:?}");
}
