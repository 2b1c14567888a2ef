//! The broker's shared state: its configuration and identity, its replicas
//! and their fetchers, the metadata the controller sent, the etcd store, the
//! producer ids it hands out, the state-change log and its coordinators. The
//! listener hands one [`Broker`] to every connection; `crate::broker::run`
//! builds it and owns its lifetime, so nothing here knows how the broker
//! starts or stops.
//!
//! What may reach the whole broker, and why:
//! - dispatch.rs, which runs each request's handler with the parts of the
//!   broker it touches: one part it borrows itself, several it takes from
//!   context/parts.rs, the one place that builds the handlers' structs of
//!   borrows. No handler is given the broker: its signature names what it
//!   may touch. The fields nothing outside this file and parts.rs reads
//!   (the control lock, the state-change log, the advertised address, the
//!   producer ids behind [`TxnHost`]) are private;
//! - the transaction coordinator's work, through [`TxnHost`] alone;
//! - `crate::broker`, which builds the broker and runs its background tasks
//!   (the fetchers it stops, the replicas it flushes and shuts down, the
//!   transaction coordinator's marker jobs, the settings they read): the
//!   fields those touch are `pub(crate)`;
//! - the handlers' unit tests, through `server::test_support`, which read
//!   the rest (`pub(in crate::server)`) as dispatch.rs does.

mod parts;

use std::sync::Arc;
use std::time::Duration;

use crate::config::BrokerConfig;
use crate::controller::metadata_store::MetadataStore;
use crate::group::{GroupConfig, GroupCoordinator};
use crate::offsets::OffsetsManager;
use crate::replica::fetcher::FetcherManager;
use crate::replica::manager::ReplicaManager;
use crate::server::metadata_cache::MetadataCache;
use crate::server::producer_id_manager::ProducerIdManager;
use crate::state_change_log::StateChangeLog;
use crate::transactions::{TxnCoordinator, TxnHost};

pub struct Broker {
    pub(crate) config: BrokerConfig,
    advertised_host: String,
    advertised_port: i32,
    cluster_id: String,
    pub(crate) replicas: Arc<ReplicaManager>,
    /// Follower fetcher tasks, started and replaced by LeaderAndIsr.
    pub(crate) fetchers: FetcherManager,
    pub(in crate::server) metadata: MetadataCache,
    pub(in crate::server) store: MetadataStore,
    /// Blocks of producer ids claimed in etcd, for InitProducerId.
    producer_ids: ProducerIdManager,
    state_changes: StateChangeLog,
    /// Held by a control request (LeaderAndIsr, StopReplica, UpdateMetadata;
    /// `handlers::fencing::Control::lock`) across its fences, its apply and
    /// its state-change.log lines, as Kafka's
    /// `replicaStateChangeLock` is across `becomeLeaderOrFollower`: a request
    /// that passed the fences is applied before the next one is fenced, and
    /// the log is in apply order.
    control: std::sync::Mutex<()>,
    /// The offsets partitions this broker leads, as their group coordinator.
    pub(in crate::server) offsets: Arc<OffsetsManager>,
    /// The members, generations and rebalances of the groups it coordinates.
    pub(in crate::server) groups: GroupCoordinator,
    /// The transaction-state partitions this broker leads, as their
    /// transaction coordinator.
    pub(crate) transactions: Arc<TxnCoordinator>,
}

/// The transaction coordinator's work is given these parts, not the whole
/// broker (transactions/host.rs).
impl TxnHost for Broker {
    fn config(&self) -> &BrokerConfig {
        &self.config
    }
    fn coordinator(&self) -> &TxnCoordinator {
        &self.transactions
    }
    fn replicas(&self) -> &ReplicaManager {
        &self.replicas
    }
    fn metadata(&self) -> &MetadataCache {
        &self.metadata
    }
    fn producer_ids(&self) -> &ProducerIdManager {
        &self.producer_ids
    }
}

impl Broker {
    /// The broker's shared state from its settings and what starting it
    /// opened: every coordinator and cache sized and configured from
    /// `config`, in one place (the fuzz target builds its broker here too,
    /// so it cannot fall behind a new field).
    pub fn new(
        config: BrokerConfig,
        replicas: Arc<ReplicaManager>,
        store: MetadataStore,
        state_changes: StateChangeLog,
        advertised: (String, i32),
    ) -> Broker {
        let partitions = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Broker {
            fetchers: FetcherManager::new(
                replicas.clone(),
                Duration::from_millis(config.replica_fetch_wait_max_ms),
            ),
            replicas,
            metadata: MetadataCache::new(),
            cluster_id: "epochal".to_string(),
            advertised_host: advertised.0,
            advertised_port: advertised.1,
            producer_ids: ProducerIdManager::new(config.node_id, store.clone()),
            store,
            state_changes,
            control: std::sync::Mutex::new(()),
            offsets: Arc::new(OffsetsManager::new(partitions(
                config.offsets_topic_num_partitions,
            ))),
            transactions: Arc::new(TxnCoordinator::new(partitions(
                config.transaction_state_num_partitions,
            ))),
            groups: GroupCoordinator::new(GroupConfig {
                min_session_timeout_ms: config.group_min_session_timeout_ms,
                max_session_timeout_ms: config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
                ..GroupConfig::default()
            }),
            config,
        }
    }
}
