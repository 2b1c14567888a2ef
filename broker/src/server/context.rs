//! What every request handler shares: the broker's configuration and identity,
//! its replicas and their fetchers, the metadata the controller sent, the etcd
//! store, the producer ids it hands out and the state-change log. The listener
//! hands one [`Broker`] to every connection; `crate::broker::run` builds it and
//! owns its lifetime, so nothing here knows how the broker starts or stops.

use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::controller::metadata_store::MetadataStore;
use crate::group::GroupCoordinator;
use crate::offsets::OffsetsManager;
use crate::replica::fetcher::FetcherManager;
use crate::replica::manager::ReplicaManager;
use crate::server::metadata_cache::MetadataCache;
use crate::server::producer_id_manager::ProducerIdManager;
use crate::state_change_log::StateChangeLog;
use crate::transactions::TxnCoordinator;

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
    /// The offsets partitions this broker leads, as their group coordinator.
    pub offsets: Arc<OffsetsManager>,
    /// The members, generations and rebalances of the groups it coordinates.
    pub groups: GroupCoordinator,
    /// The transaction-state partitions this broker leads, as their
    /// transaction coordinator.
    pub transactions: Arc<TxnCoordinator>,
}
