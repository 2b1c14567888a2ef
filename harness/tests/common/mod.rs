//! Helpers shared by the integration tests: a copy of the committed
//! `reader-basic` fixture (see `reader_fixtures.rs` for how it is written and
//! what it holds), the data-directory writer (`segments`), a real etcd
//! (`etcd`), hand-built run directories for the checkers (`run_dir`) and
//! scenario runs of the real binary and what they stored (`scenario`). Each
//! test module uses only part of it.
#![allow(dead_code)]

pub mod docker;
pub mod etcd;
pub mod groups;
pub mod html;
pub mod run_dir;
pub mod scenario;
pub mod segments;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use epochal::observe::{ClusterView, await_ready};
use epochal::reader::{DataDirState, read_data_dir};
use epochal::runtime::Runtime;

/// The dir cargo put the binaries in: the test executable lives in its `deps/`.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_owned();
    for bin in ["epochal-broker", "epochal-proxy"] {
        assert!(
            dir.join(bin).is_file(),
            "{} is missing: build the workspace first (cargo build --workspace --bins)",
            dir.join(bin).display()
        );
    }
    dir
}

/// Awaits `runtime`'s cluster ready as etcd shows it (observe::ready); panics
/// with what is missing at the deadline.
pub async fn ready<R: Runtime>(runtime: &R, timeout: Duration) -> ClusterView {
    await_ready(runtime.etcd_endpoint(), runtime.nodes(), timeout)
        .await
        .unwrap()
}

pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reader-basic")
}

pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A private copy of the fixture, and the reader's view of it before any
/// change.
pub fn fixture_copy() -> (tempfile::TempDir, DataDirState) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    let clean = read_data_dir(dir.path()).unwrap();
    assert_eq!(
        clean.all_findings().count(),
        0,
        "the fixture itself is clean"
    );
    (dir, clean)
}

/// Every file under `root`, relative to it, with its bytes.
pub fn files_under(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = fs::read(&path).unwrap();
                files.insert(path.strip_prefix(root).unwrap().to_owned(), bytes);
            }
        }
    }
    files
}

/// One uncompressed v2 batch of `(offset, value)` records in leader epoch
/// `epoch`, written by kafka-protocol's encoder as `reader_fixtures.rs` does
/// (never the broker crate); `control` sets the control bit (a transaction
/// marker's batch).
pub fn plain_batch(epoch: i32, control: bool, records: &[(i64, &str)]) -> Vec<u8> {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let first = records.first().map_or(0, |(offset, _)| *offset);
    let records: Vec<Record> = records
        .iter()
        .map(|(offset, value)| Record {
            transactional: control,
            control,
            partition_leader_epoch: epoch,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: *offset,
            // The encoder cuts a batch where `offset - sequence` changes.
            sequence: -1 + (offset - first) as i32,
            timestamp: 1_700_000_000_000 + offset,
            key: None,
            value: Some(bytes::Bytes::copy_from_slice(value.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
    buf.to_vec()
}

/// Writes `batches` back to back as `<data>/<partition>/00000000000000000000.log`.
pub fn write_log(data: &Path, partition: &str, batches: &[Vec<u8>]) {
    let dir = data.join(partition);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(format!("{:020}.log", 0)), batches.concat()).unwrap();
}

/// The children of `pid`, from /proc.
pub fn children(pid: u32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // The fields after the parenthesised command: state, ppid, ...
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        if ppid == pid {
            found.push(child);
        }
    }
    found
}
