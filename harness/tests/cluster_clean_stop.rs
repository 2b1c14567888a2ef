//! A clean stop deregisters the broker (tests/schedules/clean_stop.toml):
//! valid on the fixed broker, and `stop-kept-registration` when the broker
//! exits on SIGTERM without revoking its lease (its `shutdown-exits-at-once`
//! failpoint), which leaves t-0 without a leader for the lease's length.

use crate::common::scenario::{evidence_of, run_test_schedule};

#[test]
fn cluster_clean_stop_is_valid_when_the_broker_deregisters() {
    let (code, results, shown) = run_test_schedule("clean_stop.toml", &[]);
    assert_eq!(code, Some(0), "{shown}");
    assert_eq!(results["verdict"], "valid", "{results}");
    assert!(evidence_of(&results, "clean-stop").is_empty());
}

#[test]
fn cluster_clean_stop_names_a_broker_that_keeps_its_registration() {
    let set = ["--set", "failpoint.shutdown-exits-at-once=return"];
    let (code, results, shown) = run_test_schedule("clean_stop.toml", &set);
    assert_eq!(code, Some(1), "{shown}");
    let evidence = evidence_of(&results, "clean-stop");
    assert_eq!(evidence.len(), 1, "{results}");
    assert_eq!(evidence[0]["anomaly"], "stop-kept-registration");
    assert_eq!(evidence[0]["details"]["node"], "b1");
}
