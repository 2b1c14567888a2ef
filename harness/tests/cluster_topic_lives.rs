//! The topic-lives workload on a real cluster (tests/schedules/topic_lives.toml):
//! topics deleted and created again under one name while a broker is crashed
//! and restarted, valid on the fixed broker, and each of the two deletion
//! slips the broker can be set to named by its anomaly.

use std::path::{Path, PathBuf};

use crate::common;

fn schedule() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedules/topic_lives.toml")
}

/// Runs the schedule with `set`; its exit code and results.json.
fn run(set: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let store = tempfile::tempdir().unwrap();
    let output = common::scenario::run_quietly(&schedule(), store.path(), set);
    let shown = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let dir = common::scenario::latest(store.path());
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    (output.status.code(), results, shown)
}

fn result<'a>(results: &'a serde_json::Value, checker: &str) -> &'a serde_json::Value {
    results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == checker)
        .unwrap_or_else(|| panic!("no {checker} result: {results}"))
}

#[test]
fn cluster_topic_lives_are_valid_through_a_crash_and_restart() {
    let (code, results, shown) = run(&[]);
    assert_eq!(code, Some(0), "{shown}");
    assert_eq!(results["verdict"], "valid", "{results}");
    let lives = result(&results, "topic-lives");
    assert_eq!(lives["verdict"], "valid", "{lives}");
    // Several lives, each read back, and the liveness window's own.
    assert!(lives["counts"]["lives"].as_u64().unwrap() >= 3, "{lives}");
    assert!(
        lives["counts"]["records-read"].as_u64().unwrap() >= 3,
        "{lives}"
    );
}

#[test]
fn cluster_topic_lives_name_a_replica_that_keeps_a_deleted_log() {
    let (code, results, shown) = run(&["--set", "failpoint.stop-replica-keeps-log=return"]);
    assert_eq!(code, Some(1), "{shown}");
    let lives = result(&results, "topic-lives");
    assert_eq!(lives["verdict"], "invalid", "{lives}");
    let evidence = &lives["evidence"][0];
    assert_eq!(evidence["anomaly"], "resurrected-record");
    let details = &evidence["details"];
    assert!(
        details["sent_life"].as_u64().unwrap() < details["read_life"].as_u64().unwrap(),
        "{evidence}"
    );
}

#[test]
fn cluster_topic_lives_name_a_deletion_that_never_completes() {
    let (code, results, shown) = run(&[
        "--set",
        "failpoint.controller-drops-stop-replica-answer=return",
    ]);
    assert_eq!(code, Some(1), "{shown}");
    // The liveness window names the topic; the quiesce after it also finds
    // the cluster never settled (the topic stays marked for deletion), a
    // `no-recovery` of its own.
    let stuck: Vec<&serde_json::Value> = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["checker"] == "liveness")
        .flat_map(|r| r["evidence"].as_array().unwrap())
        .filter(|e| e["anomaly"] == "stuck-topic")
        .collect();
    assert_eq!(stuck.len(), 1, "{results}");
    assert_eq!(stuck[0]["details"]["topic"], "epochal-lives");
}
