//! A system other than the reference broker, end to end: tansu (systems/
//! tansu.toml) runs a scripted scenario under the same workload, nemesis and
//! checkers. Every checker either ran over what the run saw, or says
//! `not-applicable` with its reason; none says valid over data it never saw.
//! And the final read over the protocol is what lost-write holds acknowledged
//! writes against: a value taken out of it is a lost write. The same run's
//! database is checked as tansu's replica (cluster_database.rs): valid as
//! the run left it, and each row changed after the run named.
//!
//! Needs tansu installed (`bash ci/tools.sh tansu`, which `ci/dev.sh test`
//! runs): a missing tool fails the test with that command, never skips it.

use crate::common;

use std::path::Path;

use common::scenario::{latest, read_results, result_of as result, run_quietly, show, suite_file};
use epochal::system::System;
use serde_json::Value;

/// Fails with how to install the system's program when it is missing.
fn require(system: &str) {
    let system = System::named(system).unwrap();
    if let Err(missing) = system.node.program.resolve(Path::new("/nonexistent")) {
        panic!("{} is not installed: {missing}", system.name);
    }
}

/// Runs the suite's `schedule` on tansu as `system_text` describes it (a
/// variant of its file, written into `store`): the run's output, directory
/// and history.
fn run_variant(
    store: &Path,
    system_text: &str,
    schedule: &str,
) -> (std::process::Output, std::path::PathBuf, String) {
    let system = store.join("tansu-variant.toml");
    std::fs::write(&system, system_text).unwrap();
    let output = run_quietly(
        &suite_file(schedule),
        &store.join("store"),
        &["--system", system.to_str().unwrap()],
    );
    let run = latest(&store.join("store"));
    let history = std::fs::read_to_string(run.join("history.jsonl")).unwrap();
    (output, run, history)
}

#[test]
fn cluster_tansu_runs_under_the_same_checkers_and_none_is_valid_over_what_it_cannot_see() {
    require("tansu");
    let store = tempfile::tempdir().unwrap();
    let schedule = suite_file("systems/tansu-broker-crash.toml");
    let output = run_quietly(&schedule, store.path(), &["--system", "tansu"]);
    assert!(output.status.success(), "{}", show(&output));
    let run = latest(store.path());
    assert!(
        run.join("system.toml").is_file(),
        "the run keeps its system file"
    );
    let results = read_results(&run);
    assert_eq!(results["verdict"], "valid", "{results:#}");
    for checker in [
        "divergence",
        "epoch-file",
        "one-leader-per-epoch",
        "clean-election",
        "stale-controller-fenced",
        "isr-acks",
    ] {
        let r = result(&results, checker);
        assert_eq!(r["verdict"], "not-applicable", "{r:#}");
        assert!(
            r["message"]
                .as_str()
                .unwrap()
                .contains("which the system under test (tansu) does not let the harness see"),
            "{r:#}"
        );
    }
    // The ones that ran looked at something: every acknowledged send, and
    // polls that read records.
    let count = |checker: &str, name: &str| result(&results, checker)["counts"][name].as_u64();
    assert!(count("lost-write", "acknowledged").unwrap() >= 300);
    assert!(count("consumer", "records-read").unwrap() > 0);
    assert_eq!(result(&results, "duplicates")["verdict"], "valid");
    let read: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("final-read/final-read.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(read["via"], "b1", "{read:#}");
    crate::cluster_database::database_rows_changed_after_the_run_are_reported(&run);

    // Take one acknowledged value out of the final read's segment: `epochal
    // check` (the checkers alone, on the stored run) must call it lost.
    let segment = run.join("final-read/t-0/00000000000000000000.log");
    let bytes = std::fs::read(&segment).unwrap();
    let cut = first_batch_len(&bytes);
    std::fs::write(&segment, &bytes[cut..]).unwrap();
    let output = common::scenario::epochal()
        .arg("check")
        .arg(&run)
        .output()
        .unwrap();
    // `check` prints its report (results.json stays as the run wrote it).
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{}", show(&output));
    assert!(stdout.contains("invalid  lost-write"), "{}", show(&output));
    assert!(
        stdout.contains("is not in the final log (the final read over the protocol through b1)"),
        "{}",
        show(&output)
    );
}

/// The length of the first record batch in a segment: its 8-byte base
/// offset, its 4-byte length, then that many bytes.
fn first_batch_len(segment: &[u8]) -> usize {
    let length = i32::from_be_bytes(segment[8..12].try_into().unwrap());
    12 + usize::try_from(length).unwrap()
}

/// docs/findings/tansu-fetch-node-endpoints.md, kept reproducing: without
/// its `[client] fetch_version = 11`, tansu's file makes the harness read
/// with Fetch v12, and tansu's answers carry v16's NodeEndpoints tag, which a
/// decoder generated from Kafka's schema rejects. Every poll fails, and the
/// final read reads nothing, so the data checkers cannot judge the run.
#[test]
fn cluster_tansu_fetch_v12_answers_carry_a_tag_kafka_defines_from_v16_only() {
    require("tansu");
    let store = tempfile::tempdir().unwrap();
    let text = System::named("tansu").unwrap().text;
    let without_client = &text[..text.find("[client]").expect("tansu.toml sets [client]")];
    let (output, run, history) = run_variant(
        store.path(),
        without_client,
        "systems/tansu-broker-crash.toml",
    );
    let polls_failed = history
        .lines()
        .filter(|l| l.contains("\"f\":\"poll\"") && l.contains("\"type\":\"fail\""))
        .count();
    let malformed = history
        .matches("protocol violation: Fetch v12: Tag 0 is not valid for version 12")
        .count();
    let polls_ok = history
        .lines()
        .filter(|l| l.contains("\"f\":\"poll\"") && l.contains("\"type\":\"ok\""))
        .count();
    assert_eq!(polls_ok, 0, "{}", show(&output));
    assert!(
        malformed > 100 && malformed + 10 >= polls_failed,
        "{malformed} malformed of {polls_failed} failed polls\n{}",
        show(&output)
    );
    let results = read_results(&run);
    assert_eq!(results["verdict"], "unknown", "{results:#}");
    assert_eq!(result(&results, "lost-write")["verdict"], "unknown");
}

/// docs/findings/tansu-member-id-required-below-v4.md, kept reproducing:
/// with `[client] join_group_version = 2` the subscribed consumers join as a
/// client from before KIP-394 would, and tansu answers every first join
/// with MEMBER_ID_REQUIRED, which Kafka sends only from JoinGroup v4 on: no
/// consumer ever joins, so no commit is acknowledged and the run's await of
/// commits times out.
#[test]
fn cluster_tansu_answers_a_join_group_v2_with_member_id_required() {
    require("tansu");
    let store = tempfile::tempdir().unwrap();
    let text = System::named("tansu").unwrap().text;
    let at = text.find("[client]").expect("tansu.toml sets [client]") + "[client]".len();
    let pinned = format!("{}\njoin_group_version = 2{}", &text[..at], &text[at..]);
    let (output, run, history) = run_variant(
        store.path(),
        &pinned,
        "systems/tansu-subscribers-broker-crash.toml",
    );
    let rounds = |kind: &str| {
        history
            .lines()
            .filter(|l| l.contains("\"f\":\"rebalance\"") && l.contains(kind))
            .count()
    };
    let refused = history.matches("(MemberIdRequired)").count();
    assert_eq!(rounds("\"type\":\"ok\""), 0, "{}", show(&output));
    assert!(
        refused > 100 && refused + 10 >= rounds("\"type\":\"fail\""),
        "{refused} MEMBER_ID_REQUIRED of {} failed rounds\n{}",
        rounds("\"type\":\"fail\""),
        show(&output)
    );
    assert_eq!(read_results(&run)["verdict"], "unknown");
}

/// tansu on the Docker runtime: its image is built from the installed
/// binary (epochal-tansu), the brokers share the run's dir by a bind mount
/// and start in it, nothing but the brokers and the proxy runs (no etcd),
/// readiness is a Kafka answer on the published port, and the clients' cut
/// from b1 moves them to b2 as on the process runtime. The gate runs the
/// whole suite on Docker in CI (ci/dev.sh).
#[test]
fn cluster_docker_tansu_takes_a_clients_cut_valid_and_leaves_nothing() {
    use common::docker::{assert_nothing_left, containers, require_docker, run_id};
    require("tansu");
    require_docker();
    let store = tempfile::tempdir().unwrap();
    let schedule = suite_file("systems/tansu-clients-cut.toml");
    let output = run_quietly(
        &schedule,
        store.path(),
        &["--system", "tansu", "--runtime", "docker"],
    );
    let run = latest(store.path());
    let id = run_id(&run);
    assert!(output.status.success(), "{}", show(&output));
    let results = read_results(&run);
    assert_eq!(results["verdict"], "valid", "{results:#}");
    let acknowledged = result(&results, "lost-write")["counts"]["acknowledged"]
        .as_u64()
        .unwrap();
    assert!(acknowledged >= 300, "{acknowledged}");
    // The database in the shared dir, written by the containers, is read
    // and checked as on the process runtime.
    for checker in ["database-lost-write", "database-divergence"] {
        assert_eq!(result(&results, checker)["verdict"], "valid", "{results:#}");
    }
    let log = std::fs::read_to_string(run.join("harness.log")).unwrap();
    // The clients moved to b2 during the cut: the await under it was met
    // (at least 150 acknowledged, however many the last await saw).
    assert!(
        log.lines()
            .any(|l| l.contains("step 3: ") && l.contains("more writes acknowledged after")),
        "{log}"
    );
    assert!(
        run.join("nodes/shared/tansu.db").is_file(),
        "the database is in the run's shared dir"
    );
    assert!(containers(&id).is_empty());
    assert_nothing_left(&id, "after a tansu run on Docker");
}
