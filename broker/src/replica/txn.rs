//! A leader's side of transactions (KIP-98): the transaction coordinator's
//! markers appended to the partitions it leads (WriteTxnMarkers), which end
//! a producer's transaction there and move the last stable offset that
//! read_committed fetches read to (`leader.rs`, `read_isolated`).

use kafka_protocol::ResponseError;

use super::leader::{AppendTicket, maybe_advance_hw};
use super::manager::{ReplicaManager, storage_error_code};
use super::store::TopicPartition;
use super::store::txn::Marker;

impl ReplicaManager {
    /// Whether `producer_id` has a transaction open on `tp` at
    /// `producer_epoch`: its next transactional batch there continues it and
    /// needs no check with the coordinator (KIP-890; Kafka's
    /// `UnifiedLog.hasOngoingTransaction`).
    pub fn has_ongoing_txn(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
    ) -> bool {
        let inner = self.lock();
        inner.logs.get(tp).is_some_and(|log| {
            log.producer_state().entry(producer_id).is_some_and(|e| {
                e.current_txn_first_offset.is_some() && e.producer_epoch == producer_epoch
            })
        })
    }

    /// Appends `producer_id`'s transaction marker to `tp` as its leader, in
    /// the leader epoch it leads in; the ticket to await its replication on. Kafka's
    /// WriteTxnMarkers waits for the marker to be replicated before the
    /// coordinator completes the transaction; the caller waits on the HW.
    pub fn append_marker(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        now_ms: i64,
    ) -> Result<AppendTicket, ResponseError> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let partition = self.led(&inner.partitions, &inner.logs, tp)?;
        let leader_epoch = partition.leader_epoch();
        let log = inner
            .logs
            .get_or_create(tp)
            .map_err(|e| storage_error_code(&e))?;
        let info = log
            .append_marker_as_leader(producer_id, producer_epoch, marker, leader_epoch, now_ms)
            .map_err(|e| {
                tracing::warn!(%e, partition = %tp, producer_id, "transaction marker refused");
                storage_error_code(&e)
            })?;
        maybe_advance_hw(self.node_id, partition, log);
        let ticket = AppendTicket::of(partition, info.first_offset, info.last_offset);
        drop(guard);
        self.appended.notify_waiters();
        Ok(ticket)
    }
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    use super::*;
    use crate::replica::test_support::{batch, manager, state, tp};

    fn transactional(pid: i64, values: &[&str]) -> Bytes {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Record {
                transactional: true,
                control: false,
                partition_leader_epoch: -1,
                producer_id: pid,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: i as i32,
                timestamp: 0,
                key: None,
                value: Some(Bytes::copy_from_slice(v.as_bytes())),
                headers: IndexMap::new(),
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
        buf.freeze()
    }

    #[test]
    fn read_committed_stops_at_an_open_transaction_and_is_told_of_an_abort() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1]))]);
        rm.append_as_leader(&tp(), batch(1), 1).unwrap();
        rm.append_as_leader(&tp(), transactional(9, &["a", "b"]), 1)
            .unwrap();
        let committed = |rm: &ReplicaManager| rm.read_isolated(&tp(), 0, 1 << 20, -1, -1, true);
        let open = committed(&rm).unwrap();
        assert_eq!((open.high_watermark, open.last_stable_offset), (3, 1));
        assert!(!open.records.is_empty(), "the plain record below the LSO");
        assert_eq!(
            rm.read_isolated(&tp(), 1, 1 << 20, -1, -1, true)
                .unwrap()
                .records
                .len(),
            0
        );
        assert!(
            !rm.read(&tp(), 1, 1 << 20, -1, -1)
                .unwrap()
                .records
                .is_empty(),
            "read_uncommitted"
        );
        assert_eq!(rm.list_offset(&tp(), -1, -1, true).unwrap().0, 1);

        let abort = Marker {
            commit: false,
            coordinator_epoch: 0,
        };
        assert_eq!(
            rm.append_marker(&tp(), 9, 0, abort, 0).unwrap().last_offset,
            3
        );
        let done = committed(&rm).unwrap();
        assert_eq!((done.high_watermark, done.last_stable_offset), (4, 4));
        assert_eq!(done.aborted, vec![(9, 1)]);
        assert_eq!(rm.list_offset(&tp(), -1, -1, true).unwrap().0, 4);
        // Not the leader: refused.
        rm.apply_leader_and_isr(vec![(tp(), state(2, 1, vec![1, 2]))]);
        assert_eq!(
            rm.append_marker(&tp(), 9, 0, abort, 0).unwrap_err(),
            ResponseError::NotLeaderOrFollower
        );
    }
}
