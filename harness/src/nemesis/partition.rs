//! Network partitions through the proxies.
//!
//! A partition is named by the direction bytes flow: [`blocked`] turns a
//! [`PartitionSpec`] into the directed `(from, to)` endpoint pairs whose bytes
//! are dropped, and [`cuts`] turns those into the proxy streams that realise
//! them. Every directed link has its own proxy ([`Link::proxy_name`]), and a
//! TCP connection carries bytes both ways, so "no byte from A reaches B" means
//! two streams: the requests of the connections A dialled (proxy A→B's
//! `Upstream`) and the responses of the connections B dialled (proxy B→A's
//! `Downstream`). etcd never dials, so a pair involving etcd is one stream of
//! the broker's `b<i>-etcd` proxy.
//!
//! Client links (`client-b<i>`) are cut by one fault only,
//! [`PartitionSpec::NodeFromClients`]: the workload's clients stand outside
//! the cluster, as Jepsen's control node does, so the other partitions change
//! what the brokers see of each other and of etcd, not what the clients see.
//! A system whose brokers never dial one another (tansu: stateless brokers
//! over shared storage) has no other network fault, and for any system it is
//! the cut between an application and its broker: requests that arrived but
//! whose answers never left (an idempotent producer's resends, a write the
//! client must count as indeterminate). The harness's own looks (Metadata,
//! the final read) go to each broker's own port and are never cut.
//!
//! Each cut is epochal's `partition` toxic, by default with
//! [`OnHeal::Resume`]: while cut, connections stay open and their bytes are
//! held; on heal the held bytes are delivered in order. That is what an
//! iptables `DROP` rule (Jepsen's way to partition) does to TCP: the dropped
//! segments are retransmitted and arrive once the rule goes, unless a peer
//! gave up on the connection first, which it still may here (its own timeouts
//! run while its bytes are held). A schedule may ask for [`OnHeal::Reset`]
//! instead: at heal every connection the cut held is reset, so what was in
//! flight is never delivered — a partition long enough that TCP gave up, and
//! the way to make a broker miss a control request.
//!
//! [`Partitions`] holds the cuts in force: several partition faults accumulate
//! (their union is cut); [`Partitions::heal`] removes them all and
//! [`Partitions::heal_cut`] the one a schedule named.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use epochal_faults::proxy::{OnHeal, Stream};
use epochal_faults::toxiproxy_client::{ClientError, ToxiproxyClient};
use serde::{Serialize, Serializer};

use crate::runtime::{Link, NodeId};
use crate::system::ServiceKind;

/// One end of a cluster link: a broker, etcd, the system's database or the
/// workload's clients. Serialized (for the history) as the schedules name
/// it: `"b2"`, `"etcd"`, `"postgres"`, `"clients"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    Broker(NodeId),
    Etcd,
    Clients,
    Database,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Broker(id) => write!(f, "{id}"),
            Endpoint::Etcd => f.write_str("etcd"),
            Endpoint::Clients => f.write_str("clients"),
            Endpoint::Database => write!(f, "{}", ServiceKind::Postgres),
        }
    }
}

impl Serialize for Endpoint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A partition, with its targets already resolved to node ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionSpec {
    /// No byte between the node and any other broker or etcd, either way.
    Isolate(NodeId),
    /// The minority against the rest, both ways. etcd stays on the majority's
    /// side: in a Kafka deployment the ZooKeeper (or KRaft) quorum is its own
    /// majority of machines, so a minority of brokers cut off from the rest is
    /// cut off from the quorum too, while the majority keeps it. Putting etcd
    /// with the minority would instead let the minority keep its leases and
    /// the controller, which no real deployment's majority-minority split does.
    MajorityMinority { minority: Vec<NodeId> },
    /// No byte from `from` reaches `to` on any connection between them,
    /// whichever of the two dialled it; bytes from `to` to `from` still flow.
    OneWay { from: NodeId, to: NodeId },
    /// The other brokers split into two halves (sorted by id, the first half
    /// the first ceil(k/2) of the k others); the bridge sees both halves, the
    /// halves do not see each other. Everyone still reaches etcd.
    Bridge(NodeId),
    /// The node and etcd, both ways; its broker links still flow.
    NodeFromEtcd(NodeId),
    /// The node and the workload's clients, both ways; its links to other
    /// brokers and to services still flow.
    NodeFromClients(NodeId),
    /// The node and the system's database, both ways.
    NodeFromDatabase(NodeId),
}

/// Why a partition was not applied.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error(
        "partition names {node}, which is not in the cluster ({})",
        nodes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    UnknownNode { node: NodeId, nodes: Vec<NodeId> },
    #[error("one-way partition from {0} to itself")]
    OneWayToSelf(NodeId),
    #[error("majority-minority partition with an empty minority")]
    EmptyMinority,
    #[error(
        "majority-minority partition's minority {:?} is not smaller than half of the \
         {nodes} nodes",
        NodeId::ids(minority)
    )]
    MinorityNotSmaller { minority: Vec<NodeId>, nodes: usize },
    #[error("a cut named {0:?} is already in force (heal it first)")]
    IdInForce(String),
    #[error("no cut named {0:?} is in force (never made, or already healed)")]
    NoSuchCut(String),
    #[error(transparent)]
    Proxy(#[from] ClientError),
}

impl PartitionSpec {
    /// Every node the spec names, each once.
    fn named(&self) -> Vec<NodeId> {
        match self {
            PartitionSpec::Isolate(n)
            | PartitionSpec::Bridge(n)
            | PartitionSpec::NodeFromEtcd(n)
            | PartitionSpec::NodeFromClients(n)
            | PartitionSpec::NodeFromDatabase(n) => vec![*n],
            PartitionSpec::OneWay { from, to } => vec![*from, *to],
            PartitionSpec::MajorityMinority { minority } => minority.clone(),
        }
    }

    /// Checks the spec against the cluster's `nodes`: every named node is one
    /// of them, a one-way partition joins two different nodes, and a minority
    /// is non-empty and smaller than half of the nodes (duplicates count once).
    pub fn validate(&self, nodes: &[NodeId]) -> Result<(), PartitionError> {
        for node in self.named() {
            if !nodes.contains(&node) {
                let mut nodes = nodes.to_vec();
                nodes.sort_unstable();
                nodes.dedup();
                return Err(PartitionError::UnknownNode { node, nodes });
            }
        }
        match self {
            PartitionSpec::OneWay { from, to } if from == to => {
                Err(PartitionError::OneWayToSelf(*from))
            }
            PartitionSpec::MajorityMinority { minority } => {
                let minority: BTreeSet<NodeId> = minority.iter().copied().collect();
                let all: BTreeSet<NodeId> = nodes.iter().copied().collect();
                if minority.is_empty() {
                    Err(PartitionError::EmptyMinority)
                } else if minority.len() * 2 >= all.len() {
                    Err(PartitionError::MinorityNotSmaller {
                        minority: minority.into_iter().collect(),
                        nodes: all.len(),
                    })
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

/// Both directions between every member of `a` and every member of `b`.
fn both_ways(
    a: &BTreeSet<Endpoint>,
    b: &BTreeSet<Endpoint>,
    out: &mut BTreeSet<(Endpoint, Endpoint)>,
) {
    for &x in a {
        for &y in b {
            if x != y {
                out.insert((x, y));
                out.insert((y, x));
            }
        }
    }
}

/// Directed `(from, to)` endpoint pairs whose bytes are dropped. Assumes
/// `spec` passed [`PartitionSpec::validate`] against `nodes`; it never holds a
/// pair `(x, x)`.
pub fn blocked(spec: &PartitionSpec, nodes: &[NodeId]) -> BTreeSet<(Endpoint, Endpoint)> {
    let brokers: BTreeSet<NodeId> = nodes.iter().copied().collect();
    let set = |ids: &mut dyn Iterator<Item = NodeId>| -> BTreeSet<Endpoint> {
        ids.map(Endpoint::Broker).collect()
    };
    let mut out = BTreeSet::new();
    match spec {
        PartitionSpec::Isolate(node) => {
            let mut rest = set(&mut brokers.iter().copied().filter(|n| n != node));
            rest.insert(Endpoint::Etcd);
            both_ways(&[Endpoint::Broker(*node)].into(), &rest, &mut out);
        }
        PartitionSpec::MajorityMinority { minority } => {
            let minority: BTreeSet<Endpoint> = set(&mut minority.iter().copied());
            let mut majority = set(&mut brokers.iter().copied());
            majority.retain(|e| !minority.contains(e));
            majority.insert(Endpoint::Etcd);
            both_ways(&minority, &majority, &mut out);
        }
        PartitionSpec::OneWay { from, to } => {
            if from != to {
                out.insert((Endpoint::Broker(*from), Endpoint::Broker(*to)));
            }
        }
        PartitionSpec::Bridge(bridge) => {
            let others: Vec<NodeId> = brokers.iter().copied().filter(|n| n != bridge).collect();
            let (first, second) = others.split_at(others.len().div_ceil(2));
            both_ways(
                &set(&mut first.iter().copied()),
                &set(&mut second.iter().copied()),
                &mut out,
            );
        }
        PartitionSpec::NodeFromEtcd(node) => {
            both_ways(
                &[Endpoint::Broker(*node)].into(),
                &[Endpoint::Etcd].into(),
                &mut out,
            );
        }
        PartitionSpec::NodeFromClients(node) => {
            both_ways(
                &[Endpoint::Broker(*node)].into(),
                &[Endpoint::Clients].into(),
                &mut out,
            );
        }
        PartitionSpec::NodeFromDatabase(node) => {
            both_ways(
                &[Endpoint::Broker(*node)].into(),
                &[Endpoint::Database].into(),
                &mut out,
            );
        }
    }
    out
}

/// The proxy (dialler → dialled) for a connection `from` dials to `to`, if one
/// exists: etcd and the database never dial, and no broker dials the clients.
fn proxy(from: Endpoint, to: Endpoint) -> Option<Link> {
    match (from, to) {
        (Endpoint::Broker(from), Endpoint::Broker(to)) => Some(Link::BrokerToBroker { from, to }),
        (Endpoint::Broker(from), Endpoint::Etcd) => {
            Some(Link::BrokerToService(from, ServiceKind::Etcd))
        }
        (Endpoint::Broker(from), Endpoint::Database) => {
            Some(Link::BrokerToService(from, ServiceKind::Postgres))
        }
        (Endpoint::Clients, Endpoint::Broker(to)) => Some(Link::ClientToBroker(to)),
        (Endpoint::Etcd | Endpoint::Clients | Endpoint::Database, _)
        | (Endpoint::Broker(_), Endpoint::Clients) => None,
    }
}

/// The proxy streams that realise `blocked`: for each `(A, B)`, proxy A→B's
/// `Upstream` (A's requests on connections A dialled) and proxy B→A's
/// `Downstream` (A's responses on connections B dialled); a proxy exists only
/// from a dialler: a broker, or the clients.
pub fn cuts(blocked: &BTreeSet<(Endpoint, Endpoint)>) -> BTreeSet<(Link, Stream)> {
    let mut out = BTreeSet::new();
    for &(a, b) in blocked {
        if let Some(link) = proxy(a, b) {
            out.insert((link, Stream::Upstream));
        }
        if let Some(link) = proxy(b, a) {
            out.insert((link, Stream::Downstream));
        }
    }
    out
}

/// The partitions in force: the union of every applied spec's cuts. Several
/// faults accumulate; [`Partitions::heal`] removes all of them and
/// [`Partitions::heal_cut`] one fault's, by the name the schedule gave it. A
/// stream two faults cut stays cut until both are healed, and keeps the
/// `on_heal` of the first.
#[derive(Debug, Default)]
pub struct Partitions {
    /// Streams cut and not healed since → the cuts holding each: the id the
    /// schedule gave, or `#n` for the n-th unnamed cut.
    cut: BTreeMap<(Link, Stream), BTreeSet<String>>,
    unnamed: u64,
}

impl Partitions {
    pub fn new() -> Self {
        Partitions::default()
    }

    /// Validates `spec` against `nodes`, then cuts what it needs that is not
    /// already cut (with `on_heal`), held by `id` (or a fresh unnamed hold);
    /// returns its blocked pairs, for the history. If a cut fails midway, the
    /// cuts made so far stay recorded, so [`Partitions::heal`] still removes
    /// them.
    pub async fn apply(
        &mut self,
        proxies: &ToxiproxyClient,
        spec: &PartitionSpec,
        nodes: &[NodeId],
        id: Option<&str>,
        on_heal: OnHeal,
    ) -> Result<BTreeSet<(Endpoint, Endpoint)>, PartitionError> {
        spec.validate(nodes)?;
        let holder = match id {
            Some(id) if self.holds(id) => return Err(PartitionError::IdInForce(id.to_owned())),
            Some(id) => id.to_owned(),
            None => {
                self.unnamed += 1;
                format!("#{}", self.unnamed)
            }
        };
        let blocked = blocked(spec, nodes);
        for (link, stream) in cuts(&blocked) {
            if let Some(holders) = self.cut.get_mut(&(link, stream)) {
                holders.insert(holder.clone());
                continue;
            }
            proxies
                .partition(&link.proxy_name(), stream, on_heal)
                .await?;
            self.cut
                .insert((link, stream), BTreeSet::from([holder.clone()]));
        }
        Ok(blocked)
    }

    /// Whether a cut named `id` holds any stream.
    fn holds(&self, id: &str) -> bool {
        self.cut.values().any(|holders| holders.contains(id))
    }

    /// Removes every cut; held bytes are delivered (or the held connections
    /// reset, for a cut made with `on_heal = reset`). A cut already gone from
    /// the proxy (404: reset by someone else) counts as healed. On an error the
    /// cuts not yet removed stay recorded, so healing again retries them.
    pub async fn heal(&mut self, proxies: &ToxiproxyClient) -> Result<(), PartitionError> {
        while let Some((&(link, stream), _)) = self.cut.first_key_value() {
            heal_stream(proxies, link, stream).await?;
            self.cut.remove(&(link, stream));
        }
        Ok(())
    }

    /// Removes the cut named `id`: the streams no other cut holds are healed;
    /// returns the blocked pairs that flow again, as `(from, to)` links.
    pub async fn heal_cut(
        &mut self,
        proxies: &ToxiproxyClient,
        id: &str,
    ) -> Result<Vec<(Link, Stream)>, PartitionError> {
        if !self.holds(id) {
            return Err(PartitionError::NoSuchCut(id.to_owned()));
        }
        let held: Vec<(Link, Stream)> = self
            .cut
            .iter()
            .filter(|(_, holders)| holders.contains(id))
            .map(|(&key, _)| key)
            .collect();
        let mut healed = Vec::new();
        for key in held {
            let holders = self.cut.get_mut(&key).expect("listed above");
            holders.remove(id);
            if holders.is_empty() {
                heal_stream(proxies, key.0, key.1).await?;
                self.cut.remove(&key);
                healed.push(key);
            }
        }
        Ok(healed)
    }

    pub fn is_healed(&self) -> bool {
        self.cut.is_empty()
    }

    /// The proxy streams currently cut.
    pub fn cut(&self) -> impl Iterator<Item = &(Link, Stream)> {
        self.cut.keys()
    }
}

/// Heals one stream; one already gone from the proxy (404) counts as healed.
async fn heal_stream(
    proxies: &ToxiproxyClient,
    link: Link,
    stream: Stream,
) -> Result<(), PartitionError> {
    match proxies.heal(&link.proxy_name(), stream).await {
        Ok(()) => Ok(()),
        Err(e) if e.status() == Some(404) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests;
