//! Dynamic broker configs (KIP-226): ZooKeeper's `/config/brokers/<id>` and
//! `/config/brokers/<default>` (the cluster-wide default), kept under the
//! same root as every other key, read back with their revision and replaced
//! by compare-and-swap on it.

use etcd_client::{Compare, CompareOp, Txn, TxnOp};

use super::{MetadataStore, Overrides, ROOT, StoreError, TopicConfigRecord, decode, encode};

/// The entity of the cluster-wide default, as Kafka names its znode.
pub const DEFAULT_ENTITY: &str = "<default>";

/// The key of broker `entity`'s dynamic configs: a broker id, or
/// [`DEFAULT_ENTITY`].
pub fn broker_config_key(entity: &str) -> String {
    format!("{ROOT}/config/brokers/{entity}")
}

impl MetadataStore {
    /// `entity`'s dynamic configs and the revision they were written at
    /// (0 and none when there are none).
    pub async fn broker_configs(&self, entity: &str) -> Result<(Overrides, i64), StoreError> {
        let key = broker_config_key(entity);
        let resp = self.client.clone().get(key.clone(), None).await?;
        match resp.kvs().first() {
            None => Ok((Overrides::new(), 0)),
            Some(kv) => {
                let record: TopicConfigRecord = decode(&key, kv.value())?;
                Ok((record.config, kv.mod_revision()))
            }
        }
    }

    /// Replaces `entity`'s dynamic configs by `configs` (the key is deleted
    /// when empty) if they are still at `held` (0: there were none). false
    /// when another write came first.
    pub async fn write_broker_configs(
        &self,
        entity: &str,
        held: i64,
        configs: &Overrides,
    ) -> Result<bool, StoreError> {
        let key = broker_config_key(entity);
        let write = if configs.is_empty() {
            TxnOp::delete(key.clone(), None)
        } else {
            TxnOp::put(
                key.clone(),
                encode(&TopicConfigRecord::new(configs.clone())),
                None,
            )
        };
        let txn = Txn::new()
            .when(vec![Compare::mod_revision(key, CompareOp::Equal, held)])
            .and_then(vec![write]);
        Ok(self.client.clone().txn(txn).await?.succeeded())
    }
}
