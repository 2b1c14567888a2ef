//! The cluster's costs, each against a baseline measured in the same run, for
//! the goals of issue 22:
//!
//! 1. cluster ready — `ProcessRuntime::start` through every leader serving,
//!    as `epochal run`'s setup brings a cluster up — versus etcd alone with
//!    the runtime's flags (≤ 5×), with where the start spends its time;
//! 2. a pause taking effect — SIGSTOP to a broker until `/proc` reads `T`
//!    (p99 ≤ 1 ms), beside an idle process and the runtime's `pause_node`;
//! 3. the background workload's acknowledged sends/s — `epochal run` of a
//!    schedule with only `[workload.background]`, acks=all, RF 3 — versus
//!    kcat's (librdkafka's) acks=all rate on the same kind of cluster
//!    (≥ 5,000/s and ≥ 0.1 of it);
//! 4. the broker's 1 KiB-record throughput, acks=all RF 3 versus acks=1 RF 1,
//!    with kcat (≥ 0.25).
//!
//! `cargo bench -p epochal --bench cluster -- [--quick] [--json PATH]`;
//! `ci/bench.sh` calls it after `cargo build --release --workspace --bins`,
//! whose binaries it runs. `--quick` (CI) makes fewer, shorter runs. Every
//! process it starts is killed and reaped on every exit path: clusters by the
//! library's runtime, everything else by a guard (cluster/child.rs). A missed
//! goal is printed; a figure that cannot be measured fails the bench.

// A bench is a crate root, whose modules sit beside it unless told.
#[path = "cluster/bring_up.rs"]
mod bring_up;
#[path = "cluster/child.rs"]
mod child;
#[path = "cluster/load.rs"]
mod load;
#[path = "cluster/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bring_up::{Topic, bring_up, create_topics, etcd_alone, records_in};
use epochal::node::NodeId;
use epochal::runtime::Runtime;
use report::report;
use serde_json::{Value, json};

const BROKERS: u32 = 3;
const PARTITIONS: u32 = 3;
const REPS_FULL: usize = 5;
const REPS_QUICK: usize = 2;
const PAUSE_SAMPLES_FULL: usize = 50;
const PAUSE_SAMPLES_QUICK: usize = 10;
const LOAD_MS_FULL: u64 = 10_000;
const LOAD_MS_QUICK: u64 = 3_000;
const PRODUCERS: [u32; 3] = [8, 32, 64];
const SMALL_RECORDS_FULL: usize = 100_000;
const SMALL_RECORDS_QUICK: usize = 20_000;
const SMALL_RECORD_BYTES: usize = 16;
const KIB_RECORDS_FULL: usize = 50_000;
const KIB_RECORDS_QUICK: usize = 10_000;
const KIB: usize = 1024;
/// Bound on one kcat run, far above what the record counts take.
const KCAT_TIMEOUT: Duration = Duration::from_secs(180);

const GOAL_READY_RATIO_MAX: f64 = 5.0;
const GOAL_PAUSE_P99_MS_MAX: f64 = 1.0;
const GOAL_SENDS_PER_S_MIN: f64 = 5_000.0;
const GOAL_SENDS_SHARE_MIN: f64 = 0.1;
const GOAL_RF_RATIO_MIN: f64 = 0.25;

/// The topic of the cluster-ready figure: what a schedule's cluster has.
const READY_TOPICS: [Topic; 1] = [Topic {
    name: "t",
    partitions: PARTITIONS as i32,
    replication_factor: 3,
}];
/// kcat's topics, made on the last cluster of figure 1 once it is ready.
const KCAT_TOPICS: [Topic; 3] = [
    Topic {
        name: "small",
        partitions: PARTITIONS as i32,
        replication_factor: 3,
    },
    Topic {
        name: "kib-rf3",
        partitions: PARTITIONS as i32,
        replication_factor: 3,
    },
    Topic {
        name: "kib-rf1",
        partitions: PARTITIONS as i32,
        replication_factor: 1,
    },
];

struct Args {
    quick: bool,
    json: Option<String>,
}

fn args() -> Args {
    let mut args = Args {
        quick: false,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--json" => args.json = Some(it.next().expect("--json takes a path")),
            // `cargo bench` adds `--bench`; a filter would come as a bare word.
            _ => {}
        }
    }
    args
}

/// The binaries' directory: `$EPOCHAL_BENCH_BIN_DIR` (ci/bench.sh), else
/// beside this bench's own (`target/<profile>/deps/..`, wherever
/// `CARGO_TARGET_DIR` put it), else `$CARGO_TARGET_DIR/release` or the
/// workspace's `target/release`. `Err` names every missing
/// binary and the command that builds them.
fn release_bin_dir() -> Result<PathBuf, String> {
    const BINS: [&str; 3] = ["epochal", "epochal-broker", "epochal-proxy"];
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let beside_us = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_owned()));
    let from_env =
        std::env::var_os("CARGO_TARGET_DIR").map(|dir| workspace.join(dir).join("release"));
    // ci/bench.sh names the directory it built (release, or debug in --quick).
    let named = std::env::var_os("EPOCHAL_BENCH_BIN_DIR").map(PathBuf::from);
    let candidates: Vec<PathBuf> = named
        .into_iter()
        .chain(beside_us)
        .chain(from_env)
        .chain([workspace.join("target/release")])
        .collect();
    if let Some(dir) = candidates
        .iter()
        .find(|dir| BINS.iter().all(|bin| dir.join(bin).is_file()))
    {
        return Ok(dir.clone());
    }
    let missing: Vec<String> = BINS
        .iter()
        .map(|bin| candidates[0].join(bin))
        .filter(|path| !path.is_file())
        .map(|path| path.display().to_string())
        .collect();
    Err(format!(
        "the cluster bench runs the release binaries, and {} missing; build them first: \
         cargo build --release --workspace --bins",
        if missing.len() == 1 {
            format!("{} is", missing[0])
        } else {
            format!("these are: {}", missing.join(", "))
        }
    ))
}

/// Figure 1's numbers: seconds per repetition, and each repetition's phases.
#[derive(Default)]
struct Ready {
    etcd_s: Vec<f64>,
    cluster_s: Vec<f64>,
    phases: Vec<Vec<(String, f64)>>,
}

/// Figure 2's numbers, in ms per sample.
#[derive(Default)]
struct Pause {
    broker_ms: Vec<f64>,
    idle_ms: Vec<f64>,
    pause_node_ms: Vec<f64>,
}

/// One kcat run: records sent, records the topic's high watermarks show
/// afterwards, seconds from spawn to exit.
#[derive(Clone, Copy)]
struct Kcat {
    records: usize,
    record_bytes: usize,
    delivered: i64,
    seconds: f64,
}

impl Kcat {
    fn per_s(&self) -> f64 {
        self.delivered as f64 / self.seconds
    }
    fn mib_per_s(&self) -> f64 {
        self.per_s() * self.record_bytes as f64 / f64::from(1 << 20)
    }
    fn json(&self) -> Value {
        json!({"records": self.records, "record_bytes": self.record_bytes,
               "delivered": self.delivered, "seconds": self.seconds,
               "records_per_s": self.per_s(), "mib_per_s": self.mib_per_s()})
    }
}

/// Everything measured; a figure that could not be is its error.
struct Measured {
    ready: Result<Ready, String>,
    pause: Result<Pause, String>,
    kcat_small: Result<Kcat, String>,
    kcat_rf3: Result<Kcat, String>,
    kcat_rf1: Result<Kcat, String>,
    background: Vec<(u32, Result<load::Background, String>)>,
}

fn main() {
    let args = args();
    let bin_dir = release_bin_dir().unwrap_or_else(|why| {
        eprintln!("cluster bench: {why}");
        std::process::exit(2);
    });
    let etcd = bring_up::config(BROKERS, &bin_dir, Path::new("."))
        .preflight()
        .map(|found| found.etcd.expect("the reference system needs etcd"))
        .unwrap_or_else(|why| {
            eprintln!("cluster bench: {why}");
            std::process::exit(2);
        });
    let tmp = tempfile::Builder::new()
        .prefix("epochal-bench-cluster-")
        .tempdir()
        .expect("a temp dir");
    let reps = if args.quick { REPS_QUICK } else { REPS_FULL };
    let load_ms = if args.quick {
        LOAD_MS_QUICK
    } else {
        LOAD_MS_FULL
    };
    println!(
        "cluster bench: {} mode, binaries in {}, etcd {}; {BROKERS} brokers, \
         {PARTITIONS} partitions a topic, {reps} starts, {load_ms} ms of background load a run",
        if args.quick { "quick" } else { "full" },
        bin_dir.display(),
        etcd.display(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let measured = runtime.block_on(measure(&args, &bin_dir, &etcd, tmp.path(), load_ms));
    drop(runtime);
    let failed = report(&args, &measured);
    if failed {
        eprintln!(
            "cluster bench: a figure could not be measured (above); files in {}",
            tmp.path().display()
        );
        // Kept for reading: the run directories and every node's log.
        let _ = tmp.keep();
        std::process::exit(1);
    }
}

async fn measure(args: &Args, bin_dir: &Path, etcd: &Path, tmp: &Path, load_ms: u64) -> Measured {
    let reps = if args.quick { REPS_QUICK } else { REPS_FULL };
    let mut ready = Ready::default();
    let mut kept = None;
    let mut ready_error = None;
    for rep in 0..reps {
        eprintln!("start {}/{reps}: etcd alone, then the cluster ...", rep + 1);
        let dir = tmp.join(format!("start-{rep}"));
        let _ = std::fs::create_dir_all(&dir);
        let etcd_s = etcd_alone(etcd, &dir).await;
        let started = bring_up(BROKERS, bin_dir, &dir.join("nodes"), &READY_TOPICS).await;
        match (etcd_s, started) {
            (Ok(etcd_s), Ok(started)) => {
                ready.etcd_s.push(etcd_s);
                ready.cluster_s.push(started.ready_s);
                ready.phases.push(started.phases);
                // The last one stays up for the other figures.
                if let Some(previous) = kept.replace(started.runtime) {
                    let _ = previous.shutdown().await;
                }
            }
            (Err(why), _) | (_, Err(why)) => {
                ready_error = Some(why);
                break;
            }
        }
    }
    let ready = match ready_error {
        Some(why) => Err(why),
        None => Ok(ready),
    };
    let Some(mut cluster) = kept else {
        let why = "no cluster came up".to_owned();
        return Measured {
            ready,
            pause: Err(why.clone()),
            kcat_small: Err(why.clone()),
            kcat_rf3: Err(why.clone()),
            kcat_rf1: Err(why.clone()),
            background: PRODUCERS.iter().map(|&p| (p, Err(why.clone()))).collect(),
        };
    };
    eprintln!("pausing a broker ...");
    let samples = if args.quick {
        PAUSE_SAMPLES_QUICK
    } else {
        PAUSE_SAMPLES_FULL
    };
    let pause = measure_pause(&mut cluster, samples).await;
    // A sample that failed half way may have left b2 stopped; kcat needs it.
    if let Some(pid) = cluster.pid(NodeId::new(2)) {
        let _ = epochal_faults::signal::resume(pid);
    }
    eprintln!("kcat ...");
    let (kcat_small, kcat_rf3, kcat_rf1) = measure_kcat(&cluster, args.quick, tmp).await;
    let _ = cluster.shutdown().await;

    let mut background = Vec::new();
    for producers in PRODUCERS {
        eprintln!("epochal run: {producers} background producers for {load_ms} ms ...");
        let dir = tmp.join(format!("background-{producers}"));
        let _ = std::fs::create_dir_all(&dir);
        let epochal = bin_dir.join("epochal");
        let run = load::background_run(&epochal, bin_dir, &dir, producers, PARTITIONS, load_ms);
        background.push((producers, run));
    }
    Measured {
        ready,
        pause,
        kcat_small,
        kcat_rf3,
        kcat_rf1,
        background,
    }
}

/// Figure 2 on b2 of a ready cluster, then an idle process, then the
/// runtime's own `pause_node` (which awaits `T` with its 20 ms poll).
async fn measure_pause(
    cluster: &mut epochal::runtime::ProcessRuntime,
    samples: usize,
) -> Result<Pause, String> {
    let node = NodeId::new(2);
    let pid = cluster.pid(node).ok_or("b2 is not running")?;
    let broker_ms = load::pause_samples(pid, samples)?;
    let idle = load::idle_process()?;
    let idle_ms = load::pause_samples(idle.pid(), samples)?;
    drop(idle);
    let mut pause_node_ms = Vec::with_capacity(samples);
    for _ in 0..samples {
        let sent = Instant::now();
        cluster.pause_node(node).await.map_err(|e| e.to_string())?;
        pause_node_ms.push(sent.elapsed().as_secs_f64() * 1e3);
        cluster.resume_node(node).await.map_err(|e| e.to_string())?;
        load::await_state(pid, Instant::now(), false)?;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(Pause {
        broker_ms,
        idle_ms,
        pause_node_ms,
    })
}

/// Figure 3's baseline and figure 4, with kcat on `cluster`.
async fn measure_kcat(
    cluster: &epochal::runtime::ProcessRuntime,
    quick: bool,
    tmp: &Path,
) -> (
    Result<Kcat, String>,
    Result<Kcat, String>,
    Result<Kcat, String>,
) {
    if let Err(why) = create_topics(cluster, &KCAT_TOPICS, Instant::now()).await {
        return (Err(why.clone()), Err(why.clone()), Err(why));
    }
    let small = if quick {
        SMALL_RECORDS_QUICK
    } else {
        SMALL_RECORDS_FULL
    };
    let kib = if quick {
        KIB_RECORDS_QUICK
    } else {
        KIB_RECORDS_FULL
    };
    let mut runs = Vec::new();
    for (topic, records, bytes, acks) in [
        ("small", small, SMALL_RECORD_BYTES, "all"),
        ("kib-rf3", kib, KIB, "all"),
        ("kib-rf1", kib, KIB, "1"),
    ] {
        eprintln!("kcat: {records} records of {bytes} bytes into {topic}, acks={acks} ...");
        runs.push(kcat_run(cluster, tmp, topic, records, bytes, acks).await);
    }
    let mut runs = runs.into_iter();
    let mut next = || runs.next().expect("three runs");
    (next(), next(), next())
}

async fn kcat_run(
    cluster: &epochal::runtime::ProcessRuntime,
    tmp: &Path,
    topic: &str,
    records: usize,
    record_bytes: usize,
    acks: &str,
) -> Result<Kcat, String> {
    let input = tmp.join(format!("records-{records}x{record_bytes}"));
    if !input.is_file() {
        load::write_records(&input, records, record_bytes)?;
    }
    let broker = cluster
        .client_address(NodeId::new(1))
        .map_err(|e| e.to_string())?;
    let log = tmp.join(format!("kcat-{topic}.log"));
    let seconds = load::kcat_produce(&broker, topic, &input, acks, &log, KCAT_TIMEOUT)?;
    let delivered = records_in(cluster, topic).await?;
    if delivered < records as i64 {
        return Err(format!(
            "kcat delivered {delivered} of {records} records to {topic}; its stderr: {}",
            log.display()
        ));
    }
    Ok(Kcat {
        records,
        record_bytes,
        delivered,
        seconds,
    })
}
