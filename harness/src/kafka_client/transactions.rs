//! A transactional producer's calls and the read_committed fetch (KIP-98):
//! FindCoordinator for a transactional id, InitProducerId with it (fencing
//! the id's older producers), AddPartitionsToTxn, EndTxn, transactional
//! Produce, and Fetch at isolation level read_committed, which reads up to
//! the last stable offset and drops the records of aborted transactions as
//! Kafka's consumer does (`Fetcher`'s aborted-transaction filter). As with
//! the idempotent calls, the client keeps no state: the workload's
//! transactional process (workload/txn.rs) decides what to send.

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, ProducerId, TransactionalId,
};

use super::calls::fetch_request;
use super::groups::Coordinator;
use super::*;

/// AddPartitionsToTxn and EndTxn v1: v0's fields; PRODUCER_FENCED (v2+,
/// KIP-588) arrives as INVALID_PRODUCER_EPOCH, definite either way. The
/// oldest version with everything this client needs, so the calls work on
/// the most brokers.
const ADD_PARTITIONS_TO_TXN_VERSION: i16 = 1;
const END_TXN_VERSION: i16 = 1;
/// Fetch's isolation level read_committed.
const READ_COMMITTED: i8 = 1;
/// A control record's key type of an abort marker (`ControlRecordType`).
const ABORT_MARKER: i16 = 0;

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

impl KafkaClient {
    /// The coordinator of `transactional_id`, as the connected broker names it.
    pub async fn find_txn_coordinator(
        &mut self,
        transactional_id: &str,
        deadline: Duration,
    ) -> Result<Coordinator, ClientError> {
        self.find_coordinator_of(transactional_id, 1, deadline)
            .await
    }

    /// InitProducerId for `transactional_id` at its coordinator: the id's
    /// producer id and a new epoch, which fences every older producer of the
    /// id and aborts a transaction it left open (answered
    /// CONCURRENT_TRANSACTIONS until that abort is written; ask again).
    pub async fn init_transactional_producer(
        &mut self,
        transactional_id: &str,
        transaction_timeout_ms: i32,
        deadline: Duration,
    ) -> Result<ProducerIdAndEpoch, ClientError> {
        self.init_producer(
            Some(txn_id(transactional_id)),
            transaction_timeout_ms,
            deadline,
        )
        .await
    }

    /// Adds `partitions` to the ongoing transaction (begun by the first
    /// add); the first partition error as [`ClientError::Broker`].
    pub async fn add_partitions_to_txn(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &[(String, i32)],
        deadline: Duration,
    ) -> Result<(), ClientError> {
        let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
        for (topic, partition) in partitions {
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(*partition),
                None => topics.push(
                    AddPartitionsToTxnTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(vec![*partition]),
                ),
            }
        }
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id(transactional_id))
            .with_v3_and_below_producer_id(ProducerId(producer.producer_id))
            .with_v3_and_below_producer_epoch(producer.producer_epoch)
            .with_v3_and_below_topics(topics);
        let resp = self
            .call(&req, ADD_PARTITIONS_TO_TXN_VERSION, deadline)
            .await?;
        let codes = resp.results_by_topic_v3_and_below.iter().flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        });
        // OPERATION_NOT_ATTEMPTED (55) only says another partition failed.
        let mut first_other = None;
        for code in codes.filter(|c| *c != 0) {
            if code != 55 {
                return Err(ClientError::broker(code));
            }
            first_other.get_or_insert(code);
        }
        match first_other {
            Some(code) => Err(ClientError::broker(code)),
            None => Ok(()),
        }
    }

    /// Ends the ongoing transaction: commits it, or aborts it.
    pub async fn end_txn(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        deadline: Duration,
    ) -> Result<(), ClientError> {
        let req = EndTxnRequest::default()
            .with_transactional_id(txn_id(transactional_id))
            .with_producer_id(ProducerId(producer.producer_id))
            .with_producer_epoch(producer.producer_epoch)
            .with_committed(commit);
        let resp = self.call(&req, END_TXN_VERSION, deadline).await?;
        match resp.error_code {
            0 => Ok(()),
            code => Err(ClientError::broker(code)),
        }
    }

    /// A transactional producer's produce: batches stamped as an idempotent
    /// producer's and marked transactional, the request naming the id.
    #[allow(clippy::too_many_arguments)]
    pub async fn produce_transactional(
        &mut self,
        transactional_id: &str,
        topic: &str,
        partition: i32,
        records: &[ProduceRecord],
        options: &ProduceOptions,
        stamp: &ProducerStamp,
        deadline: Duration,
    ) -> Result<Produced, ClientError> {
        self.produce_as(
            topic,
            partition,
            records,
            options,
            Some(stamp),
            Some(transactional_id),
            deadline,
        )
        .await
    }

    /// Fetch one partition from `offset` at isolation level read_committed:
    /// the records below the last stable offset, those of aborted
    /// transactions and the markers dropped. The answer's `high_watermark`
    /// is the last stable offset: where a read_committed reader stops.
    pub async fn fetch_committed(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        options: &FetchOptions,
        deadline: Duration,
    ) -> Result<Fetched, ClientError> {
        let req = fetch_request(-1, topic, partition, offset, options)
            .with_isolation_level(READ_COMMITTED);
        let p = self.fetch_one(req, topic, partition, deadline).await?;
        let aborted: Vec<(i64, i64)> = p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        let mut bytes = p.records.unwrap_or_default();
        let sets = RecordBatchDecoder::decode_all(&mut bytes)
            .map_err(|e| ClientError::Protocol(format!("fetched batches: {e:#}")))?;
        let records = committed_records(
            sets.into_iter().flat_map(|s| s.records),
            offset,
            p.last_stable_offset,
            aborted,
        );
        Ok(Fetched {
            high_watermark: p.last_stable_offset,
            records,
        })
    }

    /// The partition's last stable offset and high watermark as this broker,
    /// its leader, answers ListOffsets latest at read_committed and at
    /// read_uncommitted (KIP-98): equal when no transaction is open on it.
    pub async fn stable_offsets(
        &mut self,
        topic: &str,
        partition: i32,
        deadline: Duration,
    ) -> Result<(i64, i64), ClientError> {
        let started = std::time::Instant::now();
        let lso = self
            .list_offset_as(
                -1,
                READ_COMMITTED,
                topic,
                partition,
                OffsetSpec::Latest,
                deadline,
            )
            .await?;
        let left = deadline.saturating_sub(started.elapsed());
        let hw = self
            .list_offset_as(-1, 0, topic, partition, OffsetSpec::Latest, left)
            .await?;
        Ok((lso, hw))
    }
}

/// The records a read_committed consumer returns from `records` (in offset
/// order): at or above `from`, below `last_stable_offset`, no control
/// records, and no transactional record of a producer inside one of its
/// `aborted` transactions (producer id, first offset) — from that first
/// offset up to the producer's abort marker, as Kafka's consumer skips them.
fn committed_records(
    records: impl Iterator<Item = Record>,
    from: i64,
    last_stable_offset: i64,
    mut aborted: Vec<(i64, i64)>,
) -> Vec<FetchedRecord> {
    // By first offset, so each is taken up as the read reaches it.
    aborted.sort_by_key(|&(_, first)| std::cmp::Reverse(first));
    let mut aborting: BTreeSet<i64> = BTreeSet::new();
    let mut out = Vec::new();
    for record in records {
        if last_stable_offset >= 0 && record.offset >= last_stable_offset {
            break;
        }
        while aborted
            .last()
            .is_some_and(|&(_, first)| first <= record.offset)
        {
            let (producer, _) = aborted.pop().expect("looked at above");
            aborting.insert(producer);
        }
        if record.control {
            // An abort marker ends that producer's aborted run.
            let abort = record
                .key
                .as_ref()
                .filter(|k| k.len() >= 4)
                .is_some_and(|k| i16::from_be_bytes([k[2], k[3]]) == ABORT_MARKER);
            if abort {
                aborting.remove(&record.producer_id);
            }
            continue;
        }
        if record.transactional && aborting.contains(&record.producer_id) {
            continue;
        }
        if record.offset >= from {
            out.push(FetchedRecord {
                offset: record.offset,
                key: record.key,
                value: record.value,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn record(offset: i64, producer: i64, transactional: bool, value: &str) -> Record {
        Record {
            transactional,
            control: false,
            partition_leader_epoch: 0,
            producer_id: producer,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: 0,
            timestamp: 0,
            key: None,
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: IndexMap::new(),
        }
    }

    fn marker(offset: i64, producer: i64, commit: bool) -> Record {
        let mut r = record(offset, producer, true, "");
        r.control = true;
        r.key = Some(Bytes::from(vec![0, 0, 0, u8::from(commit)]));
        r.value = Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0]));
        r
    }

    fn values(out: &[FetchedRecord]) -> Vec<(i64, String)> {
        out.iter()
            .map(|r| {
                (
                    r.offset,
                    String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn aborted_records_and_markers_are_dropped_and_the_read_stops_at_the_lso() {
        // p1 aborts offsets 1-2 (marker 4), p2 commits 3 (marker 5), a plain
        // record at 6, p1's next transaction opens at 7 (the LSO).
        let records = vec![
            record(0, -1, false, "plain"),
            record(1, 1, true, "a1"),
            record(2, 1, true, "a2"),
            record(3, 2, true, "c"),
            marker(4, 1, false),
            marker(5, 2, true),
            record(6, -1, false, "after"),
            record(7, 1, true, "open"),
        ];
        let out = committed_records(records.into_iter(), 0, 7, vec![(1, 1)]);
        assert_eq!(
            values(&out),
            vec![(0, "plain".into()), (3, "c".into()), (6, "after".into())]
        );
    }

    #[test]
    fn a_producers_records_before_its_aborted_transaction_are_kept() {
        let records = vec![
            record(0, 1, true, "committed"),
            marker(1, 1, true),
            record(2, 1, true, "aborted"),
            marker(3, 1, false),
        ];
        let out = committed_records(records.into_iter(), 0, 4, vec![(1, 2)]);
        assert_eq!(values(&out), vec![(0, "committed".into())]);
        // From a later offset: what lies below it is not returned.
        let records = vec![record(0, 1, true, "x"), marker(1, 1, true)];
        assert!(committed_records(records.into_iter(), 1, 2, vec![]).is_empty());
    }
}
