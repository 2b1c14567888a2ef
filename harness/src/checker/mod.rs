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
pub mod app_writes;
pub mod clean_stop;
pub mod committed;
pub mod consumer;
pub mod context;
pub mod coverage;
pub mod database_divergence;
pub mod divergence;
pub mod duplicates;
mod earlier_lives;
pub mod elections;
pub mod epoch_file;
mod error;
pub mod evidence;
mod excuses;
pub mod fencing;
pub(crate) mod final_log;
pub mod hanging;
pub mod high_watermark;
pub mod index;
pub mod isr_acks;
pub mod leaders;
pub mod lost_write;
pub mod offset_changed;
pub mod send_order;
#[cfg(any(test, feature = "testing"))]
pub mod synthetic;
pub mod topic_lives;
pub mod transactions;
pub mod txn_cycles;
pub(crate) mod txn_index;
pub mod unseen;
mod verdict;

use serde::{Deserialize, Serialize};

pub use anomaly::Anomaly;
pub use context::{LoadError, RunData};
pub use coverage::Coverage;
pub use error::CheckError;
pub use evidence::{Details, Evidence};
pub use final_log::NoFinalLog;
pub use index::RunIndex;
pub(crate) use verdict::anomalies_message;
pub use verdict::{CheckOutcome, CheckResult, Checker, Need, Verdict};

/// The checkers that judge a run's ops of one kind and are listed only for a
/// run that has such ops (a run without them has nothing for them to judge,
/// and they do not claim it valid): each one's name and its test of an op.
const LISTED_WITH_OPS: &[(&str, OpTest)] = &[
    (app_writes::NAME, app_writes::judges),
    (clean_stop::NAME, clean_stop::judges),
    (committed::NAME, committed::judges),
    (unseen::NAME, unseen::judges),
    (topic_lives::NAME, topic_lives::judges),
];

/// Whether an op is one a checker judges.
type OpTest = fn(&crate::history::Op) -> bool;

/// The transaction checkers ([transactions]): listed only for a run with
/// transactions — a `txn` op, a read_committed poll, or a transactional
/// batch in its logs (`txn_index::in_run`) — so every earlier run reports as it
/// did.
const LISTED_WITH_TRANSACTIONS: &[&str] = &[transactions::NAME, txn_cycles::NAME, hanging::NAME];

/// The checkers of a system's database: listed only for a run whose system
/// names one (`[final_state] database`), so every other run reports as it
/// did.
const LISTED_WITH_DATABASE: &[&str] = &[
    lost_write::DATABASE_NAME,
    offset_changed::DATABASE_NAME,
    database_divergence::NAME,
];

/// The checkers for `run`: [`all`], less those of [`LISTED_WITH_OPS`] whose
/// ops the run has none of, the transaction checkers for a run without
/// transactions, and the database's for a system without one.
pub fn for_run(run: &RunData) -> Vec<Checker> {
    let with_transactions = std::cell::OnceCell::new();
    all()
        .into_iter()
        .filter(|c| {
            LISTED_WITH_OPS
                .iter()
                .find(|(name, _)| *name == c.name)
                .is_none_or(|(_, judges)| run.history.iter().any(judges))
        })
        .filter(|c| {
            !LISTED_WITH_TRANSACTIONS.contains(&c.name)
                || *with_transactions.get_or_init(|| txn_index::in_run(run))
        })
        .filter(|c| !LISTED_WITH_DATABASE.contains(&c.name) || run.sees.database)
        .collect()
}

/// Every checker, in report order. Each module adds its own entry here.
pub fn all() -> Vec<Checker> {
    vec![
        lost_write::checker(),
        offset_changed::checker(),
        app_writes::checker(),
        divergence::checker(),
        lost_write::database_checker(),
        offset_changed::database_checker(),
        database_divergence::checker(),
        epoch_file::checker(),
        leaders::checker(),
        elections::checker(),
        clean_stop::checker(),
        fencing::checker(),
        isr_acks::checker(),
        high_watermark::checker(),
        consumer::checker(),
        duplicates::checker(),
        committed::checker(),
        send_order::checker(),
        unseen::checker(),
        topic_lives::checker(),
        transactions::checker(),
        txn_cycles::checker(),
        hanging::checker(),
    ]
}

/// The whole report of one run: each checker's result and the merged verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub verdict: Verdict,
    pub results: Vec<CheckResult>,
    /// Where the run's faults landed (coverage.rs); the run's verdict folds
    /// it in (run/check.rs), a bare [`check`] leaves it out. Absent from
    /// results.json written before coverage was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
}

/// Runs one checker; one that errs or panics is unknown, never valid, and
/// one whose needs the system does not meet is not applicable (it never runs).
fn run_one(checker: &Checker, run: &RunIndex) -> CheckResult {
    let unmet: Vec<&str> = checker
        .needs
        .iter()
        .filter(|need| !need.met_by(&run.run.sees))
        .map(|need| need.what())
        .collect();
    if !unmet.is_empty() {
        return CheckResult::not_applicable(
            checker.name,
            format!(
                "needs {}, which the system under test ({}) does not let the harness see",
                unmet.join(" and "),
                run.run.system
            ),
        );
    }
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
    // A run no checker applied to was not judged: unknown, never valid.
    let verdict = match results.iter().map(|r| r.verdict).max() {
        None | Some(Verdict::NotApplicable) => Verdict::Unknown,
        Some(verdict) => verdict,
    };
    Report {
        verdict,
        results,
        coverage: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use synthetic::{SyntheticSpec, synthetic_run};

    #[test]
    fn every_kind_is_reported_by_a_checker_that_exists() {
        let checkers: Vec<&str> = all().iter().map(|c| c.name).collect();
        for &a in Anomaly::ALL {
            assert!(
                checkers.contains(&a.checker()) || a.checker() == "liveness",
                "{a}: no checker {}",
                a.checker()
            );
        }
    }

    fn checker(name: &'static str, check: fn(&RunIndex) -> CheckOutcome) -> Checker {
        Checker {
            name,
            guarantee: "",
            source: "",
            not_checked: "",
            needs: &[],
            check,
        }
    }

    #[test]
    fn verdicts_merge_invalid_over_unknown_over_valid_and_errors_are_unknown() {
        let run = RunData::default();
        let valid = checker("v", |_| Ok(CheckResult::valid("v", "fine")));
        let erring = checker("e", |_| Err(NoFinalLog::NotInTheRun.into()));
        let panicking = checker("p", |_| panic!("boom"));
        let invalid = checker("i", |_| Ok(CheckResult::invalid("i", "bad", vec![])));
        assert_eq!(check(&run, &[]).verdict, Verdict::Unknown);
        assert_eq!(
            check(&run, std::slice::from_ref(&valid)).verdict,
            Verdict::Valid
        );
        let report = check(&run, &[valid, erring, panicking]);
        assert_eq!(report.verdict, Verdict::Unknown);
        assert_eq!(
            report.results[1].message,
            "could not check: no replica of the partition and no send to it"
        );
        assert_eq!(report.results[2].verdict, Verdict::Unknown);
        let valid = checker("v", |_| Ok(CheckResult::valid("v", "fine")));
        let erring = checker("e", |_| Err(CheckError::MismatchedSend { index: 3 }));
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

    #[test]
    fn every_checker_is_valid_on_a_synthetic_run() {
        let run = synthetic_run(&SyntheticSpec::with_ops(2_000));
        // The database's checkers need a system that keeps one (their tests:
        // observe/database/tests.rs, tests/cluster_database.rs).
        let checkers: Vec<Checker> = all()
            .into_iter()
            .filter(|c| !LISTED_WITH_DATABASE.contains(&c.name))
            .collect();
        let report = check(&run, &checkers);
        for result in &report.results {
            assert_eq!(result.verdict, Verdict::Valid, "{result:#?}");
        }
        // Valid because each looked, not because it had nothing to look at.
        let count = |checker: &str, name: &str| {
            let result = report.results.iter().find(|r| r.checker == checker);
            result
                .and_then(|r| r.counts.get(name).copied())
                .unwrap_or(0)
        };
        assert!(count("lost-write", "acknowledged") > 1_000);
        assert_eq!(count("divergence", "partitions-compared"), 3);
        assert_eq!(count("epoch-file", "epoch-files-checked"), 9);
        assert!(count("consumer", "records-read") > 1_000);
        assert!(count("stale-controller-fenced", "applied") > 9);
    }

    /// `run` as a system that lets the checkers see only the history and a
    /// final read over the protocol would leave it: each partition's final
    /// log moved into the final read, no replicas, no timeline, no
    /// state-change logs.
    fn as_seen_over_the_protocol(run: RunData) -> RunData {
        let replicas = run
            .partitions()
            .iter()
            .map(|p| final_log::FinalLog::of(&run, p).unwrap().replica.clone())
            .collect();
        let data = crate::reader::DataDirState {
            path: "final-read".into(),
            replicas,
            high_watermarks: None,
            recovery_points: None,
            clean_shutdown: false,
            findings: Vec::new(),
        };
        RunData {
            replicas: Default::default(),
            state_changes: Default::default(),
            timeline: None,
            system: "over-the-protocol".into(),
            sees: crate::system::Sees {
                replica_files: false,
                etcd_timeline: false,
                state_change_log: false,
                database: false,
            },
            claims: crate::system::Claims {
                unclean_elections: false,
                unclean_election_setting: None,
                recovers: false,
            },
            final_read: Some(context::FinalReadState {
                failed: Default::default(),
                via: crate::node::NodeId::new(2),
                data,
            }),
            ..run
        }
    }

    #[test]
    fn a_checker_never_says_valid_over_what_the_system_does_not_let_it_see() {
        let run = as_seen_over_the_protocol(synthetic_run(&SyntheticSpec::with_ops(2_000)));
        let report = check(&run, &all());
        assert_eq!(report.verdict, Verdict::Valid, "{report:#?}");
        for (checker, result) in all().iter().zip(&report.results) {
            if checker.needs.is_empty() {
                assert_ne!(result.verdict, Verdict::NotApplicable, "{result:#?}");
            } else {
                assert_eq!(result.verdict, Verdict::NotApplicable, "{result:#?}");
                assert!(
                    result.message.contains("does not let the harness see")
                        && result.message.contains("over-the-protocol"),
                    "{}",
                    result.message
                );
            }
        }
        let result = |name: &str| report.results.iter().find(|r| r.checker == name).unwrap();
        for name in [
            "divergence",
            "epoch-file",
            "one-leader-per-epoch",
            "stale-controller-fenced",
        ] {
            assert_eq!(result(name).verdict, Verdict::NotApplicable, "{name}");
        }
        // The ones that ran looked at the final read, not at nothing.
        assert!(result("lost-write").counts["acknowledged"] > 1_000);
        assert!(result("consumer").counts["records-read"] > 1_000);

        // And the final read is what they hold acknowledged writes against.
        let spec = SyntheticSpec {
            drop_acked_value: true,
            ..SyntheticSpec::with_ops(2_000)
        };
        let report = check(&as_seen_over_the_protocol(synthetic_run(&spec)), &all());
        let lost = result_of(&report, "lost-write");
        assert_eq!(lost.verdict, Verdict::Invalid, "{lost:#?}");
        let evidence = serde_json::to_string(&lost.evidence[0]).unwrap();
        assert!(evidence.contains("\"final_log_node\":\"b2\""), "{evidence}");
    }

    fn result_of<'a>(report: &'a Report, name: &str) -> &'a CheckResult {
        report.results.iter().find(|r| r.checker == name).unwrap()
    }

    #[test]
    fn a_run_no_checker_applies_to_is_unknown_not_valid() {
        let run = RunData {
            sees: crate::system::Sees {
                replica_files: false,
                etcd_timeline: false,
                state_change_log: false,
                database: false,
            },
            ..RunData::default()
        };
        let needy = Checker {
            needs: &[Need::ReplicaFiles],
            ..checker("needy", |_| Ok(CheckResult::valid("needy", "saw nothing")))
        };
        let report = check(&run, &[needy]);
        assert_eq!(report.results[0].verdict, Verdict::NotApplicable);
        assert_eq!(
            report.results[0].message,
            "needs every replica's log files on disk, which the system under test (epochal) \
             does not let the harness see"
        );
        assert_eq!(report.verdict, Verdict::Unknown);
        assert_eq!(
            serde_json::to_string(&report.results[0].verdict).unwrap(),
            "\"not-applicable\""
        );
    }

    #[test]
    fn a_synthetic_run_missing_an_acknowledged_value_is_a_lost_write() {
        let spec = SyntheticSpec {
            drop_acked_value: true,
            ..SyntheticSpec::with_ops(2_000)
        };
        let report = check(&synthetic_run(&spec), &all());
        assert_eq!(report.verdict, Verdict::Invalid);
        let lost = report
            .results
            .iter()
            .find(|r| r.checker == "lost-write")
            .unwrap();
        assert_eq!(lost.verdict, Verdict::Invalid, "{lost:#?}");
        let anomalies: Vec<&str> = lost.evidence.iter().map(|e| e.anomaly.name()).collect();
        assert_eq!(anomalies, vec!["lost-acknowledged-write"]);
    }
}
