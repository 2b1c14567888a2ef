//! The proxy's cost on the data path and how fast its partition bites, against
//! the goals of issue 22: echo throughput through `epochal-proxy` at least half
//! of direct loopback's, at most 25 µs added to a 1-byte round trip's p50, and
//! a partition in force — no further byte arrives — within 5 ms at p99 of its
//! API call returning. Each figure has a baseline measured in the same run: the
//! same traffic straight to the echo server, or the cut stream's own transit
//! time while it flows.
//!
//! A real `epochal-proxy` process is measured, started and driven as the
//! harness does (harness/src/runtime/process.rs: `--listen 127.0.0.1:0`, its
//! `listening on` line, one proxy per link created on port 0 through the API;
//! the cut is harness/src/nemesis/partition.rs's `partition` toxic with
//! `on_heal: resume`, healed by removing it). The binary is the one beside this
//! bench (`target/release/epochal-proxy`), or in `EPOCHAL_BIN_DIR`; `ci/bench.sh`
//! builds it first. Every socket is on 127.0.0.1 and every port is picked by
//! the kernel.
//!
//! Recording (`epochal-proxy --record DIR`) is measured on a client link
//! against the same link unrecorded, in the same run: two proxy processes
//! started alike but for `--record`, each with a `client-b1` proxy in front of
//! a server that answers Kafka-framed requests, used in alternating rounds.
//! The goal: recorded, at least 0.8× the unrecorded throughput and at most
//! 20 µs more on the round trip's p50. The recording itself is read back and
//! the bench fails if it holds no request or no response.
//!
//! `cargo bench -p epochal-faults --bench proxy -- [--quick] [--json PATH]`;
//! `--rtt-only` measures the round trips alone and prints one line;
//! `--recording-only` measures recording on against off alone.
//! Throughput is the best of `--reps` transfers each way, since the machine is
//! shared; RTT and cut figures are nearest-rank percentiles over every sample
//! (with 50 cuts, p99 is the worst). Nothing here asserts a time: a missed goal
//! is printed, and only a bench that cannot run exits non-zero.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use epochal_faults::proxy::{NewProxy, OnHeal, Stream};
use epochal_faults::toxiproxy_client::ToxiproxyClient;
use serde_json::{Value, json};

// In a folder of its own, so cargo does not take it for a bench of its own.
#[path = "proxy/cut.rs"]
mod cut;
use cut::{Cuts, measure_cuts};
#[path = "proxy/recording.rs"]
mod recording;
use recording::*;
#[path = "proxy/report.rs"]
mod report;
use report::{Summary, figures, print_cuts, print_figures, report_json, write_json};

const ECHO_BYTES_FULL: usize = 64 << 20;
const ECHO_BYTES_QUICK: usize = 8 << 20;
const REPS_DEFAULT: usize = 3;
const ROUND_TRIPS_FULL: usize = 20_000;
const ROUND_TRIPS_QUICK: usize = 2_000;
/// Round trips on each connection before any is timed (caches, the proxy's
/// first-use allocations).
const ROUND_TRIPS_WARMUP: usize = 200;
/// Direct and proxied round trips alternate in this many blocks, so a noisy
/// neighbour on the shared machine hits both paths alike.
const ROUND_TRIP_BLOCKS: usize = 10;
const CUTS_FULL: usize = 50;
const CUTS_QUICK: usize = 10;

/// The most one socket call, one connect and one API call may take.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const API_TIMEOUT: Duration = Duration::from_secs(10);
const PROXY_START_TIMEOUT: Duration = Duration::from_secs(10);
/// One echo transfer, and the whole RTT measurement.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);
const ROUND_TRIPS_TIMEOUT: Duration = Duration::from_secs(120);
/// An echo server connection idle this long is closed.
const ECHO_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
const CHUNK_BYTES: usize = 64 * 1024;
/// The echoed pattern's period: prime, so it never lines up with a chunk.
const PATTERN_PERIOD: usize = 251;

/// The cut stream: a message every interval (sleep-paced, so roughly), each
/// carrying its sequence number and send time. Paced, not pushed flat out, so
/// no backlog sits in socket buffers: bytes that arrive after a cut are bytes
/// the proxy forwarded after it, not a queue draining.
const MESSAGE_BYTES: usize = 32;
const MESSAGE_INTERVAL: Duration = Duration::from_micros(100);
/// A cut is in force once no byte has arrived for this long: hundreds of
/// message intervals, so a stream still flowing cannot look quiet.
const CUT_SETTLE: Duration = Duration::from_millis(100);
/// A cut after which bytes still arrive this long is reported at this bound.
const CUT_TIMEOUT: Duration = Duration::from_secs(2);
/// Before each cut, this many messages must arrive after everything the
/// previous heal released: the stream is flowing again.
const FLOWING_MESSAGES: u64 = 20;
/// Messages whose transit time is the cut's baseline.
const TRANSIT_MESSAGES: u64 = 2_000;
const FLOW_TIMEOUT: Duration = Duration::from_secs(10);
/// The receiver wakes this often to see whether it should stop.
const RECEIVER_POLL: Duration = Duration::from_millis(50);

const GOAL_THROUGHPUT_RATIO_MIN: f64 = 0.5;
const GOAL_ADDED_RTT_P50_US_MAX: f64 = 25.0;
const GOAL_CUT_P99_MS_MAX: f64 = 5.0;

struct Args {
    quick: bool,
    json: Option<String>,
    reps: usize,
    /// Only the round trips, printed on one line (for comparing builds).
    rtt_only: bool,
    /// Only recording on against recording off (for comparing builds).
    recording_only: bool,
}

fn args() -> Args {
    let mut args = Args {
        quick: false,
        json: None,
        reps: REPS_DEFAULT,
        rtt_only: false,
        recording_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--rtt-only" => args.rtt_only = true,
            "--recording-only" => args.recording_only = true,
            "--json" => args.json = Some(it.next().expect("--json takes a path")),
            "--reps" => {
                args.reps = it
                    .next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .expect("--reps takes a number")
                    .max(1)
            }
            // `cargo bench` adds `--bench`; a filter would come as a bare word.
            _ => {}
        }
    }
    args
}

fn main() {
    let args = args();
    // Everything `run` started — the proxy process above all — is dropped
    // (killed and reaped) before the exit.
    if let Err(why) = run(&args) {
        eprintln!("proxy bench cannot run: {why}");
        std::process::exit(1);
    }
}

/// `EPOCHAL_BIN_DIR`, else the directory cargo puts the workspace's binaries
/// in: this bench runs from `target/release/deps/`.
fn proxy_bin() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("EPOCHAL_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot locate this bench's executable: {e}"))?
            .parent()
            .and_then(Path::parent)
            .map(Path::to_owned)
            .ok_or("this bench's executable has no target directory above it")?,
    };
    let bin = dir.join("epochal-proxy");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "{} is missing: build it first with `cargo build --release --workspace --bins` \
             (ci/bench.sh does), or point EPOCHAL_BIN_DIR at a directory holding it",
            bin.display()
        ))
    }
}

/// A running `epochal-proxy`, killed and reaped when dropped, on every path.
struct ProxyProcess {
    child: Child,
    api: String,
    log: PathBuf,
}

impl ProxyProcess {
    /// Starts it on a free port and reads `listening on ADDR`, its first line;
    /// with `record`, it records to that directory (`--record DIR`).
    fn start(bin: &Path, log: PathBuf, record: Option<&Path>) -> Result<ProxyProcess, String> {
        let log_file = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let mut command = Command::new(bin);
        command.args(["--listen", "127.0.0.1:0"]);
        if let Some(dir) = record {
            command.arg("--record").arg(dir);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut proxy = ProxyProcess {
            child,
            api: String::new(),
            log,
        };
        let stdout = proxy.child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        // The read blocks until the line comes or the proxy dies (the guard
        // kills it past the deadline); then the pipe is drained so it never fills.
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout);
            let mut first = String::new();
            let _ = lines.read_line(&mut first);
            let _ = tx.send(first);
            let _ = std::io::copy(&mut lines, &mut std::io::sink());
        });
        let line = rx.recv_timeout(PROXY_START_TIMEOUT).map_err(|_| {
            format!(
                "epochal-proxy printed no `listening on` line within {PROXY_START_TIMEOUT:?}; \
                 its log: {}",
                proxy.log.display()
            )
        })?;
        match line.trim().strip_prefix("listening on ") {
            Some(address) => {
                proxy.api = address.to_owned();
                Ok(proxy)
            }
            None => Err(format!(
                "epochal-proxy printed {line:?}, not `listening on ADDR`; its log: {}",
                proxy.log.display()
            )),
        }
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The harness's own API client, driven from this synchronous bench; every
/// call is bounded by [`API_TIMEOUT`].
struct Api {
    client: ToxiproxyClient,
    runtime: tokio::runtime::Runtime,
}

impl Api {
    fn new(address: &str) -> Result<Api, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot build a tokio runtime: {e}"))?;
        Ok(Api {
            client: ToxiproxyClient::new(address),
            runtime,
        })
    }

    fn call<T, E: std::fmt::Display>(
        &self,
        what: &str,
        request: impl Future<Output = Result<T, E>>,
    ) -> Result<T, String> {
        self.runtime
            .block_on(async { tokio::time::timeout(API_TIMEOUT, request).await })
            .map_err(|_| format!("{what}: no answer within {API_TIMEOUT:?}"))?
            .map_err(|e| format!("{what}: {e}"))
    }

    /// One link, as the harness makes each: a proxy on port 0; returns where
    /// it listens.
    fn link(&self, name: &str, upstream: SocketAddr) -> Result<SocketAddr, String> {
        let new = NewProxy::new(name, "127.0.0.1:0", upstream.to_string());
        let created = self.call("creating a proxy", self.client.create_proxy(&new))?;
        created
            .listen
            .parse()
            .map_err(|e| format!("proxy {name} listens on {:?}: {e}", created.listen))
    }
}

/// A listener on a free loopback port whose accepted connections come out of
/// the channel.
fn listen() -> Result<(SocketAddr, mpsc::Receiver<TcpStream>), String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind a listener: {e}"))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("cannot read a listener's address: {e}"))?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if tx.send(stream).is_err() {
                return;
            }
        }
    });
    Ok((address, rx))
}

/// An echo server: each connection's bytes go straight back, on a thread of
/// its own, until the client closes (or idles past [`ECHO_IDLE_TIMEOUT`]).
fn echo_server() -> Result<SocketAddr, String> {
    let (address, accepted) = listen()?;
    thread::spawn(move || {
        for stream in accepted {
            thread::spawn(move || echo(stream));
        }
    });
    Ok(address)
}

fn echo(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(ECHO_IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(ECHO_IDLE_TIMEOUT));
    let mut buffer = vec![0; CHUNK_BYTES];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if stream.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Write);
}

fn connect(address: SocketAddr) -> Result<TcpStream, String> {
    let stream = TcpStream::connect_timeout(&address, IO_TIMEOUT)
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| format!("cannot set timeouts on a socket: {e}"))?;
    Ok(stream)
}

/// Sends `bytes` of a pattern to `address` and reads them all back, checking
/// every byte; returns the time from the first write to the last byte back.
fn echo_transfer(address: SocketAddr, bytes: usize) -> Result<Duration, String> {
    let deadline = Instant::now() + TRANSFER_TIMEOUT;
    let mut reader = connect(address)?;
    let mut writer = reader
        .try_clone()
        .map_err(|e| format!("cannot clone a socket: {e}"))?;
    let pattern: Arc<Vec<u8>> = Arc::new(
        (0..CHUNK_BYTES + PATTERN_PERIOD)
            .map(|i| (i % PATTERN_PERIOD) as u8)
            .collect(),
    );
    let to_send = Arc::clone(&pattern);
    let started = Instant::now();
    let sending = thread::spawn(move || -> std::io::Result<()> {
        let mut sent = 0;
        while sent < bytes {
            let n = CHUNK_BYTES.min(bytes - sent);
            let at = sent % PATTERN_PERIOD;
            writer.write_all(&to_send[at..at + n])?;
            sent += n;
        }
        writer.shutdown(Shutdown::Write)
    });
    let mut buffer = vec![0; CHUNK_BYTES];
    let mut received = 0;
    while received < bytes {
        if Instant::now() > deadline {
            return Err(format!(
                "echo via {address}: {received} of {bytes} bytes back within {TRANSFER_TIMEOUT:?}"
            ));
        }
        let n = reader
            .read(&mut buffer)
            .map_err(|e| format!("echo via {address}: read after {received} bytes: {e}"))?;
        if n == 0 {
            return Err(format!(
                "echo via {address}: closed after {received} of {bytes} bytes"
            ));
        }
        let at = received % PATTERN_PERIOD;
        if buffer[..n] != pattern[at..at + n] {
            return Err(format!(
                "echo via {address}: the bytes after offset {received} are not the ones sent"
            ));
        }
        received += n;
    }
    let took = started.elapsed();
    sending
        .join()
        .map_err(|_| "the echo sender panicked".to_owned())?
        .map_err(|e| format!("echo via {address}: write: {e}"))?;
    Ok(took)
}

fn mb_per_s(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / took.as_secs_f64() / 1e6
}

struct Throughput {
    direct_mb_s: Vec<f64>,
    proxy_mb_s: Vec<f64>,
}

impl Throughput {
    fn best(samples: &[f64]) -> f64 {
        samples.iter().copied().fold(0.0, f64::max)
    }
}

/// Direct and proxied transfers alternate, `reps` of each.
fn measure_throughput(
    direct: SocketAddr,
    proxied: SocketAddr,
    bytes: usize,
    reps: usize,
) -> Result<Throughput, String> {
    let mut throughput = Throughput {
        direct_mb_s: Vec::new(),
        proxy_mb_s: Vec::new(),
    };
    for _ in 0..reps {
        throughput
            .direct_mb_s
            .push(mb_per_s(bytes, echo_transfer(direct, bytes)?));
        throughput
            .proxy_mb_s
            .push(mb_per_s(bytes, echo_transfer(proxied, bytes)?));
    }
    Ok(throughput)
}

fn round_trip(stream: &mut TcpStream, byte: u8) -> Result<Duration, String> {
    let started = Instant::now();
    let mut back = [0];
    stream
        .write_all(&[byte])
        .and_then(|()| stream.read_exact(&mut back))
        .map_err(|e| format!("1-byte echo: {e}"))?;
    let took = started.elapsed();
    if back[0] != byte {
        return Err(format!("1-byte echo: sent {byte}, got {}", back[0]));
    }
    Ok(took)
}

/// Nearest-rank percentile of `samples` (sorted here).
fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    let rank = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}

struct Rtt {
    direct_us: Vec<f64>,
    proxy_us: Vec<f64>,
}

/// `round_trips` 1-byte echoes on one connection each way, in alternating
/// blocks, after a warmup.
fn measure_rtt(direct: SocketAddr, proxied: SocketAddr, round_trips: usize) -> Result<Rtt, String> {
    let deadline = Instant::now() + ROUND_TRIPS_TIMEOUT;
    let mut paths = [connect(direct)?, connect(proxied)?];
    for stream in &mut paths {
        stream
            .set_nodelay(true)
            .map_err(|e| format!("cannot set TCP_NODELAY: {e}"))?;
        for i in 0..ROUND_TRIPS_WARMUP {
            round_trip(stream, i as u8)?;
        }
    }
    let mut samples = [Vec::new(), Vec::new()];
    let per_block = round_trips.div_ceil(ROUND_TRIP_BLOCKS);
    for _ in 0..ROUND_TRIP_BLOCKS {
        for (stream, samples) in paths.iter_mut().zip(&mut samples) {
            for i in 0..per_block {
                if Instant::now() > deadline {
                    return Err(format!(
                        "1-byte echoes did not finish within {ROUND_TRIPS_TIMEOUT:?}"
                    ));
                }
                samples.push(round_trip(stream, i as u8)?.as_secs_f64() * 1e6);
            }
        }
    }
    let [direct_us, proxy_us] = samples;
    Ok(Rtt {
        direct_us,
        proxy_us,
    })
}

fn us(v: f64) -> String {
    format!("{v:.1} µs")
}

fn ms(v: f64) -> String {
    format!("{v:.2} ms")
}

fn mark(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// How much each measurement does: the full goals' run, or `--quick`'s.
struct Sizes {
    echo_bytes: usize,
    round_trips: usize,
    cuts: usize,
    /// Rounds of recording on and off, each arm once a round.
    recording_rounds: usize,
}

impl Sizes {
    fn of(args: &Args) -> Sizes {
        let (echo_bytes, round_trips, cuts, recording_rounds) = if args.quick {
            (
                ECHO_BYTES_QUICK,
                ROUND_TRIPS_QUICK,
                CUTS_QUICK,
                RECORDING_ROUNDS_QUICK,
            )
        } else {
            (
                ECHO_BYTES_FULL,
                ROUND_TRIPS_FULL,
                CUTS_FULL,
                RECORDING_ROUNDS_FULL,
            )
        };
        Sizes {
            echo_bytes,
            round_trips,
            cuts,
            recording_rounds,
        }
    }
}

fn mode(args: &Args) -> &'static str {
    if args.quick { "quick" } else { "full" }
}

/// The first line: what is measured, and with which proxy.
fn print_plan(args: &Args, sizes: &Sizes, bin: &Path, version: &str, proxy: &ProxyProcess) {
    let Sizes {
        echo_bytes,
        round_trips,
        cuts,
        recording_rounds,
    } = sizes;
    println!(
        "proxy bench: {} mode; {} MiB echoed, best of {} each way; {round_trips} 1-byte round \
         trips each way ({ROUND_TRIPS_WARMUP} warmup); {cuts} cuts of a {MESSAGE_BYTES}-byte \
         message every ~{MESSAGE_INTERVAL:?}, quiet after {CUT_SETTLE:?}; recording on vs off \
         on a `{RECORDED_LINK}` link, {recording_rounds} rounds; {} {version} (API on {}, log \
         {}){}",
        mode(args),
        echo_bytes >> 20,
        args.reps,
        bin.display(),
        proxy.api,
        proxy.log.display(),
        if cfg!(debug_assertions) {
            "; this bench is a debug build, the goals are for release"
        } else {
            ""
        },
    );
}

/// `--rtt-only`: the round trips alone, on one line.
fn run_rtt_only(echo: SocketAddr, echo_link: SocketAddr, round_trips: usize) -> Result<(), String> {
    let mut rtt = measure_rtt(echo, echo_link, round_trips)?;
    let direct_p50 = percentile(&mut rtt.direct_us, 0.50);
    let proxy_p50 = percentile(&mut rtt.proxy_us, 0.50);
    println!(
        "rtt p50: direct {}, proxy {}, added +{}",
        us(direct_p50),
        us(proxy_p50),
        us(proxy_p50 - direct_p50)
    );
    Ok(())
}

/// Every measurement's samples, taken while the proxy runs.
struct Measured {
    throughput: Throughput,
    rtt: Rtt,
    cut: Cuts,
}

fn measure(
    api: &Api,
    echo: SocketAddr,
    echo_link: SocketAddr,
    sizes: &Sizes,
    reps: usize,
) -> Result<Measured, String> {
    eprintln!("measuring echo throughput ...");
    let throughput = measure_throughput(echo, echo_link, sizes.echo_bytes, reps)?;
    eprintln!("measuring 1-byte round trips ...");
    let rtt = measure_rtt(echo, echo_link, sizes.round_trips)?;
    eprintln!("measuring cuts ...");
    let cut = measure_cuts(api, sizes.cuts)?;
    Ok(Measured {
        throughput,
        rtt,
        cut,
    })
}

fn run(args: &Args) -> Result<(), String> {
    let sizes = Sizes::of(args);
    let bin = proxy_bin()?;
    if args.recording_only {
        return run_recording_only(&bin, &sizes);
    }
    let log = std::env::temp_dir().join(format!("epochal-proxy-bench-{}.log", std::process::id()));
    let proxy = ProxyProcess::start(&bin, log, None)?;
    let api = Api::new(&proxy.api)?;
    let version = api.call("reading the version", api.client.version())?;
    print_plan(args, &sizes, &bin, &version, &proxy);

    let echo = echo_server()?;
    let echo_link = api.link("bench-echo", echo)?;
    if args.rtt_only {
        return run_rtt_only(echo, echo_link, sizes.round_trips);
    }
    let mut measured = measure(&api, echo, echo_link, &sizes, args.reps)?;
    drop(proxy);
    eprintln!("measuring recording on a client link, on against off ...");
    let mut recording = measure_recording(&bin, &sizes)?;

    let summary = Summary::of(&mut measured);
    let recording_summary = RecordingSummary::of(&mut recording);
    print_cuts(&summary, &measured.cut);
    print_recording(&recording_summary, &recording);
    let mut figures = figures(&summary, &sizes).to_vec();
    figures.extend(recording_figures(&recording_summary));
    print_figures(&figures);

    if let Some(path) = &args.json {
        let mut json = report_json(args, &sizes, &bin, &version, &figures, &measured, &summary);
        json["recording"] = recording_json(&recording_summary, &recording);
        write_json(path, &json)?;
        println!();
        println!("written: {path}");
    }
    Ok(())
}
