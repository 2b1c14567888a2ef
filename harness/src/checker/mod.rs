//! Checkers: each asserts one documented guarantee over what a run left behind
//! — the history, every replica's files as the harness's own reader sees them,
//! the state-change logs and etcd's timeline — and says plainly what it does
//! not check. A verdict is valid, invalid (with the minimal evidence: offsets,
//! replicas, epochs, values, history indices) or unknown (with why). A checker
//! that cannot run is unknown, never valid. Verdicts merge invalid > unknown >
//! valid.
//!
//! Checkers read the history as typed ops (`history/op.rs` has the table of
//! what each op holds): `Op::acked_send`, `Op::read` and `Op::fault`, never
//! its JSON. A `send` that ends `fail` definitely did not happen; `info` may
//! have. Nodes are `NodeId`s and partitions `PartitionRef`s throughout; the
//! evidence spells them as every report does (`b1`, `t-0`).

pub mod anomaly;
pub mod consumer;
pub mod context;
pub mod divergence;
pub mod duplicates;
pub mod epoch_file;
pub mod evidence;
mod excuses;
pub mod fencing;
pub(crate) mod final_log;
pub mod high_watermark;
pub mod index;
pub mod leaders;
pub mod lost_write;
pub mod offset_changed;
pub mod synthetic;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use anomaly::Anomaly;
pub use context::{LoadError, RunData};
pub use evidence::{Details, Evidence};
pub use index::RunIndex;

/// Ordered so that `max` is the merge: invalid > unknown > valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Valid,
    Unknown,
    Invalid,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Valid => "valid",
            Verdict::Unknown => "unknown",
            Verdict::Invalid => "invalid",
        })
    }
}

/// One checker's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub checker: String,
    pub verdict: Verdict,
    /// Why, for unknown; a one-line account otherwise.
    pub message: String,
    /// The anomalies; a valid result may also list what it reports but Kafka
    /// allows (e.g. an acks=1 write lost), each named as such.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
    /// Things counted but not invalid (e.g. acks=1 writes lost, duplicates).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
}

impl CheckResult {
    pub fn valid(checker: &str, message: impl Into<String>) -> Self {
        Self::new(checker, Verdict::Valid, message)
    }

    pub fn unknown(checker: &str, why: impl Into<String>) -> Self {
        Self::new(checker, Verdict::Unknown, why)
    }

    pub fn invalid(checker: &str, message: impl Into<String>, evidence: Vec<Evidence>) -> Self {
        CheckResult {
            evidence,
            ..Self::new(checker, Verdict::Invalid, message)
        }
    }

    pub fn new(checker: &str, verdict: Verdict, message: impl Into<String>) -> Self {
        CheckResult {
            checker: checker.to_owned(),
            verdict,
            message: message.into(),
            evidence: Vec::new(),
            counts: BTreeMap::new(),
        }
    }

    /// The verdict a checker reaches from what it found, folded the one way
    /// every checker folds it: any evidence makes it invalid, else a reason it
    /// could not tell makes it unknown, else it is valid. Each message is
    /// only written for the verdict that uses it.
    pub fn fold(
        checker: &str,
        evidence: Vec<Evidence>,
        invalid: impl FnOnce(&[Evidence]) -> String,
        unknown: Option<String>,
        valid: impl FnOnce() -> String,
    ) -> Self {
        if !evidence.is_empty() {
            let message = invalid(&evidence);
            Self::invalid(checker, message, evidence)
        } else if let Some(why) = unknown {
            Self::unknown(checker, why)
        } else {
            Self::valid(checker, valid())
        }
    }

    pub fn with_count(mut self, name: &str, n: u64) -> Self {
        self.counts.insert(name.to_owned(), n);
        self
    }
}

/// `3 anomalies: poll-skip, truncated-read`: how many, and which kinds.
pub(crate) fn anomalies_message(evidence: &[Evidence]) -> String {
    let kinds: BTreeSet<&str> = evidence.iter().map(|e| e.anomaly.name()).collect();
    format!(
        "{} anomalies: {}",
        evidence.len(),
        kinds.into_iter().collect::<Vec<_>>().join(", ")
    )
}

/// A checker: a name, the guarantee it asserts with its source, what it does
/// not check, and the check itself. `Err` (it could not run) becomes unknown.
pub struct Checker {
    pub name: &'static str,
    pub guarantee: &'static str,
    pub source: &'static str,
    pub not_checked: &'static str,
    pub check: fn(&RunIndex) -> Result<CheckResult, String>,
}

impl Checker {
    /// Checks `run` alone, with an index of its own (tests, a single
    /// checker); [`check`] shares one index among every checker.
    pub fn check_run(&self, run: &RunData) -> Result<CheckResult, String> {
        (self.check)(&RunIndex::new(run))
    }
}

/// Every checker, in report order. Each module adds its own entry here.
pub fn all() -> Vec<Checker> {
    vec![
        lost_write::checker(),
        offset_changed::checker(),
        divergence::checker(),
        epoch_file::checker(),
        leaders::checker(),
        fencing::checker(),
        high_watermark::checker(),
        consumer::checker(),
        duplicates::checker(),
    ]
}

/// The whole report of one run: each checker's result and the merged verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub verdict: Verdict,
    pub results: Vec<CheckResult>,
}

/// Runs one checker; one that errs or panics is unknown, never valid.
fn run_one(checker: &Checker, run: &RunIndex) -> CheckResult {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (checker.check)(run)));
    match outcome {
        Ok(Ok(mut result)) => {
            result.checker = checker.name.to_owned();
            result
        }
        Ok(Err(why)) => CheckResult::unknown(checker.name, format!("could not check: {why}")),
        Err(_) => CheckResult::unknown(checker.name, "the checker panicked"),
    }
}

/// Runs every checker; a checker that errs or panics is unknown, never valid.
/// Two threads share the work (issue 22: a million-op run in seconds on two
/// cores), one taking checkers from the front of the list and one from the
/// back, so the costliest (lost-write and offset-changed at the front,
/// consumer near the back) run apart. Each checker reads the run alone, so
/// every result, and their order, is what one thread would give.
pub fn check(run: &RunData, checkers: &[Checker]) -> Report {
    let run = &RunIndex::new(run);
    let mut slots: Vec<Option<CheckResult>> = vec![None; checkers.len()];
    // The next checker from the front, and one past the next from the back.
    let bounds = std::sync::Mutex::new((0usize, checkers.len()));
    let take = |from_front: bool| {
        let mut bounds = bounds.lock().unwrap_or_else(|e| e.into_inner());
        let (front, back) = &mut *bounds;
        if *front >= *back {
            return None;
        }
        Some(if from_front {
            *front += 1;
            *front - 1
        } else {
            *back -= 1;
            *back
        })
    };
    let work = |from_front: bool| {
        let mut done = Vec::new();
        while let Some(i) = take(from_front) {
            done.push((i, run_one(&checkers[i], run)));
        }
        done
    };
    let (front, back) = std::thread::scope(|scope| {
        let back = scope.spawn(|| work(false));
        let front = work(true);
        // `run_one` catches each checker's panic, so the thread does not panic.
        (front, back.join().expect("a checker thread does not panic"))
    });
    for (i, result) in front.into_iter().chain(back) {
        slots[i] = Some(result);
    }
    let results: Vec<CheckResult> = slots
        .into_iter()
        .map(|r| r.expect("every checker ran"))
        .collect();
    let verdict = results
        .iter()
        .map(|r| r.verdict)
        .max()
        .unwrap_or(Verdict::Unknown);
    Report { verdict, results }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker(name: &'static str, check: fn(&RunIndex) -> Result<CheckResult, String>) -> Checker {
        Checker {
            name,
            guarantee: "",
            source: "",
            not_checked: "",
            check,
        }
    }

    #[test]
    fn verdicts_merge_invalid_over_unknown_over_valid_and_errors_are_unknown() {
        let run = RunData::default();
        let valid = checker("v", |_| Ok(CheckResult::valid("v", "fine")));
        let erring = checker("e", |_| Err("no timeline".into()));
        let panicking = checker("p", |_| panic!("boom"));
        let invalid = checker("i", |_| Ok(CheckResult::invalid("i", "bad", vec![])));
        assert_eq!(check(&run, &[]).verdict, Verdict::Unknown);
        assert_eq!(
            check(&run, std::slice::from_ref(&valid)).verdict,
            Verdict::Valid
        );
        let report = check(&run, &[valid, erring, panicking]);
        assert_eq!(report.verdict, Verdict::Unknown);
        assert!(report.results[1].message.contains("no timeline"));
        assert_eq!(report.results[2].verdict, Verdict::Unknown);
        let valid = checker("v", |_| Ok(CheckResult::valid("v", "fine")));
        let erring = checker("e", |_| Err("x".into()));
        assert_eq!(
            check(&run, &[valid, erring, invalid]).verdict,
            Verdict::Invalid
        );
    }

    fn evidence(anomaly: Anomaly) -> Evidence {
        let details = evidence::Stuck {
            last_error: None,
            partition: crate::topic_partition::PartitionRef::new("t", 0),
            window_ms: 1,
        };
        Evidence::new(anomaly, String::new(), details)
    }

    #[test]
    fn a_fold_is_invalid_with_evidence_else_unknown_with_a_reason_else_valid() {
        let found = vec![
            evidence(Anomaly::PollSkip),
            evidence(Anomaly::Duplicate),
            evidence(Anomaly::PollSkip),
        ];
        let invalid = CheckResult::fold(
            "c",
            found.clone(),
            anomalies_message,
            Some("x".into()),
            || unreachable!("a verdict with evidence is not valid"),
        );
        assert_eq!(invalid.verdict, Verdict::Invalid);
        assert_eq!(invalid.message, "3 anomalies: duplicate, poll-skip");
        assert_eq!(invalid.evidence, found);
        let unknown = CheckResult::fold(
            "c",
            vec![],
            |_| unreachable!("no evidence, no invalid message"),
            Some("no timeline".into()),
            || unreachable!("a verdict held back is not valid"),
        );
        assert_eq!(
            (unknown.verdict, unknown.message.as_str()),
            (Verdict::Unknown, "no timeline")
        );
        let valid = CheckResult::fold("c", vec![], |_| unreachable!(), None, || "fine".into());
        assert_eq!(
            (
                valid.verdict,
                valid.message.as_str(),
                valid.checker.as_str()
            ),
            (Verdict::Valid, "fine", "c")
        );
    }
}
