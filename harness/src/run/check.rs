//! Phase 6, and `epochal check`: a run's verdict from its directory alone.
//! The checkers' report is merged with how the run itself ended (`run.json`),
//! written to `results.json` and told to a person on stdout; `epochal check`
//! rebuilds the same report from the stored files, with no cluster.

use std::io::Write;

use crate::checker::{
    self, Anomaly, CheckResult, Evidence, LoadError, Report, RunData, Verdict, evidence,
};
use crate::run_dir::{RunDir, RunEnd, Stuck};

use super::RunError;

/// Checks a loaded run and folds in how it ended: a run that did not finish
/// or could not establish its premise is at best unknown; an anomaly found
/// anyway still makes it invalid.
pub fn verdict(run: &RunData, end: &RunEnd) -> Report {
    let mut report = checker::check(run, &checker::all());
    if !end.stuck.is_empty() {
        report.results.insert(0, stuck_partitions(&end.stuck));
        report.verdict = Verdict::Invalid;
    }
    if let Some(why) = &end.unknown {
        report
            .results
            .insert(0, CheckResult::unknown("run", why.clone()));
        report.verdict = report.verdict.max(Verdict::Unknown);
    }
    report
}

/// The liveness window's finding: each partition that took no write after
/// the final heal (run/liveness.rs), as a `stuck-partition` anomaly.
fn stuck_partitions(stuck: &[Stuck]) -> CheckResult {
    let evidence = stuck
        .iter()
        .map(|s| Evidence {
            anomaly: Anomaly::StuckPartition,
            summary: format!(
                "{} acknowledged no write within {} ms of the final heal (last answer: {})",
                s.partition,
                s.window_ms,
                s.last_error.as_deref().unwrap_or("none")
            ),
            details: evidence::Stuck {
                last_error: s.last_error.clone(),
                partition: s.partition.clone(),
                window_ms: s.window_ms,
            }
            .into(),
        })
        .collect();
    CheckResult::invalid(
        "liveness",
        format!(
            "{} of the partitions took no write after the final heal",
            stuck.len()
        ),
        evidence,
    )
}

/// Loads a run directory and checks it.
pub fn check_dir(dir: &RunDir) -> Result<Report, LoadError> {
    let run = RunData::load(dir)?;
    Ok(verdict(&run, &dir.read_end()))
}

/// Loads a run directory, checks it and draws its `report.html` (`epochal
/// check`). A report that cannot be written is told on stderr and never
/// changes the verdict: the checkers' word is the result, the page a view.
pub fn check_dir_and_draw(dir: &RunDir) -> Result<Report, LoadError> {
    let run = RunData::load(dir)?;
    let end = dir.read_end();
    let report = verdict(&run, &end);
    if let Err(e) = crate::report::write(dir, &run, &report, &end) {
        eprintln!("epochal: drawing the report: {e}");
    }
    Ok(report)
}

/// Checks a run that just ended, keeps the report in `results.json` and
/// draws `report.html` beside it.
pub(super) fn check_and_store(dir: &RunDir) -> Result<Report, RunError> {
    let report = check_dir_and_draw(dir).map_err(|source| RunError::Check {
        dir: dir.path().to_owned(),
        source: Box::new(source),
    })?;
    crate::store::write_json(&dir.results(), &report)?;
    Ok(report)
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
