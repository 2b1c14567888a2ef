//! The partition log's behaviour as the server sees it: offsets and epochs on
//! append, corrupt produce data refused whole, segment roll, batch-aligned
//! truncation across segments, reads bounded by max_bytes, and the flush policy.

use crate::support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use epochal_broker::storage::record_batch::BatchError;
use epochal_broker::storage::{
    EpochEntry, LogConfig, LogManager, PartitionLog, StorageError, TopicPartition,
};
use kafka_protocol::records::RecordBatchDecoder;
use support::*;

fn e(epoch: i32, start_offset: i64) -> EpochEntry {
    EpochEntry {
        epoch,
        start_offset,
    }
}

/// The byte size of one two-record batch as `batch2` builds it.
fn batch2_size() -> u64 {
    producer_batch(&["v0a", "v0b"]).len() as u64
}

fn batch2(i: usize) -> Bytes {
    producer_batch(&[&format!("v{i}a"), &format!("v{i}b")])
}

/// Appends `epochs.len()` two-record batches.
fn fill(log: &mut PartitionLog, epochs: &[i32]) {
    for (i, &epoch) in epochs.iter().enumerate() {
        log.append_as_leader(batch2(i), epoch).unwrap();
    }
}

fn offsets_in(bytes: Bytes) -> Vec<i64> {
    let mut bytes = bytes;
    RecordBatchDecoder::decode_all(&mut bytes)
        .unwrap()
        .iter()
        .flat_map(|s| s.records.iter().map(|r| r.offset))
        .collect()
}

#[test]
fn leader_appends_assign_offsets_from_the_leo_and_record_each_epochs_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    let info = log
        .append_as_leader(producer_batch(&["a", "b", "c"]), 0)
        .unwrap();
    assert_eq!(
        (
            info.first_offset,
            info.last_offset,
            info.record_count,
            info.batch_count
        ),
        (0, 2, 3, 1)
    );
    let two: Bytes = [producer_batch(&["d"]), producer_batch(&["e", "f"])]
        .concat()
        .into();
    let info = log.append_as_leader(two, 0).unwrap();
    assert_eq!(
        (
            info.first_offset,
            info.last_offset,
            info.record_count,
            info.batch_count
        ),
        (3, 5, 3, 2)
    );
    log.append_as_leader(producer_batch(&["g"]), 3).unwrap();
    assert_eq!(log.log_end_offset(), 7);
    assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0), e(3, 6)]);
    assert_eq!(log.leader_epoch_cache().epoch_for_offset(5), Some(0));

    let empty = log.append_as_leader(Bytes::new(), 3).unwrap();
    assert_eq!((empty.first_offset, empty.batch_count), (7, 0));
    assert_eq!(log.log_end_offset(), 7);
}

/// A Produce or a fetched answer that carries no batch appends nothing: no
/// offset taken, the log end unchanged, and the answer names the log end as
/// the offset the next record would get (`last_offset` one below it).
#[test]
fn an_append_of_no_batch_takes_no_offset_and_names_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    fill(log, &[0]);
    let as_leader = log.append_as_leader(Bytes::new(), 0).unwrap();
    let as_follower = log.append_as_follower(Bytes::new()).unwrap();
    for info in [as_leader, as_follower] {
        assert_eq!(
            (
                info.first_offset,
                info.last_offset,
                info.record_count,
                info.batch_count,
                info.duplicate
            ),
            (2, 1, 0, 0, false)
        );
    }
    assert_eq!(log.log_end_offset(), 2);
    log.append_as_leader(batch2(1), 0).unwrap();
    assert_eq!(offsets_in(log.read(0, 1 << 20).unwrap()), [0, 1, 2, 3]);
}

#[test]
fn corrupt_produce_data_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    log.append_as_leader(producer_batch(&["ok"]), 0).unwrap();
    let segment = segment_path(dir.path(), &tp(), 0);
    let size_before = std::fs::metadata(&segment).unwrap().len();

    let good = producer_batch(&["a", "b"]);
    let mut bad = producer_batch(&["c"]).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let both: Bytes = [good.to_vec(), bad].concat().into();
    match log.append_as_leader(both, 0) {
        Err(StorageError::CorruptRecords {
            position,
            source: BatchError::CrcMismatch { .. },
        }) => assert_eq!(position, good.len()),
        other => panic!("expected a CRC error, got {other:?}"),
    }

    let mut old_magic = producer_batch(&["m"]).to_vec();
    old_magic[16] = 1;
    assert!(matches!(
        log.append_as_leader(old_magic.into(), 0),
        Err(StorageError::CorruptRecords {
            position: 0,
            source: BatchError::UnsupportedMagic { magic: 1 }
        })
    ));
    let garbage: Bytes = (0..300u32)
        .map(|i| (i * 31 % 256) as u8)
        .collect::<Vec<_>>()
        .into();
    assert!(matches!(
        log.append_as_leader(garbage.clone(), 0),
        Err(StorageError::CorruptRecords { .. })
    ));
    assert!(matches!(
        log.append_as_follower(garbage),
        Err(StorageError::CorruptRecords { .. })
    ));
    let torn = producer_batch(&["t"]).slice(..30);
    assert!(matches!(
        log.append_as_leader(torn, 0),
        Err(StorageError::CorruptRecords {
            source: BatchError::Incomplete { .. },
            ..
        })
    ));
    assert!(matches!(
        log.append_as_leader(producer_batch(&["x"]), -1),
        Err(StorageError::InvalidEpochEntry { epoch: -1, .. })
    ));

    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), size_before);
}

#[test]
fn segments_roll_at_segment_bytes_and_are_named_by_base_offset() {
    let dir = tempfile::tempdir().unwrap();
    // Room for two batches a segment, not three.
    let mut logs = LogManager::open(dir.path(), config(2 * batch2_size() + 10)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    fill(log, &[0, 0, 0, 1, 1]);
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8]);
    for (base, offsets) in [
        (0, vec![0, 1, 2, 3]),
        (4, vec![4, 5, 6, 7]),
        (8, vec![8, 9]),
    ] {
        let path = segment_path(dir.path(), &tp(), base);
        let decoded: Vec<i64> = flatten(&decode_file(&path)).iter().map(|r| r.0).collect();
        assert_eq!(decoded, offsets, "{}", path.display());
    }
    // Rolled segments were flushed; only the active one may hold unflushed bytes.
    assert_eq!(log.recovery_point(), 8);

    // A batch larger than segment_bytes still goes in, alone in a new segment.
    let big: Vec<String> = (0..50).map(|i| format!("big-{i:04}")).collect();
    let big: Vec<&str> = big.iter().map(String::as_str).collect();
    log.append_as_leader(producer_batch(&big), 1).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8, 10]);
    log.append_as_leader(batch2(9), 1).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8, 10, 60]);
    drop(logs);

    let logs = LogManager::open(dir.path(), config(2 * batch2_size() + 10)).unwrap();
    let log = logs.get(&tp()).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8, 10, 60]);
    assert_eq!(log.log_end_offset(), 62);
}

#[test]
fn truncation_is_batch_aligned_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(2 * batch2_size() + 10);
    let mut logs = LogManager::open(dir.path(), cfg).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    // Batches at 0,2 | 4,6 | 8,10 | 12 with epochs 0 0 | 1 1 | 2 2 | 3.
    fill(log, &[0, 0, 1, 1, 2, 2, 3]);
    log.set_high_watermark(14);
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8, 12]);

    // Offset 7 is inside the batch 6..=7: the whole batch goes, and with it every
    // later segment.
    log.truncate_to(7).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(log.segment_base_offsets(), vec![0, 4]);
    assert_eq!(log.high_watermark(), 6);
    assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0), e(1, 4)]);
    assert!(!segment_path(dir.path(), &tp(), 8).exists());
    assert!(!segment_path(dir.path(), &tp(), 12).exists());
    assert_eq!(offsets_in(log.read(4, usize::MAX).unwrap()), vec![4, 5]);

    // At a segment's base offset: that segment stays, empty, as the active one.
    log.truncate_to(4).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.segment_base_offsets(), vec![0, 4]);
    assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0)]);
    assert_eq!(
        std::fs::metadata(segment_path(dir.path(), &tp(), 4))
            .unwrap()
            .len(),
        0
    );

    // Truncating at or past the LEO changes nothing.
    log.truncate_to(4).unwrap();
    log.truncate_to(100).unwrap();
    assert_eq!(log.log_end_offset(), 4);

    // The log continues from the new end, in the new epoch.
    log.append_as_leader(batch2(9), 5).unwrap();
    assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0), e(5, 4)]);
    assert!(matches!(
        log.truncate_to(-1),
        Err(StorageError::OffsetOutOfRange { offset: -1, .. })
    ));
    drop(logs);

    let logs = LogManager::open(dir.path(), cfg).unwrap();
    let log = logs.get(&tp()).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0), e(5, 4)]);
    assert_eq!(
        flatten(&decode_file(&segment_path(dir.path(), &tp(), 4))),
        vec![(4, 5, "v9a".to_string()), (5, 5, "v9b".to_string())]
    );
}

#[test]
fn truncation_clamps_the_recovery_point_and_rewrites_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_messages: 1,
        ..config(1 << 20)
    };
    let mut logs = LogManager::open(dir.path(), cfg).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    fill(log, &[0, 0, 0]);
    assert_eq!(log.recovery_point(), 6);
    log.truncate_to(3).unwrap();
    assert_eq!(log.recovery_point(), 2);
    assert_eq!(
        read_text(&dir.path().join("recovery-point-offset-checkpoint")),
        "0\n1\nt 0 2\n"
    );
}

#[test]
fn reads_return_whole_batches_bounded_by_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(3 * batch2_size() + 10)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    fill(log, &[0, 0, 0, 0, 0]);
    let one = batch2_size() as usize;

    // The first batch comes whole even when it alone exceeds max_bytes (KIP-74).
    let read = log.read(0, 1).unwrap();
    assert_eq!(read.len(), one);
    assert_eq!(offsets_in(read), vec![0, 1]);
    assert_eq!(offsets_in(log.read(1, 0).unwrap()), vec![0, 1]);
    assert_eq!(offsets_in(log.read(0, 2 * one).unwrap()), vec![0, 1, 2, 3]);
    assert_eq!(
        offsets_in(log.read(0, 2 * one + 1).unwrap()),
        vec![0, 1, 2, 3]
    );
    // One read stays within a segment, as Kafka's does: 0..=5 | 6..=9.
    assert_eq!(
        offsets_in(log.read(3, usize::MAX).unwrap()),
        vec![2, 3, 4, 5]
    );
    assert_eq!(
        offsets_in(log.read(6, usize::MAX).unwrap()),
        vec![6, 7, 8, 9]
    );
    assert!(log.read(10, usize::MAX).unwrap().is_empty());

    for bad in [-1, 11] {
        match log.read(bad, 100) {
            Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: 0,
                log_end_offset: 10,
                ..
            }) => assert_eq!(offset, bad),
            other => panic!("read({bad}): {other:?}"),
        }
    }
}

#[test]
fn the_high_watermark_is_clamped_to_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    fill(log, &[0, 0]);
    log.set_high_watermark(99);
    assert_eq!(log.high_watermark(), 4);
    log.set_high_watermark(-5);
    assert_eq!(log.high_watermark(), 0);
    log.set_high_watermark(3);
    assert_eq!(log.high_watermark(), 3);
}

#[test]
fn flush_messages_one_fsyncs_and_checkpoints_every_append() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_messages: 1,
        ..config(1 << 20)
    };
    let mut logs = LogManager::open(dir.path(), cfg).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    for i in 0..3 {
        log.append_as_leader(batch2(i), 0).unwrap();
        let leo = log.log_end_offset();
        assert_eq!(log.recovery_point(), leo);
        assert_eq!(
            read_text(&dir.path().join("recovery-point-offset-checkpoint")),
            format!("0\n1\nt 0 {leo}\n")
        );
    }
}

#[test]
fn flush_messages_n_flushes_once_n_messages_are_unflushed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_messages: 5,
        ..config(1 << 20)
    };
    let mut logs = LogManager::open(dir.path(), cfg).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    fill(log, &[0, 0]);
    assert_eq!(log.recovery_point(), 0, "4 messages unflushed");
    log.append_as_leader(batch2(2), 0).unwrap();
    assert_eq!(log.recovery_point(), 6);
    log.append_as_leader(batch2(3), 0).unwrap();
    assert_eq!(log.recovery_point(), 6);
}

#[test]
fn flush_interval_flushes_when_due_and_zero_never_does() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_interval_ms: 1_000,
        ..config(1 << 20)
    };
    let mut logs = LogManager::open(dir.path(), cfg).unwrap();
    let opened = Instant::now();
    fill(logs.get_or_create(&tp()).unwrap(), &[0, 0]);
    logs.flush_if_due(opened).unwrap();
    assert_eq!(logs.get(&tp()).unwrap().recovery_point(), 0);
    logs.flush_if_due(opened + Duration::from_secs(2)).unwrap();
    assert_eq!(logs.get(&tp()).unwrap().recovery_point(), 4);
    assert_eq!(
        read_text(&dir.path().join("recovery-point-offset-checkpoint")),
        "0\n1\nt 0 4\n"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    fill(logs.get_or_create(&tp()).unwrap(), &[0]);
    logs.flush_if_due(Instant::now() + Duration::from_secs(3600))
        .unwrap();
    assert_eq!(logs.get(&tp()).unwrap().recovery_point(), 0);
}

#[test]
fn partitions_of_many_topics_live_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let tps = [
        TopicPartition::new("a-b-c", 10),
        TopicPartition::new("a-b", 0),
        TopicPartition::new("z", 1),
    ];
    let mut logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    for (i, tp) in tps.iter().enumerate() {
        fill(logs.get_or_create(tp).unwrap(), &vec![0; i + 1]);
    }
    logs.shutdown().unwrap();
    drop(logs);
    let logs = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    let mut expected = tps.to_vec();
    expected.sort();
    assert_eq!(logs.partitions().cloned().collect::<Vec<_>>(), expected);
    for (i, tp) in tps.iter().enumerate() {
        assert_eq!(logs.get(tp).unwrap().log_end_offset(), 2 * (i as i64 + 1));
    }
}

#[test]
fn an_unaligned_follower_append_takes_a_batch_from_inside_it_and_offsets_go_backwards() {
    // The follower holds [0,2) [2,4) [4,6) of epoch 0; the leader's log has a
    // four-record batch [4,8) of epoch 2 where ours has [4,6).
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    fill(log, &[0, 0, 0]);
    let leaders = leader_batch(4, 2, &["w", "x", "y", "z"]);

    // Every setting but high-watermark wants the batch to start at our LEO.
    assert!(matches!(
        log.append_as_follower(leaders.clone()),
        Err(StorageError::UnexpectedAppendOffset {
            expected: 6,
            actual: 4,
            ..
        })
    ));
    // Kafka 0.10's rule: the batch ends past our LEO (7 >= 6), so it goes in
    // whole, and the log reads 4 and 5 twice.
    let info = log.append_as_follower_unaligned(leaders).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (4, 7));
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(
        offsets_in(log.read(0, 1 << 20).unwrap()),
        vec![0, 1, 2, 3, 4, 5, 4, 5, 6, 7]
    );
    assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0), e(2, 4)]);

    // A batch that ends below the LEO is refused on that rule too.
    assert!(matches!(
        log.append_as_follower_unaligned(leader_batch(2, 2, &["a", "b"])),
        Err(StorageError::UnexpectedAppendOffset { .. })
    ));
}

#[test]
fn truncating_at_the_log_end_drops_an_epoch_that_never_appended() {
    // A leader elected at LEO 4 records (2, 4) at once (KAFKA-7415) and is
    // deposed before any append. As a follower it learns the new leader's
    // epoch 1 ended at 6 and its own epoch 1 at 4, and truncates to 4: no
    // record goes, but (2, 4) must, or it asks about epoch 2 for ever.
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    fill(log, &[0, 1]);
    log.leader_epoch_cache_mut().assign(2, 4).unwrap();
    assert_eq!(
        log.leader_epoch_cache().entries(),
        &[e(0, 0), e(1, 2), e(2, 4)]
    );
    log.truncate_to(4).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0), e(1, 2)]);
    // Past the end too: the epoch file follows the log, not the target.
    log.leader_epoch_cache_mut().assign(3, 4).unwrap();
    log.truncate_to(100).unwrap();
    assert_eq!(log.leader_epoch_cache().entries(), &[e(0, 0), e(1, 2)]);
    drop(logs);
    let logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    assert_eq!(
        logs.get(&tp()).unwrap().leader_epoch_cache().entries(),
        &[e(0, 0), e(1, 2)]
    );
}
