//! A producer-state snapshot the real broker wrote, read back by the
//! harness's own reader (issue #20): the suite's idempotent scenario on
//! `producer_state_recovery = current` restarts b2 after a crash, and b2
//! writes a snapshot of the state it rebuilt from its log. The reader must
//! find it intact with the idempotent producer's entry, and the same file
//! with one byte flipped must come back as a finding naming it, not a panic.
//! Needs the workspace's binaries built and `etcd` on PATH.

use crate::common;

use common::scenario::{latest, read_results, run_quietly, schedule_file, show};
use epochal::history::{OpType, read_history};
use epochal::reader::{FindingKind, read_data_dir};

#[test]
fn cluster_a_snapshot_the_broker_wrote_is_read_back_and_a_flipped_byte_is_a_finding() {
    let temp = tempfile::tempdir().unwrap();
    let store = temp.path().join("store");
    let output = run_quietly(
        &schedule_file("idempotent-retry-after-failover.toml"),
        &store,
        &["--set", "producer_state_recovery=current"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let run_dir = latest(&store);
    assert_eq!(read_results(&run_dir)["verdict"], "valid");

    // The first acknowledged send's producer: the one b1 stopped on.
    let history = read_history(run_dir.join("history.jsonl")).unwrap();
    let first = history
        .iter()
        .filter(|op| op.kind == OpType::Ok)
        .find_map(|op| op.send().and_then(|send| send.producer))
        .expect("an acknowledged idempotent send");

    let data = run_dir.join("nodes/b2/data");
    let state = read_data_dir(&data).unwrap();
    let replica = state.replica("t", 0).expect("b2 holds t-0");
    let snapshot = replica
        .producer_snapshots
        .first()
        .unwrap_or_else(|| panic!("b2 wrote no producer snapshot: {replica:?}"));
    assert!(
        snapshot.intact,
        "{snapshot:?}; findings {:?}",
        replica.findings
    );
    assert!(
        snapshot.offset >= 1 && snapshot.offset <= replica.log_end_offset,
        "{snapshot:?} against log end {}",
        replica.log_end_offset
    );
    let entry = snapshot
        .entries
        .iter()
        .find(|e| e.producer_id == first.id)
        .unwrap_or_else(|| panic!("no entry for producer {}: {snapshot:?}", first.id));
    assert_eq!(entry.producer_epoch, first.epoch);
    assert!(
        entry.has_batch() && entry.last_offset < snapshot.offset,
        "{entry:?}"
    );
    assert!(
        replica.findings.is_empty(),
        "an intact replica: {:?}",
        replica.findings
    );

    // The same directory with one byte of that snapshot flipped.
    let damaged = temp.path().join("damaged");
    common::copy_dir(&data, &damaged);
    let file = damaged.join(&snapshot.file);
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let state = read_data_dir(&damaged).unwrap();
    let replica = state.replica("t", 0).unwrap();
    let read = replica
        .producer_snapshots
        .iter()
        .find(|s| s.file == snapshot.file)
        .expect("the damaged snapshot is still listed");
    assert!(!read.intact && read.entries.is_empty(), "{read:?}");
    assert!(
        replica.findings.iter().any(|f| f.file == snapshot.file
            && matches!(f.kind, FindingKind::SnapshotCrcMismatch { .. })),
        "no CRC finding naming {}: {:?}",
        snapshot.file.display(),
        replica.findings
    );
    // The log itself still reads whole.
    assert_eq!(
        replica.records().count(),
        read_data_dir(&data)
            .unwrap()
            .replica("t", 0)
            .unwrap()
            .records()
            .count()
    );
}
