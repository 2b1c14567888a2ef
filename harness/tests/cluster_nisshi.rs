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

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::scenario::{
    epochal, latest, read_results, result_of as result, run_quietly, show, suite_file,
};
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
    // Its PostgreSQL database, read while the server still ran, is checked
    // as its replica.
    for checker in [
        "database-lost-write",
        "database-offset-changed",
        "database-divergence",
    ] {
        let r = result(&results, checker);
        assert_eq!(r["verdict"], "valid", "{r:#}");
    }
    let database: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("database/database.json")).unwrap())
            .unwrap();
    assert_eq!(database["engine"], "postgres", "{database:#}");
    assert!(database["rows"].as_u64().unwrap() >= 300, "{database:#}");
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
    // Over the protocol the loss cannot be judged (the final read has no t),
    // but the database, read as nisshi's replica, judges it: every
    // acknowledged write of t is gone from its tables.
    assert!(
        result(&results, "lost-write")["message"]
            .as_str()
            .unwrap()
            .contains("has no t-0"),
        "{results:#}"
    );
    assert_eq!(results["verdict"], "invalid", "{results:#}");
    let lost = result(&results, "database-lost-write");
    assert_eq!(lost["verdict"], "invalid", "{lost:#}");
    let counts = &lost["counts"];
    assert!(counts["acknowledged"].as_u64().unwrap() > 0, "{lost:#}");
    assert_eq!(counts["lost-acks-all"], counts["acknowledged"], "{lost:#}");
}

/// A schedule of nisshi's suite's shape (three brokers, two partitions,
/// acks=all background load) with `steps` after it.
fn database_schedule(dir: &Path, steps: &str) -> PathBuf {
    let file = dir.join("database.toml");
    let text = format!(
        "[cluster]\nbrokers = 3\n\n[[cluster.topic]]\nname = \"t\"\npartitions = 2\n\
         replication_factor = 1\n\n[workload]\nacks = \"all\"\nawait_timeout_ms = 30000\n\n\
         [workload.background]\nproducers = 2\nconsumers = 1\ninterval_ms = 20\n\n\
         [[step]]\nawait = \"50 more writes acknowledged\"\n\n{steps}"
    );
    std::fs::write(&file, text).unwrap();
    file
}

/// The postmaster's pid, from line 1 of the data directory's
/// `postmaster.pid` (the server's own record of itself).
fn postmaster(run: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(run.join("nodes/postgres-data/postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// A process's state letter from `/proc`, `None` once it is gone.
fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Awaits every pid gone (or a zombie, which holds nothing) within `bound`;
/// returns those still there with their state.
fn await_gone(pids: &[i32], bound: Duration) -> Vec<(i32, char)> {
    let deadline = Instant::now() + bound;
    loop {
        let left: Vec<(i32, char)> = pids
            .iter()
            .filter_map(|&p| state_of(p).filter(|&s| s != 'Z').map(|s| (p, s)))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The database crashed and restarted, then paused and left so: the final
/// heal resumes it (a nemesis op), the run is valid, and once the run ends
/// the restarted server (a new postmaster the runtime spawned) is gone.
#[test]
fn cluster_nisshi_database_left_paused_is_resumed_by_the_final_heal_and_reaped() {
    if !installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let steps = "[[step]]\nfault = \"crash-database\"\n\n[[step]]\nawait = \"1000 ms pass\"\n\n\
                 [[step]]\nfault = \"restart-database\"\n\n\
                 [[step]]\nawait = \"50 more writes acknowledged\"\n\n\
                 [[step]]\nfault = \"pause-database\"\n";
    let schedule = database_schedule(dir.path(), steps);
    let store = dir.path().join("store");
    let output = run_quietly(&schedule, &store, &["--system", "nisshi"]);
    assert!(output.status.success(), "{}", show(&output));
    let run = latest(&store);
    let results = read_results(&run);
    assert_eq!(results["verdict"], "valid", "{results:#}");
    let history = std::fs::read_to_string(run.join("history.jsonl")).unwrap();
    let verbs: Vec<&str> = history
        .lines()
        .filter(|l| l.contains(r#""process":"nemesis""#) && !l.contains(r#""type":"invoke""#))
        .filter_map(|l| l.split(r#""f":""#).nth(1)?.split('"').next())
        .collect();
    assert_eq!(
        verbs,
        [
            "crash-database",
            "restart-database",
            "pause-database",
            "resume-database"
        ]
    );
    let pid = postmaster(&run).expect("the restarted server wrote postmaster.pid");
    assert_eq!(await_gone(&[pid], Duration::from_secs(10)), []);
}

/// Ctrl-C while the database is paused: its children are stopped and lead
/// sessions of their own, so killing the postmaster's group leaves them
/// stopped for good unless the reaper kills each. None is left.
#[test]
fn cluster_nisshi_ctrl_c_while_the_database_is_paused_leaves_none_of_its_processes() {
    if !installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let steps = "[[step]]\nfault = \"pause-database\"\n\n[[step]]\nawait = \"60000 ms pass\"\n";
    let schedule = database_schedule(dir.path(), steps);
    let store = dir.path().join("store");
    let child = epochal()
        .arg("run")
        .arg(&schedule)
        .arg("--store")
        .arg(&store)
        .args(["--quiet", "--system", "nisshi"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed on every exit path of the test, Ctrl-C's work or not.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = child.id() as i32;
    let mut guard = Reap(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    let run = loop {
        let paused = store
            .join("latest")
            .exists()
            .then(|| latest(&store))
            .filter(|run| {
                std::fs::read_to_string(run.join("history.jsonl")).is_ok_and(|h| {
                    h.lines().any(|l| {
                        l.contains(r#""f":"pause-database""#) && l.contains(r#""type":"info""#)
                    })
                })
            });
        if let Some(run) = paused {
            break run;
        }
        assert!(Instant::now() < deadline, "the database was never paused");
        assert!(guard.0.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(50));
    };
    let postmaster = postmaster(&run).unwrap();
    let children = epochal::runtime::postgres::server_children(postmaster).unwrap();
    assert!(!children.is_empty());
    for &c in &children {
        assert_eq!(state_of(c), Some('T'), "child {c} of a paused server");
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let exit_deadline = Instant::now() + Duration::from_secs(30);
    while guard.0.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < exit_deadline,
            "epochal did not exit on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut all = children.clone();
    all.push(postmaster);
    assert_eq!(await_gone(&all, Duration::from_secs(10)), []);
}

/// A database fault on a system without a database is refused before
/// anything starts, naming the file, the step's line, the step and the
/// system (needs no broker: nothing runs).
#[test]
fn cluster_nisshi_a_database_schedule_on_a_system_without_one_is_refused_at_load() {
    let store = tempfile::tempdir().unwrap();
    let schedule = suite_file("systems/nisshi-database-pause.toml");
    let output = run_quietly(&schedule, store.path(), &["--system", "tansu"]);
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nisshi-database-pause.toml:")
            && stderr.contains(
                ": step 2: pause-database needs a system with a database, and \
                                tansu has none"
            ),
        "{}",
        show(&output)
    );
    assert!(!store.path().join("latest").exists(), "a run was started");
}
