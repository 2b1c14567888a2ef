//! Producer ids for idempotent producers (KIP-98): handed out one at a time
//! from a block of [`PRODUCER_ID_BLOCK_SIZE`] ids this broker claims in etcd
//! by compare-and-swap on one key, as ZooKeeper-era Kafka's
//! `ZkProducerIdManager` claimed blocks of 1000 through `/latest_producer_id_block`.
//!
//! Ids are unique across the cluster (no two brokers hold the same block) and
//! across restarts (a restarted broker claims a block after every block ever
//! claimed; the unused rest of its old block is simply skipped). The manager
//! never reuses an id and never hands one out without etcd having recorded
//! its block first.

use std::time::Duration;

use tokio::sync::Mutex;

use crate::controller::metadata_store::{MetadataStore, ProducerIdBlock, StoreError};

/// Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// How long one block claim (its reads and compare-and-swaps) may take.
const BLOCK_CLAIM_TIMEOUT: Duration = Duration::from_secs(10);

pub struct ProducerIdManager {
    node_id: i32,
    store: MetadataStore,
    /// The block ids are taken from, and the next id in it; None before the
    /// first claim. Held across the claim, so concurrent requests wait for one
    /// claim rather than each claiming a block.
    current: Mutex<Option<(ProducerIdBlock, i64)>>,
}

impl ProducerIdManager {
    pub fn new(node_id: i32, store: MetadataStore) -> Self {
        ProducerIdManager {
            node_id,
            store,
            current: Mutex::new(None),
        }
    }

    /// The next unused producer id, claiming a new block first when the
    /// current one is used up (or none is held yet).
    pub async fn generate(&self) -> Result<i64, StoreError> {
        let mut current = self.current.lock().await;
        if let Some(id) = current.as_mut().and_then(take_next) {
            return Ok(id);
        }
        let claim = self
            .store
            .claim_producer_id_block(self.node_id, PRODUCER_ID_BLOCK_SIZE);
        let block = tokio::time::timeout(BLOCK_CLAIM_TIMEOUT, claim)
            .await
            .map_err(|_| StoreError::Timeout(BLOCK_CLAIM_TIMEOUT))??;
        tracing::info!(
            first = block.first,
            last = block.last,
            "claimed a block of producer ids"
        );
        let state = current.insert((block, block.first));
        Ok(take_next(state).expect("a new block has ids"))
    }
}

/// The next id of the block, if any is left.
fn take_next((block, next): &mut (ProducerIdBlock, i64)) -> Option<i64> {
    (*next <= block.last).then(|| {
        let id = *next;
        *next += 1;
        id
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_hands_out_each_id_once_then_runs_dry() {
        let block = ProducerIdBlock {
            broker: 1,
            first: 2000,
            last: 2002,
        };
        let mut state = (block, block.first);
        let ids: Vec<i64> = std::iter::from_fn(|| take_next(&mut state)).collect();
        assert_eq!(ids, [2000, 2001, 2002]);
        assert_eq!(take_next(&mut state), None);
    }
}
