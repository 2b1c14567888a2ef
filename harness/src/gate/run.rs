//! Running a gate: every scenario under every setting, at most `jobs` at
//! once, each run judged against what its setting expects.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::checker::{Report, RunData, Verdict};
use crate::run::{self, RunOptions};
use crate::run_dir::RunDir;

use super::path::check_path;
use super::suite::{Expect, LoadedSuite, Scenario, Setting, setting_dir, setting_label};

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
    /// Run only this slice of the cases (see [`Shard`]).
    pub shard: Shard,
}

/// The I-th of N slices of a gate (`--shard I/N`), so a CI matrix spreads the
/// cases over N runners. Case k (in suite, scenario, setting order) belongs
/// to slice `k mod N + 1`: deterministic, the same on every runner, every
/// case in exactly one slice, and neighbouring settings of one scenario (the
/// slow and the fast) land on different runners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    pub fn holds(self, case: usize) -> bool {
        case % self.count == self.index - 1
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("{s:?} is not a shard like 1/4 (I/N with 1 <= I <= N)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// The gate's cases, every scenario under every setting, in order; only the
/// shard's slice of them.
pub fn cases(suites: &[LoadedSuite], shard: Shard) -> Vec<(LoadedSuite, Scenario, Setting)> {
    let mut cases = Vec::new();
    for suite in suites {
        for scenario in &suite.suite.scenarios {
            for setting in &scenario.settings {
                cases.push((suite.clone(), scenario.clone(), setting.clone()));
            }
        }
    }
    cases
        .into_iter()
        .enumerate()
        .filter(|(k, _)| shard.holds(*k))
        .map(|(_, case)| case)
        .collect()
}

/// Runs every scenario under every setting (of the shard), at most `jobs` at once.
pub async fn run_gate(suites: &[LoadedSuite], options: &GateOptions) -> Vec<CaseResult> {
    let cases = cases(suites, options.shard);
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
