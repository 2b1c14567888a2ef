//! What a checker is and what it says: a [`Checker`] (its guarantee, its
//! source, what it does not check, the check), and its [`CheckResult`] with a
//! [`Verdict`] ordered so the merge is `max`. Every checker builds on this;
//! the list of checkers and the merge over them are mod.rs's.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::context::RunData;
use super::error::CheckError;
use super::evidence::Evidence;
use super::index::RunIndex;
use crate::system::Sees;

/// What a checker returns: its result, or why it could not check.
pub type CheckOutcome = Result<CheckResult, CheckError>;

/// Ordered so that `max` is the merge: invalid > unknown > valid >
/// not-applicable. A checker is not applicable when the system under test
/// does not give what it needs ([`Need`]); a run's verdict is never
/// not-applicable (`check` folds a run no checker applied to into unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    #[serde(rename = "not-applicable")]
    NotApplicable,
    Valid,
    Unknown,
    Invalid,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::NotApplicable => "not-applicable",
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

    pub fn not_applicable(checker: &str, why: impl Into<String>) -> Self {
        Self::new(checker, Verdict::NotApplicable, why)
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

/// What a checker may need beyond the history and each partition's final log
/// (which every system gives: its replicas' files, or the final read over the
/// protocol). A system that does not give it makes the checker not
/// applicable, never valid over data it never saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Every replica's segments, checkpoints and leader-epoch file.
    ReplicaFiles,
    /// etcd's revision history of the cluster's decisions.
    EtcdTimeline,
    /// The brokers' state-change logs.
    StateChangeLog,
    /// The system's database, read after the run (`[final_state] database`).
    Database,
}

impl Need {
    pub fn met_by(self, sees: &Sees) -> bool {
        match self {
            Need::ReplicaFiles => sees.replica_files,
            Need::EtcdTimeline => sees.etcd_timeline,
            Need::StateChangeLog => sees.state_change_log,
            Need::Database => sees.database,
        }
    }

    /// What is needed, as the not-applicable message says it.
    pub fn what(self) -> &'static str {
        match self {
            Need::ReplicaFiles => "every replica's log files on disk",
            Need::EtcdTimeline => "the cluster's decisions in etcd (the reference broker's layout)",
            Need::StateChangeLog => "the brokers' state-change logs",
            Need::Database => "a database the system keeps its records in",
        }
    }
}

/// A checker: a name, the guarantee it asserts with its source, what it does
/// not check, what it needs, and the check itself. `Err` (it could not run)
/// becomes unknown.
pub struct Checker {
    pub name: &'static str,
    pub guarantee: &'static str,
    pub source: &'static str,
    pub not_checked: &'static str,
    pub needs: &'static [Need],
    pub check: fn(&RunIndex) -> CheckOutcome,
}

impl Checker {
    /// Checks `run` alone, with an index of its own (tests, a single
    /// checker); [`check`](super::check) shares one index among every checker.
    pub fn check_run(&self, run: &RunData) -> CheckOutcome {
        (self.check)(&RunIndex::new(run))
    }
}
