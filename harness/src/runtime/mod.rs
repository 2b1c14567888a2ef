//! Runtimes: what starts, stops and breaks a cluster of real brokers. A runtime
//! realises a [`ClusterPlan`] — etcd, one proxy per directed link, the brokers
//! — and can then start, stop, kill, pause and resume a node and tell where
//! each one is reached, like Jepsen's DB protocol. It never judges the cluster
//! (readiness and every other look are observe/'s), and it leaves no child
//! behind on any exit.

pub mod docker;
mod error;
pub mod etcd_probe;
mod kind;
pub mod orphans;
pub mod plan;
pub mod postgres;
pub mod process;
pub mod reaper;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use epochal_faults::signal;
use epochal_faults::toxiproxy_client::ToxiproxyClient;

pub use docker::DockerRuntime;
pub use error::RuntimeError;
pub use kind::RuntimeKind;
pub use plan::{
    BrokerAddresses, BrokerPlan, ClusterConfig, ClusterPlan, EtcdAddresses, Link, Preflight,
    Upstream,
};
pub use process::ProcessRuntime;

pub use crate::node::NodeId;

/// How often a runtime's wait re-checks its condition; every wait also has a
/// deadline.
const POLL: Duration = Duration::from_millis(20);

/// A plan as a runtime realised it: the plan, and where its pieces ended up —
/// etcd as the harness reaches it, the proxy's API, and each link's listener
/// as its dialler reaches it.
pub struct Realised {
    pub plan: ClusterPlan,
    pub etcd_endpoint: String,
    pub proxies: ToxiproxyClient,
    pub links: BTreeMap<Link, String>,
}

/// One protocol for every backend (process and Docker), so the same
/// scenario runs on both. Used through generics, never `dyn`, so async methods
/// need no boxing; `Send` bounds are not promised (a runtime lives on one task).
#[allow(async_fn_in_trait)]
pub trait Runtime {
    /// The plan this runtime realises, and where its links, etcd and the
    /// proxy ended up.
    fn realised(&self) -> &Realised;
    /// The host pid of a running node's process (in Docker, its container's
    /// PID 1), for signals' effects and checks against `/proc`.
    fn pid(&self, node: NodeId) -> Option<i32>;
    /// Starts a stopped or killed node on its old data directory.
    async fn start_node(&mut self, node: NodeId) -> Result<(), RuntimeError>;
    /// SIGTERM: a clean shutdown, awaited; then the node is reaped.
    async fn stop_node(&mut self, node: NodeId) -> Result<(), RuntimeError>;
    /// SIGKILL: a crash; the node is reaped.
    async fn kill_node(&mut self, node: NodeId) -> Result<(), RuntimeError>;
    /// SIGSTOP, and awaited until the kernel reports it stopped.
    async fn pause_node(&mut self, node: NodeId) -> Result<(), RuntimeError>;
    /// SIGCONT.
    async fn resume_node(&mut self, node: NodeId) -> Result<(), RuntimeError>;
    /// When the node's latest incarnation was started (wall clock), so files it
    /// shares with earlier ones (the state-change log) can be read from then on.
    fn started_at(&self, node: NodeId) -> Option<std::time::SystemTime>;
    /// The node's own address, bypassing every proxy: for observation only.
    fn observe_address(&self, node: NodeId) -> Option<String>;
    /// Kills and reaps every child.
    async fn shutdown(self) -> Result<(), RuntimeError>;

    /// The system's database as the runtime runs it; `None` when it runs
    /// none (the system has no database, or the runtime cannot run one).
    fn database(&self) -> Result<Option<DatabaseState>, RuntimeError> {
        Ok(None)
    }
    /// Where the harness itself reaches the system's database (PostgreSQL),
    /// bypassing every proxy: for reading its records after the run.
    fn database_address(&self) -> Option<String> {
        None
    }
    /// SIGSTOP to the database's whole process tree, awaited.
    async fn pause_database(&mut self) -> Result<(), RuntimeError> {
        Err(RuntimeError::NoDatabase)
    }
    /// SIGCONT to the database's whole process tree.
    async fn resume_database(&mut self) -> Result<(), RuntimeError> {
        Err(RuntimeError::NoDatabase)
    }
    /// SIGKILL to the database's whole process tree; reaped.
    async fn kill_database(&mut self) -> Result<(), RuntimeError> {
        Err(RuntimeError::NoDatabase)
    }
    /// The database started again on its data directory and port, awaited
    /// until it answers a connection.
    async fn start_database(&mut self) -> Result<(), RuntimeError> {
        Err(RuntimeError::NoDatabase)
    }

    /// SIGKILL to every running broker, as close to at once as the backend
    /// allows: the end of a run freezes the data directories, and the longer
    /// the first broker is dead while the others live, the more the cluster
    /// decides in between. Failures are collected; the first is returned after
    /// every broker was tried.
    async fn freeze(&mut self) -> Result<(), RuntimeError> {
        let mut first_error = None;
        for node in self.nodes() {
            if self.is_running(node)
                && let Err(e) = self.kill_node(node).await
            {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn plan(&self) -> &ClusterPlan {
        &self.realised().plan
    }
    /// The brokers' ids.
    fn nodes(&self) -> Vec<NodeId> {
        self.plan().nodes()
    }
    /// Whether the node's process exists (paused counts as running).
    fn is_running(&self, node: NodeId) -> bool {
        self.pid(node).is_some()
    }
    /// Whether the node is stopped by SIGSTOP (state T), ours or a failpoint's.
    fn is_paused(&self, node: NodeId) -> Result<bool, RuntimeError> {
        match self.pid(node) {
            Some(pid) => Ok(signal::is_stopped(pid)?),
            None => Ok(false),
        }
    }
    /// Where a workload client reaches the node (through its client proxy).
    fn client_address(&self, node: NodeId) -> Result<String, RuntimeError> {
        self.realised()
            .links
            .get(&Link::ClientToBroker(node))
            .cloned()
            .ok_or(RuntimeError::UnknownNode(node))
    }
    /// etcd, directly: for observation only.
    fn etcd_endpoint(&self) -> &str {
        &self.realised().etcd_endpoint
    }
    /// The node's data directory on the harness's side.
    fn data_dir(&self, node: NodeId) -> Result<PathBuf, RuntimeError> {
        Ok(self.plan().broker(node)?.data_dir.clone())
    }
    /// The proxy serving every link, to cut and heal them.
    fn proxies(&self) -> &ToxiproxyClient {
        &self.realised().proxies
    }
}

/// The system's database as a runtime runs it, for the nemesis and the
/// final heal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseState {
    Running,
    /// Its postmaster stopped by SIGSTOP (state T).
    Paused,
    /// Killed and not started since.
    Down,
}

/// How a wait for a SIGSTOP to land ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Paused {
    /// The kernel reports the process stopped (state T).
    Stopped,
    /// The process exited (a zombie, or gone): it died on its own, or was
    /// killed by someone else, and will never stop. Each runtime reports it
    /// with what it knows of the exit.
    Ended,
}

/// Awaits the kernel reporting `pid` stopped (state T) after a SIGSTOP, which
/// takes effect asynchronously; `what` names the wait in the timeout error.
async fn await_paused(pid: i32, timeout: Duration, what: String) -> Result<Paused, RuntimeError> {
    // The stop lands within microseconds unless the machine is busy: re-check
    // at once a few hundred times (a /proc read each, ~2 ms in all), then every
    // millisecond. A 20 ms poll made every pause fault take 20 ms whenever the
    // first check came too early (issue 22's "pause takes effect").
    const SPINS: u32 = 200;
    let deadline = Instant::now() + timeout;
    let mut checks = 0u32;
    loop {
        match signal::proc_state(pid)? {
            Some('T') => return Ok(Paused::Stopped),
            None | Some('Z') => return Ok(Paused::Ended),
            Some(_) => {}
        }
        if Instant::now() > deadline {
            return Err(RuntimeError::Timeout {
                what,
                timeout,
                detail: None,
            });
        }
        checks += 1;
        if checks < SPINS {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}
