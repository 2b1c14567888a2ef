//! An application's text records, known by offset and bytes, lost and caught
//! ([apps], issue 54 item 2): `epochal up` starts
//! suites/schedules/offsets-commit-acks-leader.toml's cluster (three brokers,
//! followers kept in the ISR for 30 s) and a confluent-kafka application
//! (tests/clients/cluster_up_app_writes.py) produces words, not numbers, to
//! t-0 with acks=all on command. It writes two; `epochal fault` cuts every
//! byte from t-0's leader to the other brokers (`one-way`: their fetches
//! arrive but get no answer); it writes two more; the leader is crashed and a
//! follower takes over cleanly. With the broker's `leader-acks-on-append`
//! slip (acks=all answered once the leader's own log holds the batch) the
//! two are acknowledged and lost: the verdict is invalid, `app-write-lost`
//! naming the application's records at their offsets. Without it they wait
//! for the followers, time out unacknowledged, and the verdict is valid with
//! every acknowledged record checked. Needs `etcd`, the workspace's binaries
//! and EPOCHAL_PYTHON with confluent-kafka.

use crate::cluster_up_common;

use std::path::Path;
use std::time::Duration;

use cluster_up_common::{CommandApp, Up, cut_from_followers, fire, interrupt_and_judge, resolve};
use serde_json::{Value, json};

/// Bound on one command: a produce the followers never answer waits for its
/// message timeout (8 s).
const COMMAND_WITHIN: Duration = Duration::from_secs(60);

/// Plays the scenario with `extra` settings; the run's results, what the
/// second produce answered and the session.
fn scenario(store: &Path, extra: &[&str]) -> (Value, Value, Up) {
    let schedule = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../suites/schedules/offsets-commit-acks-leader.toml");
    let mut args = vec![schedule.to_str().expect("a UTF-8 path")];
    args.extend(extra);
    let mut up = Up::start_with(store, &args);
    let mut app = CommandApp::start(
        "cluster_up_app_writes.py",
        &[&up.bootstrap, "t"],
        COMMAND_WITHIN,
    );
    let first = app.command("produce order-a1 order-a2");
    assert_eq!(first["offsets"], json!([0, 1]), "{first}\n{}", up.show());
    let leader = resolve(&up, "leader of t-0");
    cut_from_followers(&up, &leader);
    let second = app.command("produce order-b1 order-b2");
    println!("while the leader is cut off: {second}");
    fire(&up, "crash", &leader);
    drop(app);
    let results = interrupt_and_judge(&mut up);
    (results, second, up)
}

fn app_writes(results: &Value) -> &Value {
    results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "app-writes")
        .unwrap_or_else(|| panic!("no app-writes result: {results}"))
}

#[test]
fn cluster_an_applications_records_acknowledged_by_the_leader_alone_are_lost_and_caught() {
    let store = tempfile::tempdir().unwrap();
    let slip = ["--set", "failpoint.leader-acks-on-append=return"];
    let (results, second, up) = scenario(store.path(), &slip);
    assert_eq!(second["offsets"], json!([2, 3]), "{second}\n{}", up.show());
    assert_eq!(results["verdict"], "invalid", "{results}\n{}", up.show());
    let found = app_writes(&results);
    let lost: Vec<(&Value, &Value)> = found["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["anomaly"], "app-write-lost", "{e}");
            assert_eq!(e["details"]["client_id"], "cluster-up-app-writer", "{e}");
            (&e["details"]["acked_offset"], &e["details"]["sent"])
        })
        .collect();
    assert_eq!(
        lost,
        [
            (&json!(2), &json!("order-b1")),
            (&json!(3), &json!("order-b2"))
        ],
        "{found}"
    );
    let printed = up.stdout.all().join("\n");
    assert!(printed.contains("app-write-lost"), "{}", up.show());
}

#[test]
fn cluster_an_applications_records_wait_for_the_followers_and_none_is_lost() {
    let store = tempfile::tempdir().unwrap();
    let (results, second, up) = scenario(store.path(), &[]);
    assert_eq!(
        second["offsets"],
        json!([null, null]),
        "{second}\n{}",
        up.show()
    );
    assert_eq!(results["verdict"], "valid", "{results}\n{}", up.show());
    assert_eq!(app_writes(&results)["counts"]["checked"], 2, "{results}");
}
