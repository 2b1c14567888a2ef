//! `epochal run --runtime docker` end to end, as a user runs it: the real
//! binary, every node in a container of its own. After a completed run, after
//! a failed one and after Ctrl-C, `docker ps -a` and `docker network ls`
//! filtered by the run's label show nothing. Needs Docker, `etcd` (Debian's
//! etcd-server) and the workspace's binaries; without Docker these tests fail
//! saying so.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::docker::{Cleanup, assert_nothing_left, containers, require_docker, run_id};
use common::scenario::{
    await_harness_log, broker_log, epochal, interrupt, latest, read_results, run_quietly, show,
};

fn schedule(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedules")
        .join(name)
}

/// `epochal run <schedule> --runtime docker` into a temp store, asserted to
/// exit 0 with a valid verdict: the store, the run dir, the run id, and a
/// guard that removes the run's containers if the test fails.
fn run_valid(name: &str) -> (tempfile::TempDir, PathBuf, String, Cleanup) {
    require_docker();
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule(name), store.path(), &["--runtime", "docker"]);
    let dir = latest(store.path());
    let run = run_id(&dir);
    let cleanup = Cleanup(Some(run.clone()));
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_eq!(read_results(&dir)["verdict"], "valid");
    (store, dir, run, cleanup)
}

#[test]
fn cluster_docker_run_completes_valid_and_leaves_nothing() {
    let (_store, dir, run, _cleanup) = run_valid("crash_restart.toml");
    assert_nothing_left(&run, "after a completed run");
    // Each broker's output was saved from its container, across its restart:
    // b1 (crashed and restarted) came up twice.
    for node in ["b1", "b2", "b3"] {
        assert!(broker_log(&dir, node).contains("broker ready"), "{node}");
        assert!(
            dir.join("nodes").join(node).join("data/t-0").is_dir(),
            "{node}"
        );
    }
    assert_eq!(broker_log(&dir, "b1").matches("broker ready").count(), 2);
    assert!(dir.join("nodes/etcd.log").is_file() && dir.join("nodes/proxy.log").is_file());
}

#[test]
fn cluster_docker_failed_run_leaves_nothing() {
    require_docker();
    let store = tempfile::tempdir().unwrap();
    let file = store.path().join("times_out.toml");
    std::fs::write(
        &file,
        "[cluster]\nbrokers = 2\n\n[[step]]\nawait = \"b2 is stopped\"\ntimeout_ms = 1000\n",
    )
    .unwrap();
    let output = run_quietly(&file, store.path(), &["--runtime", "docker"]);
    let dir = latest(store.path());
    let run = run_id(&dir);
    let _cleanup = Cleanup(Some(run.clone()));
    assert_eq!(output.status.code(), Some(2), "unknown: {}", show(&output));
    assert_nothing_left(&run, "after a run whose await timed out");
}

#[test]
fn cluster_docker_run_interrupted_leaves_nothing() {
    require_docker();
    let store = tempfile::tempdir().unwrap();
    let mut child = epochal()
        .arg("run")
        .arg(schedule("await_forever.toml"))
        .args(["--runtime", "docker", "--quiet", "--store"])
        .arg(store.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cleanup = Cleanup(None);
    let dir = await_harness_log(
        store.path(),
        "await b2 is stopped",
        &mut child,
        Duration::from_secs(120),
    );
    let run = run_id(&dir);
    cleanup.0 = Some(run.clone());
    // During the run each broker is a container of its own, beside etcd's and
    // the proxy's.
    let names = containers(&run);
    let roles: Vec<&str> = names.iter().filter_map(|n| n.rsplit('-').next()).collect();
    assert_eq!(roles, ["b1", "b2", "b3", "etcd", "proxy"], "{names:?}");

    let status = interrupt(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "exit status {status}");
    assert_nothing_left(&run, "after SIGINT");
    // Killed first (data dirs frozen), then their output saved, as the process
    // runtime's Ctrl-C leaves its logs.
    for node in ["b1", "b2", "b3"] {
        assert!(broker_log(&dir, node).contains("broker ready"), "{node}");
    }
}

#[test]
fn cluster_docker_run_killed_outright_leaves_containers_that_gc_removes() {
    require_docker();
    let store = tempfile::tempdir().unwrap();
    let ledgers = tempfile::tempdir().unwrap();
    let mut child = epochal()
        .arg("run")
        .arg(schedule("await_forever.toml"))
        .args(["--runtime", "docker", "--quiet", "--store"])
        .arg(store.path())
        .env("EPOCHAL_LEDGER_DIR", ledgers.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut cleanup = Cleanup(None);
    let dir = await_harness_log(
        store.path(),
        "await b2 is stopped",
        &mut child,
        Duration::from_secs(120),
    );
    let run = run_id(&dir);
    cleanup.0 = Some(run.clone());
    // SIGKILL: the harness's Docker cleanup never runs.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        containers(&run).len(),
        5,
        "left running by the killed harness"
    );
    let output = epochal()
        .arg("gc")
        .env("EPOCHAL_LEDGER_DIR", ledgers.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert_nothing_left(&run, "after gc of a killed harness's run");
    let output = epochal().arg("check").arg(&dir).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("did not finish"),
        "{}",
        show(&output)
    );
}

#[test]
fn docker_unreachable_is_a_clear_harness_error() {
    let store = tempfile::tempdir().unwrap();
    let output = epochal()
        .arg("run")
        .arg(schedule("crash_restart.toml"))
        .args(["--runtime", "docker", "--quiet", "--store"])
        .arg(store.path())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Docker daemon at /nonexistent/docker.sock"),
        "{}",
        show(&output)
    );
}

#[test]
fn cluster_docker_run_fires_every_fault_kind_and_stays_valid() {
    let (_store, dir, run, _cleanup) = run_valid("every_fault.toml");
    // Pause, stop, power loss, crash, truncate-log and every partition kind
    // fired on containers, each a completed nemesis op.
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    for f in [
        "pause",
        "resume",
        "stop",
        "start",
        "power-loss",
        "crash",
        "truncate-log",
        "isolate",
        "one-way",
        "node-from-etcd",
        "heal",
    ] {
        assert!(
            history.contains(&format!("\"f\":\"{f}\"")),
            "no {f} in the history"
        );
    }
    assert_nothing_left(&run, "after a run of every fault");
}
