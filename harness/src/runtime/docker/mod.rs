//! The Docker runtime: etcd, one `epochal-proxy` and N `epochal-broker`s, each
//! in a container of its own on a user-defined network made for the run, so
//! every node is its own host with its own address, as in a CI cluster.
//!
//! - Images are built here, `FROM scratch` (image.rs); nothing is pulled.
//! - Containers reach each other by DNS name (`b1`…, `etcd`, `proxy`), never by
//!   IP, which changes when a container restarts. Every link of the cluster runs
//!   through the proxy container, one listener per directed link named as in the
//!   process runtime ([`Link::proxy_name`]): broker i dials broker j at
//!   `proxy:<port of b<i>-b<j>>`, and its etcd session runs through `b<i>-etcd`.
//! - The harness reaches containers only through ports published on 127.0.0.1,
//!   on host ports it picks, so they stay the same across restarts: the proxy's
//!   API, each `client-b<i>` listener (what the broker advertises to clients),
//!   each broker's own listener (observation, bypassing every proxy) and etcd.
//! - Each broker's data dir is bind-mounted from the run's store
//!   (`b<i>/data`, and `b<i>/broker.toml` read-only), so the reader and the
//!   checkers see its files; its output is saved to `b<i>/broker.log` when its
//!   container is removed (Docker keeps it across restarts).
//! - The broker is PID 1 (exec-form entrypoint, no init). Faults are signals
//!   through the Engine API's kill endpoint: SIGSTOP/SIGCONT (not `docker
//!   pause`, whose cgroup freezer a process cannot see; a SIGSTOP is what the
//!   process runtime sends too), SIGKILL, and SIGTERM awaited. Paused is state
//!   T of that PID 1 in `/proc` on the host.
//! - Every container and network carries the run's labels (api.rs); dropping the
//!   runtime removes them all, and Ctrl-C does too (reaper.rs).

pub mod api;
mod gc;
pub mod image;
mod watcher;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use epochal_faults::proxy::NewProxy;
use epochal_faults::signal;
use epochal_faults::toxiproxy_client::ToxiproxyClient;
use testcontainers::bollard::Docker;
use testcontainers::bollard::errors::Error as DockerError;
use testcontainers::bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, NetworkCreateRequest, NetworkingConfig,
    PortBinding,
};
use testcontainers::bollard::query_parameters::{CreateContainerOptions, KillContainerOptions};

use super::{ClusterView, Link, NodeId, ProcessConfig, Runtime, RuntimeError, reaper};
use api::{LABEL_LOG, LABEL_RUN, docker_error};
pub use gc::{GcReport, gc};
use image::ImageSpec;
use watcher::StopWatcher;

/// Ports inside the containers (each container has its own address, so they
/// can be fixed there; the host side is always picked free).
const BROKER_PORT: u16 = 9092;
const ETCD_PORT: u16 = 2379;
const PROXY_API_PORT: u16 = 8474;
/// The proxy container's link listeners: this plus the link's index.
const LINK_PORT_BASE: u16 = 20000;
const POLL_MS: u64 = 20;
/// The broker's `stop` failpoint as PID 1 asks for its SIGSTOP through this
/// file in its data dir (broker/src/failpoints.rs); [`StopWatcher`] answers.
const STOP_REQUEST_ENV: &str = "EPOCHAL_STOP_REQUEST";
const STOP_REQUEST_FILE: &str = "stop-request";
/// In the run dir: the value of the run's `epochal.run` label.
pub const RUN_ID_FILE: &str = "docker-run-id";

/// A container of the run.
struct Container {
    id: String,
    name: String,
    /// Where its output is saved (also its `epochal.log` label).
    log: PathBuf,
}

struct Broker {
    container: Container,
    data_dir: PathBuf,
    /// 127.0.0.1:port published for the broker's own listener.
    observe: String,
    /// The host pid of the container's PID 1 while it runs.
    pid: Option<i32>,
    started_at: Option<SystemTime>,
}

pub struct DockerRuntime {
    config: ProcessConfig,
    docker: Docker,
    run_id: String,
    etcd_endpoint: String,
    proxies: ToxiproxyClient,
    /// Each link's listen address as its dialler sees it: 127.0.0.1:<host port>
    /// for clients, `proxy:<port>` inside the network for the rest.
    links: BTreeMap<Link, String>,
    /// Each link's listener port inside the proxy container.
    link_ports: BTreeMap<Link, u16>,
    brokers: BTreeMap<NodeId, Broker>,
    watcher: StopWatcher,
}

/// What the images hold.
fn image_specs(config: &ProcessConfig, etcd: PathBuf) -> [ImageSpec; 3] {
    [
        ImageSpec {
            name: "broker",
            binary: config.bin_dir.join("epochal-broker"),
            at: "/epochal-broker",
        },
        ImageSpec {
            name: "etcd",
            binary: etcd,
            at: "/usr/bin/etcd",
        },
        ImageSpec {
            name: "proxy",
            binary: config.bin_dir.join("epochal-proxy"),
            at: "/epochal-proxy",
        },
    ]
}

/// A host port for a published container port: free now, and outside the
/// kernel's ephemeral range, so that while its container is down (killed,
/// awaiting a restart) no outgoing connection can take it as its local port and
/// make the restart fail with "address already in use". Ports handed out stay
/// reserved for the life of the process, so concurrent runs never share one.
fn free_port() -> Result<u16, RuntimeError> {
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

/// A container to create: what the runtime varies between etcd, proxy and brokers.
struct Spec<'a> {
    name: String,
    alias: &'a str,
    image: &'a str,
    cmd: Vec<String>,
    env: Vec<String>,
    binds: Vec<String>,
    /// Container port → host port, published on 127.0.0.1 only.
    publish: Vec<(u16, u16)>,
    log: PathBuf,
    /// `uid:gid` to run as (the default is the image's, root).
    user: Option<String>,
}

impl DockerRuntime {
    /// Builds (or reuses) the images, makes the run's network, starts etcd, the
    /// proxy and its links, then every broker; returns once each broker serves
    /// (await [`Runtime::await_ready`] next). A failure part way removes
    /// everything made so far.
    pub async fn start(config: ProcessConfig) -> Result<Self, RuntimeError> {
        let etcd_bin = config.preflight()?;
        let docker = api::connect()?;
        let io = |what: &str| {
            let what = what.to_owned();
            move |source| RuntimeError::Io { what, source }
        };
        std::fs::create_dir_all(&config.run_dir).map_err(io("creating the run dir"))?;
        let mut images = Vec::new();
        for spec in image_specs(&config, etcd_bin) {
            images.push(image::ensure(&docker, &spec).await?);
        }
        let run_id = api::new_run_id();
        // Beside the nodes' files, so a person (or a test) can find the run's
        // containers: `docker ps -a --filter label=epochal.run=<id>`.
        std::fs::write(config.run_dir.join(RUN_ID_FILE), &run_id)
            .map_err(io("writing the docker run id"))?;
        // Ctrl-C from here on removes this session's containers and networks.
        reaper::install();
        reaper::arm_docker(api::session_id());
        let mut runtime = DockerRuntime {
            config,
            docker,
            etcd_endpoint: String::new(),
            proxies: ToxiproxyClient::new("127.0.0.1:9"),
            links: BTreeMap::new(),
            link_ports: BTreeMap::new(),
            brokers: BTreeMap::new(),
            watcher: StopWatcher::new(),
            run_id,
        };
        // From here the runtime exists, so its Drop removes what was made.
        runtime.create_network().await?;
        runtime.start_etcd(&images[1]).await?;
        runtime.start_proxy(&images[2]).await?;
        runtime.create_brokers(&images[0]).await?;
        if !runtime.config.node_env.is_empty() {
            runtime.watcher.spawn();
        }
        for node in runtime.nodes() {
            runtime.start_node(node).await?;
        }
        Ok(runtime)
    }

    fn network(&self) -> String {
        format!("epochal-{}", self.run_id)
    }

    /// This run's id, the value of its containers' and network's `epochal.run` label.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The host pid of a running broker's PID 1, for checks against `/proc`.
    pub fn pid(&self, node: NodeId) -> Option<i32> {
        self.brokers.get(&node)?.pid
    }

    /// The name of a broker's container.
    pub fn container_name(&self, node: NodeId) -> Option<&str> {
        Some(&self.brokers.get(&node)?.container.name)
    }

    async fn create_network(&self) -> Result<(), RuntimeError> {
        let request = NetworkCreateRequest {
            name: self.network(),
            driver: Some("bridge".into()),
            labels: Some(api::run_labels(&self.run_id)),
            ..Default::default()
        };
        self.docker
            .create_network(request)
            .await
            .map_err(|e| docker_error(format!("creating network {}", self.network()), e))?;
        Ok(())
    }

    async fn create(&self, spec: Spec<'_>) -> Result<Container, RuntimeError> {
        let mut labels = api::run_labels(&self.run_id);
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
            hostname: Some(spec.alias.to_owned()),
            image: Some(spec.image.to_owned()),
            cmd: Some(spec.cmd),
            env: Some(spec.env),
            labels: Some(labels),
            exposed_ports: Some(port_bindings.keys().cloned().collect()),
            host_config: Some(HostConfig {
                binds: Some(spec.binds),
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

    async fn start_container(&self, container: &Container) -> Result<i32, RuntimeError> {
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
    async fn exited(&self, container: &Container) -> RuntimeError {
        let inspected = self.docker.inspect_container(&container.id, None).await;
        let code = inspected
            .ok()
            .and_then(|i| i.state)
            .and_then(|s| s.exit_code)
            .unwrap_or(-1);
        let _ = api::save_logs(&self.docker, &container.id, &container.log).await;
        RuntimeError::ContainerExited {
            what: format!("container {}", container.name),
            code,
            log: container.log.clone(),
        }
    }

    /// Polls `up` until it holds, the container's PID 1 (`pid`) ends (its
    /// exit code and saved output are the error) or the start timeout passes.
    async fn await_serving<Up: Future<Output = bool>>(
        &self,
        container: &Container,
        pid: i32,
        what: &str,
        mut up: impl FnMut() -> Up,
    ) -> Result<(), RuntimeError> {
        let timeout = self.config.start_timeout;
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
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
        Ok(())
    }

    async fn start_etcd(&mut self, image: &str) -> Result<(), RuntimeError> {
        let host_port = free_port()?;
        let client_url = format!("http://0.0.0.0:{ETCD_PORT}");
        let peer_url = "http://127.0.0.1:2380";
        let cmd = [
            "--name",
            "n0",
            "--data-dir",
            "/etcd-data",
            "--listen-client-urls",
            &client_url,
            "--advertise-client-urls",
            &format!("http://etcd:{ETCD_PORT}"),
            "--listen-peer-urls",
            peer_url,
            "--initial-advertise-peer-urls",
            peer_url,
            "--initial-cluster",
            &format!("n0={peer_url}"),
            // Fast elections, and compaction off: the checkers read etcd's
            // whole revision history (as in the process runtime).
            "--heartbeat-interval",
            "50",
            "--election-timeout",
            "300",
            "--auto-compaction-retention",
            "0",
        ];
        let container = self
            .create(Spec {
                name: format!("epochal-{}-etcd", self.run_id),
                alias: "etcd",
                image,
                cmd: cmd.iter().map(|s| s.to_string()).collect(),
                env: Vec::new(),
                binds: Vec::new(),
                publish: vec![(ETCD_PORT, host_port)],
                log: self.config.run_dir.join("etcd.log"),
                user: None,
            })
            .await?;
        let pid = self.start_container(&container).await?;
        let endpoint = format!("http://127.0.0.1:{host_port}");
        self.await_serving(&container, pid, "etcd healthy", || {
            super::process::etcd_healthy(&endpoint)
        })
        .await?;
        self.etcd_endpoint = endpoint;
        Ok(())
    }

    async fn start_proxy(&mut self, image: &str) -> Result<(), RuntimeError> {
        let nodes: Vec<NodeId> = NodeId::all(self.config.brokers).collect();
        let mut wanted = Vec::new();
        for &i in &nodes {
            wanted.push((Link::ClientToBroker(i), format!("{i}:{BROKER_PORT}")));
            wanted.push((Link::BrokerToEtcd(i), format!("etcd:{ETCD_PORT}")));
            for &j in nodes.iter().filter(|&&j| j != i) {
                wanted.push((
                    Link::BrokerToBroker { from: i, to: j },
                    format!("{j}:{BROKER_PORT}"),
                ));
            }
        }
        let api_port = free_port()?;
        let mut publish = vec![(PROXY_API_PORT, api_port)];
        let mut proxies = Vec::new();
        for (index, (link, upstream)) in wanted.into_iter().enumerate() {
            let port = LINK_PORT_BASE + index as u16;
            let address = match link {
                Link::ClientToBroker(_) => {
                    let host = free_port()?;
                    publish.push((port, host));
                    format!("127.0.0.1:{host}")
                }
                _ => format!("proxy:{port}"),
            };
            self.links.insert(link, address);
            self.link_ports.insert(link, port);
            proxies.push(NewProxy::new(
                link.proxy_name(),
                format!("0.0.0.0:{port}"),
                upstream,
            ));
        }
        let container = self
            .create(Spec {
                name: format!("epochal-{}-proxy", self.run_id),
                alias: "proxy",
                image,
                cmd: vec!["--listen".into(), format!("0.0.0.0:{PROXY_API_PORT}")],
                env: Vec::new(),
                binds: Vec::new(),
                publish,
                log: self.config.run_dir.join("proxy.log"),
                user: None,
            })
            .await?;
        let pid = self.start_container(&container).await?;
        self.proxies = ToxiproxyClient::new(format!("127.0.0.1:{api_port}"));
        // Docker accepts on a published port before the process inside listens,
        // so only an answer from the API says it is up.
        self.await_serving(&container, pid, "the proxy API", || async {
            self.proxies.version().await.is_ok()
        })
        .await?;
        self.proxies.populate(&proxies).await?;
        Ok(())
    }

    async fn create_brokers(&mut self, image: &str) -> Result<(), RuntimeError> {
        let io = |what: &str| {
            let what = what.to_owned();
            move |source| RuntimeError::Io { what, source }
        };
        // Brokers write as the owner of the run's store, so whoever ran the
        // harness owns (and can remove) what they wrote through the bind mount.
        let owner = {
            use std::os::unix::fs::MetadataExt;
            let meta =
                std::fs::metadata(&self.config.run_dir).map_err(io("reading the run dir"))?;
            format!("{}:{}", meta.uid(), meta.gid())
        };
        let nodes: Vec<NodeId> = NodeId::all(self.config.brokers).collect();
        for &i in &nodes {
            let dir = self.config.run_dir.join(i.to_string());
            let data_dir = dir.join("data");
            std::fs::create_dir_all(&data_dir).map_err(io("creating a data dir"))?;
            let settings = self.config.node_settings.get(&i);
            let lease_ttl_s = settings
                .and_then(|s| s.get("lease_ttl_s"))
                .and_then(toml::Value::as_integer)
                .map_or(self.config.lease_ttl_s.to_string(), |l| l.to_string());
            let mut cmd = vec![
                "--node-id".to_string(),
                i.id().to_string(),
                "--listen".into(),
                format!("0.0.0.0:{BROKER_PORT}"),
                "--advertised".into(),
                self.links[&Link::ClientToBroker(i)].clone(),
                "--data-dir".into(),
                "/data".into(),
                "--etcd".into(),
                format!("http://{}", self.links[&Link::BrokerToEtcd(i)]),
                "--lease-ttl-s".into(),
                lease_ttl_s,
            ];
            let mut binds = vec![format!("{}:/data", absolute(&data_dir)?.display())];
            if let Some(settings) = settings.filter(|s| !s.is_empty()) {
                let file = dir.join("broker.toml");
                let text = toml::to_string(settings).expect("settings are TOML values");
                std::fs::write(&file, text).map_err(io("writing a broker config file"))?;
                binds.push(format!("{}:/broker.toml:ro", absolute(&file)?.display()));
                cmd.push("--config".into());
                cmd.push("/broker.toml".into());
            }
            for &j in nodes.iter().filter(|&&j| j != i) {
                cmd.push("--peer".into());
                cmd.push(format!(
                    "{}={}",
                    j.id(),
                    self.links[&Link::BrokerToBroker { from: i, to: j }]
                ));
            }
            // A controller's requests to itself go to its advertised address in
            // the process runtime, i.e. through its own `client-b<i>` proxy; that
            // address is the host's loopback here, so name the same listener as
            // the container network sees it.
            cmd.push("--peer".into());
            cmd.push(format!(
                "{}=proxy:{}",
                i.id(),
                self.link_ports[&Link::ClientToBroker(i)]
            ));
            cmd.extend(self.config.broker_args.iter().cloned());
            let mut env: Vec<String> = self
                .config
                .node_env
                .get(&i)
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            env.push(format!("{STOP_REQUEST_ENV}=/data/{STOP_REQUEST_FILE}"));
            let observe_port = free_port()?;
            let container = self
                .create(Spec {
                    name: format!("epochal-{}-{i}", self.run_id),
                    alias: &i.to_string(),
                    image,
                    cmd,
                    env,
                    binds,
                    publish: vec![(BROKER_PORT, observe_port)],
                    log: dir.join("broker.log"),
                    user: Some(owner.clone()),
                })
                .await?;
            self.brokers.insert(
                i,
                Broker {
                    container,
                    data_dir,
                    observe: format!("127.0.0.1:{observe_port}"),
                    pid: None,
                    started_at: None,
                },
            );
        }
        Ok(())
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

    fn running_pid(&self, node: NodeId) -> Result<i32, RuntimeError> {
        self.broker(node)?.pid.ok_or(RuntimeError::NotRunning(node))
    }

    /// Sends `signal` to a broker's PID 1 through the Engine API. A container
    /// that already stopped by itself (409) is not an error for SIGKILL/SIGTERM.
    async fn signal(&self, node: NodeId, signal: &str) -> Result<(), RuntimeError> {
        let broker = self.broker(node)?;
        let options = KillContainerOptions {
            signal: signal.into(),
        };
        match self
            .docker
            .kill_container(&broker.container.id, Some(options))
            .await
        {
            Ok(()) => Ok(()),
            Err(DockerError::DockerResponseServerError {
                status_code: 409, ..
            }) if matches!(signal, "SIGKILL" | "SIGTERM") => Ok(()),
            Err(e) => Err(docker_error(
                format!(
                    "{signal} to broker {node} (container {})",
                    broker.container.name
                ),
                e,
            )),
        }
    }

    /// Awaits Docker reporting the container stopped, up to `timeout`.
    async fn await_stopped(&self, node: NodeId, timeout: Duration) -> Result<bool, RuntimeError> {
        let broker = self.broker(node)?;
        let deadline = Instant::now() + timeout;
        loop {
            let inspected = self
                .docker
                .inspect_container(&broker.container.id, None)
                .await
                .map_err(|e| {
                    docker_error(format!("inspecting container {}", broker.container.name), e)
                })?;
            if !inspected.state.and_then(|s| s.running).unwrap_or(false) {
                return Ok(true);
            }
            if Instant::now() > deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    fn forget(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        self.broker_mut(node)?.pid = None;
        self.watcher.set(node, None);
        Ok(())
    }
}

fn absolute(path: &std::path::Path) -> Result<PathBuf, RuntimeError> {
    std::path::absolute(path).map_err(|source| RuntimeError::Io {
        what: format!("resolving {}", path.display()),
        source,
    })
}

impl Runtime for DockerRuntime {
    fn nodes(&self) -> Vec<NodeId> {
        self.brokers.keys().copied().collect()
    }

    async fn await_ready(&self, timeout: Duration) -> Result<ClusterView, RuntimeError> {
        let all: BTreeSet<NodeId> = self.brokers.keys().copied().collect();
        super::await_cluster_ready(&self.etcd_endpoint, &all, timeout).await
    }

    async fn start_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let broker = self.broker(node)?;
        if broker.pid.is_some() {
            return Err(RuntimeError::AlreadyRunning(node));
        }
        // A previous incarnation's `listening` would read as up at once, and
        // its unanswered stop request would stop the new one.
        let _ = std::fs::remove_file(broker.data_dir.join(STOP_REQUEST_FILE));
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
        let started_at = SystemTime::now();
        let pid = self.start_container(&broker.container).await?;
        let broker = self.broker_mut(node)?;
        broker.started_at = Some(started_at);
        broker.pid = Some(pid);
        let request = broker.data_dir.join(STOP_REQUEST_FILE);
        self.watcher.set(node, Some((request, pid)));
        let broker = self.broker(node)?;
        let what = format!("broker {node} listening");
        let serving = self
            .await_serving(&broker.container, pid, &what, || {
                let up = std::fs::read_to_string(&listening).is_ok_and(|a| !a.trim().is_empty());
                std::future::ready(up)
            })
            .await;
        if let Err(RuntimeError::ContainerExited { .. }) = serving {
            self.forget(node)?;
        }
        serving
    }

    async fn stop_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.config.start_timeout;
        let pid = self.running_pid(node)?;
        self.signal(node, "SIGTERM").await?;
        // A stopped process acts on SIGTERM only once continued.
        if signal::is_stopped(pid)? {
            self.signal(node, "SIGCONT").await?;
        }
        if !self.await_stopped(node, timeout).await? {
            self.signal(node, "SIGKILL").await?;
            self.await_stopped(node, timeout).await?;
            self.forget(node)?;
            return Err(RuntimeError::Timeout {
                what: format!(
                    "broker {node} exiting on SIGTERM (container {}; it was SIGKILLed)",
                    self.broker(node)?.container.name
                ),
                timeout,
                detail: None,
            });
        }
        self.forget(node)
    }

    async fn kill_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.config.start_timeout;
        self.running_pid(node)?;
        self.signal(node, "SIGKILL").await?;
        if !self.await_stopped(node, timeout).await? {
            return Err(RuntimeError::Timeout {
                what: format!(
                    "broker {node} gone after SIGKILL (container {})",
                    self.broker(node)?.container.name
                ),
                timeout,
                detail: None,
            });
        }
        self.forget(node)
    }

    async fn pause_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.config.start_timeout;
        let pid = self.running_pid(node)?;
        self.signal(node, "SIGSTOP").await?;
        let deadline = Instant::now() + timeout;
        while !signal::is_stopped(pid)? {
            if Instant::now() > deadline {
                return Err(RuntimeError::Timeout {
                    what: format!(
                        "broker {node} stopped (state T; container {})",
                        self.broker(node)?.container.name
                    ),
                    timeout,
                    detail: None,
                });
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
        Ok(())
    }

    async fn resume_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        self.running_pid(node)?;
        self.signal(node, "SIGCONT").await
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

    fn started_at(&self, node: NodeId) -> Option<SystemTime> {
        self.brokers.get(&node)?.started_at
    }

    fn observe_address(&self, node: NodeId) -> Option<String> {
        self.brokers
            .get(&node)
            .filter(|b| b.pid.is_some())
            .map(|b| b.observe.clone())
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

    async fn shutdown(mut self) -> Result<(), RuntimeError> {
        self.watcher.stop();
        let removed = api::remove_labelled(&self.docker, LABEL_RUN, &self.run_id, true).await;
        // Nothing left for Drop to do.
        self.run_id.clear();
        removed.map(|_| ())
    }
}

impl Drop for DockerRuntime {
    /// Removes every container (saving its output) and the network of the run,
    /// on every exit path: a finished run, an error, a panic.
    fn drop(&mut self) {
        self.watcher.stop();
        if self.run_id.is_empty() {
            return;
        }
        if let Err(e) = api::remove_labelled_blocking(LABEL_RUN, &self.run_id) {
            eprintln!(
                "epochal: removing the containers of run {}: {e}",
                self.run_id
            );
        }
    }
}
