//! Checkers: each asserts one documented guarantee over what a run left behind
//! — the history, every replica's files as the harness's own reader sees them,
//! the state-change logs and etcd's timeline — and says plainly what it does
//! not check. A verdict is valid, invalid (with the minimal evidence: offsets,
//! replicas, epochs, values, history indices) or unknown (with why). A checker
//! that cannot run is unknown, never valid. Verdicts merge invalid > unknown >
//! valid.
//!
//! What the history holds (run.rs writes it; checkers read it):
//!
//! | f | process | invoke value | completion value (ok) |
//! |---|---|---|---|
//! | `send` | client | `{partition: "t-0", values: [i64], acks: "all"/"1"/"0", node: "b1"/null}` | the same plus `offsets: [i64]` (null for acks=0), `isr: [u32]` and `leader_epoch` read from etcd just after the ack |
//! | `poll` | client | `{partition, from_offset, node}` | the same plus `records: [[offset, value]]`, `high_watermark` (of the first fetch), `leader_epoch` from etcd just after |
//! | fault verbs (`crash`, `power-loss`, ...) | nemesis | `{target}` or the fault's fields | `info` with `nodes: ["b1"]` and what it did |
//!
//! A `send` that ends `fail` definitely did not happen; `info` may have.

pub mod consumer;
pub mod context;
pub mod divergence;
pub mod duplicates;
pub mod epoch_file;
pub mod fencing;
mod final_log;
pub mod high_watermark;
pub mod leaders;
pub mod lost_write;
pub mod offset_changed;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use context::{LoadError, RunData};

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

/// One anomaly, minimal and concrete: enough to find it in the files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The anomaly's name, e.g. `lost-acknowledged-write`.
    pub anomaly: String,
    /// One line a person reads first, naming values, offsets and replicas.
    pub summary: String,
    /// The particulars: offsets, replicas, epochs, values, history indices.
    #[serde(default)]
    pub details: serde_json::Value,
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

    pub fn with_count(mut self, name: &str, n: u64) -> Self {
        self.counts.insert(name.to_owned(), n);
        self
    }
}

/// A checker: a name, the guarantee it asserts with its source, what it does
/// not check, and the check itself. `Err` (it could not run) becomes unknown.
pub struct Checker {
    pub name: &'static str,
    pub guarantee: &'static str,
    pub source: &'static str,
    pub not_checked: &'static str,
    pub check: fn(&RunData) -> Result<CheckResult, String>,
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

/// Runs every checker; a checker that errs or panics is unknown, never valid.
pub fn check(run: &RunData, checkers: &[Checker]) -> Report {
    let results: Vec<CheckResult> = checkers
        .iter()
        .map(|checker| {
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (checker.check)(run)));
            match outcome {
                Ok(Ok(mut result)) => {
                    result.checker = checker.name.to_owned();
                    result
                }
                Ok(Err(why)) => {
                    CheckResult::unknown(checker.name, format!("could not check: {why}"))
                }
                Err(_) => CheckResult::unknown(checker.name, "the checker panicked"),
            }
        })
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

    fn checker(name: &'static str, check: fn(&RunData) -> Result<CheckResult, String>) -> Checker {
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
}
