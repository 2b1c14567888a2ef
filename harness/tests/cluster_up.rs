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
//! cluster) are refused with a clear error and a non-zero exit. Needs `etcd`,
//! the workspace's binaries and EPOCHAL_PYTHON with confluent-kafka
//! (`ci/dev.sh` makes it).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::docker::{Cleanup, assert_nothing_left, require_docker, run_id};
use common::groups;
use common::scenario::{epochal, interrupt, read_results, show};
use epochal::history::{Body, OpType, read_history};
use serde_json::Value;

/// Bound on the cluster coming up (the Docker runtime may build images first).
const UP_WITHIN: Duration = Duration::from_secs(300);
/// Bound on the application taking more writes after a fault.
const PROGRESS_WITHIN: Duration = Duration::from_secs(90);
/// Writes the application must get acknowledged between two faults.
const PROGRESS_ACKS: u64 = 20;
/// Bound on the application's finish: its last deliveries and reads.
const APP_FINISH_S: u64 = 60;
/// Bound on `up` healing, checking and exiting after SIGINT.
const CHECK_WITHIN: Duration = Duration::from_secs(240);

/// Lines a child printed, collected by a thread as they come.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn follow(pipe: impl std::io::Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                sink.0.lock().unwrap().push(line);
            }
        });
        lines
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The rest of the first line that starts with `prefix`, once printed.
    fn after(&self, prefix: &str) -> Option<String> {
        self.all()
            .iter()
            .find_map(|l| l.strip_prefix(prefix).map(str::to_owned))
    }

    /// The last JSON line.
    fn last_json(&self) -> Option<Value> {
        self.all()
            .iter()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
    }
}

/// Polls `what` until it gives a value, failing after `within` with
/// `describe`'s words.
fn poll<T>(
    within: Duration,
    describe: &dyn Fn() -> String,
    mut what: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = what() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "not within {within:?}: {}",
            describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// As [`poll`], failing at once if `child` exits first.
fn await_some<T>(
    within: Duration,
    child: &mut Child,
    describe: &dyn Fn() -> String,
    mut what: impl FnMut() -> Option<T>,
) -> T {
    poll(within, describe, || {
        if let Some(found) = what() {
            return Some(found);
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("exited early ({status}): {}", describe());
        }
        None
    })
}

/// A running `epochal up`, what it printed, and where its stderr goes.
struct Up {
    child: Child,
    stdout: Lines,
    stderr: PathBuf,
    run: PathBuf,
    bootstrap: String,
}

impl Up {
    fn start(store: &Path, extra: &[&str]) -> Up {
        let stderr = store.join("up.stderr");
        let mut child = epochal()
            .arg("up")
            .args(["--brokers", "3", "--topic", "t:1:3"])
            .args(["--set", "min_insync_replicas=2", "--quiet", "--store"])
            .arg(store)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let stdout = Lines::follow(child.stdout.take().unwrap());
        let describe = describer(&stdout, &stderr);
        let (bootstrap, run) = await_some(UP_WITHIN, &mut child, &describe, || {
            Some((
                stdout.after("bootstrap servers: ")?,
                stdout.after("run directory: ")?,
            ))
        });
        Up {
            child,
            stdout,
            stderr,
            run: PathBuf::from(run),
            bootstrap,
        }
    }

    fn show(&self) -> String {
        show_up(&self.stdout, &self.stderr)
    }
}

/// A test that fails with `up` still running must not leave it (nor its
/// cluster) behind: SIGTERM ends its session, SIGINT then takes the kill
/// path at once (two signals, so neither is lost to the other), bounded;
/// SIGKILL if even that hangs.
impl Drop for Up {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let _ = kill(pid, Signal::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// [`show_up`] for later, when `up` is no longer at hand.
fn describer(stdout: &Lines, stderr: &Path) -> impl Fn() -> String + use<> {
    let (stdout, stderr) = (stdout.clone(), stderr.to_owned());
    move || show_up(&stdout, &stderr)
}

fn show_up(stdout: &Lines, stderr: &Path) -> String {
    format!(
        "--- up's stdout\n{}\n--- up's stderr\n{}",
        stdout.all().join("\n"),
        std::fs::read_to_string(stderr).unwrap_or_default()
    )
}

/// The application, started against `bootstrap`.
struct App {
    child: Child,
    stdout: Lines,
}

impl App {
    fn start(bootstrap: &str) -> App {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/app_through_faults.py");
        let python = groups::python();
        let mut child = Command::new(&python)
            .arg(&script)
            .args([bootstrap, "t", &APP_FINISH_S.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {python}: {e} (set EPOCHAL_PYTHON)"));
        let stdout = Lines::follow(child.stdout.take().unwrap());
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

/// `epochal fault RUN VERB TARGET...`, waited for.
fn fault(run: &Path, verb: &str, target: &str) -> Output {
    epochal()
        .arg("fault")
        .arg(run)
        .arg(verb)
        .args(target.split(' ').filter(|w| !w.is_empty()))
        .output()
        .unwrap()
}

/// Asserts `epochal fault DIR VERB TARGET` exits `code` saying `needle`.
fn assert_refused(dir: &Path, (verb, target): (&str, &str), code: i32, needle: &str) {
    let output = fault(dir, verb, target);
    assert_eq!(output.status.code(), Some(code), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(needle),
        "{needle:?}: {}",
        show(&output)
    );
}

/// Fires a fault that must fire; the node it resolved to.
fn fired(up: &Up, verb: &str, target: &str) -> String {
    let output = fault(&up.run, verb, target);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        show(&output),
        up.show()
    );
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let (asked, node) = stdout
        .split_once(" -> ")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(asked, format!("{verb} {target}"));
    assert!(node.starts_with('b') && !node.contains(','), "{stdout}");
    println!("{stdout}");
    node.to_owned()
}

/// Every process below `pid` now, from /proc.
fn descendants(pid: u32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        for c in common::children(p) {
            found.push(c);
            next.push(c as u32);
        }
    }
    found
}

/// The exit code `epochal` gives a verdict (cli/mod.rs's table).
fn verdict_code(verdict: &Value) -> i32 {
    match verdict.as_str() {
        Some("valid") => 0,
        Some("invalid") => 1,
        _ => 2,
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

    // Bad faults are refused while the session goes on.
    let verb = "unknown fault verb \"frobnicate\"";
    assert_refused(&up.run, ("frobnicate", "b1"), 3, verb);
    assert_refused(&up.run, ("crash", "b9"), 3, "unknown node b9");

    let mut app = App::start(&up.bootstrap);
    app.await_progress("the start");
    let paused = fired(&up, "pause", "leader of t-0");
    app.await_progress("the pause");
    fired(&up, "resume", &paused);
    app.await_progress("the resume");
    let crashed = fired(&up, "crash", "leader of t-0");
    app.await_progress("the crash");
    fired(&up, "restart", &crashed);
    app.await_progress("the restart");
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
    let status = interrupt(&mut up.child, CHECK_WITHIN);
    println!(
        "checked and exited in {:.1} s",
        ending.elapsed().as_secs_f64()
    );
    let results = read_results(&up.run);
    assert_eq!(
        status.code(),
        Some(verdict_code(&results["verdict"])),
        "{status}: {}",
        up.show()
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
    let mut up = Up::start(store.path(), &[]);
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
