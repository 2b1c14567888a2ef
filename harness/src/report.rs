//! A run's verdict: the checkers' report merged with how the run itself ended,
//! written to `results.json` in the run directory and told to a person on
//! stdout. `epochal check` rebuilds the same report from the stored files.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::checker::{self, CheckResult, LoadError, Report, RunData, Verdict};

/// `run.json`: how the run ended, kept so an offline re-check reaches the same
/// verdict (an await that timed out stays unknown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    pub completed: bool,
    /// Why the run is unknown, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

pub const RUN_END: &str = "run.json";
pub const RESULTS: &str = "results.json";

impl RunEnd {
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).expect("serializes");
        std::fs::write(dir.join(RUN_END), text + "\n")
    }

    /// A run directory without `run.json` was cut off before it finished
    /// (e.g. Ctrl-C): unknown, saying so.
    pub fn read(dir: &Path) -> RunEnd {
        std::fs::read_to_string(dir.join(RUN_END))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(RunEnd {
                completed: false,
                unknown: Some("the run did not finish (no run.json)".into()),
            })
    }
}

/// Checks a loaded run and folds in how it ended: a run that did not finish
/// or could not establish its premise is at best unknown; an anomaly found
/// anyway still makes it invalid.
pub fn verdict(run: &RunData, end: &RunEnd) -> Report {
    let mut report = checker::check(run, &checker::all());
    if let Some(why) = &end.unknown {
        report
            .results
            .insert(0, CheckResult::unknown("run", why.clone()));
        report.verdict = report.verdict.max(Verdict::Unknown);
    }
    report
}

/// Loads `dir` and checks it.
pub fn check_dir(dir: &Path) -> Result<Report, LoadError> {
    let run = RunData::load(dir)?;
    Ok(verdict(&run, &RunEnd::read(dir)))
}

pub fn write_results(dir: &Path, report: &Report) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(report).expect("serializes");
    std::fs::write(dir.join(RESULTS), text + "\n")
}

/// The human summary: one line per checker, then each anomaly's evidence.
pub fn write_report(report: &Report, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "checks:")?;
    for result in &report.results {
        writeln!(
            out,
            "  {:<8} {:<28} {}",
            result.verdict.to_string(),
            result.checker,
            result.message
        )?;
        for (name, n) in &result.counts {
            writeln!(out, "           {name}: {n}")?;
        }
        for evidence in &result.evidence {
            writeln!(
                out,
                "           - {}: {}",
                evidence.anomaly, evidence.summary
            )?;
        }
    }
    writeln!(out, "verdict: {}", report.verdict)
}
