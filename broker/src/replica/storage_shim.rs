//! TEMPORARY in-memory stand-in for `crate::storage`, with the same public
//! signatures, so the wire path can be exercised before the real storage lands on
//! main. Nothing here survives a restart. Delete this file when storage is merged.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::batch_header;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

#[derive(Clone, Debug)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub flush_messages: u64,
    pub flush_interval_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("corrupt batch: {0}")]
    CorruptBatch(String),
    #[error("offset {offset} out of range [{start}, {end}]")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Clone, Debug)]
pub struct LogAppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    pub record_count: u32,
    pub batch_count: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

#[derive(Default, Debug)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn assign(&mut self, epoch: i32, start_offset: i64) {
        if self.latest_epoch().is_some_and(|e| e >= epoch) {
            return;
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }
}

pub struct PartitionLog {
    batches: Vec<(i64, Bytes)>,
    leo: i64,
    hw: i64,
    cache: LeaderEpochCache,
}

impl PartitionLog {
    fn new() -> Self {
        Self {
            batches: Vec::new(),
            leo: 0,
            hw: 0,
            cache: LeaderEpochCache::default(),
        }
    }

    pub fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, StorageError> {
        let headers = batch_header::headers(&records);
        let total: usize = headers.iter().map(|h| h.size).sum();
        if headers.is_empty() || total != records.len() {
            return Err(StorageError::CorruptBatch(
                "not a whole number of record batches".into(),
            ));
        }
        let mut pos = 0;
        let first = self.leo;
        let mut count = 0u32;
        let mut staged = Vec::new();
        let mut next = self.leo;
        for h in &headers {
            let raw = &records[pos..pos + h.size];
            if h.magic != 2 || !batch_header::crc_ok(raw) {
                return Err(StorageError::CorruptBatch(format!(
                    "batch at byte {pos}: bad magic or CRC"
                )));
            }
            let mut b = BytesMut::from(raw);
            b[0..8].copy_from_slice(&next.to_be_bytes());
            b[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
            let n = h.last_offset - h.base_offset + 1;
            staged.push((next, b.freeze()));
            count += i32::from_be_bytes(raw[57..61].try_into().unwrap()) as u32;
            next += n;
            pos += h.size;
        }
        self.cache.assign(leader_epoch, first);
        self.batches.extend(staged);
        self.leo = next;
        Ok(LogAppendInfo {
            first_offset: first,
            last_offset: next - 1,
            record_count: count,
            batch_count: headers.len() as u32,
        })
    }

    pub fn append_as_follower(&mut self, records: Bytes) -> Result<LogAppendInfo, StorageError> {
        let first = self.leo;
        for h in batch_header::headers(&records) {
            self.batches.push((h.base_offset, records.slice(0..h.size)));
            self.leo = h.last_offset + 1;
        }
        Ok(LogAppendInfo {
            first_offset: first,
            last_offset: self.leo - 1,
            record_count: 0,
            batch_count: 0,
        })
    }

    pub fn read(&self, start_offset: i64, max_bytes: usize) -> Result<Bytes, StorageError> {
        if start_offset < 0 || start_offset > self.leo {
            return Err(StorageError::OffsetOutOfRange {
                offset: start_offset,
                start: 0,
                end: self.leo,
            });
        }
        let mut out = BytesMut::new();
        for (base, b) in &self.batches {
            let last = batch_header::headers(b)[0].last_offset;
            if last < start_offset {
                continue;
            }
            let _ = base;
            if !out.is_empty() && out.len() + b.len() > max_bytes {
                break;
            }
            out.extend_from_slice(b);
        }
        Ok(out.freeze())
    }

    pub fn log_start_offset(&self) -> i64 {
        0
    }
    pub fn log_end_offset(&self) -> i64 {
        self.leo
    }
    pub fn high_watermark(&self) -> i64 {
        self.hw
    }
    pub fn set_high_watermark(&mut self, hw: i64) {
        self.hw = hw;
    }
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        self.batches.retain(|(b, _)| *b < offset);
        self.leo = self.leo.min(offset);
        Ok(())
    }
    pub fn flush(&mut self) -> Result<(), StorageError> {
        Ok(())
    }
    pub fn recovery_point(&self) -> i64 {
        self.leo
    }
    pub fn leader_epoch_cache(&self) -> &LeaderEpochCache {
        &self.cache
    }
    pub fn leader_epoch_cache_mut(&mut self) -> &mut LeaderEpochCache {
        &mut self.cache
    }
}

pub struct LogManager {
    dir: PathBuf,
    logs: HashMap<TopicPartition, PartitionLog>,
}

impl LogManager {
    pub fn open(data_dir: &Path, _config: LogConfig) -> Result<LogManager, StorageError> {
        std::fs::create_dir_all(data_dir)?;
        Ok(LogManager {
            dir: data_dir.to_path_buf(),
            logs: HashMap::new(),
        })
    }
    pub fn had_clean_shutdown(&self) -> bool {
        false
    }
    pub fn get(&self, tp: &TopicPartition) -> Option<&PartitionLog> {
        self.logs.get(tp)
    }
    pub fn get_mut(&mut self, tp: &TopicPartition) -> Option<&mut PartitionLog> {
        self.logs.get_mut(tp)
    }
    pub fn get_or_create(
        &mut self,
        tp: &TopicPartition,
    ) -> Result<&mut PartitionLog, StorageError> {
        Ok(self
            .logs
            .entry(tp.clone())
            .or_insert_with(PartitionLog::new))
    }
    pub fn partitions(&self) -> impl Iterator<Item = &TopicPartition> {
        self.logs.keys()
    }
    pub fn checkpoint_high_watermarks(&self) -> Result<(), StorageError> {
        Ok(())
    }
    pub fn checkpoint_recovery_points(&self) -> Result<(), StorageError> {
        Ok(())
    }
    pub fn flush_if_due(&mut self, _now: Instant) -> Result<(), StorageError> {
        Ok(())
    }
    pub fn shutdown(&mut self) -> Result<(), StorageError> {
        std::fs::write(self.dir.join(".kafka_cleanshutdown"), b"")?;
        Ok(())
    }
}
