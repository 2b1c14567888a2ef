//! The cluster plan: what a cluster is, decided once from its configuration
//! before anything starts — the brokers, every directed link with what its
//! proxy forwards to, and per broker its settings, environment, files and
//! command line. The process and Docker runtimes only realise a plan: they pick
//! addresses (loopback ports, or names on a container network) and start
//! processes, but never decide which links exist or which flags a broker gets,
//! so the two cannot drift apart.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::RuntimeError;
use crate::node::NodeId;
use crate::run_dir::{NodeLayout, RunDir};
use crate::system::{NodeSpec, ServiceKind, SettingsMode, System, find_executable};

/// What to start, for either runtime. Paths are resolved before anything runs
/// ([`ClusterConfig::preflight`]); node files go where [`NodeLayout`] says,
/// under `run_dir`.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The system under test: how its brokers start and what they need.
    pub system: System,
    pub brokers: u32,
    /// Holds `epochal-broker` and `epochal-proxy` (a cargo target dir's `debug/`).
    pub bin_dir: PathBuf,
    /// The etcd binary: a path, or a name looked up on `PATH`.
    pub etcd: PathBuf,
    /// The nodes' directory of a run: every node's data and logs go under here.
    pub run_dir: PathBuf,
    pub lease_ttl_s: u32,
    /// Extra flags for every broker (e.g. `--flush-messages 1`).
    pub broker_args: Vec<String>,
    /// Per node: broker settings (the config file's snake_case keys), written
    /// to the node's `broker.toml` and passed with `--config`. A node's
    /// `lease_ttl_s` there replaces [`ClusterConfig::lease_ttl_s`].
    pub node_settings: BTreeMap<NodeId, BTreeMap<String, toml::Value>>,
    /// Per node: extra environment (e.g. `EPOCHAL_FAILPOINTS`).
    pub node_env: BTreeMap<NodeId, Vec<(String, String)>>,
    /// Bound on each start-up wait (etcd healthy, the proxy up, a broker
    /// listening) and on each stop or pause taking effect.
    pub start_timeout: Duration,
}

impl ClusterConfig {
    pub fn new(brokers: u32, bin_dir: impl Into<PathBuf>, run_dir: impl Into<PathBuf>) -> Self {
        ClusterConfig {
            system: System::reference(),
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

    /// The reference broker's binary in `bin_dir` (the Docker gc's image
    /// tags are of it, whatever system a run tests).
    pub fn broker_bin(&self) -> PathBuf {
        self.bin_dir.join("epochal-broker")
    }

    pub fn proxy_bin(&self) -> PathBuf {
        self.bin_dir.join("epochal-proxy")
    }

    /// Resolves the system's program and each service's binaries. Names
    /// everything missing at once, so one run of the check says all a user has
    /// to install or build.
    pub fn preflight(&self) -> Result<Preflight, RuntimeError> {
        let mut missing = Vec::new();
        let program = self
            .system
            .node
            .program
            .resolve(&self.bin_dir)
            .map_err(|what| missing.push(what.to_string()))
            .ok();
        let mut etcd = None;
        if self.system.services().any(|s| s == ServiceKind::Etcd) {
            etcd = find_executable(&self.etcd);
            if etcd.is_none() {
                missing.push(format!(
                    "etcd binary {:?} (not found; Debian: apt-get install etcd-server)",
                    self.etcd
                ));
            }
        }
        let proxy = self.proxy_bin();
        if !proxy.is_file() {
            missing.push(format!(
                "{} (build the workspace: cargo build --workspace --bins)",
                proxy.display()
            ));
        }
        if self.brokers == 0 {
            missing.push("brokers: at least one".into());
        }
        if let Some(most) = self.system.node.max_brokers
            && self.brokers > most
        {
            missing.push(format!(
                "brokers: {} runs at most {most} (its system file's max_brokers), not {}",
                self.system.name, self.brokers
            ));
        }
        if self.system.node.settings == SettingsMode::None
            && let Some((node, _)) = self.node_settings.iter().find(|(_, s)| !s.is_empty())
        {
            missing.push(format!(
                "{node}: {} takes no broker settings (its system file says settings = \"none\")",
                self.system.name
            ));
        }
        match program {
            Some(program) if missing.is_empty() => Ok(Preflight { program, etcd }),
            _ => Err(RuntimeError::Missing(missing)),
        }
    }
}

/// What a preflight found: the broker program and the services' binaries.
#[derive(Clone, Debug)]
pub struct Preflight {
    pub program: PathBuf,
    /// `None` when the system needs no etcd.
    pub etcd: Option<PathBuf>,
}

/// A directed link of the cluster; each has its own proxy, named by
/// [`Link::proxy_name`], so a fault can cut one direction of one link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Link {
    /// Workload clients to a broker (the broker's advertised address).
    ClientToBroker(NodeId),
    /// Broker `from` dialling broker `to` (replica fetches, controller requests).
    BrokerToBroker { from: NodeId, to: NodeId },
    /// A broker's connections to a service (etcd, PostgreSQL).
    BrokerToService(NodeId, ServiceKind),
}

impl Link {
    pub fn proxy_name(self) -> String {
        match self {
            Link::ClientToBroker(to) => format!("client-{to}"),
            Link::BrokerToBroker { from, to } => format!("{from}-{to}"),
            Link::BrokerToService(from, service) => format!("{from}-{service}"),
        }
    }

    /// What the link's proxy forwards to.
    pub fn upstream(self) -> Upstream {
        match self {
            Link::ClientToBroker(to) | Link::BrokerToBroker { to, .. } => Upstream::Broker(to),
            Link::BrokerToService(_, service) => Upstream::Service(service),
        }
    }
}

/// The far end of a link, by role; each runtime maps it to a real address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upstream {
    Broker(NodeId),
    Service(ServiceKind),
}

/// One cluster, decided: see the module docs.
#[derive(Clone, Debug)]
pub struct ClusterPlan {
    pub config: ClusterConfig,
    layout: NodeLayout,
    links: Vec<Link>,
    brokers: BTreeMap<NodeId, BrokerPlan>,
}

impl ClusterPlan {
    pub fn new(config: ClusterConfig) -> Self {
        let layout = RunDir::node_layout(&config.run_dir);
        let nodes: Vec<NodeId> = NodeId::all(config.brokers).collect();
        // Per broker: its client link, its link to each service, then its
        // links to every other broker when brokers dial one another. The
        // Docker runtime numbers listener ports in this order.
        let system = &config.system;
        let mut links = Vec::new();
        for &i in &nodes {
            links.push(Link::ClientToBroker(i));
            links.extend(system.services().map(|s| Link::BrokerToService(i, s)));
            if system.has_peers() {
                for &j in nodes.iter().filter(|&&j| j != i) {
                    links.push(Link::BrokerToBroker { from: i, to: j });
                }
            }
        }
        let brokers = nodes
            .iter()
            .map(|&i| {
                let settings = config.node_settings.get(&i).cloned().unwrap_or_default();
                let lease_ttl_s = settings
                    .get("lease_ttl_s")
                    .and_then(toml::Value::as_integer)
                    .unwrap_or(config.lease_ttl_s.into());
                let peers = if system.has_peers() {
                    nodes.iter().copied().filter(|&j| j != i).collect()
                } else {
                    Vec::new()
                };
                let plan = BrokerPlan {
                    node: i,
                    spec: system.node.clone(),
                    peers,
                    settings,
                    lease_ttl_s,
                    env: config.node_env.get(&i).cloned().unwrap_or_default(),
                    extra_args: config.broker_args.clone(),
                    data_dir: layout.data_dir(i),
                    log: layout.broker_log(i),
                    config_file: layout.broker_config(i),
                };
                (i, plan)
            })
            .collect();
        ClusterPlan {
            config,
            layout,
            links,
            brokers,
        }
    }

    pub fn nodes(&self) -> Vec<NodeId> {
        self.brokers.keys().copied().collect()
    }

    /// Every directed link, each to get a proxy of its own.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    pub fn brokers(&self) -> impl Iterator<Item = &BrokerPlan> {
        self.brokers.values()
    }

    pub fn broker(&self, node: NodeId) -> Result<&BrokerPlan, RuntimeError> {
        self.brokers
            .get(&node)
            .ok_or(RuntimeError::UnknownNode(node))
    }

    /// Where the cluster's files go on the harness's side.
    pub fn layout(&self) -> &NodeLayout {
        &self.layout
    }
}

/// Where the cluster's single etcd member keeps its data and listens, as seen
/// from where it runs; supplied by the runtime, turned into flags by
/// [`EtcdAddresses::argv`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdAddresses {
    pub data_dir: String,
    /// The URL it listens on for clients.
    pub listen_client: String,
    /// The URL it tells clients to use.
    pub advertise_client: String,
    /// Its peer URL (listened on and advertised: the member is alone).
    pub peer: String,
}

impl EtcdAddresses {
    /// etcd's command line after the program name.
    pub fn argv(&self) -> Vec<String> {
        [
            "--name",
            "n0",
            "--data-dir",
            &self.data_dir,
            "--listen-client-urls",
            &self.listen_client,
            "--advertise-client-urls",
            &self.advertise_client,
            "--listen-peer-urls",
            &self.peer,
            "--initial-advertise-peer-urls",
            &self.peer,
            "--initial-cluster",
            &format!("n0={}", self.peer),
            // Fast elections: a lone member elects itself within a few hundred ms.
            "--heartbeat-interval",
            "50",
            "--election-timeout",
            "300",
            // Compaction off (0 = never): the checkers read etcd's whole
            // revision history of the cluster's decisions (observe/timeline.rs).
            "--auto-compaction-retention",
            "0",
        ]
        .map(str::to_owned)
        .to_vec()
    }
}

/// One broker, decided: everything about it but the addresses.
#[derive(Clone, Debug)]
pub struct BrokerPlan {
    pub node: NodeId,
    /// The system's node spec: the command-line templates.
    spec: NodeSpec,
    /// The other brokers, each dialled through a link of its own.
    pub peers: Vec<NodeId>,
    /// Its settings; written to a config file only when there are any.
    pub settings: BTreeMap<String, toml::Value>,
    pub lease_ttl_s: i64,
    pub env: Vec<(String, String)>,
    /// Flags after the planned ones (the config's `broker_args`).
    pub extra_args: Vec<String>,
    /// Its data directory on the harness's side (the reader's, too).
    pub data_dir: PathBuf,
    /// Where its output goes.
    pub log: PathBuf,
    config_file: PathBuf,
}

/// Where a broker listens and what it dials, as the broker sees them from
/// where it runs: supplied by the runtime, turned into flags by the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerAddresses {
    pub listen: String,
    /// What it tells clients to dial: its client link's proxy.
    pub advertised: String,
    pub data_dir: String,
    /// A directory every broker of the run shares (storage a system keeps
    /// in one file for all its brokers, e.g. an SQLite database).
    pub shared_dir: String,
    /// Each service as `host:port`, through the broker's link to it.
    pub services: BTreeMap<ServiceKind, String>,
    /// Each peer's id and the address that reaches it, in `--peer` order.
    pub peers: Vec<(NodeId, String)>,
    /// The settings file, when [`BrokerPlan::prepare`] wrote one.
    pub config: Option<String>,
}

impl BrokerPlan {
    /// Creates the data directory and writes the settings file if there are
    /// settings; returns that file's path on the harness's side.
    pub fn prepare(&self) -> Result<Option<PathBuf>, RuntimeError> {
        std::fs::create_dir_all(&self.data_dir).map_err(RuntimeError::io("creating a data dir"))?;
        if self.settings.is_empty() {
            return Ok(None);
        }
        let text = toml::to_string(&self.settings).expect("settings are TOML values");
        std::fs::write(&self.config_file, text)
            .map_err(RuntimeError::io("writing a broker config file"))?;
        Ok(Some(self.config_file.clone()))
    }

    /// The addresses of a broker whose every link runs through a proxy:
    /// `links` gives each link's listener as the broker reaches it; the rest
    /// is where the broker runs.
    pub fn addresses(
        &self,
        links: &BTreeMap<Link, String>,
        listen: String,
        (data_dir, shared_dir): (String, String),
        config: Option<String>,
    ) -> BrokerAddresses {
        let i = self.node;
        let peers = self
            .peers
            .iter()
            .map(|&j| (j, links[&Link::BrokerToBroker { from: i, to: j }].clone()))
            .collect();
        BrokerAddresses {
            listen,
            advertised: links[&Link::ClientToBroker(i)].clone(),
            data_dir,
            shared_dir,
            services: links
                .iter()
                .filter_map(|(link, address)| match *link {
                    Link::BrokerToService(from, service) if from == i => {
                        Some((service, address.clone()))
                    }
                    _ => None,
                })
                .collect(),
            peers,
            config,
        }
    }

    /// The broker's command line after the program name: the system's
    /// `args`, then `args_with_config` when there is a settings file, then
    /// `args_per_peer` for each peer, then the config's extra flags.
    pub fn argv(&self, at: &BrokerAddresses) -> Vec<String> {
        let spec = &self.spec;
        let mut args: Vec<String> = spec
            .args
            .iter()
            .map(|t| t.expand(|n| self.value(at, n)))
            .collect();
        if let Some(config) = &at.config {
            args.extend(spec.args_with_config.iter().map(|t| {
                t.expand(|n| match n {
                    "config" => Some(config.clone()),
                    n => self.value(at, n),
                })
            }));
        }
        for (j, address) in &at.peers {
            args.extend(spec.args_per_peer.iter().map(|t| {
                t.expand(|n| match n {
                    "peer" => Some(j.id().to_string()),
                    "peer_address" => Some(address.clone()),
                    n => self.value(at, n),
                })
            }));
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }

    /// The broker's environment: the system's `env`, then the config's.
    pub fn environment(&self, at: &BrokerAddresses) -> Vec<(String, String)> {
        let system = self
            .spec
            .env
            .iter()
            .map(|(k, t)| (k.clone(), t.expand(|n| self.value(at, n))));
        system.chain(self.env.iter().cloned()).collect()
    }

    /// The directory the broker starts in, when the system names one.
    pub fn working_dir(&self, at: &BrokerAddresses) -> Option<String> {
        let cwd = self.spec.cwd.as_ref()?;
        Some(cwd.expand(|n| self.value(at, n)))
    }

    /// A placeholder every template may use (system/mod.rs's `ARGS_NAMES`,
    /// and a service by name).
    fn value(&self, at: &BrokerAddresses, name: &str) -> Option<String> {
        Some(match name {
            "node" => self.node.id().to_string(),
            "listen" => at.listen.clone(),
            // For a program that takes its address as two flags.
            "listen_host" => at.listen.rsplit_once(':')?.0.to_owned(),
            "listen_port" => at.listen.rsplit_once(':')?.1.to_owned(),
            "advertised" => at.advertised.clone(),
            "data_dir" => at.data_dir.clone(),
            "shared_dir" => at.shared_dir.clone(),
            "lease_ttl_s" => self.lease_ttl_s.to_string(),
            service => at
                .services
                .iter()
                .find(|(kind, _)| kind.name() == service)
                .map(|(_, address)| address.clone())?,
        })
    }

    /// The file the broker writes, atomically, with the address it bound once
    /// it serves.
    pub fn listening_file(&self) -> PathBuf {
        self.data_dir.join("listening")
    }

    /// The address in the listening file, once there is one.
    pub fn listening(&self) -> Option<String> {
        let address = std::fs::read_to_string(self.listening_file()).ok()?;
        let address = address.trim();
        (!address.is_empty()).then(|| address.to_owned())
    }

    /// Removes a previous incarnation's listening file before a start: it names
    /// the old port, and the broker removes it only once it runs, so a read in
    /// between would take a dead broker for a serving one.
    pub fn clear_listening(&self) -> Result<(), RuntimeError> {
        let listening = self.listening_file();
        match std::fs::remove_file(&listening) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(RuntimeError::Io {
                what: format!("removing {}", listening.display()),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn node(n: u32) -> NodeId {
        NodeId::new(n)
    }

    #[test]
    fn every_ordered_pair_of_brokers_has_a_link_besides_clients_and_etcd() {
        let plan = ClusterPlan::new(ClusterConfig::new(3, "/bin", "/run/nodes"));
        let names: Vec<String> = plan.links().iter().map(|l| l.proxy_name()).collect();
        assert_eq!(
            names,
            [
                "client-b1",
                "b1-etcd",
                "b1-b2",
                "b1-b3",
                "client-b2",
                "b2-etcd",
                "b2-b1",
                "b2-b3",
                "client-b3",
                "b3-etcd",
                "b3-b1",
                "b3-b2"
            ]
        );
        let b2_b3 = Link::BrokerToBroker {
            from: node(2),
            to: node(3),
        };
        assert_eq!(b2_b3.upstream(), Upstream::Broker(node(3)));
        let b2_etcd = Link::BrokerToService(node(2), ServiceKind::Etcd);
        assert_eq!(b2_etcd.upstream(), Upstream::Service(ServiceKind::Etcd));
    }

    #[test]
    fn argv_has_every_flag_in_order_and_a_nodes_lease_ttl_wins() {
        let mut config = ClusterConfig::new(2, "/bin", "/run/nodes");
        config.broker_args = vec!["--flush-messages".into(), "1".into()];
        config.node_settings.insert(
            node(2),
            BTreeMap::from([("lease_ttl_s".to_owned(), toml::Value::Integer(5))]),
        );
        let plan = ClusterPlan::new(config);
        let b2 = plan.broker(node(2)).unwrap();
        assert_eq!(b2.data_dir, Path::new("/run/nodes/b2/data"));
        assert_eq!(b2.log, Path::new("/run/nodes/b2/broker.log"));
        let links: BTreeMap<Link, String> = plan
            .links()
            .iter()
            .map(|&l| (l, format!("at-{}", l.proxy_name())))
            .collect();
        let dirs = ("D".to_owned(), "S".to_owned());
        let at = b2.addresses(&links, "L".into(), dirs.clone(), Some("C".into()));
        assert_eq!(
            b2.argv(&at).join(" "),
            "--node-id 2 --listen L --advertised at-client-b2 --data-dir D \
             --etcd http://at-b2-etcd --lease-ttl-s 5 --config C \
             --peer 1=at-b2-b1 --flush-messages 1"
        );
        let b1 = plan.broker(node(1)).unwrap();
        let at = b1.addresses(&links, "L".into(), dirs, None);
        assert!(
            b1.argv(&at)
                .join(" ")
                .ends_with("--lease-ttl-s 2 --peer 2=at-b1-b2 --flush-messages 1")
        );
    }
}
