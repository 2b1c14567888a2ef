//! Writes a small partition log with the broker's storage engine and prints it.
//!
//! `cargo run -p epochal-broker --example storage_demo -- DATA_DIR` creates topic
//! partition `demo-0` in DATA_DIR, appends batches as leader in epoch 0, then in
//! epoch 1 (the leader changed), with segments small enough that the log rolls,
//! shuts the storage down cleanly, and prints every file it wrote. The harness's
//! independent reader can then print the same directory back.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use bytes::{Bytes, BytesMut};
use epochal_broker::storage::{LogConfig, LogManager, TopicPartition};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Segment size for the demo: a few batches, so the log rolls once.
const SEGMENT_BYTES: u64 = 300;

/// (leader epoch, values of one batch).
const BATCHES: &[(i32, &[&str])] = &[
    (0, &["alpha", "beta"]),
    (0, &["gamma"]),
    (0, &["delta", "epsilon", "zeta"]),
    (1, &["eta", "theta"]),
    (1, &["iota"]),
];

/// A batch as a producer would send it: offsets from 0, no leader epoch yet.
fn producer_batch(values: &[&str]) -> anyhow::Result<Bytes> {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol keeps records in one batch while offset minus
            // sequence is constant; this also yields baseSequence -1.
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("key-{value}"))),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )?;
    Ok(buf.freeze())
}

fn main() -> anyhow::Result<()> {
    let Some(data_dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        bail!("usage: storage_demo DATA_DIR");
    };
    let tp = TopicPartition::new("demo", 0);
    if data_dir.join(tp.dir_name()).exists() {
        bail!(
            "{} already holds {}; give an empty or new directory",
            data_dir.display(),
            tp.dir_name()
        );
    }
    let config = LogConfig {
        segment_bytes: SEGMENT_BYTES,
        ..LogConfig::default()
    };
    let mut logs = LogManager::open(&data_dir, config)?;
    let log = logs.get_or_create(&tp)?;
    for &(epoch, values) in BATCHES {
        let info = log.append_as_leader(producer_batch(values)?, epoch)?;
        println!(
            "appended {values:?} as leader in epoch {epoch}: offsets {}..={}",
            info.first_offset, info.last_offset
        );
    }
    // As if every replica had caught up.
    let leo = log.log_end_offset();
    log.set_high_watermark(leo);
    logs.shutdown()?;
    drop(logs);

    println!();
    print_dir(&data_dir)
}

/// Prints every file under `data_dir`: checkpoints as text, segments batch by
/// batch as kafka-protocol's decoder reads them.
fn print_dir(data_dir: &Path) -> anyhow::Result<()> {
    println!("== {}", data_dir.display());
    let mut files = Vec::new();
    collect_files(data_dir, &mut files)?;
    files.sort();
    for path in files {
        let name = path.strip_prefix(data_dir).unwrap_or(&path).display();
        if path.extension().is_some_and(|e| e == "log") {
            let mut bytes = Bytes::from(fs::read(&path)?);
            println!("-- {name} ({} bytes)", bytes.len());
            let sets = RecordBatchDecoder::decode_all(&mut bytes)
                .with_context(|| format!("decode {}", path.display()))?;
            for set in sets {
                let (Some(first), Some(last)) = (set.records.first(), set.records.last()) else {
                    continue;
                };
                println!(
                    "   batch offsets {}..={} leader epoch {}",
                    first.offset, last.offset, first.partition_leader_epoch
                );
                for r in &set.records {
                    let text = |b: &Option<Bytes>| {
                        b.as_ref()
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                            .unwrap_or_else(|| "null".into())
                    };
                    println!(
                        "     offset {} key {} value {}",
                        r.offset,
                        text(&r.key),
                        text(&r.value)
                    );
                }
            }
        } else {
            let text = fs::read_to_string(&path)?;
            println!("-- {name}");
            for line in text.lines() {
                println!("   {line}");
            }
        }
    }
    Ok(())
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_files(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}
