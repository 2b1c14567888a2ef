//! Phase 6, and `epochal check`: a run's verdict from its directory alone.
//! The checkers' report is merged with how the run itself ended (`run.json`),
//! written to `results.json` and told to a person on stdout; `epochal check`
//! rebuilds the same report from the stored files, with no cluster.

use std::io::Write;

use crate::checker::{
    self, Anomaly, CheckResult, Coverage, Evidence, LoadError, Report, RunData, Verdict, evidence,
};
use crate::history::{OpType, Process};
use crate::run_dir::{RunDir, RunEnd, Stuck, StuckGroup, StuckTopic, Unrecovered};

use super::RunError;

/// Checks a loaded run and folds in how it ended: a run that did not finish
/// or could not establish its premise is at best unknown; an anomaly found
/// anyway still makes it invalid.
pub fn verdict(run: &RunData, end: &RunEnd) -> Report {
    let mut report = checker::check(run, &checker::for_run(run));
    // Coverage below a declared minimum makes a valid run unknown
    // ("vacuous: …"); `max` keeps an invalid one invalid.
    let coverage = Coverage::of(run);
    let minimums = run.schedule.as_ref().map(|s| &s.workload);
    if let Some(judged) = minimums.and_then(|w| coverage.judge(w, run.sees.etcd_timeline)) {
        report.verdict = report.verdict.max(judged.verdict);
        report.results.insert(0, judged);
    }
    report.coverage = Some(coverage);
    let stuck = [
        liveness_finding(&end.stuck),
        liveness_finding(&end.stuck_groups),
        liveness_finding(&end.stuck_topics),
    ];
    for found in stuck.into_iter().flatten() {
        report.results.insert(0, found);
        report.verdict = Verdict::Invalid;
    }
    if let Some(unrecovered) = &end.unrecovered
        && run.claims.recovers
    {
        report.results.insert(0, no_recovery(unrecovered));
        report.verdict = Verdict::Invalid;
    }
    if let Some(failed) = failed_restarts(run) {
        report.results.insert(0, failed);
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

/// Every start of a node (a restart or start, scripted, a campaign's or the
/// final heal's) whose process ended by itself before it served, as a
/// `restart-failed` anomaly; `None` when every start served. From the
/// history alone, so `epochal check` finds the same.
fn failed_restarts(run: &RunData) -> Option<CheckResult> {
    let evidence: Vec<Evidence> = run
        .history
        .iter()
        .filter(|op| op.process == Process::Nemesis && op.kind == OpType::Info)
        .filter_map(|op| Some((op.index, op.fault()?.done.as_ref()?.exited.as_ref()?)))
        .flat_map(|(index, exited)| {
            exited.iter().map(move |e| Evidence {
                anomaly: Anomaly::RestartFailed,
                summary: format!("{} ended during its start: {}", e.node, e.error),
                details: evidence::RestartFailed {
                    error: e.error.clone(),
                    history_index: index,
                    node: e.node,
                }
                .into(),
            })
        })
        .collect();
    if evidence.is_empty() {
        return None;
    }
    Some(CheckResult::invalid(
        "liveness",
        format!(
            "{} start(s) of a broker on its own data ended before it served",
            evidence.len()
        ),
        evidence,
    ))
}

/// What the liveness window (run/liveness.rs) found stuck after the final
/// heal: a partition, a group or the topic-lives topic, each its anomaly.
trait StuckFinding {
    /// The `liveness` result's summary for `n` of them.
    fn summary(n: usize) -> String;
    fn evidence(&self) -> Evidence;
}

/// The `liveness` result for what was found stuck; none when nothing was.
fn liveness_finding<S: StuckFinding>(stuck: &[S]) -> Option<CheckResult> {
    (!stuck.is_empty()).then(|| {
        let evidence = stuck.iter().map(S::evidence).collect();
        CheckResult::invalid("liveness", S::summary(stuck.len()), evidence)
    })
}

/// The last answer the liveness window's probe had, as a summary says it.
fn last_answer(last_error: &Option<String>) -> &str {
    last_error.as_deref().unwrap_or("none")
}

/// A partition that took no write after the final heal: `stuck-partition`.
impl StuckFinding for Stuck {
    fn summary(n: usize) -> String {
        format!("{n} of the partitions took no write after the final heal")
    }

    fn evidence(&self) -> Evidence {
        Evidence {
            anomaly: Anomaly::StuckPartition,
            summary: format!(
                "{} acknowledged no write within {} ms of the final heal (last answer: {})",
                self.partition,
                self.window_ms,
                last_answer(&self.last_error)
            ),
            details: evidence::Stuck {
                last_error: self.last_error.clone(),
                partition: self.partition.clone(),
                window_ms: self.window_ms,
            }
            .into(),
        }
    }
}

/// A group whose coordinator took no commit after the final heal:
/// `stuck-group`.
impl StuckFinding for StuckGroup {
    fn summary(n: usize) -> String {
        format!("{n} consumer group(s) had no coordinator serving commits after the final heal")
    }

    fn evidence(&self) -> Evidence {
        Evidence {
            anomaly: Anomaly::StuckGroup,
            summary: format!(
                "group {} had no commit taken and read back within {} ms of the final heal \
                 (last answer: {})",
                self.group,
                self.window_ms,
                last_answer(&self.last_error)
            ),
            details: evidence::StuckGroup {
                group: self.group.clone(),
                last_error: self.last_error.clone(),
                window_ms: self.window_ms,
            }
            .into(),
        }
    }
}

/// The topic-lives workload's topic, whose deletion, creation or read never
/// succeeded after the final heal: `stuck-topic`.
impl StuckFinding for StuckTopic {
    fn summary(n: usize) -> String {
        format!("{n} topic(s) could not be deleted, created again and read after the final heal")
    }

    fn evidence(&self) -> Evidence {
        Evidence {
            anomaly: Anomaly::StuckTopic,
            summary: format!(
                "topic {}: {} did not succeed within {} ms of the final heal (last answer: {})",
                self.topic,
                self.step,
                self.window_ms,
                last_answer(&self.last_error)
            ),
            details: evidence::StuckTopic {
                topic: self.topic.clone(),
                step: self.step.clone(),
                last_error: self.last_error.clone(),
                window_ms: self.window_ms,
            }
            .into(),
        }
    }
}

/// The final quiesce's finding on a system that claims to recover
/// (`[claims] recovers`): after the final heal the cluster made no progress
/// toward settling for the last half of the quiesce's bound, as a
/// `no-recovery` anomaly. A system that does not claim it stays unknown.
fn no_recovery(unrecovered: &Unrecovered) -> CheckResult {
    let evidence = Evidence {
        anomaly: Anomaly::NoRecovery,
        summary: format!(
            "after the final heal, unchanged for the last {} ms of the {} ms quiesce: {}{}",
            unrecovered.unchanged_ms,
            unrecovered.bound_ms,
            unrecovered.unsettled,
            if unrecovered.replicas.is_empty() {
                String::new()
            } else {
                format!("; replicas apart: {}", unrecovered.replicas.join("; "))
            }
        ),
        details: evidence::NoRecovery {
            bound_ms: unrecovered.bound_ms,
            replicas: unrecovered.replicas.clone(),
            unchanged_ms: unrecovered.unchanged_ms,
            unsettled: unrecovered.unsettled.clone(),
        }
        .into(),
    };
    CheckResult::invalid(
        "liveness",
        "the cluster did not recover after the final heal",
        vec![evidence],
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
    if let Some(coverage) = &report.coverage {
        writeln!(out, "coverage:")?;
        for line in coverage.lines() {
            writeln!(out, "  {line}")?;
        }
    }
    writeln!(out, "verdict: {}", report.verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Aim, Body, Done, ExitedAtStart, FaultOp, Op, Verb};
    use crate::node::NodeId;
    use crate::schedule::Target;

    fn start(index: u64, exited: Option<Vec<ExitedAtStart>>) -> Op {
        let node = NodeId::new(2);
        Op {
            index,
            time_ns: index,
            process: Process::Nemesis,
            kind: OpType::Info,
            body: Body::Fault(Box::new(FaultOp {
                verb: Verb::Restart,
                aim: Aim::Target {
                    target: Target::Node(node),
                    id: None,
                    on_heal: None,
                },
                done: Some(Done {
                    nodes: vec![node],
                    exited,
                    ..Done::default()
                }),
            })),
            error: None,
        }
    }

    fn completed() -> RunEnd {
        RunEnd {
            completed: true,
            unknown: None,
            stuck: Vec::new(),
            stuck_groups: Vec::new(),
            stuck_topics: Vec::new(),
            unrecovered: None,
        }
    }

    #[test]
    fn a_cluster_that_did_not_recover_is_invalid_only_where_the_system_claims_recovery() {
        let end = RunEnd {
            completed: false,
            unknown: Some("did not quiesce".into()),
            unrecovered: Some(Unrecovered {
                unsettled: "not ready: t-0 ISR [1] is not its replicas [1, 2]".into(),
                replicas: vec!["t-0: b1 leader (HW 5, LEO 5), b2 (HW 0, LEO 0)".into()],
                unchanged_ms: 30_000,
                bound_ms: 60_000,
            }),
            ..completed()
        };
        let mut run = RunData::default();
        assert_eq!(verdict(&run, &end).verdict, Verdict::Unknown);
        run.claims.recovers = true;
        let report = verdict(&run, &end);
        assert_eq!(report.verdict, Verdict::Invalid);
        let found = report
            .results
            .iter()
            .find(|r| r.checker == "liveness")
            .expect("a liveness result");
        assert_eq!(found.evidence[0].anomaly, Anomaly::NoRecovery);
        assert!(
            found.evidence[0].summary.contains("b2 (HW 0, LEO 0)"),
            "{}",
            found.evidence[0].summary
        );
    }

    #[test]
    fn coverage_below_a_minimum_makes_a_run_unknown_but_never_hides_an_invalid_one() {
        let schedule = crate::schedule::Schedule::parse(
            "s.toml",
            "[cluster]\nbrokers = 3\n[workload]\nmin_faults = 5\n",
        )
        .unwrap();
        let mut run = RunData {
            history: vec![start(3, None)],
            schedule: Some(schedule),
            ..RunData::default()
        };
        let vacuous = verdict(&run, &completed());
        assert_eq!(vacuous.results[0].checker, "coverage");
        assert!(
            vacuous.results[0]
                .message
                .starts_with("vacuous: min_faults = 5: 0 faults landed"),
            "{}",
            vacuous.results[0].message
        );
        assert_eq!(vacuous.coverage.as_ref().map(|c| c.faults.len()), Some(0));
        assert!(vacuous.verdict >= Verdict::Unknown);

        run.history.push(start(
            7,
            Some(vec![ExitedAtStart {
                node: NodeId::new(2),
                error: "exited".into(),
            }]),
        ));
        let invalid = verdict(&run, &completed());
        assert_eq!(invalid.verdict, Verdict::Invalid);
        assert!(
            invalid
                .results
                .iter()
                .any(|r| r.checker == "coverage" && r.verdict == Verdict::Unknown)
        );
    }

    #[test]
    fn a_start_that_ended_by_itself_makes_the_run_invalid_with_restart_failed() {
        let mut run = RunData {
            history: vec![start(3, None)],
            ..RunData::default()
        };
        let fine = verdict(&run, &completed());
        assert!(fine.results.iter().all(|r| r.checker != "liveness"));

        run.history.push(start(
            7,
            Some(vec![ExitedAtStart {
                node: NodeId::new(2),
                error: "broker b2 exited early (exit status: 0); its log: b2.log".into(),
            }]),
        ));
        let report = verdict(&run, &completed());
        assert_eq!(report.verdict, Verdict::Invalid);
        let liveness = &report.results[0];
        assert_eq!(liveness.checker, "liveness");
        assert_eq!(liveness.verdict, Verdict::Invalid);
        let evidence = &liveness.evidence[0];
        assert_eq!(evidence.anomaly, Anomaly::RestartFailed);
        assert_eq!(evidence.details.ops(), [7].into());
        assert!(
            evidence.summary.starts_with("b2 ended during its start: "),
            "{}",
            evidence.summary
        );
    }
}
