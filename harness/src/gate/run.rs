//! Running a gate: every scenario under every setting, at most `jobs` at
//! once, each run judged against what its setting expects.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::checker::{Report, RunData, Verdict};
use crate::run::{self, RunOptions};
use crate::run_dir::RunDir;

use super::path::check_path;
use super::suite::{
    CampaignCase, Expect, LoadedSuite, Scenario, Setting, setting_dir, setting_label,
};

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
    pub system: crate::system::System,
    pub jobs: usize,
    pub runtime: crate::runtime::RuntimeKind,
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

/// A `--shard` that is not `I/N` with 1 <= I <= N.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a shard like 1/4 (I/N with 1 <= I <= N)")]
pub struct ShardError {
    pub text: String,
}

impl std::str::FromStr for Shard {
    type Err = ShardError;
    fn from_str(s: &str) -> Result<Shard, ShardError> {
        let bad = || ShardError { text: s.to_owned() };
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

/// One case of a gate.
#[derive(Debug, Clone)]
pub enum Case {
    /// A scenario under one of its settings.
    Scenario(LoadedSuite, Scenario, Setting),
    /// A `[[campaign]]` under one of its seeds.
    Campaign(LoadedSuite, CampaignCase, u64),
}

impl Case {
    /// `suite/scenario/setting`, or `suite/campaign/seed-N/setting`: unique in a gate.
    pub fn label(&self) -> String {
        match self {
            Case::Scenario(suite, scenario, setting) => {
                format!(
                    "{}/{}/{}",
                    suite.name,
                    scenario.name,
                    setting_label(setting)
                )
            }
            Case::Campaign(suite, campaign, seed) => format!(
                "{}/{}/seed-{seed}/{}",
                suite.name,
                campaign.name,
                setting_label(&campaign.setting())
            ),
        }
    }
}

/// The gate's cases — every scenario under every setting, then every
/// campaign under every seed, suite by suite — in order; only the shard's
/// slice of them.
pub fn cases(suites: &[LoadedSuite], shard: Shard) -> Vec<Case> {
    let mut cases = Vec::new();
    for suite in suites {
        for scenario in &suite.suite.scenarios {
            for setting in &scenario.settings {
                cases.push(Case::Scenario(
                    suite.clone(),
                    scenario.clone(),
                    setting.clone(),
                ));
            }
        }
        for campaign in &suite.suite.campaigns {
            for &seed in &campaign.seeds {
                cases.push(Case::Campaign(suite.clone(), campaign.clone(), seed));
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

/// Runs every case (of the shard), at most `jobs` at once.
pub async fn run_gate(suites: &[LoadedSuite], options: &GateOptions) -> Vec<CaseResult> {
    let cases = cases(suites, options.shard);
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(options.jobs.max(1)));
    let local = tokio::task::LocalSet::new();
    let mut handles = Vec::new();
    for case in cases {
        let permits = permits.clone();
        let (suite, scenario_name, setting, schedule, group_tail) = match &case {
            Case::Scenario(suite, scenario, setting) => (
                suite.clone(),
                scenario.name.clone(),
                setting.clone(),
                suite.schedule_path(scenario),
                setting_dir(setting),
            ),
            Case::Campaign(suite, campaign, seed) => (
                suite.clone(),
                format!("{}/seed-{seed}", campaign.name),
                campaign.setting(),
                PathBuf::from(format!("{}-seed-{seed}", campaign.name)),
                setting_dir(&campaign.setting()),
            ),
        };
        let run_options = RunOptions {
            schedule,
            store: options.store.clone(),
            sets: setting.set.clone(),
            bin_dir: options.bin_dir.clone(),
            etcd: options.etcd.clone(),
            system: options.system.clone(),
            echo: false,
            name: None,
            runtime: options.runtime,
            group: Some(vec![
                suite.name.clone(),
                scenario_name.replace('/', "-"),
                group_tail,
            ]),
        };
        handles.push(local.spawn_local(async move {
            let _permit = permits.acquire_owned().await.expect("never closed");
            let started = Instant::now();
            let ran = match &case {
                Case::Scenario(..) => run::run(&run_options).await,
                Case::Campaign(_, campaign, seed) => {
                    run_campaign(campaign, *seed, &run_options).await
                }
            };
            let scenario = match &case {
                Case::Scenario(_, scenario, _) => scenario.clone(),
                Case::Campaign(_, campaign, _) => Scenario {
                    name: campaign.name.clone(),
                    schedule: PathBuf::new(),
                    description: campaign.description.clone(),
                    settings: vec![campaign.setting()],
                    paths: Vec::new(),
                    snapshot: false,
                },
            };
            let mut result = judge_case(&suite, &scenario, &setting, ran);
            result.scenario = scenario_name;
            result.duration = started.elapsed();
            result
        }));
    }
    let results = local
        .run_until(async move {
            let mut results = Vec::new();
            for handle in handles {
                results.push(handle.await.expect("a gate case does not panic"));
            }
            results
        })
        .await;
    // Each run updated the index as it ended; once more now, so the page is
    // the whole gate's even where a run's own update failed or lost a race
    // (parallel jobs: a scan made before another run's check, renamed last).
    crate::report::index::update_store_index(&options.store);
    results
}

/// A `[[campaign]]` case: the seed's plan and schedule, `--set`s applied, run.
async fn run_campaign(
    campaign: &CampaignCase,
    seed: u64,
    options: &RunOptions,
) -> Result<run::RunReport, run::RunError> {
    let campaign_options = campaign
        .options(seed)
        .map_err(|e| run::RunError::Campaign {
            name: campaign.name.clone(),
            source: Box::new(e),
        })?;
    let mut schedule = crate::campaign::schedule(&campaign_options);
    run::apply_sets(&mut schedule, &options.sets)?;
    let explicit = !campaign.kinds.is_empty();
    let kinds = crate::campaign::kinds_for(&options.system, &campaign_options.kinds, explicit)
        .map_err(|why| run::RunError::Campaign {
            name: campaign.name.clone(),
            source: Box::new(why),
        })?;
    let plan = crate::campaign::Plan::derive(
        seed,
        campaign_options.stop,
        campaign_options.brokers,
        &kinds,
    );
    let name = format!("seed-{seed}");
    let source = format!("campaign {} seed {seed}", campaign.name);
    // The plan drives phase 3 (campaign/play.rs).
    run::execute(options, schedule, &name, &source, plan).await
}

/// A case's result from its run (or the error that stopped it).
fn judge_case(
    suite: &LoadedSuite,
    scenario: &Scenario,
    setting: &Setting,
    ran: Result<run::RunReport, run::RunError>,
) -> CaseResult {
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
    match ran {
        Err(e) => case.failures.push(format!("the run failed: {e}")),
        Ok(report) => {
            case.got = report.report.verdict.to_string();
            case.run_dir = Some(report.dir.path().to_owned());
            case.failures = judge(scenario, setting, &report.report, &report.dir);
            case.met = case.failures.is_empty();
            let expectation = crate::run_dir::Expectation {
                expected: case.expected.clone(),
                met: case.met,
                failures: case.failures.clone(),
            };
            // For the store's index; a failure to write it never fails the case.
            if let Err(e) = report.dir.write_expectation(&expectation) {
                eprintln!("epochal: warning: {e}");
            }
        }
    }
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
            .any(|e| e.anomaly == *anomaly);
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
        // Not-applicable results are no reason a run missed its expectation.
        .filter(|r| r.verdict > Verdict::Valid)
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
