//! The process runtime: etcd, one `epochal-proxy` and N `epochal-broker`s as
//! local child processes on loopback. Every link of the cluster goes through the
//! proxy, one proxy per direction: clients reach a broker through `client-b<i>`
//! (its advertised address), broker i dials broker j through `b<i>-b<j>` (its
//! `--peer`), and broker i's etcd session runs through `b<i>-etcd`.
//!
//! A broker binds port 0 and reports its port only once started, yet the
//! proxies in front of it must exist before any broker starts (their addresses
//! are the brokers' flags). So each proxy towards a broker is created first with
//! an upstream nothing listens on, and pointed at the broker with the proxy API's
//! upstream update once the broker writes `<data>/listening` — and again on each
//! restart, when the port changes. A broker dialling a peer not yet started sees
//! a refused connection and retries, as it would if the peer were down.
//!
//! Each child leads its own process group, is recorded with the [`reaper`] for
//! Ctrl-C, and is killed and reaped by [`Drop`] on every other exit path.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use epochal_faults::proxy::NewProxy;
use epochal_faults::signal;
use epochal_faults::toxiproxy_client::ToxiproxyClient;

use super::{ClusterView, Link, NodeId, Runtime, RuntimeError, reaper};

/// The address proxies towards a broker point at until it reports its port:
/// port 9 (discard) on loopback has no listener, so dials are refused at once.
const UPSTREAM_NOT_YET: &str = "127.0.0.1:9";
/// How often a wait re-checks its condition; every wait also has a deadline.
const POLL_MS: u64 = 20;

/// What to start; the layout under `run_dir` is `etcd.log`, `proxy.log`, and per
/// broker `b<i>/broker.log`, `b<i>/broker.toml` and `b<i>/data/`. Paths are resolved before anything runs ([`ProcessConfig::preflight`]).
#[derive(Clone, Debug)]
pub struct ProcessConfig {
    pub brokers: u32,
    /// Holds `epochal-broker` and `epochal-proxy` (a cargo target dir's `debug/`).
    pub bin_dir: PathBuf,
    /// The etcd binary: a path, or a name looked up on `PATH`.
    pub etcd: PathBuf,
    /// Node data and logs go under here (`b<i>/data`, `b<i>.log`, `etcd.log`, ...).
    pub run_dir: PathBuf,
    pub lease_ttl_s: u32,
    /// Extra flags for every broker (e.g. `--flush-messages 1`).
    pub broker_args: Vec<String>,
    /// Per node: broker settings (the config file's snake_case keys), written
    /// to `b<i>/broker.toml` and passed with `--config`. A node's
    /// `lease_ttl_s` there replaces [`ProcessConfig::lease_ttl_s`].
    pub node_settings: BTreeMap<NodeId, BTreeMap<String, toml::Value>>,
    /// Per node: extra environment (e.g. `EPOCHAL_FAILPOINTS`).
    pub node_env: BTreeMap<NodeId, Vec<(String, String)>>,
    pub start_timeout: Duration,
}

impl ProcessConfig {
    pub fn new(brokers: u32, bin_dir: impl Into<PathBuf>, run_dir: impl Into<PathBuf>) -> Self {
        ProcessConfig {
            brokers,
            bin_dir: bin_dir.into(),
            etcd: "etcd".into(),
            run_dir: run_dir.into(),
            lease_ttl_s: 2,
            broker_args: Vec::new(),
            node_settings: BTreeMap::new(),
            node_env: BTreeMap::new(),
            start_timeout: Duration::from_secs(20),
        }
    }

    fn broker_bin(&self) -> PathBuf {
        self.bin_dir.join("epochal-broker")
    }

    fn proxy_bin(&self) -> PathBuf {
        self.bin_dir.join("epochal-proxy")
    }

    /// Names everything missing at once, so one run of the check says all a
    /// user has to install or build.
    pub fn preflight(&self) -> Result<PathBuf, RuntimeError> {
        let mut missing = Vec::new();
        let etcd = find_executable(&self.etcd);
        if etcd.is_none() {
            missing.push(format!(
                "etcd binary {:?} (not found; Debian: apt-get install etcd-server)",
                self.etcd
            ));
        }
        for bin in [self.broker_bin(), self.proxy_bin()] {
            if !bin.is_file() {
                missing.push(format!(
                    "{} (build the workspace: cargo build --workspace --bins)",
                    bin.display()
                ));
            }
        }
        if self.brokers == 0 {
            missing.push("brokers: at least one".into());
        }
        match etcd {
            Some(etcd) if missing.is_empty() => Ok(etcd),
            _ => Err(RuntimeError::Missing(missing)),
        }
    }
}

pub(crate) fn find_executable(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.is_file().then(|| name.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A child leading its own process group, recorded with the reaper.
struct Guarded {
    child: Child,
    what: String,
    log: PathBuf,
}

impl Guarded {
    fn spawn(
        mut command: Command,
        what: String,
        log: PathBuf,
        stdout: Stdio,
    ) -> Result<Self, RuntimeError> {
        let err = |source| RuntimeError::Io {
            what: format!("starting {what}"),
            source,
        };
        let file = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(err)?;
        let stderr = file.try_clone().map_err(err)?;
        // Its own group: a terminal's Ctrl-C reaches the harness only, and the
        // harness decides how children end.
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        let child = command.spawn().map_err(err)?;
        let guarded = Guarded { child, what, log };
        if !reaper::register(guarded.pid()) {
            return Err(RuntimeError::TooManyChildren);
        }
        Ok(guarded)
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn exited(&mut self) -> Result<(), RuntimeError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(RuntimeError::Exited {
                what: self.what.clone(),
                status,
                log: self.log.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// SIGKILL to the whole group, then reap the leader. A leader already reaped
    /// (by `try_wait`) is not signalled: its pid, and so its group id, may
    /// already belong to an unrelated process. An unreaped one keeps its pid as
    /// a zombie, so the check and the kill cannot race with reuse.
    fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = signal::kill_group(self.pid());
            let _ = self.child.wait();
        }
        reaper::unregister(self.pid());
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Broker {
    args: Vec<String>,
    env: Vec<(String, String)>,
    data_dir: PathBuf,
    log: PathBuf,
    process: Option<Guarded>,
    /// The port it bound, direct (for observation, never for workload traffic).
    address: Option<String>,
    /// When the latest incarnation was spawned.
    started_at: Option<std::time::SystemTime>,
}

pub struct ProcessRuntime {
    config: ProcessConfig,
    etcd_endpoint: String,
    proxies: ToxiproxyClient,
    /// Each link's proxy listen address.
    links: BTreeMap<Link, String>,
    brokers: BTreeMap<NodeId, Broker>,
    // Dropped last (fields drop in order): brokers die before their proxy and etcd.
    _proxy: Guarded,
    _etcd: Guarded,
}

impl ProcessRuntime {
    /// Preflight, then etcd, the proxy and its links, then every broker; returns
    /// once each broker reported its port (await [`Runtime::await_ready`] next).
    pub async fn start(config: ProcessConfig) -> Result<Self, RuntimeError> {
        let etcd_bin = config.preflight()?;
        reaper::install();
        let io = |what: &str| {
            let what = what.to_owned();
            move |source| RuntimeError::Io { what, source }
        };
        std::fs::create_dir_all(&config.run_dir).map_err(io("creating the run dir"))?;
        let (etcd, etcd_endpoint) = start_etcd(&config, &etcd_bin).await?;
        let (proxy, proxy_address) = start_proxy(&config).await?;
        let proxies = ToxiproxyClient::new(&proxy_address);

        let nodes: Vec<NodeId> = NodeId::all(config.brokers).collect();
        let etcd_address = etcd_endpoint.trim_start_matches("http://").to_owned();
        let mut links = BTreeMap::new();
        for &i in &nodes {
            let mut wanted = vec![
                (Link::ClientToBroker(i), UPSTREAM_NOT_YET),
                (Link::BrokerToEtcd(i), etcd_address.as_str()),
            ];
            for &j in nodes.iter().filter(|&&j| j != i) {
                wanted.push((Link::BrokerToBroker { from: i, to: j }, UPSTREAM_NOT_YET));
            }
            for (link, upstream) in wanted {
                let created = proxies
                    .create_proxy(&NewProxy::new(link.proxy_name(), "127.0.0.1:0", upstream))
                    .await?;
                links.insert(link, created.listen);
            }
        }

        let mut brokers = BTreeMap::new();
        for &i in &nodes {
            let dir = config.run_dir.join(i.to_string());
            let data_dir = dir.join("data");
            std::fs::create_dir_all(&data_dir).map_err(io("creating a data dir"))?;
            let settings = config.node_settings.get(&i);
            let lease_ttl_s = settings
                .and_then(|s| s.get("lease_ttl_s"))
                .and_then(toml::Value::as_integer)
                .map_or(config.lease_ttl_s.to_string(), |l| l.to_string());
            let mut args = vec![
                "--node-id".to_string(),
                i.id().to_string(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--advertised".into(),
                links[&Link::ClientToBroker(i)].clone(),
                "--data-dir".into(),
                data_dir.display().to_string(),
                "--etcd".into(),
                format!("http://{}", links[&Link::BrokerToEtcd(i)]),
                "--lease-ttl-s".into(),
                lease_ttl_s,
            ];
            if let Some(settings) = settings.filter(|s| !s.is_empty()) {
                let file = dir.join("broker.toml");
                let text = toml::to_string(settings).expect("settings are TOML values");
                std::fs::write(&file, text).map_err(io("writing a broker config file"))?;
                args.push("--config".into());
                args.push(file.display().to_string());
            }
            for &j in nodes.iter().filter(|&&j| j != i) {
                args.push("--peer".into());
                args.push(format!(
                    "{}={}",
                    j.id(),
                    links[&Link::BrokerToBroker { from: i, to: j }]
                ));
            }
            args.extend(config.broker_args.iter().cloned());
            brokers.insert(
                i,
                Broker {
                    args,
                    env: config.node_env.get(&i).cloned().unwrap_or_default(),
                    data_dir,
                    log: dir.join("broker.log"),
                    process: None,
                    address: None,
                    started_at: None,
                },
            );
        }
        let mut runtime = ProcessRuntime {
            config,
            etcd_endpoint,
            proxies,
            links,
            brokers,
            _proxy: proxy,
            _etcd: etcd,
        };
        for i in nodes {
            runtime.start_node(i).await?;
        }
        Ok(runtime)
    }

    /// A link's proxy address (where its traffic enters the proxy).
    pub fn link_address(&self, link: Link) -> Option<&str> {
        self.links.get(&link).map(String::as_str)
    }

    /// A running node's pid, for checks against `/proc`.
    pub fn pid(&self, node: NodeId) -> Option<i32> {
        self.brokers.get(&node)?.process.as_ref().map(Guarded::pid)
    }

    /// Every child's pid: etcd, the proxy and the running brokers.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids = vec![self._etcd.pid(), self._proxy.pid()];
        pids.extend(self.brokers.keys().filter_map(|&n| self.pid(n)));
        pids
    }

    /// The address a node bound, bypassing every proxy.
    pub fn direct_address(&self, node: NodeId) -> Option<&str> {
        self.brokers.get(&node)?.address.as_deref()
    }

    pub fn log_path(&self, node: NodeId) -> Result<PathBuf, RuntimeError> {
        Ok(self.broker(node)?.log.clone())
    }

    fn broker(&self, node: NodeId) -> Result<&Broker, RuntimeError> {
        self.brokers
            .get(&node)
            .ok_or(RuntimeError::UnknownNode(node))
    }

    fn broker_mut(&mut self, node: NodeId) -> Result<&mut Broker, RuntimeError> {
        self.brokers
            .get_mut(&node)
            .ok_or(RuntimeError::UnknownNode(node))
    }

    fn running(&mut self, node: NodeId) -> Result<&mut Guarded, RuntimeError> {
        self.broker_mut(node)?
            .process
            .as_mut()
            .ok_or(RuntimeError::NotRunning(node))
    }
}

/// Two ports free at the time of asking; the caller retries if another process
/// takes one before etcd binds it.
fn free_port() -> Result<u16, RuntimeError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| RuntimeError::Io {
            what: "picking a free port".into(),
            source,
        })
}

async fn start_etcd(
    config: &ProcessConfig,
    etcd_bin: &Path,
) -> Result<(Guarded, String), RuntimeError> {
    const ATTEMPTS: u32 = 5;
    let log = config.run_dir.join("etcd.log");
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        let data = config.run_dir.join(format!("etcd-data-{attempt}"));
        let (client, peer) = (free_port()?, free_port()?);
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut command = Command::new(etcd_bin);
        // Fast elections: a single member elects itself within a few hundred ms.
        command.args([
            "--name",
            "n0",
            "--data-dir",
            &data.display().to_string(),
            "--listen-client-urls",
            &client_url,
            "--advertise-client-urls",
            &client_url,
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
            "--initial-cluster",
            &format!("n0={peer_url}"),
            "--heartbeat-interval",
            "50",
            "--election-timeout",
            "300",
            // Compaction off (0 = never): the checkers read etcd's whole
            // revision history of the cluster's decisions (timeline.rs).
            "--auto-compaction-retention",
            "0",
        ]);
        let mut etcd = Guarded::spawn(command, "etcd".into(), log.clone(), Stdio::null())?;
        let deadline = Instant::now() + config.start_timeout;
        loop {
            if let Err(exited) = etcd.exited() {
                // Most likely a port taken between our probe and etcd's bind.
                last = Some(exited);
                break;
            }
            if etcd_healthy(&client_url).await {
                return Ok((etcd, client_url));
            }
            if Instant::now() > deadline {
                return Err(RuntimeError::Timeout {
                    what: "etcd healthy".into(),
                    timeout: config.start_timeout,
                    detail: Some(format!("its log: {}", log.display())),
                });
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }
    Err(last.expect("an attempt failed"))
}

pub(super) async fn etcd_healthy(endpoint: &str) -> bool {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_millis(500))
        .with_timeout(Duration::from_millis(500));
    match etcd_client::Client::connect([endpoint], Some(options)).await {
        Ok(mut client) => client.get("/epochal/health-probe", None).await.is_ok(),
        Err(_) => false,
    }
}

/// Starts `epochal-proxy` on a free port and reads `listening on ADDR`, its first
/// stdout line; the rest of its stdout is copied to its log.
async fn start_proxy(config: &ProcessConfig) -> Result<(Guarded, String), RuntimeError> {
    let log = config.run_dir.join("proxy.log");
    let mut command = Command::new(config.proxy_bin());
    command.args(["--listen", "127.0.0.1:0"]);
    let mut proxy = Guarded::spawn(command, "epochal-proxy".into(), log.clone(), Stdio::piped())?;
    let stdout = proxy.child.stdout.take().expect("piped");
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let copy_to = log.clone();
    // A plain thread: the read blocks until the line comes or the proxy dies (we
    // kill it at the deadline, which ends the read), then it drains the pipe.
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        let _ = lines.read_line(&mut first);
        let _ = sender.send(first);
        if let Ok(mut file) = File::options().append(true).open(copy_to) {
            let _ = std::io::copy(&mut lines, &mut file);
            let _ = file.flush();
        }
    });
    let first = tokio::time::timeout(config.start_timeout, receiver).await;
    match first {
        Ok(Ok(line)) => match line.trim().strip_prefix("listening on ") {
            Some(address) => Ok((proxy, address.to_owned())),
            None => {
                proxy.exited()?;
                Err(RuntimeError::Timeout {
                    what: "epochal-proxy's `listening on` line".into(),
                    timeout: config.start_timeout,
                    detail: Some(format!("it printed {line:?}; its log: {}", log.display())),
                })
            }
        },
        _ => Err(RuntimeError::Timeout {
            what: "epochal-proxy's `listening on` line".into(),
            timeout: config.start_timeout,
            detail: Some(format!("its log: {}", log.display())),
        }),
    }
}

impl Runtime for ProcessRuntime {
    fn nodes(&self) -> Vec<NodeId> {
        self.brokers.keys().copied().collect()
    }

    async fn await_ready(&self, timeout: Duration) -> Result<ClusterView, RuntimeError> {
        let all: BTreeSet<NodeId> = self.brokers.keys().copied().collect();
        super::await_cluster_ready(&self.etcd_endpoint, &all, timeout).await
    }

    async fn start_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.config.start_timeout;
        let broker_bin = self.config.broker_bin();
        let broker = self.broker_mut(node)?;
        if broker.process.is_some() {
            return Err(RuntimeError::AlreadyRunning(node));
        }
        // A previous incarnation's `listening` names its old port; the broker
        // removes it at start, but only once it runs, and a read before that
        // would point the proxies at a dead port. Remove it before the spawn.
        let listening = broker.data_dir.join("listening");
        match std::fs::remove_file(&listening) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(RuntimeError::Io {
                    what: format!("removing {}", listening.display()),
                    source,
                });
            }
        }
        let mut command = Command::new(broker_bin);
        command.args(&broker.args);
        command.envs(broker.env.iter().map(|(k, v)| (k, v)));
        // Taken just before the spawn: every line the new process writes is later.
        broker.started_at = Some(std::time::SystemTime::now());
        broker.process = Some(Guarded::spawn(
            command,
            format!("broker {node}"),
            broker.log.clone(),
            Stdio::null(),
        )?);
        // The broker writes `listening` atomically once it serves.
        let deadline = Instant::now() + timeout;
        let address = loop {
            if let Ok(address) = std::fs::read_to_string(&listening) {
                let address = address.trim().to_owned();
                if !address.is_empty() {
                    break address;
                }
            }
            self.running(node)?.exited()?;
            if Instant::now() > deadline {
                return Err(RuntimeError::Timeout {
                    what: format!("broker {node} listening"),
                    timeout,
                    detail: Some(format!("its log: {}", self.broker(node)?.log.display())),
                });
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        };
        let towards: Vec<Link> = self
            .links
            .keys()
            .copied()
            .filter(|link| match *link {
                Link::ClientToBroker(to) | Link::BrokerToBroker { to, .. } => to == node,
                Link::BrokerToEtcd(_) => false,
            })
            .collect();
        for link in towards {
            self.proxies
                .set_upstream(&link.proxy_name(), &address)
                .await?;
        }
        self.broker_mut(node)?.address = Some(address);
        Ok(())
    }

    async fn stop_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.config.start_timeout;
        let process = self.running(node)?;
        signal::terminate(process.pid())?;
        // A stopped process acts on SIGTERM only once continued.
        if signal::is_stopped(process.pid())? {
            signal::resume(process.pid())?;
        }
        let deadline = Instant::now() + timeout;
        while process.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                // Dropping the guard kills and reaps it; report the hang.
                self.broker_mut(node)?.process = None;
                return Err(RuntimeError::Timeout {
                    what: format!("broker {node} exiting on SIGTERM"),
                    timeout,
                    detail: None,
                });
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
        let broker = self.broker_mut(node)?;
        broker.process = None;
        broker.address = None;
        Ok(())
    }

    async fn kill_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        self.running(node)?;
        let broker = self.broker_mut(node)?;
        // The guard's drop sends SIGKILL to the group and reaps it.
        broker.process = None;
        broker.address = None;
        Ok(())
    }

    async fn pause_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.config.start_timeout;
        let pid = self.running(node)?.pid();
        signal::pause(pid)?;
        let deadline = Instant::now() + timeout;
        while !signal::is_stopped(pid)? {
            if Instant::now() > deadline {
                return Err(RuntimeError::Timeout {
                    what: format!("broker {node} stopped (state T)"),
                    timeout,
                    detail: None,
                });
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
        Ok(())
    }

    async fn resume_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let pid = self.running(node)?.pid();
        Ok(signal::resume(pid)?)
    }

    fn is_running(&self, node: NodeId) -> bool {
        self.pid(node).is_some()
    }

    fn is_paused(&self, node: NodeId) -> Result<bool, RuntimeError> {
        match self.pid(node) {
            Some(pid) => Ok(signal::is_stopped(pid)?),
            None => Ok(false),
        }
    }

    fn started_at(&self, node: NodeId) -> Option<std::time::SystemTime> {
        self.brokers.get(&node)?.started_at
    }

    fn observe_address(&self, node: NodeId) -> Option<String> {
        self.direct_address(node).map(str::to_owned)
    }

    fn client_address(&self, node: NodeId) -> Result<String, RuntimeError> {
        self.links
            .get(&Link::ClientToBroker(node))
            .cloned()
            .ok_or(RuntimeError::UnknownNode(node))
    }

    fn etcd_endpoint(&self) -> &str {
        &self.etcd_endpoint
    }

    fn data_dir(&self, node: NodeId) -> Result<PathBuf, RuntimeError> {
        Ok(self.broker(node)?.data_dir.clone())
    }

    fn proxies(&self) -> &ToxiproxyClient {
        &self.proxies
    }

    async fn shutdown(self) -> Result<(), RuntimeError> {
        // Drop kills and reaps brokers, then the proxy, then etcd.
        drop(self);
        Ok(())
    }
}
