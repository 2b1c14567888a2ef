//! Storage hot-path benchmark: leader append, fetch-sized reads, follower copy,
//! recovery on reopen. Run with `cargo bench -p epochal-broker --bench storage`.
//! Numbers are printed, never asserted (timing is not a test); each phase still
//! checks that what was written reads back in full.

#[path = "../tests/support/storage.rs"]
mod support;

use std::time::Instant;

use bytes::Bytes;
use epochal_broker::storage::record_batch::Batches;
use epochal_broker::storage::{LogConfig, LogManager};
use support::*;

const BATCHES: usize = 20_000;
const RECORDS_PER_BATCH: usize = 10;

fn one_batch() -> Bytes {
    let value = "x".repeat(100);
    let values: Vec<&str> = (0..RECORDS_PER_BATCH).map(|_| value.as_str()).collect();
    producer_batch(&values)
}

fn report(what: &str, started: Instant, ops: usize, bytes: usize) {
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "{what}: {ops} in {:.3} s = {:.0}/s, {:.1} MB/s",
        secs,
        ops as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}

fn append_and_read_throughput() {
    let batch = one_batch();
    let total_bytes = batch.len() * BATCHES;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(64 << 20);
    let mut logs = LogManager::open(dir.path(), cfg).unwrap();

    let log = logs.get_or_create(&tp()).unwrap();
    let started = Instant::now();
    for _ in 0..BATCHES {
        log.append_as_leader(batch.clone(), 0).unwrap();
    }
    report("leader append (batches)", started, BATCHES, total_bytes);
    let leo = log.log_end_offset();
    assert_eq!(leo, (BATCHES * RECORDS_PER_BATCH) as i64);

    let started = Instant::now();
    let mut offset = 0;
    let mut reads = 0;
    let mut read_bytes = 0;
    while offset < leo {
        let bytes = log.read(offset, 1 << 20).unwrap();
        let last = Batches::new(&bytes)
            .map(|b| b.unwrap().header)
            .last()
            .unwrap();
        offset = last.next_offset();
        read_bytes += bytes.len();
        reads += 1;
    }
    report("read 1 MiB fetches", started, reads, read_bytes);
    assert_eq!(read_bytes, total_bytes);

    // A follower copying the leader's log, fetch by fetch.
    let follower = tp_named("follower");
    let started = Instant::now();
    let mut offset = 0;
    while offset < leo {
        let bytes = logs.get(&tp()).unwrap().read(offset, 1 << 20).unwrap();
        let info = logs
            .get_or_create(&follower)
            .unwrap()
            .append_as_follower(bytes)
            .unwrap();
        offset = info.last_offset + 1;
    }
    report("follower read+append", started, BATCHES, total_bytes);
    assert_eq!(logs.get(&follower).unwrap().log_end_offset(), leo);

    let started = Instant::now();
    drop(logs);
    let logs = LogManager::open(dir.path(), cfg).unwrap();
    report(
        "reopen with full recovery (2 logs)",
        started,
        2,
        2 * total_bytes,
    );
    assert_eq!(logs.get(&follower).unwrap().log_end_offset(), leo);
}

fn fsync_every_append_latency() {
    let batch = one_batch();
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_messages: 1,
        ..config(64 << 20)
    };
    let mut logs = LogManager::open(dir.path(), cfg).unwrap();
    let log = logs.get_or_create(&tp()).unwrap();
    let n = 300;
    let started = Instant::now();
    for _ in 0..n {
        log.append_as_leader(batch.clone(), 0).unwrap();
    }
    report(
        "leader append, flush.messages=1",
        started,
        n,
        n * batch.len(),
    );
    assert_eq!(log.recovery_point(), (n * RECORDS_PER_BATCH) as i64);
}

fn tp_named(topic: &str) -> epochal_broker::storage::TopicPartition {
    epochal_broker::storage::TopicPartition::new(topic, 0)
}

fn main() {
    append_and_read_throughput();
    fsync_every_append_latency();
}
