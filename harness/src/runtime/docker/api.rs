//! The Docker Engine API as the runtime uses it: a client at the daemon's own
//! API version, the labels every object of a run carries, and removal by label
//! (after a run, after a failure, and for `epochal gc`).
//!
//! Why bollard directly and not testcontainers' runner: testcontainers 0.28
//! builds its client at bollard 0.21's fixed API version (1.53) and never
//! negotiates; Docker refuses a client version newer than its own ("client
//! version 1.53 is too new. Maximum supported API version is 1.41" from
//! Debian bookworm's Docker 20.10), and bollard's own `negotiate_version` asks
//! `/v1.53/version`, which that daemon refuses too. So we ask the unversioned
//! `/version` ourselves and speak min(daemon, bollard) through bollard, the
//! client testcontainers re-exports.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use testcontainers::bollard::query_parameters::{
    ListContainersOptions, ListNetworksOptions, LogsOptions, RemoveContainerOptions,
};
use testcontainers::bollard::{API_DEFAULT_VERSION, ClientVersion, Docker};

use crate::runtime::RuntimeError;

/// On every container, network and image the harness makes, so `epochal gc`
/// finds them all.
pub const LABEL_PROJECT: &str = "epochal.project";
/// The run a container or network belongs to.
pub const LABEL_RUN: &str = "epochal.run";
/// The harness process that made it (Ctrl-C removes everything of its own).
pub const LABEL_SESSION: &str = "epochal.session";
/// Where a container's stdout and stderr are saved when it is removed.
pub const LABEL_LOG: &str = "epochal.log";
/// Which image (`broker`, `etcd`, `proxy`): set by the image's Dockerfile.
pub const LABEL_IMAGE: &str = "epochal.image";

/// Seconds any single Docker API request may take.
const REQUEST_TIMEOUT_S: u64 = 120;

/// This harness process's id in labels: its pid and start time, so a later
/// process that gets the same pid does not match.
pub fn session_id() -> &'static str {
    static SESSION: OnceLock<String> = OnceLock::new();
    SESSION.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{}-{nanos:x}", std::process::id())
    })
}

/// A new run id, unique on this daemon: the session and a counter.
pub fn new_run_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{}-{}", session_id(), NEXT.fetch_add(1, Ordering::SeqCst))
}

/// The labels of an object of run `run_id`.
pub fn run_labels(run_id: &str) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_PROJECT.to_owned(), "epochal".to_owned()),
        (LABEL_RUN.to_owned(), run_id.to_owned()),
        (LABEL_SESSION.to_owned(), session_id().to_owned()),
    ])
}

pub fn docker_error(
    what: impl Into<String>,
    source: testcontainers::bollard::errors::Error,
) -> RuntimeError {
    RuntimeError::Docker {
        what: what.into(),
        source: Box::new(source),
    }
}

/// The daemon's socket: `DOCKER_HOST` when it is `unix://…`, else the default.
fn socket_path() -> Result<PathBuf, RuntimeError> {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if !host.is_empty() => match host.strip_prefix("unix://") {
            Some(path) => Ok(PathBuf::from(path)),
            None => Err(RuntimeError::Missing(vec![format!(
                "a Docker daemon on a unix socket (DOCKER_HOST={host} is not unix://…)"
            )])),
        },
        _ => Ok(PathBuf::from("/var/run/docker.sock")),
    }
}

/// The daemon's API version from an unversioned `GET /version`, which every
/// daemon answers whatever its supported range.
fn daemon_api_version(socket: &Path) -> std::io::Result<ClientVersion> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /version HTTP/1.0\r\nHost: docker\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned());
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .ok_or_else(|| invalid("no HTTP body"))?;
    let json: serde_json::Value =
        serde_json::from_str(body).map_err(|e| invalid(&format!("not JSON: {e}")))?;
    let version = json["ApiVersion"]
        .as_str()
        .ok_or_else(|| invalid("no ApiVersion"))?;
    let (major, minor) = version
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| invalid(&format!("ApiVersion {version:?}")))?;
    Ok(ClientVersion {
        major_version: major,
        minor_version: minor,
    })
}

/// A client at min(daemon, bollard) API version; the error says plainly that
/// Docker is unreachable, and where it was looked for.
pub fn connect() -> Result<Docker, RuntimeError> {
    let socket = socket_path()?;
    let daemon = daemon_api_version(&socket).map_err(|e| {
        RuntimeError::Missing(vec![format!(
            "a reachable Docker daemon at {} ({e}); is dockerd running, and may this user use it?",
            socket.display()
        )])
    })?;
    let ours = *API_DEFAULT_VERSION;
    let version = if (daemon.major_version, daemon.minor_version)
        < (ours.major_version, ours.minor_version)
    {
        daemon
    } else {
        ours
    };
    Docker::connect_with_unix(&socket.to_string_lossy(), REQUEST_TIMEOUT_S, &version)
        .map_err(|e| docker_error(format!("connecting to {}", socket.display()), e))
}

fn label_filter(key: &str, value: &str) -> HashMap<String, Vec<String>> {
    HashMap::from([("label".to_owned(), vec![format!("{key}={value}")])])
}

/// Saves a container's whole output (every incarnation: Docker keeps the log
/// across restarts) to `path`.
pub async fn save_logs(docker: &Docker, container: &str, path: &Path) -> std::io::Result<()> {
    let options = LogsOptions {
        stdout: true,
        stderr: true,
        follow: false,
        tail: "all".into(),
        ..Default::default()
    };
    let mut stream = docker.logs(container, Some(options));
    let mut bytes = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(output) => bytes.extend_from_slice(&output.into_bytes()),
            Err(e) => {
                bytes.extend_from_slice(format!("\n[epochal: reading the log: {e}]\n").as_bytes())
            }
        }
    }
    std::fs::write(path, bytes)
}

/// What [`remove_labelled`] removed.
#[derive(Debug, Default)]
pub struct Removed {
    pub containers: usize,
    pub networks: usize,
}

/// Removes every container (saving its log where [`LABEL_LOG`] says) and then
/// every network with label `key=value`. Each failure is collected and all are
/// reported at the end, so one stuck object does not keep the rest.
pub async fn remove_labelled(
    docker: &Docker,
    key: &str,
    value: &str,
    save: bool,
) -> Result<Removed, RuntimeError> {
    let mut removed = Removed::default();
    let mut failures = Vec::new();
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(label_filter(key, value)),
            ..Default::default()
        }))
        .await
        .map_err(|e| docker_error(format!("listing containers with {key}={value}"), e))?;
    for container in containers {
        let Some(id) = container.id else { continue };
        if save && let Some(log) = container.labels.as_ref().and_then(|l| l.get(LABEL_LOG)) {
            let _ = save_logs(docker, &id, Path::new(log)).await;
        }
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match docker.remove_container(&id, Some(options)).await {
            Ok(()) => removed.containers += 1,
            Err(e) => failures.push(format!("container {id}: {e}")),
        }
    }
    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(label_filter(key, value)),
        }))
        .await
        .map_err(|e| docker_error(format!("listing networks with {key}={value}"), e))?;
    for network in networks {
        let Some(id) = network.id else { continue };
        match docker.remove_network(&id).await {
            Ok(()) => removed.networks += 1,
            Err(e) => failures.push(format!("network {id}: {e}")),
        }
    }
    if failures.is_empty() {
        Ok(removed)
    } else {
        Err(RuntimeError::Cleanup(failures))
    }
}

/// Whether the harness process that made session `session` (`<pid>-<time>`)
/// may still be running on this machine. A reused pid reads as alive: gc then
/// keeps the objects, which is the safe mistake.
fn session_alive(session: &str) -> bool {
    session
        .split_once('-')
        .and_then(|(pid, _)| pid.parse::<u32>().ok())
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

/// Removes the containers and networks of every epochal session whose harness
/// process is gone: what a killed harness (SIGKILL, a crash, a lost machine
/// session) could not remove itself.
pub async fn remove_orphans(docker: &Docker) -> Result<Removed, RuntimeError> {
    let project = label_filter(LABEL_PROJECT, "epochal");
    let mut sessions = std::collections::BTreeSet::new();
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(project.clone()),
            ..Default::default()
        }))
        .await
        .map_err(|e| docker_error("listing epochal containers", e))?;
    sessions.extend(
        containers
            .into_iter()
            .filter_map(|c| c.labels?.remove(LABEL_SESSION)),
    );
    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(project),
        }))
        .await
        .map_err(|e| docker_error("listing epochal networks", e))?;
    sessions.extend(
        networks
            .into_iter()
            .filter_map(|n| n.labels?.remove(LABEL_SESSION)),
    );
    let mut removed = Removed::default();
    for session in sessions.iter().filter(|s| !session_alive(s)) {
        let more = remove_labelled(docker, LABEL_SESSION, session, false).await?;
        removed.containers += more.containers;
        removed.networks += more.networks;
    }
    Ok(removed)
}

/// [`remove_labelled`] from synchronous code (a `Drop`): on a thread of its
/// own with its own runtime and client, so it works inside or outside tokio.
pub fn remove_labelled_blocking(key: &str, value: &str) -> Result<Removed, RuntimeError> {
    let (key, value) = (key.to_owned(), value.to_owned());
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|source| RuntimeError::Io {
                        what: "starting a runtime for Docker cleanup".into(),
                        source,
                    })?;
                runtime.block_on(async {
                    let docker = connect()?;
                    remove_labelled(&docker, &key, &value, true).await
                })
            })
            .join()
            .unwrap_or_else(|_| {
                Err(RuntimeError::Cleanup(vec![
                    "the cleanup thread panicked".into(),
                ]))
            })
    })
}
