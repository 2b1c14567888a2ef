//! What every request handler shares: the broker's configuration and identity,
//! its replicas and their fetchers, the metadata the controller sent, the etcd
//! store, the producer ids it hands out and the state-change log. The listener
//! hands one [`Broker`] to every connection; `crate::broker::run` builds it and
//! owns its lifetime, so nothing here knows how the broker starts or stops.

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
    pub config: BrokerConfig,
    pub advertised_host: String,
    pub advertised_port: i32,
    pub cluster_id: String,
    pub replicas: Arc<ReplicaManager>,
    /// Follower fetcher tasks, started and replaced by LeaderAndIsr.
    pub fetchers: FetcherManager,
    pub metadata: MetadataCache,
    pub store: MetadataStore,
    /// Blocks of producer ids claimed in etcd, for InitProducerId.
    pub producer_ids: ProducerIdManager,
    pub state_changes: StateChangeLog,
    /// Held by a control request (LeaderAndIsr, UpdateMetadata) across its
    /// fences, its apply and its state-change.log lines, as Kafka's
    /// `replicaStateChangeLock` is across `becomeLeaderOrFollower`: a request
    /// that passed the fences is applied before the next one is fenced, and
    /// the log is in apply order.
    pub control: std::sync::Mutex<()>,
    /// The offsets partitions this broker leads, as their group coordinator.
    pub offsets: Arc<OffsetsManager>,
    /// The members, generations and rebalances of the groups it coordinates.
    pub groups: GroupCoordinator,
    /// The transaction-state partitions this broker leads, as their
    /// transaction coordinator.
    pub transactions: Arc<TxnCoordinator>,
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
    /// Takes [`Broker::control`] for one control request's fences, apply
    /// and log lines (a poisoned lock is taken as it is: what it guards is
    /// the order of requests, not data).
    pub fn control_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.control
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

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
