//! `epochal serve` as a user meets it: the real binary on a temporary store,
//! its port read from the one line it prints, spoken to over raw TCP (so
//! every request line is exactly what the test wrote — no client tidies a
//! `..` away). It serves the index and the store's files, nothing outside the
//! store by any spelling of a path, nothing but GET and HEAD, only on
//! 127.0.0.1, and stops cleanly (exit 0, nothing on stderr) on SIGINT and
//! SIGTERM.

use crate::common::html;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const START_TIMEOUT: Duration = Duration::from_secs(60);
const IO_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// What must never reach a client: the content of a file outside the store.
const SECRET: &str = "SECRET-OUTSIDE-THE-STORE-7c1f";

/// A store with one run (and `latest` at it) beside a directory that is not
/// the store and holds the secret.
struct Fixture {
    _tmp: tempfile::TempDir,
    store: PathBuf,
    run: PathBuf,
    outside: PathBuf,
}

const RUN: &str = "adhoc/my-schedule/20261130T130501Z-0";

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let run = store.join(RUN);
    std::fs::create_dir_all(run.join("nodes/b1")).unwrap();
    std::fs::write(
        run.join("history.jsonl"),
        "{\"index\":0,\"type\":\"invoke\"}\n{\"index\":1,\"type\":\"ok\"}\n",
    )
    .unwrap();
    std::fs::write(
        run.join("results.json"),
        "{\"verdict\": \"invalid\", \"results\": []}\n",
    )
    .unwrap();
    std::fs::write(
        run.join("report.html"),
        "<!DOCTYPE html><title>the report</title>\n",
    )
    .unwrap();
    std::fs::write(run.join("harness.log"), "[   0.001s] run of x\n").unwrap();
    std::fs::write(run.join("nodes/b1/broker.log"), "broker started\n").unwrap();
    std::os::unix::fs::symlink(RUN, store.join("latest")).unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    // Links inside the store that point out of it: to a file, to a directory.
    std::os::unix::fs::symlink(outside.join("secret.txt"), store.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, run.join("escape")).unwrap();
    Fixture {
        _tmp: tmp,
        store,
        run,
        outside,
    }
}

/// A running `epochal serve`; killed (if still running) when dropped.
struct Server {
    child: Child,
    port: u16,
    line: String,
}

impl Server {
    fn start(store: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_epochal"))
            .arg("serve")
            .arg(store)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The first line, read on a thread so the wait has a deadline.
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("epochal serve printed no line within {START_TIMEOUT:?}");
            }
        };
        let port = line
            .trim_end()
            .strip_prefix(&format!("serving {} on http://127.0.0.1:", store.display()))
            .and_then(|rest| rest.strip_suffix('/'))
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("not the serving line: {line:?}"));
        Server { child, port, line }
    }

    fn request(&self, raw: &str) -> Response {
        request_at(SocketAddr::from(([127, 0, 0, 1], self.port)), raw)
    }

    fn get(&self, path: &str) -> Response {
        self.request(&format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        ))
    }

    /// Sends `signal` and awaits the exit; its status and what it wrote to
    /// stderr.
    fn stop(mut self, signal: Signal) -> (ExitStatus, String) {
        kill(Pid::from_raw(self.child.id() as i32), signal).unwrap();
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "epochal serve still running {STOP_TIMEOUT:?} after {signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status, stderr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
struct Response {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Response {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }
}

/// One request on its own connection, read to the server's close.
fn request_at(address: SocketAddr, raw: &str) -> Response {
    let mut stream = TcpStream::connect_timeout(&address, IO_TIMEOUT).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.write_all(raw.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(&bytes)));
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let mut body = bytes[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = unchunk(&body);
    }
    Response { status, head, body }
}

fn unchunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let end = bytes
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size");
        let size = usize::from_str_radix(std::str::from_utf8(&bytes[..end]).unwrap().trim(), 16)
            .expect("a hex chunk size");
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&bytes[end + 2..end + 2 + size]);
        bytes = &bytes[end + 2 + size + 2..];
    }
}

#[test]
fn serve_home_is_the_store_index_and_files_come_back_byte_for_byte() {
    let fixture = fixture();
    let server = Server::start(&fixture.store, &[]);
    // The index was written at start, too.
    assert!(fixture.store.join("index.html").is_file());

    let home = server.get("/");
    assert_eq!(home.status, 200, "{home:?}");
    assert_eq!(
        home.header("content-type").as_deref(),
        Some("text/html; charset=utf-8")
    );
    let page = html::assert_parses(&home.text());
    let links: Vec<String> = html::elements(&page.document, "a")
        .iter()
        .filter_map(|a| html::attr(a, "href"))
        .collect();
    assert_eq!(links, [format!("{RUN}/report.html")]);
    assert!(home.text().contains(">invalid<"), "{}", home.text());

    // The link from the index works through the server.
    let report = server.get(&format!("/{RUN}/report.html"));
    assert_eq!(report.status, 200);
    assert_eq!(
        report.body,
        std::fs::read(fixture.run.join("report.html")).unwrap()
    );

    for (file, kind) in [
        ("history.jsonl", "text/plain; charset=utf-8"),
        ("results.json", "application/json"),
        ("harness.log", "text/plain; charset=utf-8"),
        ("nodes/b1/broker.log", "text/plain; charset=utf-8"),
    ] {
        let got = server.get(&format!("/{RUN}/{file}"));
        assert_eq!(got.status, 200, "{file}: {got:?}");
        assert_eq!(
            got.body,
            std::fs::read(fixture.run.join(file)).unwrap(),
            "{file}"
        );
        assert_eq!(got.header("content-type").as_deref(), Some(kind), "{file}");
    }
    // `latest` is a link inside the store: followed.
    let latest = server.get("/latest/history.jsonl");
    assert_eq!(latest.status, 200, "{latest:?}");
    assert_eq!(
        latest.body,
        std::fs::read(fixture.run.join("history.jsonl")).unwrap()
    );

    // A run directory is browsable: a listing linking its files, reached from
    // the path without its slash by a redirect.
    let bare = server.get(&format!("/{RUN}"));
    assert_eq!(bare.status, 308, "{bare:?}");
    assert_eq!(bare.header("location"), Some(format!("/{RUN}/")));
    let listing = server.get(&format!("/{RUN}/"));
    assert_eq!(listing.status, 200, "{listing:?}");
    let page = html::assert_parses(&listing.text());
    let links: Vec<String> = html::elements(&page.document, "a")
        .iter()
        .filter_map(|a| html::attr(a, "href"))
        .collect();
    for link in [
        "report.html",
        "history.jsonl",
        "results.json",
        "harness.log",
        "nodes/",
    ] {
        assert!(links.contains(&link.to_owned()), "{link} not in {links:?}");
    }
    let nodes = server.get(&format!("/{RUN}/nodes/b1/"));
    assert!(nodes.text().contains("href=\"broker.log\""), "{nodes:?}");

    assert_eq!(server.get(&format!("/{RUN}/no-such-file")).status, 404);
    // HEAD: the head alone.
    let head = server.request(&format!(
        "HEAD /{RUN}/results.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    ));
    assert_eq!(head.status, 200, "{head:?}");
    assert!(head.body.is_empty(), "{head:?}");
}

#[test]
fn serve_refuses_every_path_outside_the_store() {
    let fixture = fixture();
    let server = Server::start(&fixture.store, &[]);
    let secret = fixture.outside.join("secret.txt");
    let secret = secret.to_str().unwrap();
    let encoded_secret = secret.replace('/', "%2F");
    // `..` raw and encoded, `/` encoded, empty segments, absolute paths
    // (raw, encoded, after a segment) and links out of the store.
    let attempts = [
        "/../outside/secret.txt".to_owned(),
        format!("/{RUN}/../../../../outside/secret.txt"),
        "/%2e%2e/outside/secret.txt".to_owned(),
        "/%2E%2E%2Foutside%2Fsecret.txt".to_owned(),
        "/adhoc/..%2f..%2f..%2foutside/secret.txt".to_owned(),
        "/../etc/passwd".to_owned(),
        "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd".to_owned(),
        "//etc/passwd".to_owned(),
        format!("/{secret}"),
        format!("/{encoded_secret}"),
        format!("/adhoc/{encoded_secret}"),
        format!("/adhoc/{secret}"),
        "/leak.txt".to_owned(),
        format!("/{RUN}/escape/secret.txt"),
        format!("/{RUN}/escape/"),
    ];
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let passwd_line = passwd.lines().next().unwrap_or("root:x:0:0");
    for path in &attempts {
        let got = server.get(path);
        assert!(
            got.status == 403 || got.status == 404,
            "{path}: answered {} {:?}",
            got.status,
            got.text()
        );
        let body = got.text();
        assert!(!body.contains(SECRET), "{path} leaked the secret: {body}");
        assert!(
            !body.contains(passwd_line),
            "{path} leaked /etc/passwd: {body}"
        );
        assert!(
            !body.contains("secret.txt"),
            "{path} listed outside: {body}"
        );
    }
    // The links themselves are there and do point at the secret: the refusal
    // is the server's check, not a broken fixture.
    assert_eq!(
        std::fs::read_to_string(fixture.store.join("leak.txt")).unwrap(),
        SECRET
    );
    assert!(fixture.run.join("escape/secret.txt").is_file());
    // An absolute-form request line names the same path: still refused.
    let absolute = server.request(
        "GET http://127.0.0.1/../outside/secret.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(!absolute.text().contains(SECRET), "{absolute:?}");
}

#[test]
fn serve_answers_only_get_and_head() {
    let fixture = fixture();
    let server = Server::start(&fixture.store, &[]);
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let got = server.request(&format!(
            "{method} /{RUN}/history.jsonl HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\
             Connection: close\r\n\r\n{{}}"
        ));
        assert_eq!(got.status, 405, "{method}: {got:?}");
        assert_eq!(got.header("allow").as_deref(), Some("GET, HEAD"));
        assert!(
            !got.text().contains("invoke"),
            "{method} got the file: {got:?}"
        );
    }
    // Nothing was written: the history is as it was.
    assert!(
        std::fs::read_to_string(fixture.run.join("history.jsonl"))
            .unwrap()
            .starts_with("{\"index\":0")
    );
}

/// The machine's non-loopback IPv4 addresses (`hostname -I`).
fn other_addresses() -> Vec<IpAddr> {
    let Ok(output) = Command::new("hostname").arg("-I").output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse().ok())
        .filter(|a: &IpAddr| !a.is_loopback())
        .collect()
}

#[test]
fn serve_listens_only_on_loopback() {
    let fixture = fixture();
    let server = Server::start(&fixture.store, &[]);
    assert!(server.line.contains("http://127.0.0.1:"), "{}", server.line);
    assert_eq!(server.get("/").status, 200);
    let others = other_addresses();
    if others.is_empty() {
        println!("note: no non-loopback address on this machine; that part is not checked");
    }
    for address in others {
        let at = SocketAddr::new(address, server.port);
        assert!(
            TcpStream::connect_timeout(&at, Duration::from_secs(5)).is_err(),
            "epochal serve answered on {at}"
        );
    }
}

#[test]
fn serve_on_a_given_port() {
    let fixture = fixture();
    // A port free a moment ago; the server binds it by number.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Server::start(&fixture.store, &["--port", &port.to_string()]);
    assert_eq!(server.port, port);
    assert_eq!(server.get("/").status, 200);
}

#[test]
fn serve_stops_cleanly_on_sigint_with_exit_0_and_nothing_on_stderr() {
    let fixture = fixture();
    let server = Server::start(&fixture.store, &[]);
    assert_eq!(server.get("/").status, 200);
    // A client holding a connection open with nothing sent must not keep the
    // server up.
    let idle = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let port = server.port;
    let (status, stderr) = server.stop(Signal::SIGINT);
    assert_eq!(status.code(), Some(0), "{status:?}, stderr: {stderr}");
    assert_eq!(stderr, "");
    drop(idle);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "something still listens on {port}"
    );
}

#[test]
fn serve_stops_cleanly_on_sigterm() {
    let fixture = fixture();
    let server = Server::start(&fixture.store, &[]);
    assert_eq!(server.get("/").status, 200);
    let (status, stderr) = server.stop(Signal::SIGTERM);
    assert_eq!(status.code(), Some(0), "{status:?}, stderr: {stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn serve_a_store_that_is_not_there_is_a_harness_error() {
    let tmp = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_epochal"))
        .arg("serve")
        .arg(tmp.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not a directory"));
    assert!(output.stdout.is_empty());
}
