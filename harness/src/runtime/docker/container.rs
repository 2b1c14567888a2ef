//! One container of the run: created on the run's network with the run's
//! labels, started, and awaited until it serves — or, if its PID 1 ends first,
//! reported with its exit code and its output saved. Also where the host ports
//! that containers publish come from.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use epochal_faults::signal;
use futures_util::StreamExt;
use testcontainers::bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, NetworkingConfig, PortBinding,
};
use testcontainers::bollard::query_parameters::CreateContainerOptions;

use testcontainers::bollard::Docker;

use super::api::{self, LABEL_LOG, docker_error};
use crate::runtime::{POLL, RuntimeError};

/// How long Docker may take to record the exit of a container whose PID 1 the
/// host already sees gone. Generous: under load the daemon lags by seconds.
const EXIT_RECORDED: Duration = Duration::from_secs(30);

/// A container of the run.
pub(super) struct Container {
    pub(super) id: String,
    pub(super) name: String,
    /// Where its output is saved (also its `epochal.log` label).
    pub(super) log: PathBuf,
}

/// A container to create: what the runtime varies between etcd, proxy and brokers.
pub(super) struct Spec<'a> {
    pub(super) name: String,
    pub(super) alias: &'a str,
    pub(super) image: &'a str,
    pub(super) cmd: Vec<String>,
    pub(super) env: Vec<String>,
    pub(super) binds: Vec<String>,
    /// Container port → host port, published on 127.0.0.1 only.
    pub(super) publish: Vec<(u16, u16)>,
    pub(super) log: PathBuf,
    /// `uid:gid` to run as (the default is the image's, root).
    pub(super) user: Option<String>,
    /// Paths inside the container mounted as tmpfs (in memory).
    pub(super) tmpfs: Vec<&'a str>,
    /// The directory PID 1 starts in (the image's, `/`, if none).
    pub(super) working_dir: Option<String>,
}

/// What making, starting and awaiting a container needs of the runtime: its
/// Docker connection, the run's id (which names the run's labels and
/// network) and how long a container may take to serve. Borrowed from the
/// runtime for each use (`DockerRuntime::containers`).
pub(super) struct Containers<'a> {
    pub(super) docker: &'a Docker,
    pub(super) run_id: &'a str,
    pub(super) start_timeout: Duration,
}

/// The run's network: every container of the run is on it.
pub(super) fn network(run_id: &str) -> String {
    format!("epochal-{run_id}")
}

impl Containers<'_> {
    fn network(&self) -> String {
        network(self.run_id)
    }

    pub(super) async fn create(&self, spec: Spec<'_>) -> Result<Container, RuntimeError> {
        let mut labels = api::run_labels(self.run_id);
        labels.insert(LABEL_LOG.into(), spec.log.display().to_string());
        let port_bindings: HashMap<String, Option<Vec<PortBinding>>> = spec
            .publish
            .iter()
            .map(|&(inside, host)| {
                (
                    format!("{inside}/tcp"),
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(host.to_string()),
                    }]),
                )
            })
            .collect();
        let body = ContainerCreateBody {
            user: spec.user,
            working_dir: spec.working_dir,
            hostname: Some(spec.alias.to_owned()),
            image: Some(spec.image.to_owned()),
            cmd: Some(spec.cmd),
            env: Some(spec.env),
            labels: Some(labels),
            exposed_ports: Some(port_bindings.keys().cloned().collect()),
            host_config: Some(HostConfig {
                binds: Some(spec.binds),
                tmpfs: Some(
                    spec.tmpfs
                        .iter()
                        .map(|&path| (path.to_owned(), String::new()))
                        .collect(),
                ),
                port_bindings: Some(port_bindings),
                network_mode: Some(self.network()),
                init: Some(false),
                ..Default::default()
            }),
            networking_config: Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(
                    self.network(),
                    EndpointSettings {
                        aliases: Some(vec![spec.alias.to_owned()]),
                        ..Default::default()
                    },
                )])),
            }),
            ..Default::default()
        };
        let options = CreateContainerOptions {
            name: Some(spec.name.clone()),
            ..Default::default()
        };
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| docker_error(format!("creating container {}", spec.name), e))?;
        Ok(Container {
            id: created.id,
            name: spec.name,
            log: spec.log,
        })
    }

    pub(super) async fn start_container(&self, container: &Container) -> Result<i32, RuntimeError> {
        self.docker
            .start_container(&container.id, None)
            .await
            .map_err(|e| docker_error(format!("starting container {}", container.name), e))?;
        let inspected = self
            .docker
            .inspect_container(&container.id, None)
            .await
            .map_err(|e| docker_error(format!("inspecting container {}", container.name), e))?;
        match inspected.state.and_then(|s| s.pid) {
            Some(pid) if pid > 0 => Ok(pid as i32),
            _ => Err(self.exited(container).await),
        }
    }

    /// The error for a container that stopped by itself: its exit code, and its
    /// output saved to its log file.
    ///
    /// The host sees PID 1 gone (or a zombie) before Docker has recorded the
    /// exit: inspected in that window the container still reads as running
    /// with exit code 0, and a broker that exited with 2 would be reported as
    /// exiting cleanly. So this awaits Docker's own record of the exit (the
    /// wait API, condition `not-running`) for at most [`EXIT_RECORDED`], and
    /// reports an unknown code (-1) rather than a wrong one if it never comes.
    pub(super) async fn exited(&self, container: &Container) -> RuntimeError {
        use testcontainers::bollard::errors::Error as DockerError;
        let waited = tokio::time::timeout(
            EXIT_RECORDED,
            self.docker.wait_container(&container.id, None).next(),
        )
        .await;
        let code = match waited {
            Ok(Some(Ok(response))) => response.status_code,
            Ok(Some(Err(DockerError::DockerContainerWaitError { code, .. }))) => code,
            // The wait failed or timed out: only a recorded exit is an answer.
            _ => self
                .docker
                .inspect_container(&container.id, None)
                .await
                .ok()
                .and_then(|i| i.state)
                .filter(|s| s.running == Some(false))
                .and_then(|s| s.exit_code)
                .unwrap_or(-1),
        };
        let _ = api::save_logs(self.docker, &container.id, &container.log).await;
        RuntimeError::ContainerExited {
            what: format!("container {}", container.name),
            code,
            log: container.log.clone(),
        }
    }

    /// Polls `up` until it holds, the container's PID 1 (`pid`) ends (its
    /// exit code and saved output are the error) or the start timeout passes.
    pub(super) async fn await_serving<Up: Future<Output = bool>>(
        &self,
        container: &Container,
        pid: i32,
        what: &str,
        mut up: impl FnMut() -> Up,
    ) -> Result<(), RuntimeError> {
        let timeout = self.start_timeout;
        let deadline = Instant::now() + timeout;
        while !up().await {
            if signal::proc_state(pid)?.is_none_or(|s| s == 'Z') {
                return Err(self.exited(container).await);
            }
            if Instant::now() > deadline {
                return Err(RuntimeError::Timeout {
                    what: format!("{what} (container {})", container.name),
                    timeout,
                    detail: Some(format!("its output goes to {}", container.log.display())),
                });
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }
}

/// A host port for a published container port: free now, and outside the
/// kernel's ephemeral range, so that while its container is down (killed,
/// awaiting a restart) no outgoing connection can take it as its local port and
/// make the restart fail with "address already in use". Ports handed out stay
/// reserved for the life of the process, so concurrent runs never share one.
pub(super) fn free_port() -> Result<u16, RuntimeError> {
    use std::sync::Mutex;
    static RESERVED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let (low, high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| {
            let mut parts = range.split_whitespace().map(|p| p.parse::<u16>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .unwrap_or((32768, 60999));
    // Below the ephemeral range if there is room there, else above it.
    let (first, last) = if low > 11_000 {
        (10_000, low - 1)
    } else {
        (high.saturating_add(1), u16::MAX)
    };
    let span = u32::from(last - first) + 1;
    // Start somewhere different in each process, so two harnesses rarely probe
    // the same ports.
    let seed = std::process::id().wrapping_mul(2_654_435_761)
        ^ SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    for step in 0..span {
        let port = first + ((seed.wrapping_add(step)) % span) as u16;
        if reserved.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            reserved.insert(port);
            return Ok(port);
        }
    }
    Err(RuntimeError::Io {
        what: format!("picking a free port in {first}..={last}"),
        source: std::io::Error::new(std::io::ErrorKind::AddrInUse, "every port is taken"),
    })
}
