//! Scenario runs end to end: the real `epochal` binary runs a schedule into a
//! temp store, and [`Run`] reads back what the run left there (history,
//! results, etcd's timeline, each node's broker log and frozen data dir).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use epochal::history::{Op, OpType, Process, read_history};
use epochal::reader::state_change::{StateChange, read_state_changes};
use serde_json::Value;

/// The `epochal` binary built for these tests.
pub fn epochal() -> Command {
    Command::new(env!("CARGO_BIN_EXE_epochal"))
}

/// An output's exit code, stdout and stderr, for assertion messages.
pub fn show(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A suite file (or folder) under the repository's `suites/`.
pub fn suite_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../suites")
        .join(name)
}

/// A schedule the suites run, under `suites/schedules/`.
pub fn schedule_file(name: &str) -> PathBuf {
    suite_file("schedules").join(name)
}

/// `epochal run <schedule> --store <store> --quiet <extra...>`, waited for.
pub fn run_quietly(schedule: &Path, store: &Path, extra: &[&str]) -> Output {
    epochal()
        .arg("run")
        .arg(schedule)
        .arg("--store")
        .arg(store)
        .arg("--quiet")
        .args(extra)
        .output()
        .expect("epochal runs")
}

/// The run directory `store/latest` points at.
pub fn latest(store: &Path) -> PathBuf {
    std::fs::canonicalize(store.join("latest")).expect("store/latest points at the run")
}

/// A stored run's `results.json`.
pub fn read_results(run_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap()).unwrap()
}

/// A test schedule (under `harness/tests/schedules/`) run with `extra` in a
/// store of its own: its exit code, its `results.json` and what it printed.
pub fn run_test_schedule(name: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    let schedule = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedules")
        .join(name);
    let store = tempfile::tempdir().unwrap();
    let output = run_quietly(&schedule, store.path(), extra);
    let shown = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let results = read_results(&latest(store.path()));
    (output.status.code(), results, shown)
}

/// The first result of `checker` in `results`.
pub fn result_of<'a>(results: &'a Value, checker: &str) -> &'a Value {
    results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == checker)
        .unwrap_or_else(|| panic!("no {checker} result: {results}"))
}

/// The evidence every result of `checker` in `results` names.
pub fn evidence_of<'a>(results: &'a Value, checker: &str) -> Vec<&'a Value> {
    results["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["checker"] == checker)
        .flat_map(|r| r["evidence"].as_array().into_iter().flatten())
        .collect()
}

/// A node's `broker.log` in a stored run.
pub fn broker_log(run_dir: &Path, node: &str) -> String {
    std::fs::read_to_string(run_dir.join("nodes").join(node).join("broker.log")).unwrap()
}

/// `epochal inspect --compact` of a node's frozen data dir: its t-0 records,
/// asserting the replica shows no damage.
pub fn inspect_t0(run_dir: &Path, node: &str) -> Value {
    let output = epochal()
        .args(["inspect", "--compact"])
        .arg(run_dir.join("nodes").join(node).join("data"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", show(&output));
    let compact: Value = serde_json::from_slice(&output.stdout).unwrap();
    let replica = compact["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["topic"] == "t" && r["partition"] == 0)
        .unwrap_or_else(|| panic!("{node} holds no t-0: {compact}"))
        .clone();
    // A checkpoint written before a truncation can name an offset past the
    // new log end until the next periodic checkpoint: timing, not damage.
    let damage: Vec<&Value> = replica["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] != "checkpoint_past_log_end")
        .collect();
    assert!(damage.is_empty(), "{node}: {replica}");
    replica["records"].clone()
}

/// What one run of a scenario left in its store. A test that fails while
/// holding it keeps the store (its path goes to stderr), so the run's
/// history, logs and replicas are there to read after a failure.
pub struct Run {
    _store: KeepOnPanic,
    /// The `--set` overrides the run was made with.
    pub sets: Vec<String>,
    pub dir: PathBuf,
    pub ops: Vec<Op>,
    pub results: Value,
    /// What the run printed: its summary and report.
    pub stdout: String,
}

/// A temporary store that is kept, not removed, when a test panics holding it.
pub struct KeepOnPanic(Option<tempfile::TempDir>);

impl KeepOnPanic {
    pub fn new() -> KeepOnPanic {
        KeepOnPanic(Some(tempfile::tempdir().unwrap()))
    }

    pub fn path(&self) -> &Path {
        self.0.as_ref().unwrap().path()
    }
}

impl Drop for KeepOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(store) = self.0.take()
        {
            eprintln!(
                "the failed run's store is kept at {}",
                store.keep().display()
            );
        }
    }
}

/// Runs `schedule` with `--set` for each of `sets`; the run must complete with
/// the verdict `expect` (exit 0 valid, 1 invalid, 2 unknown), and `epochal check` on the
/// stored run, with no cluster, must say the same, report line for line.
pub fn run(schedule: &Path, sets: &[&str], expect: i32) -> Run {
    let store = KeepOnPanic::new();
    let extra: Vec<&str> = sets.iter().flat_map(|s| ["--set", s]).collect();
    let started = Instant::now();
    let output = run_quietly(schedule, store.path(), &extra);
    println!(
        "{sets:?}: exit {:?} in {:.1} s",
        output.status.code(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(output.status.code(), Some(expect), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(stdout.contains("status: completed"), "{}", show(&output));
    let dir = latest(store.path());
    let checked = epochal().arg("check").arg(&dir).output().unwrap();
    assert_eq!(checked.status.code(), Some(expect), "{}", show(&checked));
    // The offline report is the run's, line for line.
    let report = |text: &str| text[text.find("checks:").unwrap()..].to_owned();
    assert_eq!(
        report(&String::from_utf8_lossy(&checked.stdout)),
        report(&stdout)
    );
    let results = read_results(&dir);
    let verdict = match expect {
        0 => "valid",
        1 => "invalid",
        _ => "unknown",
    };
    assert_eq!(results["verdict"], verdict, "{results}");
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");
    Run {
        _store: store,
        sets: sets.iter().map(|s| s.to_string()).collect(),
        dir,
        ops,
        results,
        stdout,
    }
}

/// Runs suite schedule `name` under `--set truncation=<truncation>` (see
/// [`run`]) and asserts the applied schedule has that setting and each of
/// `premise`.
pub fn run_truncation(name: &str, truncation: &str, premise: &[&str], expect: i32) -> Run {
    let run = run(
        &schedule_file(name),
        &[&format!("truncation={truncation}")],
        expect,
    );
    run.assert_applied(&[&format!("truncation = \"{truncation}\"")]);
    run.assert_applied(premise);
    run
}

impl Run {
    /// Asserts the schedule the run applied (`schedule.toml`) contains each line.
    pub fn assert_applied(&self, lines: &[&str]) {
        let applied = std::fs::read_to_string(self.dir.join("schedule.toml")).unwrap();
        for line in lines {
            assert!(applied.contains(line), "{line}: {applied}");
        }
    }

    /// Every completed nemesis op, in order.
    pub fn nemesis_ops(&self) -> impl Iterator<Item = &Op> {
        self.ops
            .iter()
            .filter(|op| op.process == Process::Nemesis && op.kind == OpType::Info)
    }

    /// (f, nodes) of every completed nemesis op, in order.
    pub fn nemesis(&self) -> Vec<(String, Vec<String>)> {
        self.nemesis_ops()
            .map(|op| {
                (
                    op.f().to_owned(),
                    serde_json::from_value(op.value()["nodes"].clone()).unwrap(),
                )
            })
            .collect()
    }

    /// Asserts the completed nemesis ops were these (f, nodes), in order.
    pub fn assert_nemesis(&self, expected: &[(&str, &[&str])]) {
        let expected: Vec<(String, Vec<String>)> = expected
            .iter()
            .map(|(f, nodes)| (f.to_string(), nodes.iter().map(|n| n.to_string()).collect()))
            .collect();
        assert_eq!(self.nemesis(), expected, "{:?}", self.sets);
    }

    /// The values of the ok sends, in order, as the history file has them.
    pub fn sends(&self) -> Vec<Value> {
        self.ops
            .iter()
            .filter(|op| op.f() == "send" && op.kind == OpType::Ok)
            .map(|op| op.value())
            .collect()
    }

    /// The acknowledged sends: value → offset, asserting each is acks=all.
    pub fn acked(&self) -> BTreeMap<i64, i64> {
        let mut acked = BTreeMap::new();
        for send in self.sends() {
            assert_eq!(send["acks"], "all", "{send}");
            let values = send["values"].as_array().unwrap();
            let offsets = send["offsets"].as_array().unwrap();
            assert_eq!(values.len(), offsets.len(), "{send}");
            for (v, o) in values.iter().zip(offsets) {
                acked.insert(v.as_i64().unwrap(), o.as_i64().unwrap());
            }
        }
        acked
    }

    /// The ok send that acknowledged `value`.
    pub fn send_of(&self, value: i64) -> &Op {
        self.ops
            .iter()
            .find(|op| {
                op.f() == "send"
                    && op.kind == OpType::Ok
                    && op.value()["values"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|v| v.as_i64() == Some(value))
            })
            .unwrap_or_else(|| panic!("no ok send of {value}"))
    }

    /// The LeaderAndIsr changes for t-0 that `node` applied, in order.
    pub fn state_changes(&self, node: &str) -> Vec<StateChange> {
        read_state_changes(&self.dir.join("nodes").join(node).join("data"))
            .unwrap()
            .into_iter()
            .filter(|c| {
                c.request == "LeaderAndIsr" && c.applied() && c.topic == "t" && c.partition == 0
            })
            .collect()
    }

    /// `node`'s broker log.
    pub fn broker_log(&self, node: &str) -> String {
        broker_log(&self.dir, node)
    }

    /// etcd's timeline of the run (`timeline.json`).
    pub fn timeline(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.dir.join("timeline.json")).unwrap())
            .unwrap()
    }

    /// etcd's t-0 partition states, in revision order.
    pub fn t0_states(&self) -> Vec<Value> {
        self.timeline()["partition_states"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["topic"] == "t" && s["partition"] == 0)
            .cloned()
            .collect()
    }

    /// etcd's t-0 states as (leader, leader epoch, ISR), in revision order.
    pub fn t0_leaders(&self) -> Vec<(i64, i64, Vec<i64>)> {
        self.t0_states()
            .iter()
            .map(|s| {
                (
                    s["leader"].as_i64().unwrap(),
                    s["leader_epoch"].as_i64().unwrap(),
                    serde_json::from_value(s["isr"].clone()).unwrap(),
                )
            })
            .collect()
    }

    /// `node`'s final t-0 records as (offset, value).
    pub fn records(&self, node: &str) -> Vec<(i64, i64)> {
        self.records_with_epochs(node)
            .into_iter()
            .map(|(offset, _, value)| (offset, value))
            .collect()
    }

    /// `node`'s final t-0 records as (offset, batch leader epoch, value).
    pub fn records_with_epochs(&self, node: &str) -> Vec<(i64, i64, i64)> {
        inspect_t0(&self.dir, node)
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r[0].as_i64().unwrap(),
                    r[1].as_i64().unwrap(),
                    r[2].as_str().unwrap().parse().unwrap(),
                )
            })
            .collect()
    }

    /// The result of checker `name` in results.json.
    pub fn checker(&self, name: &str) -> &Value {
        self.results["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["checker"] == name)
            .unwrap_or_else(|| panic!("no {name} result: {}", self.results))
    }

    /// Asserts every checker but those named is valid.
    pub fn others_valid(&self, except: &[&str]) {
        for result in self.results["results"].as_array().unwrap() {
            let name = result["checker"].as_str().unwrap();
            if !except.contains(&name) {
                assert_eq!(result["verdict"], "valid", "{:?}: {result}", self.sets);
            }
        }
    }
}

/// SIGINT to `child` (an `epochal` run), then its exit status, waited for up to
/// `within`.
pub fn interrupt(
    child: &mut std::process::Child,
    within: std::time::Duration,
) -> std::process::ExitStatus {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "epochal did not exit on SIGINT");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Polls `<store>/latest/harness.log` until it holds `needle` (a run of
/// `child` reaching a step), failing if `child` exits first or after `within`;
/// returns the run directory.
pub fn await_harness_log(
    store: &Path,
    needle: &str,
    child: &mut std::process::Child,
    within: std::time::Duration,
) -> PathBuf {
    let deadline = Instant::now() + within;
    loop {
        let log = std::fs::read_to_string(store.join("latest/harness.log")).unwrap_or_default();
        if log.contains(needle) {
            return latest(store);
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("epochal exited early: {status}; harness.log:\n{log}");
        }
        assert!(
            Instant::now() < deadline,
            "the run never logged {needle:?}:\n{log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
