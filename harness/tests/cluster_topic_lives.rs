//! The topic-lives workload on a real cluster (tests/schedules/topic_lives.toml):
//! topics deleted and created again under one name while a broker is crashed
//! and restarted, valid on the fixed broker, and each of the two deletion
//! slips the broker can be set to named by its anomaly.

use crate::common::scenario::{evidence_of, result_of as result, run_test_schedule};

const SCHEDULE: &str = "topic_lives.toml";

#[test]
fn cluster_topic_lives_are_valid_through_a_crash_and_restart() {
    let (code, results, shown) = run_test_schedule(SCHEDULE, &[]);
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
    let set = ["--set", "failpoint.stop-replica-keeps-log=return"];
    let (code, results, shown) = run_test_schedule(SCHEDULE, &set);
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
    let set = [
        "--set",
        "failpoint.controller-drops-stop-replica-answer=return",
    ];
    let (code, results, shown) = run_test_schedule(SCHEDULE, &set);
    assert_eq!(code, Some(1), "{shown}");
    // The liveness window names the topic; the quiesce after it also finds
    // the cluster never settled (the topic stays marked for deletion), a
    // `no-recovery` of its own.
    let stuck: Vec<_> = evidence_of(&results, "liveness")
        .into_iter()
        .filter(|e| e["anomaly"] == "stuck-topic")
        .collect();
    assert_eq!(stuck.len(), 1, "{results}");
    assert_eq!(stuck[0]["details"]["topic"], "epochal-lives");
}
