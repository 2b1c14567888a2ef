//! What the `epochal up` tests share (tests/cluster_up*.rs): a running `up`
//! and what it printed, `epochal fault` and its answers, the processes below
//! `up`, what its run directory holds once it ended, and an application run
//! on command. Each test module uses only part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use epochal::history::{OpType, Process, read_history};
use serde_json::Value;

use crate::common::groups;
use crate::common::scenario::{epochal, interrupt, read_results, show};

/// Bound on the cluster coming up (the Docker runtime may build images first).
pub const UP_WITHIN: Duration = Duration::from_secs(300);
/// Bound on `up` healing, checking and exiting after SIGINT.
pub const CHECK_WITHIN: Duration = Duration::from_secs(240);

/// Lines a child printed, collected by a thread as they come.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    pub fn follow(pipe: impl std::io::Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                sink.0.lock().unwrap().push(line);
            }
        });
        lines
    }

    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The rest of the first line that starts with `prefix`, once printed.
    pub fn after(&self, prefix: &str) -> Option<String> {
        self.all()
            .iter()
            .find_map(|l| l.strip_prefix(prefix).map(str::to_owned))
    }

    /// The last JSON line.
    pub fn last_json(&self) -> Option<Value> {
        self.all()
            .iter()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
    }
}

/// Polls `what` until it gives a value, failing after `within` with
/// `describe`'s words.
pub fn poll<T>(
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
pub fn await_some<T>(
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
pub struct Up {
    pub child: Child,
    pub stdout: Lines,
    pub stderr: PathBuf,
    pub run: PathBuf,
    pub bootstrap: String,
}

impl Up {
    /// `epochal up` of 3 brokers and topic t (1 partition, 3 replicas) into
    /// `store`, with `extra` flags; returns once it printed where to connect.
    pub fn start(store: &Path, extra: &[&str]) -> Up {
        let mut args = vec!["--brokers", "3", "--topic", "t:1:3"];
        args.extend(["--set", "min_insync_replicas=2"]);
        args.extend(extra);
        Up::start_with(store, &args)
    }

    /// `epochal up` with `args` alone (a schedule's path, `--set`s), quiet
    /// and storing in `store`.
    pub fn start_with<S: AsRef<std::ffi::OsStr>>(store: &Path, args: &[S]) -> Up {
        let stderr = store.join("up.stderr");
        let mut child = epochal()
            .arg("up")
            .args(args)
            .args(["--quiet", "--store"])
            .arg(store)
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

    pub fn show(&self) -> String {
        show_up(&self.stdout, &self.stderr)
    }

    /// The lease `up` announced, in seconds.
    pub fn lease(&self) -> u64 {
        let line = self.stdout.after("lease: ").expect("a lease line");
        let seconds = line.split(' ').next().unwrap();
        seconds.parse().unwrap_or_else(|e| panic!("{line}: {e}"))
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
pub fn describer(stdout: &Lines, stderr: &Path) -> impl Fn() -> String + use<> {
    let (stdout, stderr) = (stdout.clone(), stderr.to_owned());
    move || show_up(&stdout, &stderr)
}

pub fn show_up(stdout: &Lines, stderr: &Path) -> String {
    format!(
        "--- up's stdout\n{}\n--- up's stderr\n{}",
        stdout.all().join("\n"),
        std::fs::read_to_string(stderr).unwrap_or_default()
    )
}

/// `epochal fault RUN VERB TARGET...`, waited for.
pub fn fault(run: &Path, verb: &str, target: &str) -> Output {
    epochal()
        .arg("fault")
        .arg(run)
        .arg(verb)
        .args(target.split(' ').filter(|w| !w.is_empty()))
        .output()
        .unwrap()
}

/// Asserts `epochal fault DIR VERB TARGET` exits `code` saying `needle`.
pub fn assert_refused(dir: &Path, (verb, target): (&str, &str), code: i32, needle: &str) {
    let output = fault(dir, verb, target);
    assert_eq!(output.status.code(), Some(code), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(needle),
        "{needle:?}: {}",
        show(&output)
    );
}

/// Fires a fault that must fire as the session's fault `number`; the node
/// it resolved to.
pub fn fired(up: &Up, number: usize, verb: &str, target: &str) -> String {
    let stdout = fire(up, verb, target);
    let (asked, node) = stdout
        .split_once(" -> ")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(asked, format!("fault {number}: {verb} {target}"));
    assert!(node.starts_with('b') && !node.contains(','), "{stdout}");
    println!("{stdout}");
    node.to_owned()
}

/// Every process below `pid` now, from /proc.
pub fn descendants(pid: u32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        for c in crate::common::children(p) {
            found.push(c);
            next.push(c as u32);
        }
    }
    found
}

/// The `--lease-ttl-s` of each broker process below `pid`, from its command
/// line.
pub fn broker_leases(pid: u32) -> Vec<String> {
    descendants(pid)
        .iter()
        .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
        .filter_map(|cmdline| {
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let at = args.iter().position(|a| a == "--lease-ttl-s")?;
            args.get(at + 1).cloned()
        })
        .collect()
}

/// The broker's own default lease, from `epochal-broker --list-settings`.
pub fn broker_default_lease() -> u64 {
    let bin = crate::common::bin_dir().join("epochal-broker");
    let output = std::process::Command::new(&bin)
        .arg("--list-settings")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", show(&output));
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["setting"] == "lease_ttl_s")
        .and_then(|l| l["default"].as_u64())
        .expect("the broker lists lease_ttl_s with a default")
}

/// The exit code `epochal` gives a verdict (cli/mod.rs's table).
pub fn verdict_code(verdict: &Value) -> i32 {
    match verdict.as_str() {
        Some("valid") => 0,
        Some("invalid") => 1,
        _ => 2,
    }
}

/// What an ended session's run directory says of its faults: the steps of
/// `schedule.toml`, and the history's nemesis completions without an error,
/// with an error (refused), in order.
pub fn faults_on_disk(run: &Path) -> (usize, Vec<String>, Vec<String>) {
    let schedule = epochal::schedule::Schedule::load(run.join("schedule.toml")).unwrap();
    let ops = read_history(run.join("history.jsonl")).expect("a valid history");
    let (mut fine, mut refused) = (Vec::new(), Vec::new());
    for op in ops.iter().filter(|op| op.process == Process::Nemesis) {
        if op.kind == OpType::Invoke || op.fault().is_none() {
            continue;
        }
        match op.error {
            None => fine.push(op.f().to_owned()),
            Some(_) => refused.push(op.f().to_owned()),
        }
    }
    (schedule.steps.len(), fine, refused)
}

/// A Python client of tests/clients/ (`script`) with `args`, its stdin and
/// stdout piped to the test, and its stdout followed line by line.
pub fn start_client(script: &str, args: &[&str]) -> (Child, Lines) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(script);
    let python = groups::python();
    let mut child = std::process::Command::new(&python)
        .arg(&script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e} (set EPOCHAL_PYTHON)"));
    let stdout = Lines::follow(child.stdout.take().unwrap());
    (child, stdout)
}

/// An application of tests/clients/ that answers one JSON line per command
/// read from its stdin (the first line once it is ready).
pub struct CommandApp {
    child: Child,
    stdout: Lines,
    within: Duration,
}

impl CommandApp {
    /// Starts `script` with `args` and awaits its first line; each answer
    /// then gets `within`.
    pub fn start(script: &str, args: &[&str], within: Duration) -> CommandApp {
        let (child, stdout) = start_client(script, args);
        let mut app = CommandApp {
            child,
            stdout,
            within,
        };
        app.answer(0);
        app
    }

    /// The answer after the first `seen` lines.
    fn answer(&mut self, seen: usize) -> Value {
        let stdout = self.stdout.clone();
        let describe = move || format!("application: {:?}", stdout.all());
        let stdout = self.stdout.clone();
        await_some(self.within, &mut self.child, &describe, || {
            let lines = stdout.all();
            lines
                .get(seen)
                .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
        })
    }

    /// Sends one command line; its answer.
    pub fn command(&mut self, line: &str) -> Value {
        let seen = self.stdout.all().len();
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        self.answer(seen)
    }
}

impl Drop for CommandApp {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `epochal fault` that must fire; what it printed.
pub fn fire(up: &Up, verb: &str, target: &str) -> String {
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

/// The node `target` names now (`leader of t-0`, `coordinator of group g`),
/// learnt the only way `epochal fault` tells it: a pause of it, undone at
/// once.
pub fn resolve(up: &Up, target: &str) -> String {
    let paused = fire(up, "pause", target);
    let node = paused.rsplit(" -> ").next().unwrap().to_owned();
    fire(up, "resume", &node);
    node
}

/// Cuts every byte from `node` to the cluster's other brokers (`one-way`):
/// their fetches of its log still arrive, but get no answer.
pub fn cut_from_followers(up: &Up, node: &str) {
    for other in ["b1", "b2", "b3"].iter().filter(|b| **b != node) {
        fire(
            up,
            "one-way",
            &format!("{{ from = \"{node}\", to = \"{other}\" }}"),
        );
    }
}

/// Ctrl-C to `up`, awaited; its results, the exit code asserted to be its
/// verdict's.
pub fn interrupt_and_judge(up: &mut Up) -> Value {
    let status = interrupt(&mut up.child, CHECK_WITHIN);
    let results = read_results(&up.run);
    assert_eq!(
        status.code(),
        Some(verdict_code(&results["verdict"])),
        "{status}: {}",
        up.show()
    );
    results
}
