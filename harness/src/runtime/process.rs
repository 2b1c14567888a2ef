//! The process runtime realises a [`ClusterPlan`] as local child processes on
//! loopback: etcd, one `epochal-proxy` and N `epochal-broker`s. Every link of
//! the plan goes through the proxy, one proxy per direction: clients reach a broker through `client-b<i>`
//! (its advertised address), broker i dials broker j through `b<i>-b<j>` (its
//! `--peer`), and broker i's etcd session runs through `b<i>-etcd`.
//!
//! A broker binds port 0 and reports its port only once started, yet the
//! proxies in front of it must exist before any broker starts (their addresses
//! are the brokers' flags). So each proxy towards a broker is created first with
//! an upstream nothing listens on, and pointed at the broker with the proxy API's
//! upstream update once the broker writes `<data>/listening` — and again on each
//! restart, when the port changes. When a broker is killed or stopped they point
//! back at nothing, since the OS may give its port to another run's process. A broker dialling a peer not yet started sees
//! a refused connection and retries, as it would if the peer were down.
//!
//! Each child leads its own process group, is recorded with the [`reaper`] for
//! Ctrl-C, and is killed and reaped by [`Drop`] on every other exit path.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Instant, SystemTime};

use epochal_faults::proxy::NewProxy;
use epochal_faults::signal;
use epochal_faults::toxiproxy_client::ToxiproxyClient;

use super::etcd_probe::etcd_healthy;
use super::orphans::{MemoryDir, etcd_memory_dir};
use super::postgres;
use super::{
    BrokerAddresses, ClusterConfig, ClusterPlan, DatabaseState, EtcdAddresses, Link, NodeId, POLL,
    Paused, Realised, Runtime, RuntimeError, Upstream, await_paused, reaper,
};
use crate::system::{PortMode, ServiceKind};

/// The address proxies towards a broker point at until it reports its port:
/// port 9 (discard) on loopback has no listener, so dials are refused at once.
const UPSTREAM_NOT_YET: &str = "127.0.0.1:9";

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

/// A broker's process state; everything else about it is in the plan.
struct Broker {
    /// Its addresses; a broker whose port the runtime assigns gets a fresh
    /// `listen` at each start.
    at: BrokerAddresses,
    process: Option<Guarded>,
    /// The port it bound, direct (for observation, never for workload traffic).
    address: Option<String>,
    /// When the latest incarnation was spawned.
    started_at: Option<SystemTime>,
}

pub struct ProcessRuntime {
    /// Each link's listener is a port of the one proxy on loopback.
    cluster: Realised,
    brokers: BTreeMap<NodeId, Broker>,
    /// The system's broker program, as the preflight found it.
    program: PathBuf,
    // Dropped last (fields drop in order): brokers die before their proxy and etcd.
    _proxy: Guarded,
    /// `None` for a system that needs no etcd.
    _etcd: Option<Guarded>,
    /// `None` for a system that needs no PostgreSQL.
    database: Option<PostgresServer>,
    /// etcd's data in memory, removed once etcd (above) is dead.
    _etcd_data: Option<MemoryDir>,
}

impl ProcessRuntime {
    /// Preflight, then etcd, the proxy and its links, then every broker; returns
    /// once each broker reported its port (await
    /// [`crate::observe::await_ready`] next).
    pub async fn start(config: ClusterConfig) -> Result<Self, RuntimeError> {
        let found = config.preflight()?;
        let plan = ClusterPlan::new(config);
        reaper::install();
        // What a harness killed outright (SIGKILL) left running, first.
        match super::orphans::reap_dead() {
            Ok(reaped) if !reaped.groups.is_empty() => eprintln!(
                "epochal: killed {} process group(s) left by harnesses that were killed",
                reaped.groups.len()
            ),
            Ok(_) => {}
            Err(e) => eprintln!("epochal: reading the process ledgers: {e}"),
        }
        std::fs::create_dir_all(&plan.config.run_dir)
            .map_err(RuntimeError::io("creating the run dir"))?;
        let (etcd, etcd_data, etcd_endpoint) = match &found.etcd {
            Some(etcd_bin) => {
                let (etcd, data, endpoint) = start_etcd(&plan, etcd_bin).await?;
                (Some(etcd), data, endpoint)
            }
            None => (None, None, String::new()),
        };
        let postgres = match plan
            .config
            .system
            .services()
            .any(|s| s == ServiceKind::Postgres)
        {
            true => Some(start_postgres(&plan).await?),
            false => None,
        };
        let (proxy, proxy_address) = start_proxy(&plan).await?;
        let proxies = ToxiproxyClient::new(&proxy_address);

        let etcd_address = etcd_endpoint.trim_start_matches("http://");
        let mut links = BTreeMap::new();
        for &link in plan.links() {
            let upstream = match link.upstream() {
                Upstream::Broker(_) => UPSTREAM_NOT_YET,
                Upstream::Service(ServiceKind::Etcd) => etcd_address,
                Upstream::Service(ServiceKind::Postgres) => postgres
                    .as_ref()
                    .map(|p| p.address.as_str())
                    .expect("started above: the plan has a postgres link"),
            };
            let created = proxies
                .create_proxy(&NewProxy::new(link.proxy_name(), "127.0.0.1:0", upstream))
                .await?;
            links.insert(link, created.listen);
        }

        let mut brokers = BTreeMap::new();
        for broker in plan.brokers() {
            let config = broker.prepare()?;
            // A broker told its port keeps it across restarts, so the
            // observer's and the proxies' view of it never goes stale (one
            // taken meanwhile fails the restart, naming the broker's log).
            let listen = match plan.config.system.node.port {
                PortMode::Reported => "127.0.0.1:0".to_owned(),
                PortMode::Assigned => format!("127.0.0.1:{}", free_port()?),
            };
            let shared = plan.layout().shared_dir();
            if plan.config.system.uses("shared_dir") {
                std::fs::create_dir_all(&shared)
                    .map_err(RuntimeError::io("creating the shared dir"))?;
            }
            let at = broker.addresses(
                &links,
                listen,
                (
                    broker.data_dir.display().to_string(),
                    shared.display().to_string(),
                ),
                config.map(|file| file.display().to_string()),
            );
            brokers.insert(
                broker.node,
                Broker {
                    at,
                    process: None,
                    address: None,
                    started_at: None,
                },
            );
        }
        let mut runtime = ProcessRuntime {
            cluster: Realised {
                plan,
                etcd_endpoint,
                proxies,
                links,
            },
            brokers,
            program: found.program,
            _proxy: proxy,
            database: postgres,
            _etcd: etcd,
            _etcd_data: etcd_data,
        };
        for node in runtime.nodes() {
            runtime.start_node(node).await?;
        }
        Ok(runtime)
    }

    /// A link's proxy address (where its traffic enters the proxy).
    pub fn link_address(&self, link: Link) -> Option<&str> {
        self.cluster.links.get(&link).map(String::as_str)
    }

    /// Every child's pid: etcd, the proxy and the running brokers.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self._etcd.iter().map(Guarded::pid).collect();
        pids.push(self._proxy.pid());
        pids.extend(self.brokers.keys().filter_map(|&n| self.pid(n)));
        pids
    }

    /// The address a node bound, bypassing every proxy.
    pub fn direct_address(&self, node: NodeId) -> Option<&str> {
        self.brokers.get(&node)?.address.as_deref()
    }

    pub fn log_path(&self, node: NodeId) -> Result<PathBuf, RuntimeError> {
        Ok(self.cluster.plan.broker(node)?.log.clone())
    }

    /// Points every link towards `node` at `address`: its new port once it
    /// listens, [`UPSTREAM_NOT_YET`] once it is gone. Only the links towards the
    /// node follow it; its own etcd link points at etcd, which never moves. A
    /// dead broker's port goes back to the OS, which may give it to another
    /// run's process (seen under ci/stress.sh: a broker of one test cluster,
    /// restarted on a port another cluster's dead broker had held, was sent that
    /// cluster's LeaderAndIsr), so a link must not dial it once the broker is gone.
    async fn point_links_at(&self, node: NodeId, address: &str) -> Result<(), RuntimeError> {
        for &link in self.cluster.plan.links() {
            if link.upstream() == Upstream::Broker(node) {
                self.cluster
                    .proxies
                    .set_upstream(&link.proxy_name(), address)
                    .await?;
            }
        }
        Ok(())
    }

    fn broker_mut(&mut self, node: NodeId) -> Result<&mut Broker, RuntimeError> {
        self.brokers
            .get_mut(&node)
            .ok_or(RuntimeError::UnknownNode(node))
    }

    /// The error for a broker found dead that nobody stopped (its exit status,
    /// still ours to read: the child is unreaped until now), once it is reaped
    /// and forgotten and its links point at nothing, as after a kill.
    async fn died(&mut self, node: NodeId) -> Result<RuntimeError, RuntimeError> {
        // /proc shows a multi-threaded process's leader as a zombie while its
        // other threads are still exiting, and waitpid cannot reap it until
        // they have: wait for that, within the start timeout.
        let deadline = Instant::now() + self.cluster.plan.config.start_timeout;
        let broker = self.broker_mut(node)?;
        let exited = loop {
            match broker.process.as_mut().map(Guarded::exited) {
                Some(Err(exited)) => break exited,
                Some(Ok(())) if Instant::now() < deadline => tokio::time::sleep(POLL).await,
                _ => break RuntimeError::NotRunning(node),
            }
        };
        broker.process = None;
        broker.address = None;
        self.point_links_at(node, UPSTREAM_NOT_YET).await?;
        Ok(exited)
    }

    fn database_mut(&mut self) -> Result<&mut PostgresServer, RuntimeError> {
        self.database.as_mut().ok_or(RuntimeError::NoDatabase)
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

/// A PostgreSQL server the runtime started, its data under the run
/// directory. Its children lead sessions of their own (PostgreSQL makes each
/// a group leader), so a kill of the postmaster's group does not reach them:
/// dropping it stops the postmaster, kills each child, then the group, and
/// removes the shared memory segment a killed server leaves.
///
/// The database faults act on it (runtime/postgres.rs): a pause stops the
/// whole tree, a kill ends it, a start spawns a new postmaster on the same
/// data directory and port (the proxies' upstream never moves), guarded as
/// the first was. A running child notices its postmaster's death and exits,
/// but a stopped one cannot, so while the server is paused each child's
/// session is recorded with the reaper too: Ctrl-C, or a harness killed
/// outright, kills them as it kills every guarded group.
struct PostgresServer {
    server: Option<Guarded>,
    /// How it was started, to start it again after a crash.
    at: postgres::PostgresPlan,
    /// `127.0.0.1:<port>`.
    address: String,
    /// Bound on a start, and on a pause or kill taking effect.
    timeout: std::time::Duration,
    /// The children recorded with the reaper while the server is paused.
    paused_children: Vec<i32>,
}

impl PostgresServer {
    fn state(&self) -> Result<DatabaseState, RuntimeError> {
        Ok(match &self.server {
            None => DatabaseState::Down,
            Some(server) if signal::is_stopped(server.pid())? => DatabaseState::Paused,
            Some(_) => DatabaseState::Running,
        })
    }

    fn postmaster(&self) -> Result<i32, RuntimeError> {
        self.server
            .as_ref()
            .map(Guarded::pid)
            .ok_or_else(|| RuntimeError::Postgres {
                at: self.address.clone(),
                detail: "is not running (crashed and not restarted)".into(),
            })
    }

    async fn pause(&mut self) -> Result<(), RuntimeError> {
        let postmaster = self.postmaster()?;
        postgres::pause_server(postmaster, self.timeout).await?;
        // Stopped: it forks nothing, so this list is its whole tree.
        for child in postgres::server_children(postmaster)? {
            if !reaper::register(child) {
                return Err(RuntimeError::TooManyChildren);
            }
            self.paused_children.push(child);
        }
        Ok(())
    }

    fn resume(&mut self) -> Result<(), RuntimeError> {
        postgres::resume_server(self.postmaster()?)?;
        self.forget_paused_children();
        Ok(())
    }

    async fn kill(&mut self) -> Result<(), RuntimeError> {
        let killed = postgres::kill_server(self.postmaster()?, self.timeout).await;
        // The guard kills the postmaster's group (if the kill above did not
        // finish) and reaps it.
        drop(self.server.take());
        self.forget_paused_children();
        killed
    }

    async fn start(&mut self) -> Result<(), RuntimeError> {
        if self.server.is_some() {
            return Err(RuntimeError::Postgres {
                at: self.address.clone(),
                detail: "is already running".into(),
            });
        }
        let server = Guarded::spawn(
            self.at.server_command(),
            "postgres".into(),
            self.at.log.clone(),
            Stdio::null(),
        )?;
        let server = self.server.insert(server);
        if let Err(unready) = postgres::postgres_ready(&self.address, self.timeout).await {
            // One that exited (its port taken meanwhile) says so; either
            // way it is not left half started.
            let exited = server.exited();
            self.server = None;
            exited?;
            return Err(unready);
        }
        Ok(())
    }

    fn forget_paused_children(&mut self) {
        for child in self.paused_children.drain(..) {
            reaper::unregister(child);
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if let Some(server) = &self.server {
            let postmaster = server.pid();
            // Stopped first so it forks nothing once its children are listed.
            let _ = signal::pause(postmaster);
            for child in postgres::server_children(postmaster).unwrap_or_default() {
                let _ = signal::kill_now(child);
            }
        }
        // The guard kills the postmaster's group and reaps it.
        drop(self.server.take());
        self.forget_paused_children();
        let _ = postgres::release_shared_memory(&self.at.data_dir);
    }
}

/// PostgreSQL, initialised under the run directory and answering a
/// connection's startup as its superuser.
async fn start_postgres(plan: &ClusterPlan) -> Result<PostgresServer, RuntimeError> {
    // initdb writes and syncs a whole cluster: seconds, more on a busy machine.
    let timeout = plan
        .config
        .start_timeout
        .max(std::time::Duration::from_secs(60));
    let layout = plan.layout();
    let at = postgres::PostgresPlan::new(
        postgres::find_binaries()?,
        layout.postgres_data(),
        postgres::free_port()?,
        layout.postgres_log(),
    )?;
    at.initdb(timeout).await?;
    let mut server = PostgresServer {
        server: None,
        address: at.address(),
        at,
        timeout,
        paused_children: Vec::new(),
    };
    server.start().await?;
    if let Some(schema) = plan.config.system.schema(ServiceKind::Postgres) {
        postgres::run_script(&server.address, schema, timeout).await?;
    }
    Ok(server)
}

/// etcd, healthy, with its data directory in memory when the machine has
/// one ([`etcd_memory_dir`] says why) and in the run directory otherwise.
async fn start_etcd(
    plan: &ClusterPlan,
    etcd_bin: &Path,
) -> Result<(Guarded, Option<MemoryDir>, String), RuntimeError> {
    const ATTEMPTS: u32 = 5;
    let timeout = plan.config.start_timeout;
    let log = plan.layout().etcd_log();
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        // Declared before etcd, so dropped after it on a failed attempt.
        let memory = etcd_memory_dir();
        let data = match &memory {
            Some(memory) => memory.path().to_owned(),
            None => plan.layout().etcd_data(attempt),
        };
        let (client, peer) = (free_port()?, free_port()?);
        let client_url = format!("http://127.0.0.1:{client}");
        let at = EtcdAddresses {
            data_dir: data.display().to_string(),
            listen_client: client_url.clone(),
            advertise_client: client_url.clone(),
            peer: format!("http://127.0.0.1:{peer}"),
        };
        let mut command = Command::new(etcd_bin);
        command.args(at.argv());
        let mut etcd = Guarded::spawn(command, "etcd".into(), log.clone(), Stdio::null())?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Err(exited) = etcd.exited() {
                // Most likely a port taken between our probe and etcd's bind.
                last = Some(exited);
                break;
            }
            if etcd_healthy(&client_url).await {
                return Ok((etcd, memory, client_url));
            }
            if Instant::now() > deadline {
                return Err(RuntimeError::Timeout {
                    what: "etcd healthy".into(),
                    timeout,
                    detail: Some(format!("its log: {}", log.display())),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
    Err(last.expect("an attempt failed"))
}

/// Starts `epochal-proxy` on a free port and reads `listening on ADDR`, its first
/// stdout line; the rest of its stdout is copied to its log.
async fn start_proxy(plan: &ClusterPlan) -> Result<(Guarded, String), RuntimeError> {
    let timeout = plan.config.start_timeout;
    let log = plan.layout().proxy_log();
    let mut command = Command::new(plan.config.proxy_bin());
    command.args(["--listen", "127.0.0.1:0"]);
    // The followers' fetches it forwards are evidence (checker::acks).
    command.arg("--record").arg(plan.layout().proxy_frames());
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
    let first = tokio::time::timeout(timeout, receiver).await;
    match first {
        Ok(Ok(line)) => match line.trim().strip_prefix("listening on ") {
            Some(address) => Ok((proxy, address.to_owned())),
            None => {
                proxy.exited()?;
                Err(RuntimeError::Timeout {
                    what: "epochal-proxy's `listening on` line".into(),
                    timeout,
                    detail: Some(format!("it printed {line:?}; its log: {}", log.display())),
                })
            }
        },
        _ => Err(RuntimeError::Timeout {
            what: "epochal-proxy's `listening on` line".into(),
            timeout,
            detail: Some(format!("its log: {}", log.display())),
        }),
    }
}

impl Runtime for ProcessRuntime {
    fn realised(&self) -> &Realised {
        &self.cluster
    }

    fn pid(&self, node: NodeId) -> Option<i32> {
        self.brokers.get(&node)?.process.as_ref().map(Guarded::pid)
    }

    async fn start_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.cluster.plan.config.start_timeout;
        let plan = self.cluster.plan.broker(node)?;
        let broker = self
            .brokers
            .get_mut(&node)
            .ok_or(RuntimeError::UnknownNode(node))?;
        if broker.process.is_some() {
            return Err(RuntimeError::AlreadyRunning(node));
        }
        // Before the spawn: a stale file would point the proxies at a dead port.
        plan.clear_listening()?;
        let port = self.cluster.plan.config.system.node.port;
        let mut command = Command::new(&self.program);
        command.args(plan.argv(&broker.at));
        command.envs(plan.environment(&broker.at));
        if let Some(dir) = plan.working_dir(&broker.at) {
            command.current_dir(dir);
        }
        // Taken just before the spawn: every line the new process writes is later.
        broker.started_at = Some(SystemTime::now());
        broker.process = Some(Guarded::spawn(
            command,
            format!("broker {node}"),
            plan.log.clone(),
            Stdio::null(),
        )?);
        let deadline = Instant::now() + timeout;
        let address = loop {
            let serving = match port {
                PortMode::Reported => plan.listening(),
                PortMode::Assigned => std::net::TcpStream::connect(&broker.at.listen)
                    .is_ok()
                    .then(|| broker.at.listen.clone()),
            };
            if let Some(address) = serving {
                break address;
            }
            if let Some(process) = broker.process.as_mut()
                && let Err(exited) = process.exited()
            {
                // Reaped: the node is down, as after a crash, and may be
                // started again.
                broker.process = None;
                return Err(exited);
            }
            if Instant::now() > deadline {
                return Err(RuntimeError::Timeout {
                    what: format!("broker {node} listening"),
                    timeout,
                    detail: Some(format!("its log: {}", plan.log.display())),
                });
            }
            tokio::time::sleep(POLL).await;
        };
        self.point_links_at(node, &address).await?;
        self.broker_mut(node)?.address = Some(address);
        Ok(())
    }

    async fn stop_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.cluster.plan.config.start_timeout;
        let process = self.running(node)?;
        // Asked before the signal, as the Docker runtime does. Here the child
        // stays a zombie until we reap it, so a read after SIGTERM could not
        // race its exit; one order for both runtimes keeps it that way.
        let paused = signal::is_stopped(process.pid())?;
        signal::terminate(process.pid())?;
        // A stopped process acts on SIGTERM only once continued.
        if paused {
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
            tokio::time::sleep(POLL).await;
        }
        let broker = self.broker_mut(node)?;
        broker.process = None;
        broker.address = None;
        self.point_links_at(node, UPSTREAM_NOT_YET).await
    }

    async fn kill_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        self.running(node)?;
        let broker = self.broker_mut(node)?;
        // The guard's drop sends SIGKILL to the group and reaps it.
        broker.process = None;
        broker.address = None;
        self.point_links_at(node, UPSTREAM_NOT_YET).await
    }

    async fn pause_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let pid = self.running(node)?.pid();
        signal::pause(pid)?;
        let what = format!("broker {node} stopped (state T)");
        match await_paused(pid, self.cluster.plan.config.start_timeout, what).await? {
            Paused::Stopped => Ok(()),
            Paused::Ended => Err(self.died(node).await?),
        }
    }

    async fn resume_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let pid = self.running(node)?.pid();
        Ok(signal::resume(pid)?)
    }

    fn started_at(&self, node: NodeId) -> Option<SystemTime> {
        self.brokers.get(&node)?.started_at
    }

    fn observe_address(&self, node: NodeId) -> Option<String> {
        self.direct_address(node).map(str::to_owned)
    }

    async fn shutdown(self) -> Result<(), RuntimeError> {
        // Drop kills and reaps brokers, then the proxy, then etcd.
        drop(self);
        Ok(())
    }

    fn database(&self) -> Result<Option<DatabaseState>, RuntimeError> {
        self.database
            .as_ref()
            .map(PostgresServer::state)
            .transpose()
    }

    fn database_address(&self) -> Option<String> {
        self.database.as_ref().map(|d| d.address.clone())
    }

    async fn pause_database(&mut self) -> Result<(), RuntimeError> {
        self.database_mut()?.pause().await
    }

    async fn resume_database(&mut self) -> Result<(), RuntimeError> {
        self.database_mut()?.resume()
    }

    async fn kill_database(&mut self) -> Result<(), RuntimeError> {
        self.database_mut()?.kill().await
    }

    async fn start_database(&mut self) -> Result<(), RuntimeError> {
        self.database_mut()?.start().await
    }
}
