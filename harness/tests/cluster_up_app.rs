//! An application's own traffic, judged ([apps], issue 54 item 1): a
//! confluent-kafka application (tests/clients/cluster_up_app.py, a process
//! of its own) produces decimal values with acks=all and consumes them
//! through `epochal up`'s bootstrap servers while `epochal fault` crashes the
//! leader of t-0 and restarts it. The client proxies record every request
//! and response; at Ctrl-C the session merges the application's Produce and
//! Fetch exchanges into the history as sends and polls of processes of its
//! own, and the checkers rule on them: the verdict is valid, lost-write
//! counts the application's acknowledged values, every value the application
//! saw acknowledged is in an ok send of the history and every value it read
//! in an ok poll, its group's commits are `commit` ops and its read of the
//! committed offset a `committed` op answering the last of them, and the
//! closing summary counts the application's ops.
//! Needs `etcd`, the workspace's binaries and EPOCHAL_PYTHON with
//! confluent-kafka (`ci/dev.sh` makes it).

use crate::cluster_up_common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use cluster_up_common::{Lines, Up, await_some, fired, interrupt_and_judge, start_client};
use serde_json::Value;

/// Bound on the application reaching a count of acknowledged writes.
const PROGRESS_WITHIN: Duration = Duration::from_secs(90);
/// Bound on the application's finish: its last deliveries and reads.
const APP_FINISH_S: u64 = 60;

/// The application, its stdin held open until it should finish.
struct App {
    child: Child,
    stdout: Lines,
}

impl App {
    fn start(bootstrap: &str) -> App {
        let (child, stdout) = start_client(
            "cluster_up_app.py",
            &[bootstrap, "t", &APP_FINISH_S.to_string()],
        );
        App { child, stdout }
    }

    /// Waits until `more` writes beyond those acknowledged now were
    /// acknowledged, and as many read back.
    fn await_progress(&mut self, more: u64) {
        let now = self.count("acked");
        let stdout = self.stdout.clone();
        let describe = move || format!("application progress: {:?}", stdout.last_json());
        let stdout = self.stdout.clone();
        await_some(PROGRESS_WITHIN, &mut self.child, &describe, || {
            let last = stdout.last_json()?;
            let acked = last["acked"].as_u64()?;
            let consumed = last["consumed"].as_u64()?;
            (acked >= now + more && consumed >= now + more).then_some(())
        });
    }

    fn count(&self, what: &str) -> u64 {
        self.stdout
            .last_json()
            .and_then(|l| l[what].as_u64())
            .unwrap_or(0)
    }

    /// Closes its stdin and waits for its last line.
    fn finish(mut self) -> Value {
        drop(self.child.stdin.take());
        let stdout = self.stdout.clone();
        let describe = move || format!("application finish: {:?}", stdout.all());
        let stdout = self.stdout.clone();
        let last = await_some(
            Duration::from_secs(APP_FINISH_S + 30),
            &mut self.child,
            &describe,
            || stdout.last_json().filter(|l| l["final"] == true),
        );
        let _ = self.child.wait();
        last
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The history's lines of the application's ok ops of `f` (those whose
/// value carries `app`).
fn app_ops(run: &Path, f: &str) -> Vec<Value> {
    let file = std::fs::File::open(run.join("history.jsonl")).unwrap();
    BufReader::new(file)
        .lines()
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .filter(|l| l["f"] == f && l["type"] == "ok" && l["value"]["app"].is_object())
        .collect()
}

#[test]
fn an_applications_writes_and_reads_through_up_are_in_the_history_and_judged() {
    let store = tempfile::tempdir().unwrap();
    let mut up = Up::start(store.path(), &[]);
    let mut app = App::start(&up.bootstrap);
    app.await_progress(50);
    let crashed = fired(&up, 1, "crash", "leader of t-0");
    app.await_progress(30);
    fired(&up, 2, "restart", &crashed);
    app.await_progress(30);
    let last = app.finish();
    assert_eq!(last["missing_count"], 0, "{last}");
    let acked = last["acked"].as_u64().unwrap();
    let consumed = last["consumed"].as_u64().unwrap();

    let results = interrupt_and_judge(&mut up);
    assert_eq!(results["verdict"], "valid", "{results}\n{}", up.show());

    // Every value the application saw acknowledged is in an ok send of the
    // history, and every value it read in an ok poll.
    let sent: BTreeSet<i64> = app_ops(&up.run, "send")
        .iter()
        .flat_map(|op| op["value"]["values"].as_array().unwrap().clone())
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert!(sent.len() as u64 >= acked, "{} < {acked}", sent.len());
    let polls = app_ops(&up.run, "poll");
    let read: BTreeSet<i64> = polls
        .iter()
        .flat_map(|op| op["value"]["records"].as_array().unwrap().clone())
        .filter_map(|r| r[1].as_i64())
        .collect();
    assert!(read.len() as u64 >= consumed, "{} < {consumed}", read.len());
    let app = &polls[0]["value"]["app"];
    assert_eq!(app["client_id"], "cluster-up-app-consumer", "{app}");
    assert!(
        app["proxy"].as_str().unwrap().starts_with("client-b"),
        "{app}"
    );

    // lost-write judged the application's acknowledged values.
    // Its commits and its read of the committed offset.
    let commits = app_ops(&up.run, "commit");
    assert!(
        commits.len() as u64 >= last["commits"].as_u64().unwrap(),
        "{} commits: {last}",
        commits.len()
    );
    let committed = app_ops(&up.run, "committed");
    let read_back = committed.last().unwrap_or_else(|| panic!("{last}"));
    assert_eq!(read_back["value"]["group"], "cluster-up-app");
    assert_eq!(
        read_back["value"]["offset"], last["committed"],
        "{read_back}"
    );

    let lost_write = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "lost-write")
        .unwrap_or_else(|| panic!("{results}"));
    let checked = lost_write["counts"]["acknowledged"].as_u64().unwrap_or(0);
    assert!(checked >= acked, "{lost_write}");

    let printed = up.stdout.all().join("\n");
    assert!(
        printed.contains("your application's ops, from the client proxies"),
        "{}",
        up.show()
    );
    assert!(printed.contains("cluster-up-app-producer"), "{}", up.show());
    println!("{printed}");
}
