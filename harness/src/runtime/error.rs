//! Why a runtime could not do what it was asked: a node that would not start
//! or stop, a missing binary, Docker or the proxy refusing, a signal that
//! could not be sent. Every runtime (process.rs, docker/) and the plan share
//! this one type, so a caller handles both backends alike.

use std::path::PathBuf;
use std::time::Duration;

use epochal_faults::signal::SignalError;
use epochal_faults::toxiproxy_client::ClientError;

use crate::node::NodeId;

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
    /// A PostgreSQL server that is not one a runtime can use (it asks for a
    /// password, or answers as something else), or a postmaster that ended.
    #[error("PostgreSQL {at}: {detail}")]
    Postgres { at: String, detail: String },
    #[error("no node {0}")]
    UnknownNode(NodeId),
    /// A database fault on a runtime that runs no database for the system.
    #[error("this runtime runs no database for the system")]
    NoDatabase,
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

impl RuntimeError {
    /// Maps an I/O error to [`RuntimeError::Io`] saying what was being done.
    pub(crate) fn io(what: &str) -> impl FnOnce(std::io::Error) -> RuntimeError {
        let what = what.to_owned();
        move |source| RuntimeError::Io { what, source }
    }
}
