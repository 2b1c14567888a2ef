use bytes::Bytes;

use super::super::super::checkpoint::LOG_START_OFFSET_CHECKPOINT;
use super::super::super::{LogConfig, LogManager, StorageError, TopicPartition};

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// One record `v<i>` a batch, so every offset starts a batch.
fn batch(i: usize) -> Bytes {
    crate::storage::record_batch::plain_batch(vec![(None, Some(Bytes::from(format!("v{i}"))))], 0)
}

/// Segments small enough that every batch rolls a new one.
fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 100,
        ..LogConfig::default()
    }
}

/// A log of `n` single-record batches at offsets 0.., all below the HW.
fn filled(logs: &mut LogManager, n: usize) {
    let log = logs.get_or_create(&tp()).unwrap();
    for i in 0..n {
        log.append_as_leader(batch(i), 1).unwrap();
    }
    log.set_high_watermark(n as i64);
}

#[test]
fn the_start_moves_up_to_the_high_watermark_and_never_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), small_segments()).unwrap();
    filled(&mut logs, 6);
    let log = logs.get_mut(&tp()).unwrap();
    log.set_high_watermark(4);
    assert!(matches!(
        log.increment_log_start_offset(5),
        Err(StorageError::OffsetOutOfRange { offset: 5, .. })
    ));
    assert_eq!(log.log_start_offset(), 0);
    assert!(log.increment_log_start_offset(3).unwrap());
    assert_eq!(log.log_start_offset(), 3);
    assert!(!log.increment_log_start_offset(2).unwrap());
    assert_eq!(log.log_start_offset(), 3);
    // Below the start is out of range; at it, the record there.
    assert!(matches!(
        log.read(2, 1 << 20),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert!(!log.read(3, 1 << 20).unwrap().is_empty());
    // Whole segments below the start are gone; the one holding it stays.
    assert_eq!(log.segment_base_offsets(), vec![3, 4, 5]);
}

#[test]
fn a_start_inside_a_segment_keeps_the_segment_and_hides_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    filled(&mut logs, 4);
    let log = logs.get_mut(&tp()).unwrap();
    assert!(log.increment_log_start_offset(2).unwrap());
    assert_eq!(log.segment_base_offsets(), vec![0]);
    assert_eq!(log.log_start_offset(), 2);
    assert!(log.read(1, 1 << 20).is_err());
    assert!(!log.read(2, 1 << 20).unwrap().is_empty());
}

#[test]
fn the_start_survives_a_restart_and_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        filled(&mut logs, 5);
        let log = logs.get_mut(&tp()).unwrap();
        log.flush().unwrap();
        log.increment_log_start_offset(3).unwrap();
        // Dropped without a shutdown: a crash.
    }
    let text = std::fs::read_to_string(dir.path().join(LOG_START_OFFSET_CHECKPOINT)).unwrap();
    assert_eq!(text, "0\n1\nt 0 3\n");
    let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(logs.get(&tp()).unwrap().log_start_offset(), 3);
    logs.shutdown().unwrap();
    drop(logs);
    let logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    let log = logs.get(&tp()).unwrap();
    assert_eq!(log.log_start_offset(), 3);
    assert!(log.read(2, 1 << 20).is_err());
}

#[test]
fn a_start_past_the_recovered_end_restarts_the_log_there() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        filled(&mut logs, 5);
        logs.get_mut(&tp())
            .unwrap()
            .increment_log_start_offset(4)
            .unwrap();
    }
    // The records above offset 1 never reached the disk.
    let segment = dir.path().join("t-0").join("00000000000000000000.log");
    let first_batch = batch(0).len() as u64;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap();
    file.set_len(first_batch).unwrap();
    drop(file);
    let logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    let log = logs.get(&tp()).unwrap();
    assert_eq!(log.log_start_offset(), 4);
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.segment_base_offsets(), vec![4]);
}

#[test]
fn truncating_below_the_start_forgets_it_and_a_deleted_log_leaves_no_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    filled(&mut logs, 5);
    let log = logs.get_mut(&tp()).unwrap();
    log.increment_log_start_offset(3).unwrap();
    // A follower cut below its start restarts its log there.
    log.truncate_to(1).unwrap();
    assert_eq!(log.log_start_offset(), 1);
    assert_eq!(log.log_end_offset(), 1);
    log.set_high_watermark(1);
    log.append_as_follower(Bytes::new()).unwrap();
    drop(logs);
    let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(logs.get(&tp()).unwrap().log_start_offset(), 1);
    filled(&mut logs, 0);
    let log = logs.get_mut(&tp()).unwrap();
    log.append_as_leader(batch(9), 1).unwrap();
    log.set_high_watermark(2);
    log.increment_log_start_offset(2).unwrap();
    logs.delete(&tp()).unwrap();
    let text = std::fs::read_to_string(dir.path().join(LOG_START_OFFSET_CHECKPOINT)).unwrap();
    assert_eq!(text, "0\n0\n");
}
