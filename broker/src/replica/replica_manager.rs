//! The replica manager: every hosted partition's log and leadership state behind
//! one lock, and the operations the request handlers need — append as leader,
//! read, list offsets, wait for the high watermark — plus applying LeaderAndIsr.
//!
//! Storage calls are synchronous file I/O (an fsync per append under
//! `--flush-messages 1`); they run under a std mutex held only for the call, never
//! across an await. Appends wake waiters (long-poll fetches, acks=all produces)
//! through one `Notify`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;

use super::partition::{LeaderAndIsrState, Partition};
use super::store::record_batch::Batches;
use super::store::{LogAppendInfo, LogManager, StorageError, TopicPartition};
use crate::config::Truncation;

/// A replica id of -1 or below is a client (Kafka's consumer replica id).
pub fn is_client(replica_id: i32) -> bool {
    replica_id < 0
}

/// What a read returned for one partition.
#[derive(Debug, Clone)]
pub struct ReadResult {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub records: Bytes,
}

struct Inner {
    logs: LogManager,
    partitions: HashMap<TopicPartition, Partition>,
    /// The newest controller epoch seen in any control request (KAFKA-532).
    controller_epoch: i32,
}

pub struct ReplicaManager {
    node_id: i32,
    min_insync_replicas: i32,
    truncation: Truncation,
    inner: Mutex<Inner>,
    appended: Notify,
}

/// The per-partition outcome of one LeaderAndIsr.
#[derive(Debug, Clone)]
pub struct Decision {
    pub tp: TopicPartition,
    pub state: LeaderAndIsrState,
    pub result: Result<(), ResponseError>,
    pub reason: Option<String>,
}

/// The prefix of `buf` holding only whole batches whose last offset is below `end`.
fn batches_below(buf: Bytes, end: i64) -> Bytes {
    let mut keep = 0usize;
    for batch in Batches::new(&buf) {
        let Ok(batch) = batch else { break };
        if batch.header.last_offset() >= end {
            break;
        }
        keep = batch.position + batch.header.size_bytes();
    }
    buf.slice(..keep)
}

fn storage_error_code(e: &StorageError) -> ResponseError {
    match e {
        StorageError::CorruptRecords { .. } => ResponseError::CorruptMessage,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        _ => ResponseError::KafkaStorageError,
    }
}

impl ReplicaManager {
    pub fn new(
        node_id: i32,
        min_insync_replicas: i32,
        truncation: Truncation,
        logs: LogManager,
    ) -> Self {
        Self {
            node_id,
            min_insync_replicas,
            truncation,
            inner: Mutex::new(Inner {
                logs,
                partitions: HashMap::new(),
                controller_epoch: 0,
            }),
            appended: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn controller_epoch(&self) -> i32 {
        self.lock().controller_epoch
    }

    /// Register for the next append notification (before checking a condition,
    /// so an append between the check and the await is not missed).
    pub fn appended(&self) -> &Notify {
        &self.appended
    }

    /// Append a producer's batches as leader, stamping the leader epoch.
    pub fn append_as_leader(
        &self,
        tp: &TopicPartition,
        records: Bytes,
        acks: i16,
    ) -> Result<LogAppendInfo, ResponseError> {
        let mut inner = self.lock();
        let Some(partition) = inner.partitions.get(tp) else {
            return Err(if inner.logs.get(tp).is_some() {
                ResponseError::NotLeaderOrFollower
            } else {
                ResponseError::UnknownTopicOrPartition
            });
        };
        let Some(state) = partition.state.clone().filter(|s| s.leader == self.node_id) else {
            return Err(ResponseError::NotLeaderOrFollower);
        };
        // Kafka checks min.insync.replicas before the append for acks=all only.
        if acks == -1 && (state.isr.len() as i32) < self.min_insync_replicas {
            return Err(ResponseError::NotEnoughReplicas);
        }
        let log = inner
            .logs
            .get_or_create(tp)
            .map_err(|e| storage_error_code(&e))?;
        let info = log
            .append_as_leader(records, state.leader_epoch)
            .map_err(|e| {
                tracing::warn!(%e, topic = %tp.topic, partition = tp.partition, "append rejected");
                storage_error_code(&e)
            })?;
        // One-replica ISR: the leader's own LEO is the minimum. Followers' LEOs
        // join this computation with replication.
        if state.isr == [self.node_id] {
            let leo = log.log_end_offset();
            if leo > log.high_watermark() {
                log.set_high_watermark(leo);
            }
        }
        drop(inner);
        self.appended.notify_waiters();
        Ok(info)
    }

    /// The high watermark of a partition this broker leads.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.lock().logs.get(tp).map(|l| l.high_watermark())
    }

    /// Read from `offset`; a client sees only batches below the high watermark.
    pub fn read(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
        replica_id: i32,
    ) -> Result<ReadResult, ResponseError> {
        let inner = self.lock();
        let partition = inner
            .partitions
            .get(tp)
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        if !partition.is_leader(self.node_id) {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        let log = inner
            .logs
            .get(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let hw = log.high_watermark();
        let leo = log.log_end_offset();
        let bound = if is_client(replica_id) { hw } else { leo };
        let records = if offset >= bound && offset <= leo {
            Bytes::new()
        } else {
            let raw = log
                .read(offset, max_bytes)
                .map_err(|e| storage_error_code(&e))?;
            batches_below(raw, bound)
        };
        Ok(ReadResult {
            high_watermark: hw,
            log_start_offset: log.log_start_offset(),
            log_end_offset: leo,
            records,
        })
    }

    /// ListOffsets: -2 earliest, -1 latest (the HW for clients, as Kafka answers
    /// read_uncommitted consumers). Returns (offset, leader epoch).
    pub fn list_offset(
        &self,
        tp: &TopicPartition,
        timestamp: i64,
        replica_id: i32,
    ) -> Result<(i64, i32), ResponseError> {
        let inner = self.lock();
        let partition = inner
            .partitions
            .get(tp)
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        if !partition.is_leader(self.node_id) {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        let log = inner
            .logs
            .get(tp)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let epoch = partition.leader_epoch();
        match timestamp {
            -2 => Ok((log.log_start_offset(), epoch)),
            -1 if is_client(replica_id) => Ok((log.high_watermark(), epoch)),
            -1 => Ok((log.log_end_offset(), epoch)),
            // Lookup by timestamp needs a time index, which this broker does not keep.
            _ => Err(ResponseError::InvalidRequest),
        }
    }

    /// The controller-epoch check every control request passes first (KAFKA-532):
    /// older than the newest seen is stale. With fencing off it always passes.
    pub fn observe_controller_epoch(
        &self,
        controller_epoch: i32,
        fencing: bool,
    ) -> Result<(), ResponseError> {
        let mut inner = self.lock();
        if fencing && controller_epoch < inner.controller_epoch {
            return Err(ResponseError::StaleControllerEpoch);
        }
        inner.controller_epoch = inner.controller_epoch.max(controller_epoch);
        Ok(())
    }

    /// Apply the partition states of one LeaderAndIsr (after the request-level
    /// controller-epoch check). Each partition is applied or rejected on its own.
    pub fn apply_leader_and_isr(
        &self,
        states: Vec<(TopicPartition, LeaderAndIsrState)>,
    ) -> Vec<Decision> {
        let mut inner = self.lock();
        let mut decisions = Vec::with_capacity(states.len());
        for (tp, state) in states {
            let current = inner.partitions.get(&tp).cloned().unwrap_or_default();
            if let Err(code) = current.check_leader_and_isr(&state) {
                let reason = format!(
                    "leader epoch {} is not newer than the current {}",
                    state.leader_epoch,
                    current.leader_epoch()
                );
                decisions.push(Decision {
                    tp,
                    state,
                    result: Err(code),
                    reason: Some(reason),
                });
                continue;
            }
            if !state.replicas.contains(&self.node_id) {
                decisions.push(Decision {
                    tp,
                    state,
                    result: Err(ResponseError::UnknownTopicOrPartition),
                    reason: Some("this broker is not a replica".into()),
                });
                continue;
            }
            let node_id = self.node_id;
            let record_epoch_at_election = self.truncation == Truncation::Current;
            let result = inner
                .logs
                .get_or_create(&tp)
                .and_then(|log| {
                    if state.leader == node_id {
                        // KAFKA-7415: under `current` a new leader records (epoch, LEO)
                        // at once; older releases recorded it with the epoch's first
                        // append, which the storage does (DESIGN.md's epoch table).
                        let leo = log.log_end_offset();
                        if record_epoch_at_election {
                            log.leader_epoch_cache_mut()
                                .assign(state.leader_epoch, leo)?;
                        }
                        if state.isr == [node_id] && leo > log.high_watermark() {
                            log.set_high_watermark(leo);
                        }
                    }
                    Ok(())
                })
                .map_err(|e| (storage_error_code(&e), e.to_string()));
            match result {
                Ok(()) => {
                    inner.partitions.insert(
                        tp.clone(),
                        Partition {
                            state: Some(state.clone()),
                        },
                    );
                    decisions.push(Decision {
                        tp,
                        state,
                        result: Ok(()),
                        reason: None,
                    });
                }
                Err((code, why)) => decisions.push(Decision {
                    tp,
                    state,
                    result: Err(code),
                    reason: Some(why),
                }),
            }
        }
        drop(inner);
        self.appended.notify_waiters();
        decisions
    }

    /// Periodic work: time-based flushes.
    pub fn flush_if_due(&self) -> Result<(), StorageError> {
        self.lock().logs.flush_if_due(Instant::now())
    }

    pub fn checkpoint_high_watermarks(&self) -> Result<(), StorageError> {
        self.lock().logs.checkpoint_high_watermarks()
    }

    pub fn checkpoint_recovery_points(&self) -> Result<(), StorageError> {
        self.lock().logs.checkpoint_recovery_points()
    }

    /// Clean shutdown: flush, checkpoints, clean-shutdown marker.
    pub fn shutdown(&self) -> Result<(), StorageError> {
        self.lock().logs.shutdown()
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    use super::*;
    use crate::replica::store::LogConfig;

    fn batch(n: usize) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from(format!("v{i}"))),
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

    fn manager(dir: &std::path::Path, min_isr: i32) -> ReplicaManager {
        let logs = LogManager::open(dir, LogConfig::default()).unwrap();
        ReplicaManager::new(1, min_isr, Truncation::Current, logs)
    }

    fn state(leader: i32, leader_epoch: i32, isr: Vec<i32>) -> LeaderAndIsrState {
        LeaderAndIsrState {
            controller_epoch: 1,
            leader,
            leader_epoch,
            isr,
            partition_epoch: 0,
            replicas: vec![1, 2],
        }
    }

    fn tp() -> TopicPartition {
        TopicPartition {
            topic: "t".into(),
            partition: 0,
        }
    }

    #[test]
    fn a_leader_appends_and_its_lone_isr_moves_the_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        assert_eq!(
            rm.append_as_leader(&tp(), batch(1), 1).unwrap_err(),
            ResponseError::UnknownTopicOrPartition
        );
        let d = rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1]))]);
        assert!(d[0].result.is_ok());
        let info = rm.append_as_leader(&tp(), batch(3), 1).unwrap();
        assert_eq!((info.first_offset, info.last_offset), (0, 2));
        assert_eq!(rm.high_watermark(&tp()), Some(3));
        let read = rm.read(&tp(), 0, 1 << 20, -1).unwrap();
        assert_eq!(read.high_watermark, 3);
        assert!(!read.records.is_empty());
        assert_eq!(rm.list_offset(&tp(), -1, -1).unwrap(), (3, 0));
        assert_eq!(rm.list_offset(&tp(), -2, -1).unwrap(), (0, 0));
    }

    #[test]
    fn a_client_reads_only_below_the_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        // ISR {1, 2}: with no follower fetching, the HW stays at 0.
        rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1, 2]))]);
        rm.append_as_leader(&tp(), batch(2), 1).unwrap();
        assert_eq!(rm.high_watermark(&tp()), Some(0));
        assert!(rm.read(&tp(), 0, 1 << 20, -1).unwrap().records.is_empty());
        assert!(
            !rm.read(&tp(), 0, 1 << 20, 2).unwrap().records.is_empty(),
            "a replica reads to the LEO"
        );
    }

    #[test]
    fn followers_refuse_produce_and_acks_all_needs_the_minimum_isr() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 2);
        rm.apply_leader_and_isr(vec![(tp(), state(2, 0, vec![1, 2]))]);
        assert_eq!(
            rm.append_as_leader(&tp(), batch(1), 1).unwrap_err(),
            ResponseError::NotLeaderOrFollower
        );
        rm.apply_leader_and_isr(vec![(tp(), state(1, 1, vec![1]))]);
        assert_eq!(
            rm.append_as_leader(&tp(), batch(1), -1).unwrap_err(),
            ResponseError::NotEnoughReplicas
        );
        assert!(
            rm.append_as_leader(&tp(), batch(1), 1).is_ok(),
            "acks=1 ignores min.insync.replicas"
        );
    }

    #[test]
    fn a_leader_and_isr_not_newer_than_the_current_epoch_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.apply_leader_and_isr(vec![(tp(), state(1, 3, vec![1]))]);
        for epoch in [2, 3] {
            let d = rm.apply_leader_and_isr(vec![(tp(), state(2, epoch, vec![2]))]);
            assert_eq!(
                d[0].result,
                Err(ResponseError::StaleControllerEpoch),
                "leader epoch {epoch}"
            );
        }
        let d = rm.apply_leader_and_isr(vec![(tp(), state(2, 4, vec![2]))]);
        assert!(d[0].result.is_ok());
    }

    #[test]
    fn controller_epochs_below_the_newest_seen_are_stale_only_with_fencing() {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(dir.path(), 1);
        rm.observe_controller_epoch(5, true).unwrap();
        assert_eq!(
            rm.observe_controller_epoch(4, true),
            Err(ResponseError::StaleControllerEpoch)
        );
        assert!(
            rm.observe_controller_epoch(5, true).is_ok(),
            "the same epoch is not stale"
        );
        assert!(
            rm.observe_controller_epoch(4, false).is_ok(),
            "before KAFKA-532 nothing is checked"
        );
        assert_eq!(rm.controller_epoch(), 5);
    }

    #[test]
    fn only_current_records_the_leader_epoch_at_election() {
        for (truncation, expected) in [
            (Truncation::Current, vec![(0, 0)]),
            (Truncation::Kip279, vec![]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
            let rm = ReplicaManager::new(1, 1, truncation, logs);
            rm.apply_leader_and_isr(vec![(tp(), state(1, 0, vec![1]))]);
            let inner = rm.lock();
            let entries: Vec<(i32, i64)> = inner
                .logs
                .get(&tp())
                .unwrap()
                .leader_epoch_cache()
                .entries()
                .iter()
                .map(|e| (e.epoch, e.start_offset))
                .collect();
            assert_eq!(entries, expected, "{truncation:?}");
        }
    }
}
