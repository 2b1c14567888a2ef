//! What lands on disk is Kafka's format: segments that kafka-protocol's decoder
//! reads alone, producer bytes kept except the two patched header fields, and
//! checkpoint files with exactly Kafka's text.

use crate::support;

use std::fs;

use bytes::Bytes;
use epochal_broker::storage::{EpochEntry, LogConfig, LogManager, StorageError, TopicPartition};
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use support::*;

#[test]
fn kafka_protocols_decoder_alone_reads_back_offsets_epochs_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    log.append_as_leader(producer_batch(&["a", "b"]), 0)
        .unwrap();
    log.append_as_leader(producer_batch(&["c"]), 0).unwrap();
    log.append_as_leader(producer_batch(&["d", "e", "f"]), 3)
        .unwrap();
    log.append_as_leader(producer_batch_compressed(&["g", "h"], Compression::Gzip), 4)
        .unwrap();
    drop(logs);

    let sets = decode_file(&segment_path(dir.path(), &tp(), 0));
    assert_eq!(sets.len(), 4, "one record set per batch");
    let expected: Vec<(i64, i32, String)> = [
        (0, 0, "a"),
        (1, 0, "b"),
        (2, 0, "c"),
        (3, 3, "d"),
        (4, 3, "e"),
        (5, 3, "f"),
        (6, 4, "g"),
        (7, 4, "h"),
    ]
    .iter()
    .map(|&(o, e, v)| (o, e, v.to_string()))
    .collect();
    assert_eq!(flatten(&sets), expected);
}

#[test]
fn a_produced_batch_is_stored_unchanged_except_base_offset_and_leader_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    let first = producer_batch(&["x", "y", "z", "w", "v"]);
    log.append_as_leader(first.clone(), 2).unwrap();
    for (sent, compression) in [
        (producer_batch(&["hello", "world"]), Compression::None),
        (
            producer_batch_compressed(&["p", "q", "r"], Compression::Snappy),
            Compression::Snappy,
        ),
    ] {
        let base = log.log_end_offset();
        log.append_as_leader(sent.clone(), 7).unwrap();
        let stored = log.read(base, usize::MAX).unwrap();
        assert_eq!(stored.len(), sent.len(), "{compression:?}");
        // baseOffset (bytes 0..8) and partitionLeaderEpoch (12..16) are patched ...
        assert_eq!(stored[0..8], base.to_be_bytes());
        assert_eq!(stored[12..16], 7i32.to_be_bytes());
        assert_eq!(sent[12..16], (-1i32).to_be_bytes());
        // ... and every other byte, CRC included, is the producer's.
        assert_eq!(stored[8..12], sent[8..12]);
        assert_eq!(stored[16..], sent[16..], "{compression:?}");
    }
    let file = fs::read(segment_path(dir.path(), &tp(), 0)).unwrap();
    assert_eq!(file[16..first.len()], first[16..]);
}

#[test]
fn follower_append_keeps_the_leaders_offsets_and_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    let fetched: Bytes = [
        leader_batch(0, 4, &["a", "b"]),
        leader_batch(2, 4, &["c"]),
        leader_batch(3, 6, &["d"]),
    ]
    .concat()
    .into();
    let info = log.append_as_follower(fetched.clone()).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 3));
    assert_eq!((info.record_count, info.batch_count), (4, 3));
    assert_eq!(
        log.leader_epoch_cache().entries(),
        &[
            EpochEntry {
                epoch: 4,
                start_offset: 0
            },
            EpochEntry {
                epoch: 6,
                start_offset: 3
            }
        ]
    );
    // Stored byte for byte as fetched.
    assert_eq!(
        fs::read(segment_path(dir.path(), &tp(), 0)).unwrap(),
        fetched
    );

    // A fetch that does not continue the log is refused whole.
    let err = log
        .append_as_follower(leader_batch(9, 6, &["gap"]))
        .unwrap_err();
    assert!(matches!(
        err,
        StorageError::UnexpectedAppendOffset {
            expected: 4,
            actual: 9,
            ..
        }
    ));
    assert_eq!(log.log_end_offset(), 4);
}

#[test]
fn checkpoint_files_have_kafkas_exact_text() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let t0 = TopicPartition::new("t", 0);
    let dashed = TopicPartition::new("my-topic", 2);
    let mut logs = LogManager::open(data, config(1 << 20)).unwrap();

    let log = logs.get_or_create(&t0).unwrap();
    // A new log has an empty epoch file, as Kafka creates it.
    assert_eq!(read_text(&data.join("t-0/leader-epoch-checkpoint")), "");
    log.append_as_leader(producer_batch(&["a", "b", "c"]), 0)
        .unwrap();
    log.append_as_leader(producer_batch(&["d", "e"]), 2)
        .unwrap();
    log.append_as_leader(producer_batch(&["f"]), 2).unwrap();
    log.set_high_watermark(4);
    let log = logs.get_or_create(&dashed).unwrap();
    log.append_as_leader(producer_batch(&["x"]), 5).unwrap();
    log.set_high_watermark(1);

    assert_eq!(
        read_text(&data.join("t-0/leader-epoch-checkpoint")),
        "0\n2\n0 0\n2 3\n"
    );
    assert_eq!(
        read_text(&data.join("my-topic-2/leader-epoch-checkpoint")),
        "0\n1\n5 0\n"
    );
    // Nothing flushed yet: the recovery points claim nothing.
    assert_eq!(
        read_text(&data.join("recovery-point-offset-checkpoint")),
        "0\n2\nmy-topic 2 0\nt 0 0\n"
    );

    logs.checkpoint_high_watermarks().unwrap();
    assert_eq!(
        read_text(&data.join("replication-offset-checkpoint")),
        "0\n2\nmy-topic 2 1\nt 0 4\n"
    );

    logs.shutdown().unwrap();
    assert_eq!(
        read_text(&data.join("recovery-point-offset-checkpoint")),
        "0\n2\nmy-topic 2 1\nt 0 6\n"
    );
    assert_eq!(read_text(&data.join(".kafka_cleanshutdown")), "");
    drop(logs);

    let logs = LogManager::open(data, LogConfig::default()).unwrap();
    assert!(logs.had_clean_shutdown());
    assert!(!data.join(".kafka_cleanshutdown").exists());
    assert_eq!(logs.get(&dashed).unwrap().high_watermark(), 1);
    assert_eq!(logs.get(&t0).unwrap().high_watermark(), 4);
    assert_eq!(logs.get(&t0).unwrap().log_end_offset(), 6);
    assert_eq!(
        logs.partitions().cloned().collect::<Vec<_>>(),
        vec![dashed.clone(), t0.clone()]
    );
    // Reopening rewrote both data-dir checkpoints with the same values.
    assert_eq!(
        read_text(&data.join("replication-offset-checkpoint")),
        "0\n2\nmy-topic 2 1\nt 0 4\n"
    );
    drop(logs);
    let logs = LogManager::open(data, LogConfig::default()).unwrap();
    assert!(!logs.had_clean_shutdown(), "the marker was consumed");
}

#[test]
fn every_record_in_a_read_decodes_with_kafka_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = LogManager::open(dir.path(), config(1 << 20)).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    for i in 0..10 {
        log.append_as_leader(producer_batch(&[&format!("v{i}"), "w"]), i / 4)
            .unwrap();
    }
    let mut bytes = log.read(7, usize::MAX).unwrap();
    let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
    // Offset 7 is the second record of the batch at 6, which is returned whole.
    assert_eq!(sets[0].records[0].offset, 6);
    assert_eq!(sets.len(), 7);
    assert_eq!(sets.last().unwrap().records[1].offset, 19);
}
