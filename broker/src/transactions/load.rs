//! A new coordinator's read of a transaction-state partition (Kafka's
//! `TransactionStateManager.loadTransactionsForTxnTopicPartition`): the log
//! from its start, the last record of each transactional id winning and a
//! tombstone removing it; then the ids are served, and every transaction
//! found half-ended (PrepareCommit / PrepareAbort) has its markers sent
//! again, since the coordinator that wrote the Prepare state may have died
//! before it completed it.

use std::collections::BTreeMap;

use kafka_protocol::records::Record;

use super::coordinator::{MarkerJob, TXN_STATE_TOPIC, TxnCoordinator};
use super::log_record;
use super::state::TxnMetadata;
use crate::replica::manager::ReplicaManager;
use crate::replica::own_log;
use crate::replica::store::TopicPartition;

/// Reads transaction-state partition `partition` as its leader in
/// `leader_epoch` and serves what it read. Stops without serving when the
/// broker stops leading the partition (or leads it in a later epoch)
/// meanwhile. A record that cannot be read is skipped and logged.
pub fn load(
    coordinator: &TxnCoordinator,
    replicas: &ReplicaManager,
    partition: i32,
    leader_epoch: i32,
) {
    let tp = TopicPartition {
        topic: TXN_STATE_TOPIC.into(),
        partition,
    };
    let mut ids = BTreeMap::new();
    let read = own_log::read_from_start(replicas, &tp, leader_epoch, |raw| {
        own_log::for_each_record(raw, |r| apply_record(r, &mut ids))
    });
    if let Err(e) = read {
        tracing::info!(partition, %e, "transaction-state load stopped");
        return;
    }
    let preparing: Vec<MarkerJob> = ids
        .iter()
        .filter(|(_, m)| m.status.preparing())
        .map(|(id, m)| MarkerJob {
            transactional_id: id.clone(),
            coordinator_epoch: leader_epoch,
            prepared: m.clone(),
        })
        .collect();
    tracing::info!(
        partition,
        leader_epoch,
        ids = ids.len(),
        preparing = preparing.len(),
        "transaction-state partition loaded"
    );
    if coordinator.finish(partition, leader_epoch, ids) {
        preparing
            .into_iter()
            .for_each(|job| coordinator.send_markers(job));
    }
}

/// Applies one record of a transaction-state partition to `ids`.
fn apply_record(r: Record, ids: &mut BTreeMap<String, TxnMetadata>) {
    let id = match r.key.as_deref().map(log_record::decode_key) {
        Some(Ok(id)) => id,
        Some(Err(e)) => {
            return tracing::warn!(%e, offset = r.offset, "transaction-state record skipped");
        }
        None => {
            return tracing::warn!(
                offset = r.offset,
                "transaction-state record without a key skipped"
            );
        }
    };
    match r.value.as_deref().map(log_record::decode_value) {
        None => {
            ids.remove(&id);
        }
        Some(Ok(m)) => {
            ids.insert(id, m);
        }
        Some(Err(e)) => {
            tracing::warn!(%e, offset = r.offset, id, "transaction-state record skipped")
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::TimestampType;

    use super::*;
    use crate::transactions::state::{Init, init_producer_id};

    fn record(key: &str, value: Option<Bytes>) -> Record {
        Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: 0,
            key: Some(log_record::encode_key(key)),
            value,
            headers: IndexMap::new(),
        }
    }

    #[test]
    fn the_last_record_of_an_id_wins_and_a_tombstone_removes_it() {
        let Ok(Init::Ready(first)) = init_producer_id(None, 1000, 0, || 5) else {
            panic!()
        };
        let Ok(Init::Ready(second)) = init_producer_id(Some(&first), 1000, 1, || 6) else {
            panic!()
        };
        let mut ids = BTreeMap::new();
        apply_record(
            record("a", Some(log_record::encode_value(&first))),
            &mut ids,
        );
        apply_record(
            record("b", Some(log_record::encode_value(&first))),
            &mut ids,
        );
        apply_record(
            record("a", Some(log_record::encode_value(&second))),
            &mut ids,
        );
        apply_record(record("b", None), &mut ids);
        apply_record(record("c", Some(Bytes::from_static(b"junk"))), &mut ids);
        assert_eq!(ids, BTreeMap::from([("a".to_owned(), second)]));
    }
}
