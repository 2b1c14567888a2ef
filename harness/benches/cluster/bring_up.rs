//! Bringing a cluster up the way `epochal run` does (run/setup.rs, whose
//! functions are private to the run): `ProcessRuntime::start`, readiness read
//! from etcd, the topics created through b1's client proxy, readiness again,
//! then every leader serving (it applied the LeaderAndIsr that made it
//! leader). Timed as a whole and phase by phase; and etcd alone with the flags
//! the runtime gives it, as the baseline.
//!
//! The phases inside `ProcessRuntime::start` are read from the files the
//! runtime makes as it goes, so its code path is untouched: each log is
//! created just before its process is spawned, and a broker writes
//! `<data>/listening` once it serves. A thread looks for them every
//! millisecond (file birth times would cost nothing, but not every
//! filesystem or container gives them), so those phases are good to about
//! a millisecond.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use epochal::kafka_client::KafkaClient;
use epochal::node::NodeId;
use epochal::observe::{Observer, await_ready};
use epochal::run_dir::RunDir;
use epochal::runtime::etcd_probe::etcd_healthy;
use epochal::runtime::{ClusterConfig, EtcdAddresses, ProcessRuntime, Runtime};
use epochal::schedule::Condition;
use epochal::topic_partition::PartitionRef;

use super::child::ChildGuard;

/// run/setup.rs's bound on readiness and on each topic's creation.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// run/settings.rs's bound on each start-up wait of the runtime.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The runtime's poll while etcd comes up (runtime/mod.rs).
const ETCD_POLL: Duration = Duration::from_millis(20);
/// How often the start's files are looked for (module docs).
const WATCH_POLL: Duration = Duration::from_millis(1);
/// Connecting the topic-creating client (the run uses its request timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Topic {
    pub name: &'static str,
    pub partitions: i32,
    pub replication_factor: i16,
}

/// A ready cluster, how long it took and where the time went.
pub struct Started {
    pub runtime: ProcessRuntime,
    pub ready_s: f64,
    /// `(phase, seconds)` in order; they add up to `ready_s`.
    pub phases: Vec<(String, f64)>,
}

/// The runtime's configuration as `epochal run` makes it for a schedule with
/// no settings (run/settings.rs).
pub fn config(brokers: u32, bin_dir: &Path, run_dir: &Path) -> ClusterConfig {
    let mut config = ClusterConfig::new(brokers, bin_dir, run_dir);
    config.start_timeout = START_TIMEOUT;
    for node in NodeId::all(brokers) {
        config.node_settings.insert(node, Default::default());
    }
    config
}

/// Starts `brokers` brokers under `run_dir` with `topics` and awaits them
/// ready as a run's setup does.
pub async fn bring_up(
    brokers: u32,
    bin_dir: &Path,
    run_dir: &Path,
    topics: &[Topic],
) -> Result<Started, String> {
    let started = Instant::now();
    let watch = Watch::start(brokers, run_dir, started);
    let runtime = ProcessRuntime::start(config(brokers, bin_dir, run_dir)).await;
    let runtime_s = started.elapsed().as_secs_f64();
    let marks = watch.marks(NodeId::new(brokers), runtime_s);
    let runtime = runtime.map_err(|e| format!("starting the cluster: {e}"))?;
    let endpoint = runtime.etcd_endpoint().to_owned();
    await_ready(&endpoint, runtime.nodes(), READY_TIMEOUT)
        .await
        .map_err(|e| format!("cluster ready: {e}"))?;
    let registered_s = started.elapsed().as_secs_f64();

    let (created_s, named_s) = create_topics(&runtime, topics, started).await?;
    let ready_s = started.elapsed().as_secs_f64();

    let mut marks = marks;
    marks.extend([
        (
            "brokers registered, controller elected".to_owned(),
            registered_s,
        ),
        ("CreateTopics answered".to_owned(), created_s),
        ("every partition led in etcd".to_owned(), named_s),
        ("every leader applied its LeaderAndIsr".to_owned(), ready_s),
    ]);
    let mut phases = Vec::new();
    let mut previous = 0.0;
    for (phase, at) in marks {
        phases.push((phase, at - previous));
        previous = at;
    }
    Ok(Started {
        runtime,
        ready_s,
        phases,
    })
}

/// Watches, every millisecond until stopped, for the files
/// `ProcessRuntime::start` makes as it goes (see the module docs), and notes
/// when each first exists.
struct Watch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Option<f64>>>,
    names: Vec<String>,
}

impl Watch {
    fn start(brokers: u32, run_dir: &Path, since: Instant) -> Watch {
        let layout = RunDir::node_layout(run_dir);
        let mut marks = vec![
            ("preflight, orphan reap, dirs".to_owned(), layout.etcd_log()),
            ("etcd spawned → healthy".to_owned(), layout.proxy_log()),
        ];
        let nodes: Vec<NodeId> = NodeId::all(brokers).collect();
        for (i, &node) in nodes.iter().enumerate() {
            let what = match i {
                0 => "proxy spawned, every link created".to_owned(),
                _ => format!("{}'s links pointed at it", nodes[i - 1]),
            };
            marks.push((what, layout.broker_log(node)));
            marks.push((
                format!("{node} spawned → listening"),
                layout.data_dir(node).join("listening"),
            ));
        }
        let (names, paths): (Vec<String>, Vec<PathBuf>) = marks.into_iter().unzip();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = vec![None; paths.len()];
            while !stopped.load(Ordering::Relaxed) && seen.iter().any(Option::is_none) {
                for (at, path) in seen.iter_mut().zip(&paths) {
                    if at.is_none() && path.exists() {
                        *at = Some(since.elapsed().as_secs_f64());
                    }
                }
                std::thread::sleep(WATCH_POLL);
            }
            seen
        });
        Watch {
            stop,
            thread,
            names,
        }
    }

    /// `(what ended, seconds since the start)` in order, the last being
    /// `runtime_s` (start returned); one coarse phase if a file was missed.
    fn marks(self, last: NodeId, runtime_s: f64) -> Vec<(String, f64)> {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.thread.join().unwrap_or_default();
        if seen.len() != self.names.len() || seen.iter().any(Option::is_none) {
            return vec![(
                "ProcessRuntime::start (a file was not seen)".into(),
                runtime_s,
            )];
        }
        let mut marks: Vec<(String, f64)> = self
            .names
            .into_iter()
            .zip(seen.into_iter().flatten())
            .collect();
        marks.push((format!("{last}'s links pointed at it"), runtime_s));
        marks
    }
}

/// Creates `topics` through b1's client proxy, then awaits every partition
/// led in etcd and every leader serving, as a run's setup does; returns when
/// the topics were created and when etcd named every leader, in seconds since
/// `since`.
pub async fn create_topics(
    runtime: &ProcessRuntime,
    topics: &[Topic],
    since: Instant,
) -> Result<(f64, f64), String> {
    let endpoint = runtime.etcd_endpoint();
    let b1 = runtime
        .client_address(NodeId::new(1))
        .map_err(|e| e.to_string())?;
    let mut client = KafkaClient::connect(&b1, "epochal-bench", CONNECT_TIMEOUT)
        .await
        .map_err(|e| format!("connecting to b1 ({b1}): {e}"))?;
    for topic in topics {
        client
            .create_topic(
                topic.name,
                topic.partitions,
                topic.replication_factor,
                READY_TIMEOUT.as_millis() as i32,
                READY_TIMEOUT + Duration::from_secs(5),
            )
            .await
            .map_err(|e| format!("creating topic {}: {e}", topic.name))?;
    }
    let created_s = since.elapsed().as_secs_f64();
    let view = await_ready(endpoint, runtime.nodes(), READY_TIMEOUT)
        .await
        .map_err(|e| format!("topics led: {e}"))?;
    let named_s = since.elapsed().as_secs_f64();
    let mut observer = Observer::connect(endpoint)
        .await
        .map_err(|e| e.to_string())?;
    for (partition, state) in &view.partitions {
        let condition = Condition::LeaderIs {
            partition: partition.clone(),
            node: state.leader.ok_or("ready, yet a partition has no leader")?,
        };
        observer
            .await_condition(runtime, &condition, READY_TIMEOUT)
            .await
            .map_err(|e| format!("leader serving: {e}"))?;
    }
    Ok((created_s, named_s))
}

/// A loopback port free at the time of asking.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("picking a free port: {e}"))
}

/// etcd alone, with the runtime's flags (`EtcdAddresses::argv`), from spawn to
/// answering a read as the runtime polls for it; killed and reaped after.
pub async fn etcd_alone(etcd: &Path, dir: &Path) -> Result<f64, String> {
    let (client, peer) = (free_port()?, free_port()?);
    let client_url = format!("http://127.0.0.1:{client}");
    // Where the runtime keeps etcd's data (in memory when it can), so the
    // baseline is the same etcd; dropped after etcd, which is declared later.
    let memory = epochal::runtime::orphans::etcd_memory_dir();
    let data_dir = match &memory {
        Some(memory) => memory.path().to_owned(),
        None => dir.join("etcd-data"),
    };
    let at = EtcdAddresses {
        data_dir: data_dir.display().to_string(),
        listen_client: client_url.clone(),
        advertise_client: client_url.clone(),
        peer: format!("http://127.0.0.1:{peer}"),
    };
    let log = File::create(dir.join("etcd.log")).map_err(|e| format!("etcd log: {e}"))?;
    let mut command = Command::new(etcd);
    command
        .args(at.argv())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    let started = Instant::now();
    let mut etcd = ChildGuard::spawn(command, "etcd")?;
    let deadline = started + START_TIMEOUT;
    loop {
        etcd.running()?;
        if etcd_healthy(&client_url).await {
            return Ok(started.elapsed().as_secs_f64());
        }
        if Instant::now() > deadline {
            return Err(format!("etcd alone not healthy within {START_TIMEOUT:?}"));
        }
        tokio::time::sleep(ETCD_POLL).await;
    }
}

/// The sum of `topic`'s high watermarks, each asked of its partition's leader
/// through the leader's client proxy: what a producer had acknowledged.
pub async fn records_in(runtime: &ProcessRuntime, topic: &str) -> Result<i64, String> {
    let view = await_ready(runtime.etcd_endpoint(), runtime.nodes(), READY_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let mut total = 0;
    for (partition, state) in view.partitions.iter().filter(|(p, _)| p.topic == topic) {
        let leader = state.leader.ok_or("ready, yet a partition has no leader")?;
        let address = runtime.client_address(leader).map_err(|e| e.to_string())?;
        let mut client = KafkaClient::connect(&address, "epochal-bench", CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("connecting to {leader}: {e}"))?;
        total += client
            .list_offset(
                topic,
                PartitionRef::wire_partition(partition),
                epochal::kafka_client::OffsetSpec::Latest,
                CONNECT_TIMEOUT,
            )
            .await
            .map_err(|e| format!("high watermark of {partition}: {e}"))?;
    }
    Ok(total)
}
