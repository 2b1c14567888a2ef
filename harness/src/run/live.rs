//! A run in progress: the cluster and what every phase acts through — the
//! runtime, the history, the harness log, the observer (etcd directly), the
//! nemesis and the run's clients. Phases borrow it in turn; none of them owns
//! the run. A phase-3 driver beyond run/ (campaign/play.rs) borrows it too.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::history::SharedHistory;
use crate::nemesis::Nemesis;
use crate::node::NodeId;
use crate::observe::{ClusterView, MetadataSource, Observer, ViewSource};
use crate::runtime::Runtime;
use crate::schedule::Schedule;
use crate::store::RunLog;
use crate::workload::client::{Clients, Processes, RecordingClient};
use crate::workload::txn::TxnProducerState;
use crate::workload::view::SharedView;

use super::RunError;

pub struct Live<R: Runtime> {
    pub runtime: R,
    pub history: SharedHistory,
    pub log: RunLog,
    pub observer: Observer,
    pub nemesis: Nemesis,
    /// What every client of the run shares (history, processes, addresses).
    pub clients: Clients,
    /// The scripted steps' clients, by the schedule's `process` (its worker).
    pub scripted: BTreeMap<u64, RecordingClient>,
    /// The members the steps subscribed, by name.
    pub members: BTreeMap<String, super::scripted_member::ScriptedMember>,
    /// The transactional producers the `txn` steps ran as, by id.
    pub scripted_txns: BTreeMap<String, TxnProducerState>,
}

/// The observer a system allows: etcd for the reference broker's layout,
/// else the brokers' own Metadata on their own ports (observe/source.rs).
async fn observer_of<R: Runtime>(runtime: &R) -> Result<Observer, RunError> {
    let system = &runtime.plan().config.system;
    if system.observe.etcd.is_some() {
        return Ok(Observer::connect(runtime.etcd_endpoint()).await?);
    }
    let mut brokers = Vec::new();
    for node in runtime.nodes() {
        let address = runtime
            .observe_address(node)
            .ok_or(crate::runtime::RuntimeError::UnknownNode(node))?;
        brokers.push((node, address));
    }
    Ok(Observer::new(ViewSource::Metadata(MetadataSource::new(
        brokers,
        system.node.kafka_node_ids,
        METADATA_TIMEOUT,
    ))))
}

/// Bound on one broker's Metadata answer when the brokers are the observer
/// (one that missed the last look gets less: observe/source.rs).
const METADATA_TIMEOUT: Duration = Duration::from_secs(1);

impl<R: Runtime> Live<R> {
    /// Connects the observer and the clients' etcd handle to a started cluster.
    pub async fn connect(
        runtime: R,
        schedule: &Schedule,
        history: SharedHistory,
        log: RunLog,
    ) -> Result<Live<R>, (RunLog, RunError)> {
        let connected = async {
            let observer = observer_of(&runtime).await?;
            let mut addresses = BTreeMap::new();
            for node in runtime.nodes() {
                addresses.insert(node, runtime.client_address(node)?);
            }
            Ok::<_, RunError>((observer, addresses))
        };
        let (observer, addresses) = match connected.await {
            Ok(connected) => connected,
            Err(e) => return Err((log, e)),
        };
        let clients = Clients {
            history: history.clone(),
            processes: Processes::default(),
            view: SharedView::new(
                observer.source(),
                Duration::from_millis(schedule.workload.request_timeout_ms),
            ),
            addresses: Arc::new(addresses),
            request_timeout: Duration::from_millis(schedule.workload.request_timeout_ms),
            idempotent: schedule.workload.idempotent,
            transaction_timeout: schedule.workload.transaction_timeout(),
            fetch_version: runtime.plan().config.system.client.fetch_version,
            fetch_max_wait_ms: runtime.plan().config.system.client.fetch_max_wait_ms,
            join_group_version: runtime.plan().config.system.client.join_group_version,
            shared_ids: runtime.plan().config.system.node.kafka_node_ids
                == crate::system::KafkaNodeIds::Shared,
            lives: Default::default(),
        };
        Ok(Live {
            runtime,
            history,
            log,
            observer,
            nemesis: Nemesis::new(schedule.workload.seed),
            clients,
            scripted: BTreeMap::new(),
            members: BTreeMap::new(),
            scripted_txns: BTreeMap::new(),
        })
    }

    /// The cluster as etcd records it now.
    pub async fn view(&mut self) -> Result<ClusterView, RunError> {
        Ok(self.observer.view().await?)
    }

    /// The scripted client for a schedule's worker (made at its first op).
    pub fn scripted_client(&mut self, worker: u64) -> &mut RecordingClient {
        let clients = &self.clients;
        self.scripted
            .entry(worker)
            .or_insert_with(|| clients.client("epochal"))
    }

    /// The scripted client `worker` and the transactional producer `id` it
    /// runs a `txn` step as (made at the first step naming the id, kept
    /// for the later ones).
    pub fn scripted_txn(
        &mut self,
        worker: u64,
        id: &str,
    ) -> (&mut RecordingClient, &mut TxnProducerState) {
        let clients = &self.clients;
        let client = self
            .scripted
            .entry(worker)
            .or_insert_with(|| clients.client("epochal"));
        let producer = self
            .scripted_txns
            .entry(id.to_owned())
            .or_insert_with(|| TxnProducerState::new(id.to_owned()));
        (client, producer)
    }

    /// The cluster's nodes.
    pub fn nodes(&self) -> Vec<NodeId> {
        self.runtime.nodes()
    }
}
