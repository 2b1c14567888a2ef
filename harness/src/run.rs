//! `epochal run`: a schedule in, a real cluster, real faults, a history on disk
//! out. The phases, each leaving its output in the run's store directory before
//! the next starts (store.rs has the layout):
//!
//! 1. load the schedule, apply `--set`, write `schedule.toml` as applied;
//! 2. start the cluster (process or Docker runtime), create the topics, await ready;
//! 3. the steps, in order: faults through the nemesis, client operations through
//!    the client proxies, awaits over direct observation; every op streamed to
//!    `history.jsonl` as it happens;
//! 4. the final heal — partitions removed, paused nodes resumed, dead nodes
//!    started — each recorded as a nemesis op, then a bounded quiesce: every
//!    partition led, its ISR full, and every replica's HW and LEO equal;
//! 5. etcd's history of the cluster's decisions goes to `timeline.json`; the
//!    brokers are killed (SIGKILL: no shutdown hook rewrites a file), which
//!    freezes each data directory as the cluster left it, under `nodes/`;
//!    `run.json` says how the run ended;
//! 6. the checkers read it all back from the run directory, as `epochal check`
//!    would, and their report goes to `results.json`.
//!
//! An await that times out, a target that resolves to nothing, or a cluster that
//! will not quiesce makes the run unknown; phases 4 and 5 still run so the
//! evidence is kept. Ctrl-C kills every child (runtime/reaper.rs) and leaves the
//! history as far as it got: every line is written whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::checker::Report;
use crate::cli::RuntimeKind;
use crate::history::{HistoryWriter, OpType, Process, SharedHistory, WriteError};
use crate::nemesis::{Nemesis, NemesisError, described, verb};
use crate::observe::{ObserveError, Observer, node_id, node_name, replica_offsets};
use crate::report::{self, RunEnd};
use crate::runtime::{
    DockerRuntime, NodeId, ProcessConfig, ProcessRuntime, Runtime, RuntimeError, reaper,
};
use crate::schedule::{
    BROKER_SETTINGS, Condition, Consume, Fault, HARNESS_OWNED_SETTINGS, PartitionRef, Produce,
    Schedule, ScheduleError, Step, Target,
};
use crate::store::{self, RunLog, StoreError};
use crate::workload::ProduceOptions;
use crate::workload::background::{Processes, SEND_MARGIN, Workers};
use crate::workload::kafka_client::{ClientError, KafkaClient};
use crate::workload::ops::{self, acks_name, client_outcome, wire_compression};

/// Bound on the final quiesce: time for restarted brokers to recover, catch up
/// and rejoin the ISR after the last fault.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on the cluster coming up (and on each topic's creation).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub schedule: PathBuf,
    pub store: PathBuf,
    /// `KEY=VALUE` broker settings applied to every node, overriding the schedule.
    pub sets: Vec<String>,
    /// Where `epochal-broker` and `epochal-proxy` are.
    pub bin_dir: PathBuf,
    /// The etcd binary (a path or a name on `PATH`).
    pub etcd: PathBuf,
    /// Echo `harness.log` to stderr.
    pub echo: bool,
    /// The name runs are stored under; default: the schedule's file stem.
    pub name: Option<String>,
    /// Where under the store the run goes (`[suite, scenario, setting]` for the
    /// gate); default `["adhoc", name]`.
    pub group: Option<Vec<String>>,
    /// Where the nodes run: local processes or Docker containers.
    pub runtime: RuntimeKind,
}

impl RunOptions {
    pub fn new(schedule: impl Into<PathBuf>, store: impl Into<PathBuf>) -> Self {
        RunOptions {
            schedule: schedule.into(),
            store: store.into(),
            sets: Vec::new(),
            bin_dir: default_bin_dir(),
            etcd: "etcd".into(),
            echo: false,
            name: None,
            group: None,
            runtime: RuntimeKind::Process,
        }
    }
}

/// `EPOCHAL_BIN_DIR`, else the directory `epochal` itself runs from (cargo puts
/// every workspace binary there).
pub fn default_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("EPOCHAL_BIN_DIR") {
        return dir.into();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_owned))
        .unwrap_or_else(|| ".".into())
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The schedule or the command line is wrong; nothing was started.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("--set {arg}: {why}")]
    BadSet { arg: String, why: String },
    /// The harness could not do its part (a broker that will not start, a
    /// store that cannot be written); the run directory says how far it got.
    #[error("{0}")]
    Harness(String),
}

impl RunError {
    pub fn is_usage(&self) -> bool {
        matches!(self, RunError::Schedule(_) | RunError::BadSet { .. })
    }
}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> Self {
        RunError::Harness(e.to_string())
    }
}

impl From<WriteError> for RunError {
    fn from(e: WriteError) -> Self {
        RunError::Harness(format!("history: {e}"))
    }
}

impl From<RuntimeError> for RunError {
    fn from(e: RuntimeError) -> Self {
        RunError::Harness(e.to_string())
    }
}

/// How a run ended, short of a verdict (the checkers give that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// Every step ran and the cluster quiesced.
    Completed,
    /// The run could not establish what it set out to: why.
    Unknown(String),
}

#[derive(Debug)]
pub struct RunReport {
    pub dir: PathBuf,
    pub status: RunStatus,
    pub schedule: Schedule,
    /// The checkers' verdict, with the run's own end folded in.
    pub report: Report,
}

impl RunReport {
    pub fn history(&self) -> PathBuf {
        self.dir.join("history.jsonl")
    }

    /// A node's data directory as frozen at the end of the run.
    pub fn data_dir(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(node).join("data")
    }
}

/// Applies `KEY=VALUE` broker settings to the whole cluster; a node's own value
/// for the key is replaced too (the command line wins).
pub fn apply_sets(schedule: &mut Schedule, sets: &[String]) -> Result<(), RunError> {
    for arg in sets {
        let bad = |why: String| RunError::BadSet {
            arg: arg.clone(),
            why,
        };
        let (key, raw) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected KEY=VALUE".into()))?;
        let key = key.trim();
        if HARNESS_OWNED_SETTINGS.contains(&key) {
            return Err(bad(format!("{key} is set by the harness")));
        }
        let kind = BROKER_SETTINGS
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, kind)| *kind)
            .ok_or_else(|| {
                let known: Vec<&str> = BROKER_SETTINGS.iter().map(|(n, _)| *n).collect();
                bad(format!(
                    "unknown broker setting {key} (known: {})",
                    known.join(", ")
                ))
            })?;
        // A TOML value if it reads as one (`3`, `false`), else a bare string.
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.trim().to_owned()));
        if !kind.accepts(&value) {
            return Err(bad(format!("{key} must be {kind}, not {value}")));
        }
        schedule.cluster.settings.insert(key.to_owned(), value);
        for node in schedule.cluster.node.values_mut() {
            node.settings.remove(key);
        }
    }
    Ok(())
}

/// The process runtime's configuration for a schedule.
pub fn process_config(schedule: &Schedule, options: &RunOptions, run_dir: &Path) -> ProcessConfig {
    let mut config = ProcessConfig::new(
        schedule.cluster.brokers,
        &options.bin_dir,
        run_dir.join("nodes"),
    );
    config.etcd = options.etcd.clone();
    config.start_timeout = Duration::from_secs(30);
    for id in 1..=schedule.cluster.brokers {
        let name = node_name(id);
        let node = schedule.cluster.node.get(&name);
        let mut settings = schedule.cluster.settings.clone();
        if let Some(node) = node {
            settings.extend(node.settings.clone());
            if !node.failpoints.is_empty() {
                let armed: Vec<String> = node
                    .failpoints
                    .iter()
                    .map(|(point, actions)| format!("{point}={actions}"))
                    .collect();
                config
                    .node_env
                    .insert(id, vec![("EPOCHAL_FAILPOINTS".into(), armed.join(";"))]);
            }
        }
        config.node_settings.insert(id, settings);
    }
    config
}

/// Runs a schedule end to end; see the module docs for the phases.
pub async fn run(options: &RunOptions) -> Result<RunReport, RunError> {
    let mut schedule = Schedule::load(&options.schedule)?;
    apply_sets(&mut schedule, &options.sets)?;
    let name = options.name.clone().unwrap_or_else(|| {
        options
            .schedule
            .file_stem()
            .map_or("schedule".into(), |s| s.to_string_lossy().into_owned())
    });
    // Ctrl-C from here on kills whatever children exist and exits 130.
    reaper::install();
    let group: Vec<String> = options
        .group
        .clone()
        .unwrap_or_else(|| vec!["adhoc".into(), name.clone()]);
    let group: Vec<&str> = group.iter().map(String::as_str).collect();
    let dir = store::create_run_dir(&options.store, &group)?;
    std::fs::write(dir.join("schedule.toml"), schedule.to_toml())
        .map_err(|e| RunError::Harness(format!("{}: {e}", dir.join("schedule.toml").display())))?;
    store::link_latest(&options.store, &dir)?;
    let mut log = RunLog::create(&dir.join("harness.log"), options.echo)?;
    log.line(format!(
        "run of {} in {}",
        options.schedule.display(),
        dir.display()
    ));
    let history = SharedHistory::new(HistoryWriter::create(dir.join("history.jsonl"))?);

    let config = process_config(&schedule, options, &dir);
    match options.runtime {
        RuntimeKind::Process => {
            let started = ProcessRuntime::start(config).await;
            drive(started, schedule, dir, history, log).await
        }
        RuntimeKind::Docker => {
            let started = DockerRuntime::start(config).await;
            drive(started, schedule, dir, history, log).await
        }
    }
}

/// Phases 3 to 6 on a started (or failed) cluster, whatever its runtime.
async fn drive<R: Runtime>(
    started: Result<R, RuntimeError>,
    schedule: Schedule,
    dir: PathBuf,
    history: SharedHistory,
    mut log: RunLog,
) -> Result<RunReport, RunError> {
    let runtime = match started {
        Ok(runtime) => runtime,
        Err(e) => {
            log.line(format!("cluster did not start: {e}"));
            return Err(e.into());
        }
    };
    let mut run = Run {
        schedule: &schedule,
        runtime,
        history,
        log,
        nemesis: Nemesis::new(schedule.workload.seed),
        observer: None,
        clients: BTreeMap::new(),
        workers: BTreeMap::new(),
        processes: Processes::default(),
        background: None,
    };
    let outcome = run.body().await;
    // etcd's history of the cluster's decisions, while etcd still runs.
    run.save_timeline(&dir).await;
    // Whatever happened, freeze and keep the nodes' state.
    let frozen = run.freeze().await;
    let status = match (outcome, frozen) {
        (Err(e), _) => {
            run.log.line(format!("harness error: {e}"));
            return Err(e);
        }
        (Ok(_), Err(e)) => {
            run.log.line(format!("harness error: {e}"));
            return Err(e);
        }
        (Ok(status), Ok(())) => status,
    };
    match &status {
        RunStatus::Completed => run.log.line("completed"),
        RunStatus::Unknown(why) => run.log.line(format!("unknown: {why}")),
    }
    let end = RunEnd {
        completed: status == RunStatus::Completed,
        unknown: match &status {
            RunStatus::Completed => None,
            RunStatus::Unknown(why) => Some(why.clone()),
        },
    };
    end.write(&dir)
        .map_err(|e| RunError::Harness(format!("{}: {e}", dir.join(report::RUN_END).display())))?;
    drop(run);
    let checked = report::check_dir(&dir)
        .map_err(|e| RunError::Harness(format!("checking {}: {e}", dir.display())))?;
    report::write_results(&dir, &checked)
        .map_err(|e| RunError::Harness(format!("{}: {e}", dir.join(report::RESULTS).display())))?;
    Ok(RunReport {
        dir,
        status,
        schedule,
        report: checked,
    })
}

struct Run<'a, R: Runtime> {
    schedule: &'a Schedule,
    runtime: R,
    history: SharedHistory,
    log: RunLog,
    nemesis: Nemesis,
    observer: Option<Observer>,
    /// One connection per node, through its client proxy; dropped on failure.
    clients: BTreeMap<NodeId, KafkaClient>,
    /// A schedule's logical worker → its current history process (a new one
    /// after each `info`, as Jepsen retires a crashed process).
    workers: BTreeMap<u64, u64>,
    processes: Processes,
    /// `[workload.background]`'s workers, while they run.
    background: Option<Workers>,
}

impl<R: Runtime> Run<'_, R> {
    async fn body(&mut self) -> Result<RunStatus, RunError> {
        let setup = self.setup().await?;
        if let RunStatus::Unknown(_) = setup {
            return Ok(setup);
        }
        self.start_background().await?;
        let mut status = RunStatus::Completed;
        for (i, step) in self.schedule.steps.iter().enumerate() {
            let number = i + 1;
            match self.step(number, step).await? {
                RunStatus::Completed => {}
                RunStatus::Unknown(why) => {
                    status = RunStatus::Unknown(format!("step {number}: {why}"));
                    break;
                }
            }
        }
        if let Some(workers) = self.background.take() {
            let acknowledged = workers.acknowledged();
            workers
                .stop()
                .await
                .map_err(|e| RunError::Harness(e.to_string()))?;
            self.log.line(format!(
                "background workload stopped: {acknowledged} sends acknowledged"
            ));
        }
        let settled = self.final_heal().await?;
        Ok(match (status, settled) {
            (RunStatus::Unknown(why), _) => RunStatus::Unknown(why),
            (RunStatus::Completed, settled) => settled,
        })
    }

    /// Starts `[workload.background]`'s workers on the ready cluster.
    async fn start_background(&mut self) -> Result<(), RunError> {
        let Some(config) = &self.schedule.workload.background else {
            return Ok(());
        };
        let partitions = self
            .schedule
            .cluster
            .topics
            .iter()
            .flat_map(|t| {
                (0..t.partitions).map(|partition| PartitionRef {
                    topic: t.name.clone(),
                    partition,
                })
            })
            .collect();
        let mut addresses = BTreeMap::new();
        for node in self.runtime.nodes() {
            addresses.insert(node, self.runtime.client_address(node)?);
        }
        let workers = Workers::start(
            config,
            &self.schedule.workload,
            partitions,
            addresses,
            self.runtime.etcd_endpoint(),
            self.history.clone(),
            self.processes.clone(),
        )
        .await
        .map_err(|e| RunError::Harness(e.to_string()))?;
        self.log.line(format!(
            "background workload: {} producers, {} consumers, every {} ms",
            config.producers, config.consumers, config.interval_ms
        ));
        self.background = Some(workers);
        Ok(())
    }

    fn observer(&mut self) -> &mut Observer {
        self.observer.as_mut().expect("connected in setup")
    }

    async fn setup(&mut self) -> Result<RunStatus, RunError> {
        self.observer = Some(
            Observer::connect(self.runtime.etcd_endpoint())
                .await
                .map_err(|e| RunError::Harness(e.to_string()))?,
        );
        self.runtime.await_ready(READY_TIMEOUT).await?;
        let timeout = READY_TIMEOUT;
        for topic in &self.schedule.cluster.topics {
            let client = self.client(1).await.map_err(|e| {
                RunError::Harness(format!("creating topic {}: b1: {e}", topic.name))
            })?;
            client
                .create_topic(
                    &topic.name,
                    topic.partitions as i32,
                    topic.replication_factor as i16,
                    timeout.as_millis() as i32,
                    timeout + Duration::from_secs(5),
                )
                .await
                .map_err(|e| RunError::Harness(format!("creating topic {}: {e}", topic.name)))?;
            self.log.line(format!(
                "created topic {} ({} partitions, replication factor {})",
                topic.name, topic.partitions, topic.replication_factor
            ));
        }
        let view = self.runtime.await_ready(READY_TIMEOUT).await?;
        // Every leader serving, not only named in etcd (observe.rs, LeaderIs).
        for ((topic, p), state) in &view.partitions {
            let condition = Condition::LeaderIs {
                partition: PartitionRef {
                    topic: topic.clone(),
                    partition: *p,
                },
                node: node_name(state.leader.expect("ready: every partition led")),
            };
            let observer = self.observer.as_mut().expect("connected above");
            observer
                .await_condition(&self.runtime, &condition, READY_TIMEOUT)
                .await
                .map_err(|e| RunError::Harness(format!("cluster not ready: {e}")))?;
        }
        self.log.line(format!(
            "cluster ready: controller b{}, {} partitions",
            view.controller.unwrap_or(0),
            view.partitions.len()
        ));
        Ok(RunStatus::Completed)
    }

    async fn step(&mut self, number: usize, step: &Step) -> Result<RunStatus, RunError> {
        if let Some(fault) = &step.fault {
            return self.faults(number, std::slice::from_ref(fault)).await;
        }
        if let Some(faults) = &step.faults {
            return self.faults(number, faults).await;
        }
        if let Some(produce) = &step.produce {
            self.produce(number, produce).await?;
            return Ok(RunStatus::Completed);
        }
        if let Some(consume) = &step.consume {
            self.consume(number, consume).await?;
            return Ok(RunStatus::Completed);
        }
        if let Some(condition) = &step.await_ {
            let timeout = Duration::from_millis(
                step.timeout_ms
                    .unwrap_or(self.schedule.workload.await_timeout_ms),
            );
            self.log.line(format!(
                "step {number}: await {condition} (within {timeout:?})"
            ));
            let started = Instant::now();
            if let Condition::Acknowledged { more } = condition {
                let workers = self
                    .background
                    .as_mut()
                    .expect("the parser requires background producers");
                return Ok(match workers.await_acknowledged(*more, timeout).await {
                    Ok(n) => {
                        self.log.line(format!(
                            "step {number}: {n} more writes acknowledged after {} ms",
                            started.elapsed().as_millis()
                        ));
                        RunStatus::Completed
                    }
                    Err(n) => {
                        let e = format!("\"{condition}\" not within {timeout:?}; {n} were");
                        self.log.line(format!("step {number}: {e}"));
                        RunStatus::Unknown(format!("await {e}"))
                    }
                });
            }
            let observer = self.observer.as_mut().expect("connected in setup");
            return match observer
                .await_condition(&self.runtime, condition, timeout)
                .await
            {
                Ok(seen) => {
                    self.log.line(format!(
                        "step {number}: {seen} after {} ms",
                        started.elapsed().as_millis()
                    ));
                    Ok(RunStatus::Completed)
                }
                Err(e @ ObserveError::Timeout { .. }) => {
                    self.log.line(format!("step {number}: {e}"));
                    Ok(RunStatus::Unknown(format!("await {e}")))
                }
                Err(e) => Err(RunError::Harness(format!("step {number}: {e}"))),
            };
        }
        unreachable!("the parser requires one action per step")
    }

    /// Fires faults in order, each recorded on the nemesis process.
    async fn faults(&mut self, number: usize, faults: &[Fault]) -> Result<RunStatus, RunError> {
        for fault in faults {
            let f = verb(fault);
            self.history.invoke(Process::Nemesis, f, described(fault))?;
            let view = self
                .observer()
                .view()
                .await
                .map_err(|e| RunError::Harness(format!("step {number}: {e}")))?;
            match self.nemesis.fire(&mut self.runtime, &view, fault).await {
                Ok(value) => {
                    self.log.line(format!("step {number}: {f} {value}"));
                    // A connection to a node that just died or was cut is stale.
                    self.clients.clear();
                    self.history
                        .append(Process::Nemesis, OpType::Info, f, value, None)?;
                }
                Err(e) => {
                    self.history.append(
                        Process::Nemesis,
                        OpType::Info,
                        f,
                        described(fault),
                        Some(e.to_string()),
                    )?;
                    self.log.line(format!("step {number}: {f} failed: {e}"));
                    return if e.is_cluster_state() {
                        Ok(RunStatus::Unknown(format!("{f}: {e}")))
                    } else {
                        Err(RunError::Harness(format!("step {number}: {f}: {e}")))
                    };
                }
            }
        }
        Ok(RunStatus::Completed)
    }

    /// The history process for a schedule's worker.
    fn process(&mut self, worker: u64) -> u64 {
        if let Some(&p) = self.workers.get(&worker) {
            return p;
        }
        let p = self.processes.next();
        self.workers.insert(worker, p);
        p
    }

    /// After an `info`, the worker continues as a fresh process.
    fn retire(&mut self, worker: u64) {
        self.workers.remove(&worker);
    }

    /// The node a client op goes to: `leader` (now, from etcd) or a named node.
    async fn client_target(
        &mut self,
        to: Option<&Target>,
        partition: &PartitionRef,
    ) -> Result<Option<NodeId>, RunError> {
        match to {
            Some(Target::Node(name)) => Ok(Some(node_id(name))),
            None | Some(Target::Leader) | Some(Target::LeaderOf(_)) => {
                let view = self
                    .observer()
                    .view()
                    .await
                    .map_err(|e| RunError::Harness(e.to_string()))?;
                Ok(crate::observe::leader_of(&view, partition))
            }
            Some(other) => {
                let view = self
                    .observer()
                    .view()
                    .await
                    .map_err(|e| RunError::Harness(e.to_string()))?;
                let nodes = self.runtime.nodes();
                Ok(self
                    .nemesis
                    .resolve(other, &view, &nodes)
                    .ok()
                    .and_then(|n| n.first().copied()))
            }
        }
    }

    async fn partition_state(
        &mut self,
        partition: &PartitionRef,
    ) -> Option<crate::runtime::PartitionView> {
        let view = self.observer().view().await.ok()?;
        view.partition(&partition.topic, partition.partition)
            .cloned()
    }

    async fn client(&mut self, node: NodeId) -> Result<&mut KafkaClient, ClientError> {
        if !self.clients.contains_key(&node) {
            let address = self
                .runtime
                .client_address(node)
                .map_err(|e| ClientError::Protocol(e.to_string()))?;
            let client = KafkaClient::connect(&address, "epochal", self.request_timeout()).await?;
            self.clients.insert(node, client);
        }
        Ok(self.clients.get_mut(&node).expect("inserted above"))
    }

    fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.schedule.workload.request_timeout_ms)
    }

    async fn produce(&mut self, number: usize, produce: &Produce) -> Result<(), RunError> {
        let workload = &self.schedule.workload;
        let acks = produce.acks.unwrap_or(workload.acks);
        let records_per_batch = produce
            .records_per_batch
            .unwrap_or(workload.records_per_batch);
        let compression = produce.compression.unwrap_or(workload.compression);
        let worker = produce.process.unwrap_or(0);
        let process = self.process(worker);
        let node = self
            .client_target(produce.to.as_ref(), &produce.partition)
            .await?;
        let mut value = json!({
            "partition": produce.partition.to_string(),
            "values": produce.values,
            "acks": acks_name(acks),
            "node": node.map(node_name),
        });
        self.history
            .invoke(Process::Client(process), "send", value.clone())?;
        let Some(node) = node else {
            self.history.append(
                Process::Client(process),
                OpType::Fail,
                "send",
                value,
                Some("no leader to send to".into()),
            )?;
            self.log.line(format!(
                "step {number}: send: no leader of {}",
                produce.partition
            ));
            return Ok(());
        };
        let options = ProduceOptions {
            acks: acks.wire(),
            records_per_batch: records_per_batch.max(1) as usize,
            compression: wire_compression(compression),
            timeout_ms: self.schedule.workload.request_timeout_ms as i32,
        };
        // The broker's own acks=all wait, then a margin for the answer to travel.
        let deadline = self.request_timeout() + SEND_MARGIN;
        // A connection that cannot be made (or fails its version check) never
        // carried the produce: a definite failure whatever the error.
        let result = match self.client(node).await {
            Ok(client) => ops::send(
                client,
                &produce.partition,
                &produce.values,
                &options,
                deadline,
            )
            .await
            .map_err(|e| (client_outcome(&e, acks.wire()), e)),
            Err(e) => Err((OpType::Fail, e)),
        };
        let (kind, error) = match result {
            Ok(offsets) => {
                value["offsets"] = offsets;
                // The ISR as etcd records it just after the ack: the replicas
                // the lost-write rule holds to account (DESIGN.md).
                if let Some(state) = self.partition_state(&produce.partition).await {
                    value["isr"] = json!(state.isr);
                    value["leader_epoch"] = json!(state.leader_epoch);
                }
                (OpType::Ok, None)
            }
            Err((kind, e)) => {
                self.clients.remove(&node);
                (kind, Some(e.to_string()))
            }
        };
        self.log.line(format!(
            "step {number}: send {:?} to {} -> {kind:?}{}",
            produce.values,
            node_name(node),
            error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
        self.history
            .append(Process::Client(process), kind, "send", value, error)?;
        if kind == OpType::Info {
            self.retire(worker);
        }
        Ok(())
    }

    async fn consume(&mut self, number: usize, consume: &Consume) -> Result<(), RunError> {
        let worker = consume.process.unwrap_or(0);
        let process = self.process(worker);
        let node = self
            .client_target(consume.from.as_ref(), &consume.partition)
            .await?;
        let mut value = json!({
            "partition": consume.partition.to_string(),
            "from_offset": consume.from_offset,
            "node": node.map(node_name),
        });
        self.history
            .invoke(Process::Client(process), "poll", value.clone())?;
        let Some(node) = node else {
            self.history.append(
                Process::Client(process),
                OpType::Fail,
                "poll",
                value,
                Some("no leader to read from".into()),
            )?;
            return Ok(());
        };
        let deadline = self.request_timeout();
        let result = match self.client(node).await {
            Ok(client) => {
                ops::poll(client, &consume.partition, consume.from_offset, deadline).await
            }
            Err(e) => Err(e),
        };
        let mut read = 0;
        let (kind, error) = match result {
            Ok(polled) => {
                read = polled.records.len();
                value["records"] = json!(polled.records);
                value["high_watermark"] = json!(polled.high_watermark);
                if let Some(state) = self.partition_state(&consume.partition).await {
                    value["leader_epoch"] = json!(state.leader_epoch);
                }
                (OpType::Ok, None)
            }
            Err(e) => {
                self.clients.remove(&node);
                // A read changes nothing: a failed one is definite.
                (OpType::Fail, Some(e.to_string()))
            }
        };
        self.log.line(format!(
            "step {number}: poll {} from {} at {} -> {kind:?} ({} records)",
            consume.partition,
            node_name(node),
            consume.from_offset,
            read
        ));
        self.history
            .append(Process::Client(process), kind, "poll", value, error)?;
        Ok(())
    }

    /// Heals partitions, resumes paused nodes and starts dead ones, each as a
    /// nemesis op, then awaits a quiet cluster.
    async fn final_heal(&mut self) -> Result<RunStatus, RunError> {
        let nodes = self.runtime.nodes();
        let mut fixes = Vec::new();
        if !self.nemesis.partitions_healed() {
            fixes.push(Fault::Heal);
        }
        for &n in &nodes {
            let target = Target::Node(node_name(n));
            if !self.runtime.is_running(n) {
                fixes.push(Fault::Start(target));
            } else if self.runtime.is_paused(n)? {
                fixes.push(Fault::Resume(target));
            }
        }
        if !fixes.is_empty() {
            self.log.line("final heal");
            if let RunStatus::Unknown(why) = self.faults(0, &fixes).await? {
                return Ok(RunStatus::Unknown(format!("final heal: {why}")));
            }
        }
        self.quiesce().await
    }

    /// Every partition led with a full ISR, and every replica's HW and LEO
    /// equal to the leader's, within [`QUIESCE_TIMEOUT`].
    async fn quiesce(&mut self) -> Result<RunStatus, RunError> {
        let deadline = Instant::now() + QUIESCE_TIMEOUT;
        let started = Instant::now();
        if let Err(e) = self.runtime.await_ready(QUIESCE_TIMEOUT).await {
            self.log.line(format!("did not quiesce: {e}"));
            return Ok(RunStatus::Unknown(format!("did not quiesce: {e}")));
        }
        loop {
            let view = self
                .observer()
                .view()
                .await
                .map_err(|e| RunError::Harness(e.to_string()))?;
            let mut unsettled = None;
            'partitions: for ((topic, p), state) in &view.partitions {
                let partition = PartitionRef {
                    topic: topic.clone(),
                    partition: *p,
                };
                let mut seen = Vec::new();
                for &r in &state.replicas {
                    match replica_offsets(&self.runtime, r, &partition).await {
                        Ok(offsets) => seen.push(offsets),
                        Err(why) => {
                            unsettled = Some(format!("{partition} on {}: {why}", node_name(r)));
                            break 'partitions;
                        }
                    }
                }
                let first = seen.first().copied();
                if seen
                    .iter()
                    .any(|&(hw, leo)| Some((hw, leo)) != first || hw != leo)
                {
                    unsettled = Some(format!("{partition}: replicas' (HW, LEO) {seen:?}"));
                    break;
                }
            }
            match unsettled {
                None => {
                    self.log.line(format!(
                        "quiesced after {} ms",
                        started.elapsed().as_millis()
                    ));
                    return Ok(RunStatus::Completed);
                }
                Some(why) if Instant::now() >= deadline => {
                    self.log.line(format!("did not quiesce: {why}"));
                    return Ok(RunStatus::Unknown(format!("did not quiesce: {why}")));
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Writes `timeline.json`: etcd's revision history of the partition
    /// states and the controller key. Without it the checkers that need it
    /// are unknown, so a failure is logged, not fatal.
    async fn save_timeline(&mut self, dir: &Path) {
        let path = dir.join("timeline.json");
        match crate::timeline::read_timeline(self.runtime.etcd_endpoint()).await {
            Ok(timeline) => {
                let text = serde_json::to_string_pretty(&timeline).expect("serializes");
                if let Err(e) = std::fs::write(&path, text + "\n") {
                    self.log.line(format!("{}: {e}", path.display()));
                }
            }
            Err(e) => self.log.line(format!("etcd timeline not read: {e}")),
        }
    }

    /// Kills every broker (so no file changes after this) and the rest of the
    /// cluster; the data directories stay in the store.
    async fn freeze(&mut self) -> Result<(), RunError> {
        self.clients.clear();
        for n in self.runtime.nodes() {
            if self.runtime.is_running(n) {
                self.runtime.kill_node(n).await?;
            }
        }
        Ok(())
    }
}

impl From<NemesisError> for RunError {
    fn from(e: NemesisError) -> Self {
        RunError::Harness(e.to_string())
    }
}

/// What `epochal run` prints until the checkers give verdicts: the history's
/// counts per function and outcome, then each replica as the reader sees it
/// and whether the replicas of each partition hold the same records.
pub fn write_summary(report: &RunReport, out: &mut impl std::io::Write) -> std::io::Result<()> {
    use crate::reader::{CompactReplica, read_data_dir};

    writeln!(out, "run: {}", report.dir.display())?;
    match &report.status {
        RunStatus::Completed => writeln!(out, "status: completed")?,
        RunStatus::Unknown(why) => writeln!(out, "status: unknown: {why}")?,
    }
    match crate::history::read_history(report.history()) {
        Ok(ops) => {
            let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
            for op in ops.iter().filter(|op| op.kind != OpType::Invoke) {
                let who = match op.process {
                    Process::Nemesis => "nemesis",
                    Process::Client(_) => "client",
                };
                *counts
                    .entry((
                        format!("{who} {}", op.f),
                        format!("{:?}", op.kind).to_lowercase(),
                    ))
                    .or_default() += 1;
            }
            writeln!(out, "history: {} ops", ops.len())?;
            for ((f, kind), n) in counts {
                writeln!(out, "  {f:<24} {kind:<5} {n}")?;
            }
        }
        Err(e) => writeln!(out, "history: unreadable: {e}")?,
    }
    let mut by_partition: BTreeMap<(String, i32), Vec<(String, CompactReplica)>> = BTreeMap::new();
    writeln!(out, "replicas (reader):")?;
    for id in 1..=report.schedule.cluster.brokers {
        let node = node_name(id);
        match read_data_dir(&report.data_dir(&node)) {
            Ok(state) => {
                for replica in state.compact().replicas {
                    let records: Vec<String> = replica
                        .records
                        .iter()
                        .map(|r| {
                            let value =
                                r.value.as_ref().and_then(|v| v.as_str().map(str::to_owned));
                            format!(
                                "{}@{}:{}",
                                r.offset,
                                r.epoch,
                                value.unwrap_or_else(|| "-".into())
                            )
                        })
                        .collect();
                    writeln!(
                        out,
                        "  {node} {}-{}: LEO {} HW {} epochs {:?} findings {} records [{}]",
                        replica.topic,
                        replica.partition,
                        replica.log_end_offset,
                        replica.high_watermark.map_or("-".into(), |h| h.to_string()),
                        replica.leader_epochs.clone().unwrap_or_default(),
                        replica.findings.len(),
                        records.join(" ")
                    )?;
                    by_partition
                        .entry((replica.topic.clone(), replica.partition))
                        .or_default()
                        .push((node.clone(), replica));
                }
            }
            Err(e) => writeln!(out, "  {node}: {e}")?,
        }
    }
    for ((topic, partition), replicas) in by_partition {
        let nodes: Vec<&str> = replicas.iter().map(|(n, _)| n.as_str()).collect();
        // Records only: epoch files may legitimately differ (a leader records
        // its epoch at election, before any batch; KAFKA-7415). The checkers
        // judge those.
        let same = replicas
            .windows(2)
            .all(|w| w[0].1.records == w[1].1.records);
        writeln!(
            out,
            "  {topic}-{partition}: records {} on {}",
            if same { "identical" } else { "DIFFERENT" },
            nodes.join(", ")
        )?;
    }
    Ok(())
}
