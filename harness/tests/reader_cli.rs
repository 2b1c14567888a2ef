//! `epochal inspect`: the dump, the JSON forms and the exit codes a script
//! relies on (0 read, 1 unreadable directory, 2 usage error).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use epochal::reader::{CompactDataDir, DataDirState, read_data_dir};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reader-basic")
}

fn epochal(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_epochal"))
        .args(args)
        .output()
        .expect("run epochal")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn inspect_prints_batches_and_records_like_dump_log_segments() {
    let output = epochal(&["inspect".as_ref(), fixture().as_os_str()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    for expected in [
        "Dumping t-0/00000000000000000010.log",
        "baseOffset: 13 lastOffset: 16 count: 4",
        "partitionLeaderEpoch: 3",
        "compresscodec: zstd",
        "| offset: 17 CreateTime: 1700000000017 keySize: 3 valueSize: -1",
        "payload: 0xdeadbeef",
        "epoch: 2 startOffset: 8",
        "t-0: logEndOffset: 19 highWatermark: 15 recoveryPoint: 10",
        "Clean shutdown marker: present",
        "Findings: 0",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn inspect_json_is_the_full_state_and_compact_the_compact_form() {
    let state = read_data_dir(&fixture()).unwrap();

    let output = epochal(&["inspect".as_ref(), fixture().as_os_str(), "--json".as_ref()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed: DataDirState = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed, state);

    let output = epochal(&[
        "inspect".as_ref(),
        fixture().as_os_str(),
        "--compact".as_ref(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed: CompactDataDir = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed, state.compact());
}

#[test]
fn findings_are_printed_and_still_exit_zero() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("t-0")).unwrap();
    fs::write(dir.path().join("t-0/00000000000000000000.log"), [0u8; 5]).unwrap();

    let output = epochal(&["inspect".as_ref(), dir.path().as_os_str()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    assert!(text.contains("Findings: 1"), "{text}");
    assert!(
        text.contains("t-0/00000000000000000000.log position 0: torn tail"),
        "{text}"
    );
}

#[test]
fn an_unreadable_data_dir_is_a_harness_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-data-dir");
    let output = epochal(&["inspect".as_ref(), missing.as_os_str()]);
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no-such-data-dir"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn usage_errors_exit_with_the_usage_code() {
    for args in [
        vec![],
        vec!["inspect"],
        vec!["inspect", "x", "--no-such-flag"],
        vec!["inspect", "x", "--json", "--compact"],
    ] {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        let output = epochal(&args);
        assert_eq!(output.status.code(), Some(3), "{args:?}: {output:?}");
    }
}
