//! A transactional application's aborted records read under read_committed,
//! caught ([apps], issue 54): `epochal up` starts three brokers and topic t,
//! and a confluent-kafka application (tests/clients/cluster_up_app_txns.py,
//! a process of its own) runs six transactions of three decimal values to
//! t-0, aborting the second and the fifth after their records reached the
//! broker, then reads t-0 back with a read_committed consumer of group
//! app-txn-readers. The client proxies record it all; at Ctrl-C the session
//! strings the application's AddPartitionsToTxn, Produce and EndTxn requests
//! into one `txn` op per transaction, its JoinGroup and SyncGroup into a
//! `rebalance`, its fetches into read_committed `poll`s, and the
//! transactions checker rules on them. With the broker's
//! `leader-omits-aborted-transactions` slip (a read_committed fetch answered
//! without its aborted-transactions list, so the consumer cannot drop the
//! aborted records) the application reads the aborted values: the verdict
//! is invalid, `aborted-read`, the evidence naming the application's poll
//! and the aborted `txn` that wrote the value. Without it the verdict is
//! valid and counts the application's transactions and reads. Needs `etcd`,
//! the workspace's binaries and EPOCHAL_PYTHON with confluent-kafka.

use crate::cluster_up_common;
use crate::common::scenario::result_of as result;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

use cluster_up_common::{Up, await_some, interrupt_and_judge, start_client};
use serde_json::Value;

/// Bound on the application's transactions and its read.
const APP_WITHIN_S: u64 = 120;

/// Plays the scenario with `extra` flags of `up`; the run's results, what
/// the application printed, and the session.
fn scenario(store: &Path, extra: &[&str]) -> (Value, Value, Up) {
    let mut up = Up::start(store, extra);
    let (mut child, stdout) = start_client(
        "cluster_up_app_txns.py",
        &[&up.bootstrap, "t", "6", &APP_WITHIN_S.to_string()],
    );
    let lines = stdout.clone();
    let describe = move || format!("application: {:?}", lines.all());
    let last = await_some(
        Duration::from_secs(APP_WITHIN_S + 30),
        &mut child,
        &describe,
        || stdout.last_json(),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(last["error"], Value::Null, "{last}\n{}", up.show());
    let results = interrupt_and_judge(&mut up);
    (results, last, up)
}

/// The history's lines, by index.
fn history(run: &Path) -> Vec<Value> {
    let file = std::fs::File::open(run.join("history.jsonl")).unwrap();
    BufReader::new(file)
        .lines()
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .collect()
}

fn strings(values: &Value) -> BTreeSet<String> {
    values
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// The application's ops of `f` that completed `kind`.
fn app_ops<'a>(history: &'a [Value], f: &str, kind: &str) -> Vec<&'a Value> {
    history
        .iter()
        .filter(|l| l["f"] == f && l["type"] == kind && l["value"]["app"].is_object())
        .collect()
}

#[test]
fn cluster_an_applications_aborted_records_read_under_read_committed_are_caught() {
    let store = tempfile::tempdir().unwrap();
    let slip = [
        "--set",
        "failpoint.leader-omits-aborted-transactions=return",
    ];
    let (results, app, up) = scenario(store.path(), &slip);
    let aborted = strings(&app["aborted"]);
    let read = strings(&app["read"]);
    assert!(!aborted.is_disjoint(&read), "{app}\n{}", up.show());
    assert_eq!(results["verdict"], "invalid", "{results}\n{}", up.show());
    let txns = result(&results, "transactions");
    let history = history(&up.run);
    let evidence = txns["evidence"].as_array().unwrap();
    let reads: Vec<&Value> = evidence
        .iter()
        .filter(|e| e["anomaly"] == "aborted-read")
        .collect();
    assert!(!reads.is_empty(), "{txns}");
    for e in &reads {
        let details = &e["details"];
        assert!(
            aborted.contains(&details["value"].to_string()),
            "{e}\n{app}"
        );
        // The read is the application's poll, its writer the application's
        // aborted transaction.
        let poll = history
            .iter()
            .find(|l| l["index"] == details["read_index"])
            .unwrap_or_else(|| panic!("no history line of {e}"));
        assert_eq!(poll["f"], "poll", "{poll}");
        assert_eq!(
            poll["value"]["app"]["client_id"], "cluster-up-app-txn-reader",
            "{poll}"
        );
        assert_eq!(details["writer"]["transactional_id"], "app-txn", "{e}");
        assert_eq!(details["writer"]["fate"], "aborted", "{e}");
    }
    let printed = up.stdout.all().join("\n");
    assert!(printed.contains("aborted-read"), "{}", up.show());
    println!("{printed}");
}

#[test]
fn cluster_an_applications_transactions_on_the_fixed_broker_are_judged_valid() {
    let store = tempfile::tempdir().unwrap();
    let (results, app, up) = scenario(store.path(), &[]);
    assert_eq!(strings(&app["read"]), strings(&app["committed"]), "{app}");
    assert_eq!(results["verdict"], "valid", "{results}\n{}", up.show());
    let txns = result(&results, "transactions");
    assert_eq!(txns["counts"]["transactions"], 6, "{txns}");
    assert_eq!(txns["counts"]["committed"], 4, "{txns}");
    let reads = txns["counts"]["read-committed-reads"].as_u64().unwrap();
    assert!(reads >= 1, "{txns}");
    let history = history(&up.run);
    let ok = app_ops(&history, "txn", "ok");
    assert_eq!(ok.len(), 6, "{ok:?}");
    let written: usize = ok
        .iter()
        .map(|op| op["value"]["ops"].as_array().unwrap().len())
        .sum();
    assert_eq!(written, 18, "{ok:?}");
    // The reader's membership round: its generation and the partition the
    // group assigned it.
    let rounds = app_ops(&history, "rebalance", "ok");
    let round = rounds
        .iter()
        .find(|r| r["value"]["group"] == "app-txn-readers")
        .unwrap_or_else(|| panic!("no rebalance of the reader's group: {rounds:?}"));
    assert!(
        round["value"]["generation"].as_i64().unwrap() >= 1,
        "{round}"
    );
    assert_eq!(
        round["value"]["partitions"],
        serde_json::json!(["t-0"]),
        "{round}"
    );
    let printed = up.stdout.all().join("\n");
    println!("{printed}");
}
