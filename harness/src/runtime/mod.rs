//! Runtimes: what starts, stops and breaks a cluster of real brokers. A runtime
//! owns etcd, one proxy per directed link and the brokers; it can start, stop,
//! kill, pause and resume a node and tells where each one is reached, like
//! Jepsen's DB protocol. It observes only through connections no fault touches
//! (etcd directly, files on disk), and it leaves no child behind on any exit.

pub mod cluster_view;
pub mod docker;
pub mod process;
pub mod reaper;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use epochal_faults::signal::SignalError;
use epochal_faults::toxiproxy_client::{ClientError, ToxiproxyClient};

pub use cluster_view::{ClusterView, PartitionView};
pub use docker::DockerRuntime;
pub use process::{ProcessConfig, ProcessRuntime};

pub use crate::node::NodeId;

/// A directed link of the cluster; each has its own proxy, named by
/// [`Link::proxy_name`], so a fault can cut one direction of one link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Link {
    /// Workload clients to a broker (the broker's advertised address).
    ClientToBroker(NodeId),
    /// Broker `from` dialling broker `to` (replica fetches, controller requests).
    BrokerToBroker { from: NodeId, to: NodeId },
    /// A broker's etcd session.
    BrokerToEtcd(NodeId),
}

impl Link {
    pub fn proxy_name(self) -> String {
        match self {
            Link::ClientToBroker(to) => format!("client-{to}"),
            Link::BrokerToBroker { from, to } => format!("{from}-{to}"),
            Link::BrokerToEtcd(from) => format!("{from}-etcd"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot start: missing {}", .0.join("; "))]
    Missing(Vec<String>),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{what} exited early ({status}); its log: {log}")]
    Exited {
        what: String,
        status: std::process::ExitStatus,
        log: PathBuf,
    },
    #[error("{what} not within {timeout:?}{}", .detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    Timeout {
        what: String,
        timeout: Duration,
        detail: Option<String>,
    },
    #[error("{what} exited early (exit code {code}); its log: {}", .log.display())]
    ContainerExited {
        what: String,
        code: i64,
        log: PathBuf,
    },
    #[error("docker: {what}: {source}")]
    Docker {
        what: String,
        source: Box<testcontainers::bollard::errors::Error>,
    },
    #[error("building image {tag}: {detail}")]
    ImageBuild { tag: String, detail: String },
    #[error("removing Docker objects: {}", .0.join("; "))]
    Cleanup(Vec<String>),
    #[error("no node {0}")]
    UnknownNode(NodeId),
    #[error("node {0} is not running")]
    NotRunning(NodeId),
    #[error("node {0} is already running")]
    AlreadyRunning(NodeId),
    #[error("too many child processes to guard against Ctrl-C")]
    TooManyChildren,
    #[error("proxy: {0}")]
    Proxy(#[from] ClientError),
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error(transparent)]
    Signal(#[from] SignalError),
}

/// One protocol for every backend (process and Docker), so the same
/// scenario runs on both. Used through generics, never `dyn`, so async methods
/// need no boxing; `Send` bounds are not promised (a runtime lives on one task).
#[allow(async_fn_in_trait)]
pub trait Runtime {
    /// The brokers' ids.
    fn nodes(&self) -> Vec<NodeId>;
    /// Awaits a controller, every broker registered, and a leader and full ISR
    /// for every partition, read from etcd directly; the error names what is
    /// still missing at the deadline.
    async fn await_ready(&self, timeout: Duration) -> Result<ClusterView, RuntimeError>;
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
    /// Whether the node's process exists (paused counts as running).
    fn is_running(&self, node: NodeId) -> bool;
    /// Whether the node is stopped by SIGSTOP (state T), ours or a failpoint's.
    fn is_paused(&self, node: NodeId) -> Result<bool, RuntimeError>;
    /// When the node's latest incarnation was started (wall clock), so files it
    /// shares with earlier ones (the state-change log) can be read from then on.
    fn started_at(&self, node: NodeId) -> Option<std::time::SystemTime>;
    /// The node's own address, bypassing every proxy: for observation only.
    fn observe_address(&self, node: NodeId) -> Option<String>;
    /// Where a workload client reaches the node (through its client proxy).
    fn client_address(&self, node: NodeId) -> Result<String, RuntimeError>;
    /// etcd, directly: for observation only.
    fn etcd_endpoint(&self) -> &str;
    fn data_dir(&self, node: NodeId) -> Result<PathBuf, RuntimeError>;
    /// The proxy serving every link, to cut and heal them.
    fn proxies(&self) -> &ToxiproxyClient;
    /// Kills and reaps every child.
    async fn shutdown(self) -> Result<(), RuntimeError>;
}

/// Awaits a controller, every broker in `all` registered, and a leader and full
/// ISR for every partition, read from etcd at `endpoint`; the error names what
/// is still missing at the deadline.
pub async fn await_cluster_ready(
    endpoint: &str,
    all: &BTreeSet<NodeId>,
    timeout: Duration,
) -> Result<ClusterView, RuntimeError> {
    /// How often the view is read again.
    const POLL: Duration = Duration::from_millis(20);
    let deadline = Instant::now() + timeout;
    let mut client = etcd_client::Client::connect([endpoint], None).await?;
    loop {
        let view = ClusterView::read(&mut client).await?;
        let missing = match view.ready(all) {
            Ok(()) => return Ok(view),
            Err(missing) => missing,
        };
        if Instant::now() > deadline {
            return Err(RuntimeError::Timeout {
                what: "cluster ready".into(),
                timeout,
                detail: Some(missing),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}
