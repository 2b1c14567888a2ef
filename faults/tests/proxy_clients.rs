//! Toxiproxy's existing clients drive `epochal-proxy` unchanged: the
//! `toxiproxy_rust` crate (blocking) and the PyPI package `toxiproxy-python`.
//! Each creates a proxy, adds and removes a toxic, and resets; bytes then flow
//! through the proxy it created.

use crate::common;

use std::net::SocketAddr;
use std::process::Stdio;

use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// Proves the proxy `name` made by a foreign client forwards to `upstream`.
async fn bytes_flow(listen: &str, upstream: &TcpListener) {
    let listen: SocketAddr = listen.parse().expect("listen is an address");
    let (mut client_end, mut server_end) = proxied_pair(listen, upstream).await;
    client_end.write_all(b"through").await.unwrap();
    assert_eq!(
        read_exactly(&mut server_end, 7, "bytes through the proxy").await,
        b"through"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_toxiproxy_rust_crate_drives_the_proxy() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let api = server.address();
    let upstream_address = upstream.local_addr().unwrap().to_string();

    // The crate is blocking (reqwest::blocking runs its own runtime), so it gets a
    // thread of its own.
    let listen = within(
        "toxiproxy_rust session",
        tokio::task::spawn_blocking(move || {
            use toxiproxy_rust::client::Client;
            use toxiproxy_rust::proxy::ProxyPack;

            let toxiproxy = Client::new(api);
            assert!(toxiproxy.is_running());
            toxiproxy.version().expect("version");
            let proxies = toxiproxy
                .populate(vec![ProxyPack::new(
                    "rust".into(),
                    "127.0.0.1:0".into(),
                    upstream_address,
                )])
                .expect("populate");
            assert_eq!(proxies.len(), 1);
            let listen = proxies[0].proxy_pack.listen.clone();

            let proxy = toxiproxy.find_proxy("rust").expect("find_proxy");
            proxy.with_latency("downstream".into(), 100, 10, 1.0);
            let toxics = proxy.toxics().expect("toxics");
            assert_eq!(toxics.len(), 1);
            assert_eq!(toxics[0].name, "latency_downstream");
            assert_eq!(toxics[0].attributes["latency"], 100);
            proxy.delete_all_toxics().expect("delete_all_toxics");
            assert!(proxy.toxics().expect("toxics").is_empty());

            proxy.with_timeout("upstream".into(), 0, 1.0);
            proxy.disable().expect("disable");
            assert!(!toxiproxy.all().expect("all")["rust"].proxy_pack.enabled);
            toxiproxy.reset().expect("reset");
            let after = toxiproxy.find_proxy("rust").expect("find_proxy");
            assert!(after.proxy_pack.enabled);
            assert!(after.proxy_pack.toxics.is_empty());
            listen
        }),
    )
    .await
    .expect("the toxiproxy_rust session panicked");

    // Cross-check with our own client, then use the proxy it made.
    let proxy = client.proxy("rust").await.unwrap();
    assert!(proxy.enabled && proxy.toxics.is_empty());
    bytes_flow(&listen, &upstream).await;
    server.shutdown().await;
}

/// The Python side: exits 3 if the module is missing, non-zero on a failed
/// check, and prints the proxy's listen address last.
const PYTHON_SESSION: &str = r#"
import sys
try:
    import toxiproxy
except ImportError as error:
    print("toxiproxy module not importable: %s" % error, file=sys.stderr)
    sys.exit(3)

host, port, upstream = sys.argv[1], int(sys.argv[2]), sys.argv[3]
server = toxiproxy.Toxiproxy()
server.update_api_consumer(host, port)
assert server.running(), "API not reachable"
assert server.version(), "no version"

proxy = server.create(upstream=upstream, name="python")
assert not proxy.listen.endswith(":0"), proxy.listen
proxy.add_toxic(type="latency", attributes={"latency": 100, "jitter": 0})
toxics = proxy.toxics()
assert list(toxics) == ["latency_downstream"], toxics
assert toxics["latency_downstream"].attributes["latency"] == 100
assert proxy.destroy_toxic("latency_downstream")
assert proxy.toxics() == {}, proxy.toxics()

try:
    server.create(upstream=upstream, name="python")
    raise AssertionError("a duplicate proxy was accepted")
except toxiproxy.server.ProxyExists:
    pass

proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
proxy.disable()
assert not server.get_proxy("python").enabled
assert server.reset()
assert server.get_proxy("python").enabled
assert proxy.toxics() == {}
print(proxy.listen)
"#;

#[tokio::test]
async fn the_toxiproxy_python_package_drives_the_proxy() {
    let (server, client) = start_server().await;
    let upstream = upstream().await;
    let api = server.address();
    // ci/dev.sh installs toxiproxy-python into a venv and exports its interpreter.
    let python = std::env::var("EPOCHAL_PYTHON").unwrap_or_else(|_| "python3".to_owned());

    let output = within(
        "python toxiproxy session",
        tokio::process::Command::new(&python)
            .arg("-c")
            .arg(PYTHON_SESSION)
            .arg(api.ip().to_string())
            .arg(api.port().to_string())
            .arg(upstream.local_addr().unwrap().to_string())
            // requests honours HTTP(S)_PROXY; the API is local.
            .env("NO_PROXY", "*")
            .env("no_proxy", "*")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|error| panic!("cannot run {python}: {error} (set EPOCHAL_PYTHON)"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.code() != Some(3),
        "the Python package toxiproxy-python is not importable by {python}: {stderr}\n\
         install it (bash ci/dev.sh test does: a venv at target/py with toxiproxy-python==0.1.1) \
         or point EPOCHAL_PYTHON at an interpreter that has it"
    );
    assert!(
        output.status.success(),
        "python session failed ({}):\n{stderr}",
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let listen = stdout
        .lines()
        .last()
        .expect("python printed the listen address")
        .trim()
        .to_owned();

    let proxy = client.proxy("python").await.unwrap();
    assert_eq!(proxy.listen, listen);
    assert!(proxy.enabled && proxy.toxics.is_empty());
    bytes_flow(&listen, &upstream).await;
    server.shutdown().await;
}
