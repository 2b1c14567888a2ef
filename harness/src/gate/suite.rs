//! The suite model: a suite file's scenarios, the settings each runs under
//! with the verdict it must reach, and its path assertions, loaded and
//! checked before anything runs, so a bad suite fails in seconds, not after
//! its first cluster.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::checker::Anomaly;
use crate::run;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// The systems the suite is for (`systems = ["tansu"]`, names as
    /// `--system` takes them); default the reference broker only. A gate of
    /// another system skips it.
    #[serde(default = "reference_only")]
    pub systems: Vec<String>,
    #[serde(default, rename = "scenario")]
    pub scenarios: Vec<Scenario>,
    #[serde(default, rename = "campaign")]
    pub campaigns: Vec<CampaignCase>,
}

fn reference_only() -> Vec<String> {
    vec![crate::system::REFERENCE.to_owned()]
}

/// `[[campaign]]`: seeded randomized runs (`epochal campaign`) as gate
/// cases, one per seed, each expected to reach `expect`. On the fixed
/// settings a campaign must stay valid: a nightly's way of asking "did
/// anything nobody scripted break?".
///
/// ```toml
/// [[campaign]]
/// name = "current"
/// seeds = [1, 2]
/// duration = "20s"          # or faults = 6
/// set = ["truncation=current"]
/// expect = "valid"
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignCase {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub seeds: Vec<u64>,
    /// How long the nemesis picks faults (`20s`); default 60s.
    #[serde(default)]
    pub duration: Option<String>,
    /// Or how many faults it fires.
    #[serde(default)]
    pub faults: Option<u32>,
    #[serde(default)]
    pub set: Vec<String>,
    pub expect: Expect,
    #[serde(default)]
    pub anomaly: Option<Anomaly>,
    #[serde(default)]
    pub brokers: Option<u32>,
    #[serde(default)]
    pub partitions: Option<u32>,
    #[serde(default)]
    pub producers: Option<u32>,
    /// Fault kinds by name (`pause`, `crash`, ...); default the campaign's.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// The background consumers commit and read back offsets ([groups]).
    #[serde(default)]
    pub commits: bool,
}

impl CampaignCase {
    /// The campaign's options and stop for `seed`, or why they are wrong.
    pub fn options(
        &self,
        seed: u64,
    ) -> Result<crate::campaign::CampaignOptions, CampaignCaseError> {
        use crate::campaign::{CampaignOptions, StopAfter};
        let stop = match (&self.duration, self.faults) {
            (Some(_), Some(_)) => return Err(CampaignCaseError::DurationAndFaults),
            (Some(d), None) => StopAfter::Duration(crate::duration::parse_duration(d)?),
            (None, Some(n)) => StopAfter::Faults(n),
            (None, None) => StopAfter::Duration(std::time::Duration::from_secs(60)),
        };
        let mut options = CampaignOptions::new(seed, stop);
        options.brokers = self.brokers.unwrap_or(options.brokers);
        options.partitions = self.partitions.unwrap_or(options.partitions);
        options.producers = self.producers.unwrap_or(options.producers);
        options.commits = self.commits;
        if !self.kinds.is_empty() {
            options.kinds = self
                .kinds
                .iter()
                .map(|k| k.parse())
                .collect::<Result<_, _>>()?;
        }
        Ok(options)
    }

    /// As a setting, for judging and labels.
    pub fn setting(&self) -> Setting {
        Setting {
            set: self.set.clone(),
            expect: self.expect,
            anomaly: self.anomaly,
            snapshot: Some(false),
        }
    }
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
    pub anomaly: Option<Anomaly>,
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
    /// Idempotent sends acknowledged after more than one attempt: the
    /// producer's resend reached a leader and was settled.
    pub resent_acked_at_least: Option<u64>,
    /// Reads of a committed offset that answered after a commit of the same
    /// group and partition was acknowledged ([groups]): what
    /// committed-offsets had to judge.
    pub committed_reads_at_least: Option<u64>,
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
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: scenario {scenario}: {problem}", path.display())]
    Invalid {
        path: PathBuf,
        scenario: String,
        #[source]
        problem: CaseProblem,
    },
    /// A `[[campaign]]` whose keys do not make a campaign (`scenario` is the
    /// campaign's name).
    #[error("{}: scenario {scenario}: {source}", path.display())]
    Campaign {
        path: PathBuf,
        scenario: String,
        #[source]
        source: CampaignCaseError,
    },
}

/// Why a scenario or campaign of a suite cannot run.
#[derive(Debug, thiserror::Error)]
pub enum CaseProblem {
    #[error("no seeds")]
    NoSeeds,
    #[error("no [[scenario.setting]]")]
    NoSettings,
    #[error("`anomaly` goes with expect = \"invalid\"")]
    AnomalyWithValid,
    #[error("schedule: {0}")]
    Schedule(#[source] Box<crate::schedule::ScheduleError>),
    #[error(transparent)]
    Set(Box<run::RunError>),
    #[error(
        "each [[scenario.path]] takes exactly one of acked_at_least, resent_acked_at_least, committed_reads_at_least, fault, isr_shrink, leaders"
    )]
    PathKeys,
}

/// Why a `[[campaign]]`'s keys do not make a campaign.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CampaignCaseError {
    #[error("give duration or faults, not both")]
    DurationAndFaults,
    #[error(transparent)]
    Duration(#[from] crate::duration::DurationError),
    #[error(transparent)]
    Kind(#[from] crate::campaign::KindError),
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
                .map_err(|source| SuiteError::Read {
                    path: path.clone(),
                    source,
                })?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            files.sort();
            for file in files {
                let text = read(&file)?;
                let is_suite = toml::from_str::<toml::Table>(&text)
                    .map(|t| t.contains_key("scenario") || t.contains_key("campaign"))
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
    std::fs::read_to_string(path).map_err(|source| SuiteError::Read {
        path: path.to_owned(),
        source,
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
    for campaign in &loaded.suite.campaigns {
        let invalid = |problem: CaseProblem| SuiteError::Invalid {
            path: path.to_owned(),
            scenario: campaign.name.clone(),
            problem,
        };
        if campaign.seeds.is_empty() {
            return Err(invalid(CaseProblem::NoSeeds));
        }
        let options =
            campaign
                .options(campaign.seeds[0])
                .map_err(|source| SuiteError::Campaign {
                    path: path.to_owned(),
                    scenario: campaign.name.clone(),
                    source,
                })?;
        let mut schedule = crate::campaign::schedule(&options);
        run::apply_sets(&mut schedule, &campaign.set)
            .map_err(|e| invalid(CaseProblem::Set(Box::new(e))))?;
        if campaign.expect == Expect::Valid && campaign.anomaly.is_some() {
            return Err(invalid(CaseProblem::AnomalyWithValid));
        }
    }
    for scenario in &loaded.suite.scenarios {
        let invalid = |problem: CaseProblem| SuiteError::Invalid {
            path: path.to_owned(),
            scenario: scenario.name.clone(),
            problem,
        };
        let schedule = loaded.schedule_path(scenario);
        let mut parsed = crate::schedule::Schedule::load(&schedule)
            .map_err(|e| invalid(CaseProblem::Schedule(Box::new(e))))?;
        if scenario.settings.is_empty() {
            return Err(invalid(CaseProblem::NoSettings));
        }
        for setting in &scenario.settings {
            run::apply_sets(&mut parsed, &setting.set)
                .map_err(|e| invalid(CaseProblem::Set(Box::new(e))))?;
            if setting.expect == Expect::Valid && setting.anomaly.is_some() {
                return Err(invalid(CaseProblem::AnomalyWithValid));
            }
        }
        for assertion in &scenario.paths {
            let keys = [
                assertion.acked_at_least.is_some(),
                assertion.resent_acked_at_least.is_some(),
                assertion.committed_reads_at_least.is_some(),
                assertion.fault.is_some(),
                assertion.isr_shrink.is_some(),
                assertion.leaders.is_some(),
            ];
            if keys.iter().filter(|&&k| k).count() != 1 {
                return Err(invalid(CaseProblem::PathKeys));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(keys: &str) -> SuiteError {
        let text = format!("[[campaign]]\nname = \"c\"\nseeds = [1]\nexpect = \"valid\"\n{keys}\n");
        load_suite(Path::new("s.toml"), &text).unwrap_err()
    }

    #[test]
    fn a_bad_campaign_fails_the_load_with_its_reason_as_the_source() {
        let both = campaign("duration = \"20s\"\nfaults = 3");
        assert!(
            matches!(
                &both,
                SuiteError::Campaign {
                    scenario,
                    source: CampaignCaseError::DurationAndFaults,
                    ..
                } if scenario == "c"
            ),
            "{both:?}"
        );
        assert_eq!(
            both.to_string(),
            "s.toml: scenario c: give duration or faults, not both"
        );
        let duration = campaign("duration = \"soon\"");
        assert!(
            matches!(
                &duration,
                SuiteError::Campaign {
                    source: CampaignCaseError::Duration(_),
                    ..
                }
            ),
            "{duration:?}"
        );
        assert_eq!(
            duration.to_string(),
            r#"s.toml: scenario c: "soon" is not a duration like 120s, 2m or 1500ms"#
        );
        let kind = campaign("kinds = [\"paws\"]");
        assert!(
            matches!(
                &kind,
                SuiteError::Campaign {
                    source: CampaignCaseError::Kind(crate::campaign::KindError { name }),
                    ..
                } if name == "paws"
            ),
            "{kind:?}"
        );
    }
}
