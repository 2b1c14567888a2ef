//! An application's lost commit, caught ([apps], issue 54): `epochal up`
//! starts suites/schedules/offsets-commit-acks-leader.toml's cluster (one
//! `__consumer_offsets` partition, followers kept in the ISR for 30 s) and
//! a confluent-kafka application (tests/clients/cluster_up_app_commits.py)
//! commits offsets of its group on command. It commits 5; `epochal fault`
//! cuts every byte from the group's coordinator to the other brokers
//! (`one-way`, so their fetches of the commit log still arrive but get no
//! answer); it commits 10; the coordinator is crashed; a follower takes
//! over cleanly and the application reads the committed offset back. With
//! `offsets_commit_acks=leader` (Kafka's `offsets.commit.required.acks=1`)
//! the commit of 10 was acknowledged from the coordinator's log alone and the
//! read answers 5: the verdict is invalid, `committed-offset-regressed`, its
//! evidence naming the application's ops. With `all` the commit of 10 waits
//! for the followers and times out (its outcome unknown), and the verdict is
//! valid. Needs `etcd`, the workspace's binaries and EPOCHAL_PYTHON with
//! confluent-kafka.

use crate::cluster_up_common;

use std::path::Path;
use std::time::Duration;

use cluster_up_common::{CommandApp, Up, cut_from_followers, fire, interrupt_and_judge, resolve};
use serde_json::Value;

/// Bound on one command of the application (a read of the committed offset
/// waits for a new coordinator: the brokers' lease, then an election).
const COMMAND_WITHIN: Duration = Duration::from_secs(90);

/// `epochal up` of the scenario's cluster with `setting`.
fn up(store: &Path, setting: &str) -> Up {
    let schedule = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../suites/schedules/offsets-commit-acks-leader.toml");
    let schedule = schedule.to_str().expect("a UTF-8 path");
    Up::start_with(store, &[schedule, "--set", setting])
}

/// Plays the scenario with `setting`; the run's results and what the
/// application read back last.
fn scenario(store: &Path, setting: &str) -> (Value, Value, Up) {
    let mut up = up(store, setting);
    let mut app = CommandApp::start(
        "cluster_up_app_commits.py",
        &[&up.bootstrap, "t", "g"],
        COMMAND_WITHIN,
    );
    let first = app.command("commit 5");
    assert_eq!(first["error"], Value::Null, "{first}");
    assert_eq!(app.command("committed")["committed"], 5);
    let coordinator = resolve(&up, "coordinator of group g");
    cut_from_followers(&up, &coordinator);
    let second = app.command("commit 10");
    println!("commit 10: {second}");
    fire(&up, "crash", &coordinator);
    let read = app.command("committed");
    println!("committed after the crash: {read}");
    drop(app);
    let results = interrupt_and_judge(&mut up);
    (results, read, up)
}

#[test]
fn an_applications_commit_acknowledged_by_the_coordinator_alone_is_lost_and_caught() {
    let store = tempfile::tempdir().unwrap();
    let (results, read, up) = scenario(store.path(), "offsets_commit_acks=leader");
    assert_eq!(read["committed"], 5, "{read}\n{}", up.show());
    assert_eq!(results["verdict"], "invalid", "{results}\n{}", up.show());
    let printed = up.stdout.all().join("\n");
    assert!(
        printed.contains("committed-offset-regressed"),
        "{}",
        up.show()
    );
    assert!(
        printed.contains("cluster-up-app-committer"),
        "{}",
        up.show()
    );
    println!("{printed}");
}

#[test]
fn an_applications_commit_waits_for_the_followers_with_all_and_nothing_is_lost() {
    let store = tempfile::tempdir().unwrap();
    let (results, read, up) = scenario(store.path(), "offsets_commit_acks=all");
    assert_eq!(
        results["verdict"],
        "valid",
        "{results}\n{read}\n{}",
        up.show()
    );
}
