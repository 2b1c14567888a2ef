//! Suites and the release gate. A suite is a TOML file of scenarios; each names
//! a schedule, the settings it runs under, the verdict it must reach on each
//! (`valid`, or `invalid` with the anomaly expected: a bug reproduction that
//! must keep reproducing) and path assertions that prove the fault bit — a
//! pass that never exercised the fault proves nothing.
//!
//! ```toml
//! [[scenario]]
//! name = "kip-101-scenario-1"
//! schedule = "kip-101-scenario-1.toml"      # relative to the suite file
//!
//! [[scenario.setting]]
//! set = ["truncation=high-watermark"]
//! expect = "invalid"
//! anomaly = "lost-acknowledged-write"
//!
//! [[scenario.setting]]
//! set = ["truncation=current"]
//! expect = "valid"
//! # snapshot = false                        # this setting's run is not snapshotted
//!
//! [[scenario.path]]
//! acked_at_least = 2                          # values acknowledged (ok sends)
//! [[scenario.path]]
//! fault = "crash"                             # a nemesis op that completed without error
//! [[scenario.path]]
//! isr_shrink = "t-0"                          # etcd's timeline shows the ISR shrink
//! [[scenario.path]]
//! leaders = { partition = "t-0", sequence = ["b1@0", "b2@1"] }   # leader@epoch, in order, exactly
//! ```
//!
//! `epochal gate` runs every scenario under every setting it names and meets
//! the gate only when each run reaches its expected verdict, names the
//! expected anomaly, and passes its path assertions. An unknown fails the
//! gate, and so does an unexpected pass of a bug reproduction. A directory
//! given to the gate contributes every `*.toml` in it with `[[scenario]]`
//! tables (the schedules beside them have none).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::checker::{Report, RunData, Verdict};
use crate::run::{self, RunOptions};
use crate::run_dir::RunDir;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    #[serde(rename = "scenario")]
    pub scenarios: Vec<Scenario>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub schedule: PathBuf,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(rename = "setting")]
    pub settings: Vec<Setting>,
    #[serde(default, rename = "path")]
    pub paths: Vec<PathAssertion>,
    /// Whether the scenario is scripted closely enough to snapshot its history
    /// and final state (tests/cluster_gate.rs); default yes.
    #[serde(default = "yes")]
    pub snapshot: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setting {
    /// `KEY=VALUE` broker settings, as `--set` takes them.
    #[serde(default)]
    pub set: Vec<String>,
    pub expect: Expect,
    /// For `invalid`: the anomaly some checker's evidence must name.
    #[serde(default)]
    pub anomaly: Option<String>,
    /// Overrides the scenario's `snapshot` for this setting alone (a setting
    /// whose run has a race of the system's own in what it records).
    #[serde(default)]
    pub snapshot: Option<bool>,
}

impl Scenario {
    /// The settings whose runs are compared with snapshots.
    pub fn snapshotted(&self) -> impl Iterator<Item = &Setting> {
        self.settings
            .iter()
            .filter(|s| s.snapshot.unwrap_or(self.snapshot))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    Valid,
    Invalid,
}

/// One path assertion; exactly one key per `[[scenario.path]]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathAssertion {
    pub acked_at_least: Option<u64>,
    pub fault: Option<String>,
    pub isr_shrink: Option<String>,
    pub leaders: Option<LeaderSequence>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaderSequence {
    pub partition: String,
    /// `b1@0`: leader b1 in leader epoch 0; the distinct (leader, epoch) pairs
    /// of the partition's states in etcd, in revision order, leaderless ones
    /// left out.
    pub sequence: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("{}: {error}", path.display())]
    Read { path: PathBuf, error: String },
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: scenario {scenario}: {why}", path.display())]
    Invalid {
        path: PathBuf,
        scenario: String,
        why: String,
    },
}

/// A suite file, loaded and checked (schedules exist and parse, settings are
/// well formed, each path assertion has one key).
#[derive(Debug, Clone)]
pub struct LoadedSuite {
    pub path: PathBuf,
    pub name: String,
    pub suite: Suite,
}

impl LoadedSuite {
    pub fn schedule_path(&self, scenario: &Scenario) -> PathBuf {
        self.path
            .parent()
            .unwrap_or(Path::new("."))
            .join(&scenario.schedule)
    }
}

/// Suite files named by `paths`: files as given, directories' `*.toml` files
/// that hold scenarios, in name order.
pub fn load_suites(paths: &[PathBuf]) -> Result<Vec<LoadedSuite>, SuiteError> {
    let mut suites = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| SuiteError::Read {
                    path: path.clone(),
                    error: e.to_string(),
                })?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            files.sort();
            for file in files {
                let text = read(&file)?;
                let is_suite = toml::from_str::<toml::Table>(&text)
                    .map(|t| t.contains_key("scenario"))
                    .unwrap_or(false);
                if is_suite {
                    suites.push(load_suite(&file, &text)?);
                }
            }
        } else {
            let text = read(path)?;
            suites.push(load_suite(path, &text)?);
        }
    }
    Ok(suites)
}

fn read(path: &Path) -> Result<String, SuiteError> {
    std::fs::read_to_string(path).map_err(|e| SuiteError::Read {
        path: path.to_owned(),
        error: e.to_string(),
    })
}

fn load_suite(path: &Path, text: &str) -> Result<LoadedSuite, SuiteError> {
    let suite: Suite = toml::from_str(text).map_err(|e| SuiteError::Syntax {
        path: path.to_owned(),
        line: e.span().map_or(1, |s| {
            text[..s.start.min(text.len())].matches('\n').count() + 1
        }),
        message: e.message().trim().to_owned(),
    })?;
    let name = path
        .file_stem()
        .map_or("suite".into(), |s| s.to_string_lossy().into_owned());
    let loaded = LoadedSuite {
        path: path.to_owned(),
        name,
        suite,
    };
    for scenario in &loaded.suite.scenarios {
        let invalid = |why: String| SuiteError::Invalid {
            path: path.to_owned(),
            scenario: scenario.name.clone(),
            why,
        };
        let schedule = loaded.schedule_path(scenario);
        let mut parsed = crate::schedule::Schedule::load(&schedule)
            .map_err(|e| invalid(format!("schedule: {e}")))?;
        if scenario.settings.is_empty() {
            return Err(invalid("no [[scenario.setting]]".into()));
        }
        for setting in &scenario.settings {
            run::apply_sets(&mut parsed, &setting.set).map_err(|e| invalid(e.to_string()))?;
            if setting.expect == Expect::Valid && setting.anomaly.is_some() {
                return Err(invalid("`anomaly` goes with expect = \"invalid\"".into()));
            }
        }
        for assertion in &scenario.paths {
            let keys = [
                assertion.acked_at_least.is_some(),
                assertion.fault.is_some(),
                assertion.isr_shrink.is_some(),
                assertion.leaders.is_some(),
            ];
            if keys.iter().filter(|&&k| k).count() != 1 {
                return Err(invalid(
                    "each [[scenario.path]] takes exactly one of acked_at_least, fault, isr_shrink, leaders"
                        .into(),
                ));
            }
        }
    }
    Ok(loaded)
}

/// `truncation=high-watermark` → `truncation-high-watermark`; no settings → `default`.
pub fn setting_label(setting: &Setting) -> String {
    if setting.set.is_empty() {
        return "default".into();
    }
    setting.set.join(",")
}

/// The store directory name of a setting: `truncation-high-watermark`.
pub fn setting_dir(setting: &Setting) -> String {
    setting_label(setting).replace(['=', ','], "-")
}

/// One scenario under one setting, run and judged.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub suite: String,
    pub scenario: String,
    pub setting: String,
    pub expected: String,
    /// The run's verdict, or `error` when it could not run.
    pub got: String,
    pub met: bool,
    /// Why it is not met (empty when met).
    pub failures: Vec<String>,
    pub run_dir: Option<PathBuf>,
    pub duration: Duration,
}

pub struct GateOptions {
    pub store: PathBuf,
    pub bin_dir: PathBuf,
    pub etcd: PathBuf,
    pub jobs: usize,
    pub runtime: crate::cli::RuntimeKind,
}

/// Runs every scenario under every setting, at most `jobs` at once.
pub async fn run_gate(suites: &[LoadedSuite], options: &GateOptions) -> Vec<CaseResult> {
    let mut cases = Vec::new();
    for suite in suites {
        for scenario in &suite.suite.scenarios {
            for setting in &scenario.settings {
                cases.push((suite.clone(), scenario.clone(), setting.clone()));
            }
        }
    }
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(options.jobs.max(1)));
    let local = tokio::task::LocalSet::new();
    let mut handles = Vec::new();
    for (suite, scenario, setting) in cases {
        let permits = permits.clone();
        let run_options = RunOptions {
            schedule: suite.schedule_path(&scenario),
            store: options.store.clone(),
            sets: setting.set.clone(),
            bin_dir: options.bin_dir.clone(),
            etcd: options.etcd.clone(),
            echo: false,
            name: None,
            runtime: options.runtime,
            group: Some(vec![
                suite.name.clone(),
                scenario.name.clone(),
                setting_dir(&setting),
            ]),
        };
        handles.push(local.spawn_local(async move {
            let _permit = permits.acquire_owned().await.expect("never closed");
            run_case(&suite, &scenario, &setting, &run_options).await
        }));
    }
    local
        .run_until(async move {
            let mut results = Vec::new();
            for handle in handles {
                results.push(handle.await.expect("a gate case does not panic"));
            }
            results
        })
        .await
}

async fn run_case(
    suite: &LoadedSuite,
    scenario: &Scenario,
    setting: &Setting,
    options: &RunOptions,
) -> CaseResult {
    let started = Instant::now();
    let expected = match (setting.expect, &setting.anomaly) {
        (Expect::Valid, _) => "valid".to_owned(),
        (Expect::Invalid, Some(anomaly)) => format!("invalid ({anomaly})"),
        (Expect::Invalid, None) => "invalid".to_owned(),
    };
    let mut case = CaseResult {
        suite: suite.name.clone(),
        scenario: scenario.name.clone(),
        setting: setting_label(setting),
        expected,
        got: "error".into(),
        met: false,
        failures: Vec::new(),
        run_dir: None,
        duration: Duration::ZERO,
    };
    match run::run(options).await {
        Err(e) => case.failures.push(format!("the run failed: {e}")),
        Ok(report) => {
            case.got = report.report.verdict.to_string();
            case.run_dir = Some(report.dir.path().to_owned());
            case.failures = judge(scenario, setting, &report.report, &report.dir);
            case.met = case.failures.is_empty();
        }
    }
    case.duration = started.elapsed();
    case
}

/// Why a finished run does not meet its expectation (empty: it does).
pub fn judge(scenario: &Scenario, setting: &Setting, report: &Report, dir: &RunDir) -> Vec<String> {
    let mut failures = Vec::new();
    match (setting.expect, report.verdict) {
        (Expect::Valid, Verdict::Valid) | (Expect::Invalid, Verdict::Invalid) => {}
        (Expect::Invalid, Verdict::Valid) => {
            failures.push("expected invalid, the run is valid: the bug did not reproduce".into())
        }
        (expect, verdict) => failures.push(format!(
            "expected {}, got {verdict}: {}",
            match expect {
                Expect::Valid => "valid",
                Expect::Invalid => "invalid",
            },
            reasons(report)
        )),
    }
    if let (Expect::Invalid, Some(anomaly)) = (setting.expect, &setting.anomaly) {
        let named = report
            .results
            .iter()
            .filter(|r| r.verdict == Verdict::Invalid)
            .flat_map(|r| &r.evidence)
            .any(|e| &e.anomaly == anomaly);
        if report.verdict == Verdict::Invalid && !named {
            failures.push(format!(
                "invalid, but no checker names the expected anomaly {anomaly}: {}",
                reasons(report)
            ));
        }
    }
    match RunData::load(dir) {
        Ok(run) => {
            for assertion in &scenario.paths {
                if let Err(why) = check_path(assertion, &run) {
                    failures.push(format!("path assertion: {why}"));
                }
            }
        }
        Err(e) => failures.push(format!("cannot read the run back: {e}")),
    }
    failures
}

/// The invalid and unknown checkers' messages, for a failure line.
fn reasons(report: &Report) -> String {
    let notes: Vec<String> = report
        .results
        .iter()
        .filter(|r| r.verdict != Verdict::Valid)
        .map(|r| {
            let first = r
                .evidence
                .first()
                .map(|e| format!(" — {}: {}", e.anomaly, e.summary))
                .unwrap_or_default();
            format!("{} {}: {}{first}", r.verdict, r.checker, r.message)
        })
        .collect();
    if notes.is_empty() {
        "every checker valid".into()
    } else {
        notes.join("; ")
    }
}

fn check_path(assertion: &PathAssertion, run: &RunData) -> Result<(), String> {
    use crate::history::{OpType, Process};
    if let Some(n) = assertion.acked_at_least {
        let acked: u64 = run
            .history
            .iter()
            .filter_map(|op| op.acked_send())
            .map(|(send, _)| send.values.len() as u64)
            .sum();
        if acked < n {
            return Err(format!("{acked} values acknowledged, wanted at least {n}"));
        }
    }
    if let Some(f) = &assertion.fault {
        let fired = run.history.iter().any(|op| {
            op.process == Process::Nemesis
                && op.kind == OpType::Info
                && op.f() == f
                && op.error.is_none()
        });
        if !fired {
            return Err(format!("no {f} fault completed"));
        }
    }
    let states = |partition: &str| -> Result<Vec<&crate::timeline::PartitionStateChange>, String> {
        let timeline = run
            .timeline
            .as_ref()
            .ok_or("the run recorded no etcd timeline")?;
        let p: crate::schedule::PartitionRef = partition.parse()?;
        Ok(timeline.states_of(&p.topic, p.partition))
    };
    if let Some(partition) = &assertion.isr_shrink {
        let states = states(partition)?;
        let shrank = states.windows(2).any(|w| w[1].isr.len() < w[0].isr.len());
        if !shrank {
            return Err(format!("etcd shows no ISR shrink of {partition}"));
        }
    }
    if let Some(leaders) = &assertion.leaders {
        let mut seen: Vec<String> = Vec::new();
        for state in states(&leaders.partition)? {
            if state.leader < 0 {
                continue;
            }
            let pair = format!("b{}@{}", state.leader, state.leader_epoch);
            if seen.last() != Some(&pair) {
                seen.push(pair);
            }
        }
        if seen != leaders.sequence {
            return Err(format!(
                "leaders of {} in etcd were {seen:?}, expected {:?}",
                leaders.partition, leaders.sequence
            ));
        }
    }
    Ok(())
}

/// The summary table on stdout.
pub fn write_table(cases: &[CaseResult], out: &mut impl std::io::Write) -> std::io::Result<()> {
    let names: Vec<String> = cases
        .iter()
        .map(|c| format!("{}/{}", c.suite, c.scenario))
        .collect();
    // Each column as wide as its widest cell, so long settings stay aligned.
    fn width(header: &str, cells: impl Iterator<Item = usize>) -> usize {
        cells.fold(header.len(), usize::max)
    }
    let scenario_w = width("scenario", names.iter().map(String::len));
    let setting_w = width("setting", cases.iter().map(|c| c.setting.len()));
    let expected_w = width("expected", cases.iter().map(|c| c.expected.len()));
    let got_w = width("got", cases.iter().map(|c| c.got.len()));
    writeln!(
        out,
        "{:<6} {:<scenario_w$} {:<setting_w$} {:<expected_w$} {:<got_w$} {:>7}",
        "result", "scenario", "setting", "expected", "got", "time"
    )?;
    for (case, name) in cases.iter().zip(&names) {
        writeln!(
            out,
            "{:<6} {name:<scenario_w$} {:<setting_w$} {:<expected_w$} {:<got_w$} {:>6.1}s",
            if case.met { "ok" } else { "FAIL" },
            case.setting,
            case.expected,
            case.got,
            case.duration.as_secs_f64()
        )?;
        for failure in &case.failures {
            writeln!(out, "       {failure}")?;
        }
        if !case.met
            && let Some(dir) = &case.run_dir
        {
            writeln!(out, "       run: {}", dir.display())?;
        }
    }
    let met = cases.iter().filter(|c| c.met).count();
    writeln!(
        out,
        "gate: {met}/{} met — {}",
        cases.len(),
        if met == cases.len() && !cases.is_empty() {
            "PASS"
        } else {
            "FAIL"
        }
    )
}

/// JUnit XML: one test suite per suite file, one case per scenario and setting.
pub fn junit(cases: &[CaseResult]) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("epochal-gate");
    let mut suites: Vec<TestSuite> = Vec::new();
    for case in cases {
        if suites.last().is_none_or(|s| s.name.as_str() != case.suite) {
            suites.push(TestSuite::new(case.suite.as_str()));
        }
        let status = if case.met {
            TestCaseStatus::success()
        } else {
            let mut status = TestCaseStatus::non_success(if case.got == "error" {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            });
            status.set_message(case.failures.join("; "));
            status
        };
        let mut test = TestCase::new(format!("{} [{}]", case.scenario, case.setting), status);
        test.set_classname(format!("{}.{}", case.suite, case.scenario));
        test.set_time(case.duration);
        if let Some(dir) = &case.run_dir {
            test.set_system_out(format!("run: {}", dir.display()));
        }
        suites.last_mut().expect("pushed above").add_test_case(test);
    }
    report.add_test_suites(suites);
    report
        .to_string()
        .expect("a report of plain strings serializes")
}
