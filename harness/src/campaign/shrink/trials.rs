//! The runs of `epochal shrink`'s candidates: each an ordinary run of its
//! own, up to `tries` per candidate (a replay of a random interleaving is
//! not exact, so a candidate counts as failing at its first failure), up to
//! `jobs` candidates at once, and the progress line (phase, candidates left,
//! best so far, runs, elapsed) — rewritten on a terminal, a plain line per
//! round elsewhere.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

use super::Unit;
use super::search::{Ask, Judge};
use super::timing::Realised;
use crate::checker::{Anomaly, Verdict};
use crate::run::{RunOptions, Steps};
use crate::schedule::Schedule;

/// The candidates' runs, counted. A candidate that cannot run (a missing
/// binary, a port in use) tells nothing: after the first, no more are run
/// and the shrink fails, rather than counting them as passes and "keeping"
/// every fault.
pub(super) struct Trials {
    runtime: tokio::runtime::Runtime,
    options: RunOptions,
    name: String,
    anomaly: Anomaly,
    pub tries: u32,
    pub jobs: usize,
    pub runs: u32,
    pub harness_error: Option<String>,
    started: Instant,
    terminal: bool,
    shown: bool,
}

impl Trials {
    /// `None` when no async runtime could be had (said on stderr).
    pub fn new(
        run_dir: &Path,
        base: &RunOptions,
        anomaly: Anomaly,
        tries: u32,
        jobs: usize,
    ) -> Option<Trials> {
        let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        else {
            eprintln!("epochal: starting the async runtime");
            return None;
        };
        let name = format!(
            "{}-shrink",
            run_dir
                .canonicalize()
                .ok()
                .and_then(|d| d
                    .parent()
                    .and_then(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "run".into())
        );
        let mut options = base.clone();
        options.schedule = Path::new(&name).to_path_buf();
        options.group = Some(vec!["shrink".into(), name.clone()]);
        options.echo = false;
        Some(Trials {
            runtime,
            options,
            name,
            anomaly,
            tries: tries.max(1),
            jobs: jobs.max(1),
            runs: 0,
            harness_error: None,
            started: Instant::now(),
            terminal: std::io::stderr().is_terminal(),
            shown: false,
        })
    }

    /// Runs each of `candidates` up to `tries` times (stopping at its first
    /// failure), all at once, and says which failed.
    pub fn fail(&mut self, candidates: &[Schedule]) -> Vec<bool> {
        if self.harness_error.is_some() {
            return vec![false; candidates.len()];
        }
        let (options, name, anomaly, tries) = (&self.options, &self.name, self.anomaly, self.tries);
        let runs = candidates.iter().map(|candidate| async move {
            let mut runs = 0u32;
            for _ in 0..tries {
                runs += 1;
                let ran = crate::run::execute(
                    options,
                    candidate.clone(),
                    name,
                    "a shrink candidate",
                    Steps,
                )
                .await;
                match ran {
                    Ok(report) if reproduced(&report.report, anomaly) => {
                        return (true, runs, None);
                    }
                    Ok(_) => {}
                    Err(e) => return (false, runs, Some(e.to_string())),
                }
            }
            (false, runs, None)
        });
        let results = self.runtime.block_on(futures_util::future::join_all(runs));
        let mut failed = Vec::with_capacity(results.len());
        for (fails, runs, error) in results {
            self.runs += runs;
            if let Some(e) = error {
                self.harness_error.get_or_insert(e);
            }
            failed.push(fails);
        }
        failed
    }

    /// The progress line, on stderr.
    pub fn progress(&mut self, line: &str) {
        let line = format!(
            "shrink: {line}; {} runs, {:.0} s",
            self.runs,
            self.started.elapsed().as_secs_f64()
        );
        if self.terminal {
            eprint!("\r\x1b[2K{line}");
            let _ = std::io::stderr().flush();
            self.shown = true;
        } else {
            eprintln!("{line}");
        }
    }

    /// Ends the rewritten line, so what follows starts on its own.
    pub fn done(&mut self) {
        if self.shown {
            eprintln!();
            self.shown = false;
        }
    }

    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// Whether a run was invalid with `anomaly`.
fn reproduced(report: &crate::checker::Report, anomaly: Anomaly) -> bool {
    report.verdict == Verdict::Invalid
        && report
            .results
            .iter()
            .flat_map(|r| &r.evidence)
            .any(|e| e.anomaly == anomaly)
}

/// A [`Judge`] over a schedule's units: each candidate set of units made
/// into a schedule (with the realised timing, unless compressed) and run,
/// each outcome written to `out`.
pub(super) struct UnitJudge<'a> {
    pub trials: &'a mut Trials,
    pub schedule: &'a Schedule,
    pub units: &'a [Unit],
    pub realised: Option<&'a Realised>,
    pub out: &'a mut dyn Write,
    /// Candidates that passed so far.
    pub passed: usize,
}

impl UnitJudge<'_> {
    pub fn candidate(&self, kept: &[usize]) -> Schedule {
        match self.realised {
            Some(realised) => realised.candidate(self.schedule, self.units, kept),
            None => super::candidate(self.schedule, self.units, kept),
        }
    }
}

impl Judge for UnitJudge<'_> {
    fn judge(&mut self, ask: &Ask<'_>, candidates: &[Vec<usize>]) -> Vec<bool> {
        let best = ask.best;
        self.trials.progress(&format!(
            "{}, {} candidates left, best so far {best} units; running {}",
            ask.phase,
            ask.left,
            candidates.len()
        ));
        let schedules: Vec<Schedule> = candidates.iter().map(|c| self.candidate(c)).collect();
        let failed = self.trials.fail(&schedules);
        self.passed += failed.iter().filter(|&&f| !f).count();
        for ((kept, schedule), fails) in candidates.iter().zip(&schedules).zip(&failed) {
            let _ = writeln!(
                self.out,
                "  {}: {} units ({} faults) {}: {}",
                ask.phase,
                kept.len(),
                faults(schedule),
                brief(kept),
                if *fails {
                    "fails".to_owned()
                } else {
                    format!("passes {} times", self.trials.tries)
                }
            );
        }
        let _ = self.out.flush();
        failed
    }
}

/// A unit list for a line: `[3, 4, 5]`, or `[3..41]` when consecutive and long.
fn brief(kept: &[usize]) -> String {
    match (kept.first(), kept.last()) {
        (Some(a), Some(b)) if kept.len() > 4 && b - a + 1 == kept.len() => format!("[{a}..{b}]"),
        _ => format!("{kept:?}"),
    }
}

/// How many faults a schedule fires.
pub(super) fn faults(schedule: &Schedule) -> usize {
    schedule.steps.iter().flat_map(|st| st.faults()).count()
}
