//! The Docker runtime realises a [`ClusterPlan`] as containers: etcd, one
//! `epochal-proxy` and N `epochal-broker`s, each in a container of its own on a
//! user-defined network made for the run, so every node is its own host with
//! its own address, as in a CI cluster.
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
//! - Each broker's data dir is bind-mounted from the run's store (where the
//!   plan puts it, and its settings file read-only), so the reader and the
//!   checkers see its files; its output is saved to its log file when its
//!   container is removed (Docker keeps it across restarts).
//! - The broker is PID 1 (exec-form entrypoint, no init). Faults are signals
//!   through the Engine API's kill endpoint: SIGSTOP/SIGCONT (not `docker
//!   pause`, whose cgroup freezer a process cannot see; a SIGSTOP is what the
//!   process runtime sends too), SIGKILL, and SIGTERM awaited. Paused is state
//!   T of that PID 1 in `/proc` on the host.
//! - Every container and network carries the run's labels (api.rs); dropping the
//!   runtime removes them all, and Ctrl-C does too (reaper.rs).

pub mod api;
mod container;
mod gc;
pub mod image;
mod postgres;
mod watcher;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use epochal_faults::proxy::NewProxy;
use epochal_faults::signal;
use epochal_faults::toxiproxy_client::ToxiproxyClient;
use testcontainers::bollard::Docker;
use testcontainers::bollard::errors::Error as DockerError;
use testcontainers::bollard::models::NetworkCreateRequest;
use testcontainers::bollard::query_parameters::KillContainerOptions;

use super::{
    ClusterConfig, ClusterPlan, DatabaseState, EtcdAddresses, Link, NodeId, POLL, Paused, Realised,
    Runtime, RuntimeError, Upstream, await_paused, reaper,
};
use crate::kafka_client::KafkaClient;
use crate::runtime::etcd_probe::etcd_healthy;
use crate::system::{PortMode, ServiceKind};
use api::{LABEL_RUN, docker_error};
use container::{Container, Containers, Spec, free_port};
pub use gc::{GcReport, gc};
use watcher::StopWatcher;

/// Ports inside the containers (each container has its own address, so they
/// can be fixed there; the host side is always picked free).
const BROKER_PORT: u16 = 9092;
const ETCD_PORT: u16 = 2379;
const PROXY_API_PORT: u16 = 8474;
/// How long one readiness probe of a broker started on an assigned port may
/// take (probes repeat until the start timeout).
const READY_PROBE: Duration = Duration::from_secs(1);
/// The proxy container's link listeners: this plus the link's index in the plan.
const LINK_PORT_BASE: u16 = 20000;
/// The broker's `stop` failpoint as PID 1 asks for its SIGSTOP through this
/// file in its data dir (broker/src/failpoints.rs); [`StopWatcher`] answers.
const STOP_REQUEST_ENV: &str = "EPOCHAL_STOP_REQUEST";
const STOP_REQUEST_FILE: &str = "stop-request";

/// A broker's container state; everything else about it is in the plan.
struct Broker {
    container: Container,
    /// 127.0.0.1:port published for the broker's own listener.
    observe: String,
    /// The host pid of the container's PID 1 while it runs.
    pid: Option<i32>,
    started_at: Option<SystemTime>,
}

pub struct DockerRuntime {
    /// Each link's listener as its dialler sees it: `127.0.0.1:<host port>` for
    /// clients, `proxy:<port>` inside the network for the rest.
    cluster: Realised,
    docker: Docker,
    run_id: String,
    /// Each link's listener port inside the proxy container.
    link_ports: BTreeMap<Link, u16>,
    brokers: BTreeMap<NodeId, Broker>,
    watcher: StopWatcher,
    /// The system's PostgreSQL, when it has one.
    database: Option<postgres::Database>,
}

impl DockerRuntime {
    /// Builds (or reuses) the images, makes the run's network, starts etcd, the
    /// proxy and its links, then every broker; returns once each broker serves
    /// (await [`crate::observe::await_ready`] next). A failure part way
    /// removes everything made so far.
    pub async fn start(config: ClusterConfig) -> Result<Self, RuntimeError> {
        let found = config.preflight()?;
        let plan = ClusterPlan::new(config);
        let docker = api::connect()?;
        std::fs::create_dir_all(&plan.config.run_dir)
            .map_err(RuntimeError::io("creating the run dir"))?;
        let specs = image::specs(&plan.config, found.program, found.etcd);
        let broker_image = image::ensure(&docker, &specs.broker).await?;
        let proxy_image = image::ensure(&docker, &specs.proxy).await?;
        let etcd_image = match &specs.etcd {
            Some(spec) => Some(image::ensure(&docker, spec).await?),
            None => None,
        };
        let run_id = api::new_run_id();
        // Beside the nodes' files, so a person (or a test) can find the run's
        // containers: `docker ps -a --filter label=epochal.run=<id>`.
        std::fs::write(plan.layout().docker_run_id(), &run_id)
            .map_err(RuntimeError::io("writing the docker run id"))?;
        // Ctrl-C from here on removes this session's containers and networks.
        reaper::install();
        reaper::arm_docker(api::session_id());
        let mut runtime = DockerRuntime {
            cluster: Realised {
                plan,
                etcd_endpoint: String::new(),
                proxies: ToxiproxyClient::new("127.0.0.1:9"),
                links: BTreeMap::new(),
            },
            docker,
            link_ports: BTreeMap::new(),
            brokers: BTreeMap::new(),
            watcher: StopWatcher::new(),
            database: None,
            run_id,
        };
        // From here the runtime exists, so its Drop removes what was made.
        runtime.create_network().await?;
        if let Some(image) = &etcd_image {
            runtime.start_etcd(image).await?;
        }
        if runtime
            .cluster
            .plan
            .config
            .system
            .services()
            .any(|s| s == ServiceKind::Postgres)
        {
            let owner = runtime.store_owner()?;
            let containers = runtime.containers();
            let database = postgres::start(&containers, &runtime.cluster.plan, owner).await?;
            runtime.database = Some(database);
        }
        runtime.start_proxy(&proxy_image).await?;
        runtime.create_brokers(&broker_image).await?;
        if !runtime.cluster.plan.config.node_env.is_empty() {
            runtime.watcher.spawn();
        }
        for node in runtime.nodes() {
            runtime.start_node(node).await?;
        }
        Ok(runtime)
    }

    fn network(&self) -> String {
        container::network(&self.run_id)
    }

    /// The runtime's side of making, starting and awaiting containers.
    fn containers(&self) -> Containers<'_> {
        containers_of(&self.docker, &self.run_id, &self.cluster)
    }

    /// [`Self::containers`] beside the database, which a database fault
    /// changes while it makes and awaits the database's container.
    fn containers_and_database(
        &mut self,
    ) -> Result<(Containers<'_>, &mut postgres::Database), RuntimeError> {
        let containers = containers_of(&self.docker, &self.run_id, &self.cluster);
        let database = self.database.as_mut().ok_or(RuntimeError::NoDatabase)?;
        Ok((containers, database))
    }

    /// This run's id, the value of its containers' and network's `epochal.run` label.
    pub fn run_id(&self) -> &str {
        &self.run_id
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

    async fn start_etcd(&mut self, image: &str) -> Result<(), RuntimeError> {
        let host_port = free_port()?;
        let at = EtcdAddresses {
            data_dir: "/etcd-data".into(),
            listen_client: format!("http://0.0.0.0:{ETCD_PORT}"),
            advertise_client: format!("http://etcd:{ETCD_PORT}"),
            peer: "http://127.0.0.1:2380".into(),
        };
        let container = self
            .containers()
            .create(Spec {
                name: format!("epochal-{}-etcd", self.run_id),
                alias: "etcd",
                image,
                cmd: at.argv(),
                env: Vec::new(),
                binds: Vec::new(),
                publish: vec![(ETCD_PORT, host_port)],
                log: self.cluster.plan.layout().etcd_log(),
                user: None,
                // etcd's data in memory, as on the process runtime
                // (runtime/orphans.rs, `etcd_memory_dir`, says why).
                tmpfs: vec!["/etcd-data"],
                working_dir: None,
            })
            .await?;
        let pid = self.containers().start_container(&container).await?;
        let endpoint = format!("http://127.0.0.1:{host_port}");
        self.containers()
            .await_serving(&container, pid, "etcd healthy", || etcd_healthy(&endpoint))
            .await?;
        self.cluster.etcd_endpoint = endpoint;
        Ok(())
    }

    async fn start_proxy(&mut self, image: &str) -> Result<(), RuntimeError> {
        let api_port = free_port()?;
        let mut publish = vec![(PROXY_API_PORT, api_port)];
        let mut proxies = Vec::new();
        for (index, &link) in self.cluster.plan.links().iter().enumerate() {
            let port = LINK_PORT_BASE + index as u16;
            let address = match link {
                Link::ClientToBroker(_) => {
                    let host = free_port()?;
                    publish.push((port, host));
                    format!("127.0.0.1:{host}")
                }
                _ => format!("proxy:{port}"),
            };
            let upstream = match link.upstream() {
                Upstream::Broker(to) => format!("{to}:{BROKER_PORT}"),
                Upstream::Service(ServiceKind::Etcd) => format!("etcd:{ETCD_PORT}"),
                Upstream::Service(ServiceKind::Postgres) => {
                    format!(
                        "{}:{}",
                        ServiceKind::Postgres.name(),
                        postgres::POSTGRES_PORT
                    )
                }
            };
            self.cluster.links.insert(link, address);
            self.link_ports.insert(link, port);
            proxies.push(NewProxy::new(
                link.proxy_name(),
                format!("0.0.0.0:{port}"),
                upstream,
            ));
        }
        // The followers' fetches it forwards are evidence (checker::isr_acks):
        // recorded into the run directory through a bind mount, as the
        // store's owner, like the brokers' data.
        let frames = self.cluster.plan.layout().proxy_frames();
        std::fs::create_dir_all(&frames)
            .map_err(RuntimeError::io("making the proxy's recording dir"))?;
        let container = self
            .containers()
            .create(Spec {
                name: format!("epochal-{}-proxy", self.run_id),
                alias: "proxy",
                image,
                cmd: vec![
                    "--listen".into(),
                    format!("0.0.0.0:{PROXY_API_PORT}"),
                    "--record".into(),
                    "/frames".into(),
                ],
                env: Vec::new(),
                binds: vec![format!("{}:/frames", absolute(&frames)?.display())],
                publish,
                log: self.cluster.plan.layout().proxy_log(),
                user: Some(self.store_owner()?),
                tmpfs: Vec::new(),
                working_dir: None,
            })
            .await?;
        let pid = self.containers().start_container(&container).await?;
        self.cluster.proxies = ToxiproxyClient::new(format!("127.0.0.1:{api_port}"));
        // Docker accepts on a published port before the process inside listens,
        // so only an answer from the API says it is up.
        self.containers()
            .await_serving(&container, pid, "the proxy API", || async {
                self.cluster.proxies.version().await.is_ok()
            })
            .await?;
        self.cluster.proxies.populate(&proxies).await?;
        Ok(())
    }

    /// `uid:gid` of the run directory's owner: containers that write into
    /// it through a bind mount run as them, so whoever ran the harness owns
    /// (and can remove) what they wrote.
    fn store_owner(&self) -> Result<String, RuntimeError> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&self.cluster.plan.config.run_dir)
            .map_err(RuntimeError::io("reading the run dir"))?;
        Ok(format!("{}:{}", meta.uid(), meta.gid()))
    }

    async fn create_brokers(&mut self, image: &str) -> Result<(), RuntimeError> {
        let owner = self.store_owner()?;
        for broker in self.cluster.plan.brokers() {
            let i = broker.node;
            let config = broker.prepare()?;
            let mut binds = vec![format!("{}:/data", absolute(&broker.data_dir)?.display())];
            if let Some(file) = &config {
                binds.push(format!("{}:/broker.toml:ro", absolute(file)?.display()));
            }
            if self.cluster.plan.config.system.uses("shared_dir") {
                let shared = self.cluster.plan.layout().shared_dir();
                std::fs::create_dir_all(&shared)
                    .map_err(RuntimeError::io("creating the shared dir"))?;
                binds.push(format!("{}:/shared", absolute(&shared)?.display()));
            }
            let mut at = broker.addresses(
                &self.cluster.links,
                format!("0.0.0.0:{BROKER_PORT}"),
                ("/data".into(), "/shared".into()),
                config.map(|_| "/broker.toml".into()),
            );
            // A controller's requests to itself go to its advertised address in
            // the process runtime, i.e. through its own `client-b<i>` proxy; that
            // address is the host's loopback here, so name the same listener as
            // the container network sees it.
            let own_client_port = self.link_ports[&Link::ClientToBroker(i)];
            at.peers.push((i, format!("proxy:{own_client_port}")));
            let mut env: Vec<String> = broker
                .environment(&at)
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            env.push(format!("{STOP_REQUEST_ENV}=/data/{STOP_REQUEST_FILE}"));
            let observe_port = free_port()?;
            let container = self
                .containers()
                .create(Spec {
                    name: format!("epochal-{}-{i}", self.run_id),
                    alias: &i.to_string(),
                    image,
                    cmd: broker.argv(&at),
                    env,
                    binds,
                    publish: vec![(BROKER_PORT, observe_port)],
                    log: broker.log.clone(),
                    user: Some(owner.clone()),
                    tmpfs: Vec::new(),
                    working_dir: broker.working_dir(&at),
                })
                .await?;
            self.brokers.insert(
                i,
                Broker {
                    container,
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

    /// Sends `signal` to a broker's PID 1 through the Engine API: true when it
    /// was delivered, false when the container had already exited (409), which
    /// each caller judges: nothing to do for a stop or a kill, a broker that
    /// died on its own for a pause or a resume.
    async fn signal(&self, node: NodeId, signal: &str) -> Result<bool, RuntimeError> {
        let broker = self.broker(node)?;
        let options = KillContainerOptions {
            signal: signal.into(),
        };
        match self
            .docker
            .kill_container(&broker.container.id, Some(options))
            .await
        {
            Ok(()) => Ok(true),
            Err(DockerError::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(false),
            Err(e) => Err(docker_error(
                format!(
                    "{signal} to broker {node} (container {})",
                    broker.container.name
                ),
                e,
            )),
        }
    }

    /// A signal that must find the broker alive (SIGSTOP, SIGCONT): a container
    /// that has exited is reported as the exit it was, with its code and output.
    async fn signal_live(&mut self, node: NodeId, signal: &str) -> Result<(), RuntimeError> {
        if self.signal(node, signal).await? {
            return Ok(());
        }
        Err(self.died(node).await?)
    }

    /// The error for a broker found dead that nobody stopped, once the runtime
    /// has forgotten it (as a start that ends early does).
    async fn died(&mut self, node: NodeId) -> Result<RuntimeError, RuntimeError> {
        let exited = self
            .containers()
            .exited(&self.broker(node)?.container)
            .await;
        self.forget(node)?;
        Ok(exited)
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
            tokio::time::sleep(POLL).await;
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
    fn realised(&self) -> &Realised {
        &self.cluster
    }

    fn pid(&self, node: NodeId) -> Option<i32> {
        self.brokers.get(&node)?.pid
    }

    async fn start_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let plan = self.cluster.plan.broker(node)?;
        let broker = self.broker(node)?;
        if broker.pid.is_some() {
            return Err(RuntimeError::AlreadyRunning(node));
        }
        // A previous incarnation's `listening` would read as up at once, and
        // its unanswered stop request would stop the new one.
        let request = plan.data_dir.join(STOP_REQUEST_FILE);
        let _ = std::fs::remove_file(&request);
        plan.clear_listening()?;
        let started_at = SystemTime::now();
        let pid = self.containers().start_container(&broker.container).await?;
        let broker = self
            .brokers
            .get_mut(&node)
            .ok_or(RuntimeError::UnknownNode(node))?;
        broker.started_at = Some(started_at);
        broker.pid = Some(pid);
        self.watcher.set(node, Some((request, pid)));
        let what = format!("broker {node} listening");
        let broker = self.broker(node)?;
        let port_mode = self.cluster.plan.config.system.node.port;
        let observe = broker.observe.clone();
        let serving = self
            .containers()
            .await_serving(&broker.container, pid, &what, || {
                let observe = observe.clone();
                async move {
                    match port_mode {
                        PortMode::Reported => plan.listening().is_some(),
                        // Docker accepts on a published port before the
                        // process inside listens, so only a Kafka answer
                        // (ApiVersions) says the broker serves.
                        PortMode::Assigned => {
                            KafkaClient::connect(&observe, "epochal-ready", READY_PROBE)
                                .await
                                .is_ok()
                        }
                    }
                }
            })
            .await;
        if let Err(RuntimeError::ContainerExited { .. }) = serving {
            self.forget(node)?;
        }
        serving
    }

    async fn stop_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let timeout = self.cluster.plan.config.start_timeout;
        let pid = self.running_pid(node)?;
        // Asked before the signal, never after: a broker that exits at once on
        // SIGTERM is gone (and its pid reaped by the shim, perhaps reused)
        // by the time a later read of /proc would look (issue [stop-race]).
        let paused = signal::is_stopped(pid)?;
        self.signal(node, "SIGTERM").await?;
        // A stopped process acts on SIGTERM only once continued; it cannot
        // have exited in between unless something else continued it, and then
        // the SIGCONT finds nothing to do (false), which is fine.
        if paused {
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
        let timeout = self.cluster.plan.config.start_timeout;
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

    /// Every SIGKILL goes out before any is awaited: one Engine API call
    /// takes long enough under load (seconds) that killing one container
    /// after another let a lease lapse and the survivors elect a new leader
    /// mid-freeze.
    async fn freeze(&mut self) -> Result<(), RuntimeError> {
        let timeout = self.cluster.plan.config.start_timeout;
        let running: Vec<NodeId> = self
            .nodes()
            .into_iter()
            .filter(|&n| self.is_running(n))
            .collect();
        let this = &*self;
        let killed = futures_util::future::join_all(running.iter().map(|&node| async move {
            this.signal(node, "SIGKILL").await?;
            if this.await_stopped(node, timeout).await? {
                Ok(node)
            } else {
                Err(RuntimeError::Timeout {
                    what: format!(
                        "broker {node} gone after SIGKILL (container {})",
                        this.broker(node)?.container.name
                    ),
                    timeout,
                    detail: None,
                })
            }
        }))
        .await;
        let mut first_error = None;
        for outcome in killed {
            match outcome {
                Ok(node) => self.forget(node)?,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn pause_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        let pid = self.running_pid(node)?;
        self.signal_live(node, "SIGSTOP").await?;
        let what = format!(
            "broker {node} stopped (state T; container {})",
            self.broker(node)?.container.name
        );
        match await_paused(pid, self.cluster.plan.config.start_timeout, what).await? {
            Paused::Stopped => Ok(()),
            Paused::Ended => Err(self.died(node).await?),
        }
    }

    async fn resume_node(&mut self, node: NodeId) -> Result<(), RuntimeError> {
        self.running_pid(node)?;
        self.signal_live(node, "SIGCONT").await
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

    fn database(&self) -> Result<Option<DatabaseState>, RuntimeError> {
        self.database
            .as_ref()
            .map(postgres::Database::state)
            .transpose()
    }

    fn database_address(&self) -> Option<String> {
        self.database.as_ref().map(postgres::Database::address)
    }

    async fn pause_database(&mut self) -> Result<(), RuntimeError> {
        self.database
            .as_ref()
            .ok_or(RuntimeError::NoDatabase)?
            .pause()
            .await
    }

    async fn resume_database(&mut self) -> Result<(), RuntimeError> {
        self.database
            .as_ref()
            .ok_or(RuntimeError::NoDatabase)?
            .resume()
    }

    async fn kill_database(&mut self) -> Result<(), RuntimeError> {
        let (containers, database) = self.containers_and_database()?;
        database.kill(&containers).await
    }

    async fn start_database(&mut self) -> Result<(), RuntimeError> {
        let (containers, database) = self.containers_and_database()?;
        database.start(&containers).await
    }

    async fn shutdown(mut self) -> Result<(), RuntimeError> {
        self.watcher.stop();
        let removed = api::remove_labelled(&self.docker, LABEL_RUN, &self.run_id, true).await;
        // Nothing left for Drop to do.
        self.run_id.clear();
        removed.map(|_| ())
    }
}

/// The run's side of making, starting and awaiting containers, from the
/// runtime's parts (so a caller may hold another part mutably beside it).
fn containers_of<'a>(docker: &'a Docker, run_id: &'a str, cluster: &Realised) -> Containers<'a> {
    Containers {
        docker,
        run_id,
        start_timeout: cluster.plan.config.start_timeout,
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
