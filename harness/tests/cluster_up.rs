//! `epochal up` and `epochal fault` as a developer uses them ([clients]): the
//! real binary starts a 3-broker cluster and prints its bootstrap servers; a
//! confluent-kafka application (tests/clients/app_through_faults.py) produces
//! with acks=all and consumes through them while `epochal fault`, from
//! "another terminal", pauses the leader of t-0, resumes it, crashes the
//! (new) leader and restarts it. Then SIGINT: `up` heals, reads the replicas,
//! checks and exits with the verdict's code, leaving results.json,
//! report.html and a history holding the faults — and nothing running. The
//! application must have read back every record it had acknowledged. Once on
//! each runtime (the Docker one needs Docker, and fails saying so without
//! it); bad `epochal fault`s (no session, an unknown verb, a node not in the
//! cluster) are refused with a clear error and a non-zero exit. The faults
//! are counted once: `epochal fault`'s numbers, the closing summary, the
//! history and `schedule.toml` agree, a refused fault in none of the counts.
//! The brokers' lease is the broker's default unless `--lease` says, and
//! `up` says which. Needs `etcd`,
//! the workspace's binaries and EPOCHAL_PYTHON with confluent-kafka
//! (`ci/dev.sh` makes it).

use crate::cluster_up_common;
use crate::common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use cluster_up_common::{
    CHECK_WITHIN, Lines, Up, assert_refused, await_some, broker_default_lease, broker_leases,
    descendants, describer, faults_on_disk, fired, interrupt_and_judge, poll, start_client,
};
use common::docker::{Cleanup, assert_nothing_left, require_docker, run_id};
use common::scenario::{epochal, read_results, show};
use epochal::history::{Body, OpType, read_history};
use serde_json::Value;

/// Bound on the application taking more writes after a fault.
const PROGRESS_WITHIN: Duration = Duration::from_secs(90);
/// Writes the application must get acknowledged between two faults.
const PROGRESS_ACKS: u64 = 20;
/// Bound on the application's finish: its last deliveries and reads.
const APP_FINISH_S: u64 = 60;

/// The application, started against `bootstrap`.
struct App {
    child: Child,
    stdout: Lines,
}

impl App {
    fn start(bootstrap: &str) -> App {
        let (child, stdout) = start_client(
            "app_through_faults.py",
            &[bootstrap, "t", &APP_FINISH_S.to_string()],
        );
        App { child, stdout }
    }

    /// Waits for [`PROGRESS_ACKS`] writes acknowledged that the application
    /// made after `after` (a fault that just fired): it reads the values
    /// produced so far from a progress line printed from now on, then waits
    /// until that many plus [`PROGRESS_ACKS`] were acknowledged.
    fn await_progress(&mut self, after: &str) {
        let seen = self.stdout.all().len();
        let stdout = self.stdout.clone();
        let describe = {
            let stdout = self.stdout.clone();
            move || format!("progress after {after}: {:?}", stdout.last_json())
        };
        let produced = await_some(PROGRESS_WITHIN, &mut self.child, &describe, || {
            stdout.all()[seen..]
                .iter()
                .find_map(|l| serde_json::from_str::<Value>(l).ok()?["produced"].as_u64())
        });
        let target = produced + PROGRESS_ACKS;
        await_some(PROGRESS_WITHIN, &mut self.child, &describe, || {
            let acked = stdout.last_json()?["acked"].as_u64()?;
            (acked >= target).then_some(())
        });
    }

    /// Closes its stdin and awaits its exit; its last line and its status
    /// (the child is killed on the way out if it does not finish).
    fn finish(mut self) -> (Value, std::process::ExitStatus) {
        drop(self.child.stdin.take());
        let within = Duration::from_secs(2 * APP_FINISH_S + 30);
        let describe = {
            let stdout = self.stdout.clone();
            move || format!("the application's finish: {:?}", stdout.last_json())
        };
        let status = poll(within, &describe, || self.child.try_wait().unwrap());
        // Its stdout's reader thread has the last line once the pipe closed.
        let stdout = self.stdout.clone();
        let last = poll(
            Duration::from_secs(5),
            &|| "the application printed no final line".into(),
            || stdout.last_json().filter(|l| l["final"] == true),
        );
        (last, status)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The whole session on one runtime (`extra` flags), `up` having at least
/// `children` processes below it; `after_up` is given the run directory
/// once it is up (for the runtime's own checks of what is left).
fn session(store: &Path, extra: &[&str], children: usize, after_up: impl FnOnce(&Path)) {
    let started = Instant::now();
    let mut up = Up::start(store, extra);
    after_up(&up.run);
    println!(
        "up in {:.1} s: {} in {}",
        started.elapsed().as_secs_f64(),
        up.bootstrap,
        up.run.display()
    );
    assert_eq!(up.bootstrap.split(',').count(), 3, "{}", up.show());
    assert!(up.run.join("control.sock").exists(), "{}", up.show());
    // Without --lease, the broker's own default, said and given.
    let lease = broker_default_lease();
    assert_eq!(up.lease(), lease, "{}", up.show());
    if children > 0 {
        let leases = broker_leases(up.child.id());
        assert_eq!(leases, vec![lease.to_string(); 3], "{}", up.show());
    }

    // Bad faults are refused while the session goes on.
    let verb = "unknown fault verb \"frobnicate\"";
    assert_refused(&up.run, ("frobnicate", "b1"), 3, verb);
    assert_refused(&up.run, ("crash", "b9"), 3, "unknown node b9");

    let mut app = App::start(&up.bootstrap);
    app.await_progress("the start");
    let paused = fired(&up, 1, "pause", "leader of t-0");
    app.await_progress("the pause");
    fired(&up, 2, "resume", &paused);
    app.await_progress("the resume");
    let crashed = fired(&up, 3, "crash", "leader of t-0");
    app.await_progress("the crash");
    fired(&up, 4, "restart", &crashed);
    app.await_progress("the restart");
    // Refused by the cluster's state: in the history, not counted.
    let running = format!("cannot restart: {crashed} is running");
    assert_refused(&up.run, ("restart", &crashed), 2, &running);
    let (last, status) = app.finish();
    println!("application: {last}");
    assert!(status.success(), "the application: {last}");
    assert_eq!(last["missing_count"], 0, "{last}");
    assert!(
        last["acked"].as_u64().unwrap() >= 5 * PROGRESS_ACKS,
        "{last}"
    );

    // Ctrl-C ends the session: healed, checked, nothing left.
    let pids = descendants(up.child.id());
    assert!(pids.len() >= children, "{pids:?}");
    let ending = Instant::now();
    let results = interrupt_and_judge(&mut up);
    println!(
        "checked and exited in {:.1} s",
        ending.elapsed().as_secs_f64()
    );
    assert_eq!(results["verdict"], "valid", "{results}\n{}", up.show());
    assert!(up.run.join("report.html").is_file());
    assert!(!up.run.join("control.sock").exists());
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} is still there after SIGINT"
        );
    }
    let printed = up.stdout.all().join("\n");
    assert!(printed.contains("verdict: valid"), "{}", up.show());
    // One fault count: the summary's, the history's, schedule.toml's.
    for line in [
        "faults: 4 fired: pause 1, resume 1, crash 1, restart 1",
        "  refused by the cluster's state, not counted: 1 (restart 1)",
        "  the final heal, not counted: nothing to heal",
        "coverage, of every client op in the history",
        "  writes acknowledged during faults: ",
    ] {
        assert!(printed.contains(line), "{line:?}: {}", up.show());
    }
    let (steps, fine, refused) = faults_on_disk(&up.run);
    assert_eq!(steps, 4);
    assert_eq!(fine, ["pause", "resume", "crash", "restart"]);
    assert_eq!(refused, ["restart"]);

    // The history holds the faults as fired, each resolved.
    let ops = read_history(up.run.join("history.jsonl")).expect("a valid history");
    let faults: Vec<(String, Vec<String>)> = ops
        .iter()
        .filter(|op| op.kind == OpType::Info && op.error.is_none())
        .filter_map(|op| match &op.body {
            Body::Fault(fault) => {
                let nodes = fault.done.as_ref()?.nodes.iter().map(ToString::to_string);
                Some((op.f().to_owned(), nodes.collect()))
            }
            _ => None,
        })
        .collect();
    let expected = [
        ("pause", &paused),
        ("resume", &paused),
        ("crash", &crashed),
        ("restart", &crashed),
    ];
    for (i, (f, node)) in expected.iter().enumerate() {
        assert_eq!(
            faults[i],
            (f.to_string(), vec![node.to_string()]),
            "{faults:?}"
        );
    }
    // `epochal check` reads the session's run as any other.
    let checked = epochal().arg("check").arg(&up.run).output().unwrap();
    assert_eq!(checked.status.code(), Some(0), "{}", show(&checked));
}

#[test]
fn cluster_up_process_drives_an_application_through_a_pause_and_a_crash() {
    let store = tempfile::tempdir().unwrap();
    // etcd, the proxy, three brokers.
    session(store.path(), &[], 5, |_| {});
}

#[test]
fn cluster_docker_up_drives_an_application_through_a_pause_and_a_crash() {
    require_docker();
    let store = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup(None);
    let mut run = None;
    // Containers, not children: none is required, any must be gone.
    session(store.path(), &["--runtime", "docker"], 0, |dir| {
        let id = run_id(dir);
        cleanup.0 = Some(id.clone());
        run = Some(id);
    });
    assert_nothing_left(&run.unwrap(), "after SIGINT ended `epochal up`");
}

#[test]
fn cluster_up_process_ends_on_sigterm_checked_with_no_fault() {
    let store = tempfile::tempdir().unwrap();
    // The lease asked for, said and given.
    let mut up = Up::start(store.path(), &["--lease", "2"]);
    assert_eq!(up.lease(), 2, "{}", up.show());
    assert_eq!(broker_leases(up.child.id()), ["2", "2", "2"]);
    let pids = descendants(up.child.id());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let describe = describer(&up.stdout, &up.stderr);
    let status = poll(CHECK_WITHIN, &describe, || up.child.try_wait().unwrap());
    assert_eq!(status.code(), Some(0), "{status}: {}", up.show());
    assert_eq!(read_results(&up.run)["verdict"], "valid");
    assert!(up.run.join("report.html").is_file() && !up.run.join("control.sock").exists());
    assert!(
        pids.iter()
            .all(|p| !Path::new(&format!("/proc/{p}")).exists()),
        "{pids:?}"
    );
}

/// A store holding `control.sock` in each of `runs` (relative run dirs),
/// listened on when `live`.
fn store_with_sockets(
    runs: &[&str],
    live: bool,
) -> (tempfile::TempDir, Vec<std::os::unix::net::UnixListener>) {
    let store = tempfile::tempdir().unwrap();
    let mut listeners = Vec::new();
    for run in runs {
        let dir = store.path().join(run);
        std::fs::create_dir_all(&dir).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(dir.join("control.sock")).unwrap();
        if live {
            listeners.push(listener);
        }
    }
    (store, listeners)
}

#[test]
fn fault_without_a_live_session_is_a_clear_error() {
    let empty = tempfile::tempdir().unwrap();
    let none = "no live `epochal up` session in";
    assert_refused(empty.path(), ("pause", "leader of t-0"), 4, none);
    let missing = empty.path().join("missing");
    assert_refused(&missing, ("pause", "b1"), 4, "is not a directory");

    // A socket left by an `up` killed outright: nobody answers it.
    let (stale, _) = store_with_sockets(&["adhoc/up/20260101T000000Z-0"], false);
    assert_refused(stale.path(), ("pause", "b1"), 4, "stale control sockets");

    // Two live sessions in one store: name one.
    let runs = ["adhoc/up/20260101T000000Z-0", "adhoc/up/20260101T000000Z-1"];
    let (two, _listening) = store_with_sockets(&runs, true);
    assert_refused(
        two.path(),
        ("pause", "b1"),
        4,
        "2 live `epochal up` sessions",
    );
    assert_refused(two.path(), ("pause", "b1"), 4, runs[1]);
}

#[test]
fn fault_with_an_unknown_verb_or_no_target_is_a_usage_error() {
    let empty = tempfile::tempdir().unwrap();
    let verb = "unknown fault verb \"frobnicate\" (a schedule's verbs: pause, crash";
    assert_refused(empty.path(), ("frobnicate", "b1"), 3, verb);
    assert_refused(empty.path(), ("pause", ""), 3, "pause needs a target");
}

#[test]
fn up_with_a_cluster_that_cannot_be_is_a_usage_error_and_starts_nothing() {
    let store = tempfile::tempdir().unwrap();
    let output = epochal()
        .args(["up", "--brokers", "2", "--topic", "t:1:3", "--store"])
        .arg(store.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("replication"),
        "{}",
        show(&output)
    );
    assert!(std::fs::read_dir(store.path()).unwrap().next().is_none());

    // A cluster that does not start: a harness error, and no session left.
    let output = epochal()
        .args(["up", "--quiet", "--etcd", "/nonexistent/etcd", "--store"])
        .arg(store.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "{}", show(&output));
    assert_refused(
        store.path(),
        ("pause", "b1"),
        4,
        "no live `epochal up` session",
    );
}

#[test]
fn up_help_states_the_lease_and_that_it_is_the_brokers_default() {
    let output = epochal().args(["up", "--help"]).output().unwrap();
    assert!(output.status.success(), "{}", show(&output));
    let help = String::from_utf8_lossy(&output.stdout);
    let default = format!("the broker's default, {} s", broker_default_lease());
    assert!(help.contains(&default), "{default:?}: {help}");
    assert!(help.contains("--lease <SECONDS>"), "{help}");
    // Where the broker's settings are listed, and the ones a client's test
    // suite meets first, each a setting the broker knows, with its default.
    assert!(help.contains("epochal-broker --list-settings"), "{help}");
    let listed = std::process::Command::new(common::bin_dir().join("epochal-broker"))
        .arg("--list-settings")
        .output()
        .unwrap();
    let listed: Vec<Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for name in [
        "auto_create_topics_enable",
        "num_partitions",
        "default_replication_factor",
        "offsets_topic_replication_factor",
        "transaction_state_replication_factor",
        "group_initial_rebalance_delay_ms",
        "min_insync_replicas",
    ] {
        let setting = listed
            .iter()
            .find(|s| s["setting"] == name)
            .unwrap_or_else(|| panic!("the broker lists no {name}"));
        let default = match &setting["default"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let shown = format!("{name} ({default}");
        assert!(help.contains(&shown), "{shown:?}: {help}");
    }
}
