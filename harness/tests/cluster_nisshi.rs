//! nisshi (systems/nisshi.toml) end to end on the process runtime: the
//! runtime starts PostgreSQL, applies the system file's schema, and starts
//! three stateless brokers on it; a broker crashes under acks=all load; the
//! final read goes over the protocol and every checker either ran over what
//! the run saw or says `not-applicable` with its reason.
//!
//! nisshi is not built by CI (its build took about an hour of one core:
//! ci/dev.sh installs only tansu), so unlike cluster_systems this test
//! skips, saying so, when nisshi is not installed; `bash ci/tools.sh nisshi`
//! installs it.

use crate::common;

use std::path::Path;

use common::scenario::{latest, read_results, run_quietly, show, suite_file};
use epochal::system::System;
use serde_json::Value;

/// Whether nisshi is installed; says how to install it when not.
fn installed() -> bool {
    let system = System::named("nisshi").unwrap();
    match system.node.program.resolve(Path::new("/nonexistent")) {
        Ok(_) => true,
        Err(missing) => {
            eprintln!("SKIPPED: nisshi is not installed: {missing}");
            false
        }
    }
}

fn result<'a>(results: &'a Value, checker: &str) -> &'a Value {
    results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == checker)
        .unwrap_or_else(|| panic!("no {checker} in {results}"))
}

#[test]
fn cluster_nisshi_on_postgres_takes_a_broker_crash_and_none_is_valid_over_what_it_cannot_see() {
    if !installed() {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let schedule = suite_file("systems/tansu-broker-crash.toml");
    let output = run_quietly(&schedule, store.path(), &["--system", "nisshi"]);
    assert!(output.status.success(), "{}", show(&output));
    let run = latest(store.path());
    // The stored system file carries the schema the runtime applied.
    let system = std::fs::read_to_string(run.join("system.toml")).unwrap();
    assert!(system.contains("create table record ("), "{system}");
    let results = read_results(&run);
    assert_eq!(results["verdict"], "valid", "{results:#}");
    for checker in [
        "divergence",
        "epoch-file",
        "one-leader-per-epoch",
        "stale-controller-fenced",
    ] {
        let r = result(&results, checker);
        assert_eq!(r["verdict"], "not-applicable", "{r:#}");
        assert!(
            r["message"]
                .as_str()
                .unwrap()
                .contains("which the system under test (nisshi) does not let the harness see"),
            "{r:#}"
        );
    }
    let count = |checker: &str, name: &str| result(&results, checker)["counts"][name].as_u64();
    assert!(count("lost-write", "acknowledged").unwrap() >= 300);
    assert!(count("consumer", "records-read").unwrap() > 0);
    let read: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("final-read/final-read.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(read["via"], "b1", "{read:#}");
}

/// docs/findings/nisshi-fetch-zero-wait-answers-nothing.md, kept
/// reproducing: without its `[client] fetch_max_wait_ms`, nisshi's file
/// makes the harness poll with max_wait_ms = 0, which nisshi answers with
/// no partition at all, so every poll fails and the final read reads
/// nothing.
#[test]
fn cluster_nisshi_answers_a_fetch_that_may_not_wait_without_any_partition() {
    if !installed() {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let text = System::named("nisshi").unwrap().text;
    let without = text.replace("fetch_max_wait_ms = 10\n", "");
    assert_ne!(without, text, "nisshi.toml sets [client] fetch_max_wait_ms");
    let system = store.path().join("nisshi-zero-wait.toml");
    std::fs::write(&system, without).unwrap();
    let output = run_quietly(
        &suite_file("systems/tansu-clients-cut.toml"),
        &store.path().join("store"),
        &["--system", system.to_str().unwrap()],
    );
    let run = latest(&store.path().join("store"));
    let history = std::fs::read_to_string(run.join("history.jsonl")).unwrap();
    let polls: Vec<&str> = history
        .lines()
        .filter(|l| l.contains(r#""f":"poll""#))
        .collect();
    // No poll read anything, and the answers that came lacked the
    // partition (the others failed on the cut).
    assert!(
        !polls.iter().any(|l| l.contains(r#""type":"ok""#)),
        "a poll read something: {polls:?}"
    );
    assert!(
        polls.iter().any(|l| l.contains("Fetch answer lacks t-")),
        "{}",
        show(&output)
    );
    let results = read_results(&run);
    assert_eq!(results["verdict"], "unknown", "{results:#}");
}

/// docs/findings/nisshi-delete-topic-deletes-every-topic.md, kept
/// reproducing: the topic-lives client deletes only its own topic, and `t`,
/// which nothing deletes, is gone from the final read; the run is unknown,
/// never valid, and its sends to `t` fail once the first deletion is done.
#[test]
fn cluster_nisshi_deleting_one_topic_deletes_every_topic() {
    if !installed() {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let schedule = suite_file("systems/nisshi-topic-lives.toml");
    let output = run_quietly(&schedule, store.path(), &["--system", "nisshi"]);
    let run = latest(store.path());
    let history = std::fs::read_to_string(run.join("history.jsonl")).unwrap();
    let deleted: Vec<&str> = history
        .lines()
        .filter(|l| l.contains(r#""type":"ok","f":"delete-topic""#))
        .collect();
    assert!(!deleted.is_empty(), "{}", show(&output));
    assert!(
        deleted
            .iter()
            .all(|l| l.contains(r#""topic":"epochal-lives""#)),
        "{deleted:?}"
    );
    let acked = history
        .lines()
        .filter(|l| l.contains(r#""type":"ok","f":"send""#))
        .count();
    assert!(acked > 0, "{}", show(&output));
    let read: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("final-read/final-read.json")).unwrap(),
    )
    .unwrap();
    // At most the lives' own topic, in a life begun after the last
    // deletion; never t.
    assert!(
        read["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["topic"] == "epochal-lives"),
        "{read:#}"
    );
    let results = read_results(&run);
    assert_eq!(results["verdict"], "unknown", "{results:#}");
    assert!(
        result(&results, "lost-write")["message"]
            .as_str()
            .unwrap()
            .contains("has no t-0"),
        "{results:#}"
    );
}
