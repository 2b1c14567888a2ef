//! What the transaction coordinator's work needs of the broker it runs in:
//! its settings, its replicas, the metadata the controller sent, its block
//! of producer ids, and the coordinator's own state. The broker's shared
//! state (`server::context::Broker`) provides them; nothing here names it,
//! so the coordinator sits below the request layer that drives it and is
//! given only what it uses.

use crate::config::BrokerConfig;
use crate::replica::manager::ReplicaManager;
use crate::server::metadata_cache::MetadataCache;
use crate::server::producer_id_manager::ProducerIdManager;

use super::TxnCoordinator;

pub trait TxnHost: Send + Sync + 'static {
    fn config(&self) -> &BrokerConfig;
    /// The transaction-state partitions this broker leads.
    fn coordinator(&self) -> &TxnCoordinator;
    fn replicas(&self) -> &ReplicaManager;
    /// The cluster as the controller last told this broker.
    fn metadata(&self) -> &MetadataCache;
    /// Producer ids claimed in etcd, for a transactional id's new producer.
    fn producer_ids(&self) -> &ProducerIdManager;
}
