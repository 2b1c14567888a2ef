//! An application's lost commit, caught ([apps], issue 54): `epochal up`
//! starts suites/offsets-commit-acks-leader.toml's cluster (one
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
use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use cluster_up_common::{CHECK_WITHIN, Lines, Up, await_some, fault, start_client};
use common::scenario::{interrupt, read_results, show};
use serde_json::Value;

/// Bound on one command of the application (a read of the committed offset
/// waits for a new coordinator: the brokers' lease, then an election).
const COMMAND_WITHIN: Duration = Duration::from_secs(90);

/// `epochal up` of the scenario's cluster with `setting`.
fn up(store: &Path, setting: &str) -> Up {
    let schedule =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/offsets-commit-acks-leader.toml");
    let schedule = schedule.to_str().expect("a UTF-8 path");
    Up::start_with(store, &[schedule, "--set", setting])
}

/// The application, answering one JSON line per command.
struct App {
    child: Child,
    stdout: Lines,
}

impl App {
    fn start(bootstrap: &str) -> App {
        let (child, stdout) = start_client("cluster_up_app_commits.py", &[bootstrap, "t", "g"]);
        let mut app = App { child, stdout };
        app.answer(0);
        app
    }

    /// The answer after the first `seen` lines.
    fn answer(&mut self, seen: usize) -> Value {
        let stdout = self.stdout.clone();
        let describe = move || format!("application: {:?}", stdout.all());
        let stdout = self.stdout.clone();
        await_some(COMMAND_WITHIN, &mut self.child, &describe, || {
            let lines = stdout.all();
            lines
                .get(seen)
                .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
        })
    }

    fn command(&mut self, line: &str) -> Value {
        let seen = self.stdout.all().len();
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        self.answer(seen)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `epochal fault` that must fire; what it printed.
fn fire(up: &Up, verb: &str, target: &str) -> String {
    let output = fault(&up.run, verb, target);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        show(&output),
        up.show()
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Plays the scenario with `setting`; the run's results and what the
/// application read back last.
fn scenario(store: &Path, setting: &str) -> (Value, Value, Up) {
    let mut up = up(store, setting);
    let mut app = App::start(&up.bootstrap);
    let first = app.command("commit 5");
    assert_eq!(first["error"], Value::Null, "{first}");
    assert_eq!(app.command("committed")["committed"], 5);
    // The coordinator's name, learnt the only way `epochal fault` tells it:
    // a pause of it, undone at once.
    let coordinator = fire(&up, "pause", "coordinator of group g");
    let coordinator = coordinator.rsplit(" -> ").next().unwrap().to_owned();
    fire(&up, "resume", &coordinator);
    for other in ["b1", "b2", "b3"].iter().filter(|b| **b != coordinator) {
        fire(
            &up,
            "one-way",
            &format!("{{ from = \"{coordinator}\", to = \"{other}\" }}"),
        );
    }
    let second = app.command("commit 10");
    println!("commit 10: {second}");
    fire(&up, "crash", &coordinator);
    let read = app.command("committed");
    println!("committed after the crash: {read}");
    drop(app);
    let status = interrupt(&mut up.child, CHECK_WITHIN);
    let results = read_results(&up.run);
    assert_eq!(
        status.code(),
        Some(cluster_up_common::verdict_code(&results["verdict"]))
    );
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
