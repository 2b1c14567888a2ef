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
    pub fn new(node_id: i32, min_insync_replicas: i32, logs: LogManager) -> Self {
        Self {
            node_id,
            min_insync_replicas,
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
            let result = inner
                .logs
                .get_or_create(&tp)
                .and_then(|log| {
                    if state.leader == node_id {
                        // KAFKA-7415: a new leader records (epoch, LEO) at once under
                        // `current`; older settings record it on the first append
                        // (the storage does that). Replication adds the switch.
                        let leo = log.log_end_offset();
                        log.leader_epoch_cache_mut()
                            .assign(state.leader_epoch, leo)?;
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
