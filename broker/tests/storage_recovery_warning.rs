//! Recovery's warning names the file and byte position it cut at. Alone in its
//! own test binary: tracing caches per call site whether anyone listens, and a
//! test running beside it without a subscriber could cache "no one" first.

#[path = "support/storage.rs"]
mod support;

use std::fs::{self, OpenOptions};

use epochal_broker::storage::{LogConfig, LogManager};
use support::*;

/// Collects what tracing writes, to check recovery's warning text.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_recovery_warning_names_the_file_and_byte_position() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let second_batch_at = {
        let mut logs = LogManager::open(data, config(1 << 20)).unwrap();
        let log = logs.get_or_create(&tp()).unwrap();
        log.append_as_leader(producer_batch(&["a", "b"]), 0)
            .unwrap();
        let at = fs::metadata(segment_path(data, &tp(), 0)).unwrap().len();
        log.append_as_leader(producer_batch(&["c"]), 1).unwrap();
        at
    };
    let segment = segment_path(data, &tp(), 0);
    let len = fs::metadata(&segment).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(len - 1)
        .unwrap();

    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        LogManager::open(data, LogConfig::default()).unwrap();
    });
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let warning = text
        .lines()
        .find(|l| l.contains("WARN") && l.contains("truncated"))
        .unwrap_or_else(|| panic!("no recovery warning in {text:?}"));
    assert!(
        warning.contains(&segment.display().to_string()),
        "{warning}"
    );
    assert!(
        warning.contains(&format!("position={second_batch_at}")),
        "{warning}"
    );
}
