//! What `epochal up` prints once Ctrl-C ended its session and the run is
//! checked: how it ended, the faults, the client ops (the harness's own and
//! the application's, app.rs), the replicas (replicas.rs), the checkers'
//! results and the coverage, then the verdict — every list bounded
//! (shown.rs), so an application that wrote gigabytes gets a screenful, and
//! `results.json` keeps it all.
//!
//! **The fault count.** A fault is one `epochal fault` that fired: one step
//! of `schedule.toml`, one nemesis op of `history.jsonl` completed without an
//! error before the final heal's, numbered from 1 in `epochal fault`'s answer
//! (`fault 3: pause leader of t-0 -> b2`). An undo (`resume`, `restart`,
//! `heal`) fired so is a fault like any other. Not counted: a fault the
//! cluster's state refused (its op is in the history, with its error), one
//! that was no fault of this cluster (nothing fired, nothing recorded), and
//! the final heal's ops, which follow the session's in the history. The
//! session's [`Tally`] says how many of the history's nemesis ops are its
//! own; what they were is read from the history.

use std::collections::BTreeMap;
use std::io::Write;

use super::Tally;
use super::app::AppTally;
use super::shown;
use crate::checker::{Coverage, Report};
use crate::history::{Op, OpType, Process, Verb};
use crate::run::{RunReport, RunStatus};

/// The faults of a session, as the summary counts them (the module doc).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FaultCount {
    /// Faults fired, per verb, in the order each verb first fired.
    pub fired: Vec<(Verb, usize)>,
    /// Faults the cluster's state refused, per verb.
    pub refused: Vec<(Verb, usize)>,
    /// The final heal's ops, each `verb nodes` (`start b1`, `heal`).
    pub final_heal: Vec<String>,
}

impl FaultCount {
    /// Splits the history's nemesis completions: the first `tally.fired +
    /// tally.refused` are the session's (each `epochal fault` that reached
    /// the cluster completes one), the rest the final heal's.
    pub fn of(history: &[Op], tally: Tally) -> FaultCount {
        let mut count = FaultCount::default();
        let completions = history.iter().filter(|op| {
            op.process == Process::Nemesis && op.kind != OpType::Invoke && op.fault().is_some()
        });
        for (i, op) in completions.enumerate() {
            let Some(fault) = op.fault() else { continue };
            if i >= tally.fired + tally.refused {
                let nodes: Vec<String> = fault
                    .done
                    .iter()
                    .flat_map(|d| &d.nodes)
                    .map(ToString::to_string)
                    .collect();
                let mut did = format!("{} {}", fault.verb, nodes.join(","));
                if let Some(error) = &op.error {
                    did.push_str(&format!(" (failed: {})", shown::line(error)));
                }
                count.final_heal.push(did.trim_end().to_owned());
            } else if op.error.is_none() {
                add(&mut count.fired, fault.verb);
            } else {
                add(&mut count.refused, fault.verb);
            }
        }
        count
    }

    /// Faults fired: the one count.
    pub fn fired(&self) -> usize {
        self.fired.iter().map(|(_, n)| n).sum()
    }

    pub fn refused(&self) -> usize {
        self.refused.iter().map(|(_, n)| n).sum()
    }

    /// The lines the summary prints.
    pub fn lines(&self) -> Vec<String> {
        let per_verb = |counts: &[(Verb, usize)]| {
            let each: Vec<String> = counts.iter().map(|(v, n)| format!("{v} {n}")).collect();
            each.join(", ")
        };
        let mut lines = vec![match self.fired() {
            0 => "faults: none fired".to_owned(),
            n => format!("faults: {n} fired: {}", per_verb(&self.fired)),
        }];
        if self.refused() > 0 {
            lines.push(format!(
                "  refused by the cluster's state, not counted: {} ({})",
                self.refused(),
                per_verb(&self.refused)
            ));
        }
        lines.push(if self.final_heal.is_empty() {
            "  the final heal, not counted: nothing to heal".to_owned()
        } else {
            format!(
                "  the final heal, not counted: {}",
                shown::listed(&self.final_heal, ", ")
            )
        });
        lines
    }
}

fn add(counts: &mut Vec<(Verb, usize)>, verb: Verb) {
    match counts.iter_mut().find(|(v, _)| *v == verb) {
        Some((_, n)) => *n += 1,
        None => counts.push((verb, 1)),
    }
}

/// Writes the closing summary of a session whose faults `tally` counted and
/// whose application did what `app` counts.
pub fn write_closing(
    report: &RunReport,
    tally: Tally,
    app: &AppTally,
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(out, "run: {}", report.dir.path().display())?;
    match &report.status {
        RunStatus::Completed => writeln!(out, "status: completed")?,
        RunStatus::Unknown(why) => writeln!(out, "status: unknown: {}", shown::line(why))?,
    }
    let fired = match crate::history::read_history(report.dir.history()) {
        Ok(ops) => {
            let count = FaultCount::of(&ops, tally);
            for line in count.lines() {
                writeln!(out, "{line}")?;
            }
            write_clients(&ops, app, out)?;
            count.fired()
        }
        Err(e) => {
            writeln!(out, "faults: {} fired (the session's count)", tally.fired)?;
            writeln!(out, "history: unreadable: {}", shown::line(&e.to_string()))?;
            tally.fired
        }
    };
    super::replicas::write(report, out)?;
    write_checks(&report.report, fired, out)
}

/// The client ops in the history, per function and outcome: the harness's
/// own, then the application's (its processes are the ones `app` counted,
/// the last numbers the session took before the final read's).
fn write_clients(ops: &[Op], app: &AppTally, out: &mut impl Write) -> std::io::Result<()> {
    let mut counts: BTreeMap<(&str, String), usize> = BTreeMap::new();
    for op in ops.iter().filter(|op| op.kind != OpType::Invoke) {
        if let Process::Client(_) = op.process {
            let kind = format!("{:?}", op.kind).to_lowercase();
            *counts.entry((op.f(), kind)).or_default() += 1;
        }
    }
    // The application's ops are among the client ops: the harness's own are
    // what is left.
    for ((f, kind), n) in &app.ops {
        if let Some(count) = counts.get_mut(&(f.as_str(), kind.clone())) {
            *count = count.saturating_sub(*n);
        }
    }
    counts.retain(|_, n| *n > 0);
    writeln!(out, "history: {} ops", ops.len())?;
    if counts.is_empty() {
        writeln!(out, "  the harness's own client ops: none")?;
    } else {
        writeln!(out, "  the harness's own client ops:")?;
        for ((f, kind), n) in counts {
            writeln!(out, "    {f:<22} {kind:<5} {n}")?;
        }
    }
    write_app(app, out)
}

/// The application's ops, from the client proxies' recordings.
fn write_app(app: &AppTally, out: &mut impl Write) -> std::io::Result<()> {
    if app.links == 0 {
        return writeln!(
            out,
            "  your application's ops: none (no client link was recorded)"
        );
    }
    let clients: Vec<String> = app.clients.iter().map(|c| shown::escaped(c)).collect();
    writeln!(
        out,
        "  your application's ops, from the client proxies ({} connections; clients {}):",
        app.connections,
        if clients.is_empty() {
            "unnamed".to_owned()
        } else {
            shown::listed(&clients, ", ")
        }
    )?;
    for ((f, kind), n) in &app.ops {
        writeln!(out, "    {f:<22} {kind:<5} {n}")?;
    }
    if app.ops.is_empty() {
        writeln!(out, "    none: no Produce, and no Fetch that read anything")?;
    }
    if app.unjudged_sends > 0 {
        writeln!(
            out,
            "    sends of values that are not decimal numbers, counted but judged by no \
             checker: {}",
            app.unjudged_sends
        )?;
    }
    if app.undecodable > 0 || app.dropped > 0 {
        writeln!(
            out,
            "    frames not decoded: {}; dropped by the recorders: {}",
            app.undecodable, app.dropped
        )?;
        for named in app.undecodable_named.iter().take(shown::LIST_SHOWN) {
            writeln!(out, "      - {}", shown::line(named))?;
        }
    }
    Ok(())
}

/// The checkers' results, each with its first pieces of evidence; the
/// coverage of every client op in the history; the verdict.
pub fn write_checks(report: &Report, fired: usize, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "checks:")?;
    for result in &report.results {
        writeln!(
            out,
            "  {:<8} {:<28} {}",
            result.verdict.to_string(),
            result.checker,
            shown::line(&result.message)
        )?;
        for (name, n) in &result.counts {
            writeln!(out, "           {}: {n}", shown::line(name))?;
        }
        for evidence in result.evidence.iter().take(shown::LIST_SHOWN) {
            writeln!(out, "           - {}", shown::evidence(evidence))?;
        }
        if let Some(more) = shown::more(result.evidence.len()) {
            writeln!(out, "           {more} in results.json")?;
        }
    }
    if let Some(coverage) = &report.coverage {
        writeln!(
            out,
            "coverage, of every client op in the history (the harness's workload's and your \
             application's):"
        )?;
        for line in coverage_lines(coverage, fired) {
            writeln!(out, "  {line}")?;
        }
    }
    writeln!(out, "verdict: {}", report.verdict)
}

/// The coverage in a few lines, each saying whose ops it counts; `fired`
/// is the session's fault count.
pub fn coverage_lines(coverage: &Coverage, fired: usize) -> Vec<String> {
    // Coverage's faults are those that are not undos (checker/coverage.rs).
    let breaking = coverage.faults.len();
    let idle = coverage.faults.iter().filter(|f| f.ops() == 0).count();
    let mut lines = vec![match coverage.ops_per_fault() {
        _ if fired == 0 => "faults that took something away (not undos): none fired".to_owned(),
        None => format!("faults that took something away (not undos): 0 of the {fired} fired"),
        Some((fewest, median)) => format!(
            "faults that took something away (not undos): {breaking} of the {fired} fired; \
             client ops each overlapped: fewest {fewest}, median {median}; \
             {idle} overlapped no client op"
        ),
    }];
    lines.push(format!(
        "writes acknowledged during faults: {}",
        coverage.acked_during_faults
    ));
    lines.push(match &coverage.timeline {
        None => "etcd: no timeline".to_owned(),
        Some(t) => format!(
            "etcd (the whole cluster's, your application's load included): {} leader changes, \
             {} ISR shrinks, {} ISR expands, {} unclean elections",
            t.leader_changes, t.isr_shrinks, t.isr_expands, t.unclean_elections
        ),
    });
    lines.push(format!(
        "replicas truncated by disk faults: {}",
        coverage.truncations
    ));
    if !coverage.partitions_unwritten_during_faults.is_empty() {
        let names: Vec<String> = coverage
            .partitions_unwritten_during_faults
            .iter()
            .map(|p| shown::escaped(&p.to_string()))
            .collect();
        lines.push(format!(
            "partitions no write reached during a fault: {}",
            shown::listed(&names, ", ")
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::evidence::Duplicate;
    use crate::checker::{Anomaly, CheckResult, Evidence, Verdict};
    use crate::history::{Aim, Body, Done, FaultOp};
    use crate::node::NodeId;
    use crate::schedule::Target;
    use crate::topic_partition::PartitionRef;

    /// A nemesis op: `verb` at b`node`, its completion when `done` (with
    /// `error` if refused).
    fn nemesis(index: u64, verb: Verb, node: u32, done: bool, error: Option<&str>) -> Op {
        let node = NodeId::new(node);
        Op {
            index,
            time_ns: index,
            process: Process::Nemesis,
            kind: if done { OpType::Info } else { OpType::Invoke },
            body: Body::Fault(Box::new(FaultOp {
                verb,
                aim: Aim::Target {
                    target: Target::Node(node),
                    id: None,
                    on_heal: None,
                },
                done: (done && error.is_none()).then(|| Done {
                    nodes: vec![node],
                    ..Done::default()
                }),
            })),
            error: error.map(str::to_owned),
        }
    }

    /// The history of a session that fired pause, resume, crash and restart,
    /// had one restart refused, and whose final heal started b3.
    fn history() -> Vec<Op> {
        let fired = [
            (Verb::Pause, 1, None),
            (Verb::Resume, 1, None),
            (Verb::Restart, 2, Some("cannot restart: b2 is running")),
            (Verb::Crash, 3, None),
            (Verb::Restart, 3, None),
            (Verb::Crash, 3, None),
            (Verb::Start, 3, None),
        ];
        let mut ops = Vec::new();
        for (verb, node, error) in fired {
            let i = ops.len() as u64;
            ops.push(nemesis(i, verb, node, false, None));
            ops.push(nemesis(i + 1, verb, node, true, error));
        }
        ops
    }

    #[test]
    fn the_fault_count_is_the_sessions_fired_faults_not_refusals_nor_the_final_heal() {
        let tally = Tally {
            fired: 5,
            refused: 1,
        };
        let count = FaultCount::of(&history(), tally);
        assert_eq!(count.fired(), tally.fired);
        assert_eq!(count.refused(), 1);
        assert_eq!(
            count.lines(),
            [
                "faults: 5 fired: pause 1, resume 1, crash 2, restart 1",
                "  refused by the cluster's state, not counted: 1 (restart 1)",
                "  the final heal, not counted: start b3",
            ]
        );
        // The history's restarts (two) are the fired one, the refused one.
        let restarts = history()
            .iter()
            .filter(|op| op.kind == OpType::Info && op.f() == "restart")
            .count();
        assert_eq!(restarts, 2);
    }

    #[test]
    fn the_checks_show_ten_pieces_of_evidence_each_cut_and_count_the_rest() {
        let value = format!("rdkafka\u{7}{}", "x".repeat(100_000));
        let evidence: Vec<Evidence> = (0..25)
            .map(|i| {
                Evidence::new(
                    Anomaly::Duplicate,
                    format!("value {value} is at offsets [{i}, 99] of t-0 (b1)"),
                    Duplicate {
                        log: "b1".into(),
                        offsets: vec![i, 99],
                        partition: PartitionRef::new("t", 0),
                        value: value.clone(),
                    },
                )
            })
            .collect();
        let mut result = CheckResult::valid("duplicates", "25 value(s) at more than one offset");
        result.evidence = evidence;
        let report = Report {
            verdict: Verdict::Valid,
            results: vec![result],
            coverage: Some(Coverage::default()),
        };
        let mut out = Vec::new();
        write_checks(&report, 7, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let shown: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("- duplicate: "))
            .collect();
        assert_eq!(shown.len(), shown::LIST_SHOWN, "{out}");
        let cut = format!("rdkafka\\u{{7}}{}…", "x".repeat(shown::VALUE_SHOWN - 12));
        assert_eq!(
            shown[0].trim(),
            format!("- duplicate: value {cut} is at offsets [0, 99] of t-0 (b1)")
        );
        assert!(
            out.contains("           and 15 more in results.json\n"),
            "{out}"
        );
        assert!(out.len() < 4000, "{} bytes: {out}", out.len());
        // The coverage says whose ops it counts.
        assert!(
            out.contains("coverage, of every client op in the history"),
            "{out}"
        );
        assert!(
            out.contains("  writes acknowledged during faults: 0\n"),
            "{out}"
        );
        let none = "  faults that took something away (not undos): 0 of the 7 fired\n";
        assert!(out.contains(none), "{out}");
        assert!(out.ends_with("verdict: valid\n"), "{out}");
    }
}
