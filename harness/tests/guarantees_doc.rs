//! GUARANTEES.md stays in step with the code: every checker the harness runs is
//! in its guarantee table, every scenario of the bug suite in its bug table, and
//! every scenario of the guarantees suite in its guarantees-suite table.

use std::path::Path;

fn doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../GUARANTEES.md")).unwrap()
}

#[test]
fn every_checker_is_in_the_guarantee_table() {
    let doc = doc();
    for checker in epochal::checker::all() {
        assert!(
            doc.contains(&format!("| `{}` |", checker.name)),
            "GUARANTEES.md does not list checker {}",
            checker.name
        );
        assert!(!checker.guarantee.is_empty() && !checker.source.is_empty());
        assert!(!checker.not_checked.is_empty(), "{}", checker.name);
    }
}

#[test]
fn every_bug_scenario_is_in_the_bug_table() {
    let doc = doc();
    let suites = epochal::gate::load_suites(&[
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/bugs.toml")
    ])
    .unwrap();
    for scenario in &suites[0].suite.scenarios {
        assert!(
            doc.contains(&format!(
                "| `{}` (`suites/{}`)",
                scenario.name,
                scenario.schedule.display()
            )),
            "GUARANTEES.md's bug table lacks {}",
            scenario.name
        );
    }
}

#[test]
fn every_guarantees_scenario_is_in_its_table() {
    let doc = doc();
    let suites = epochal::gate::load_suites(&[
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/guarantees.toml")
    ])
    .unwrap();
    assert!(suites[0].suite.scenarios.len() >= 6);
    for scenario in &suites[0].suite.scenarios {
        assert!(
            doc.contains(&format!(
                "| `{}` (`suites/{}`) |",
                scenario.name,
                scenario.schedule.display()
            )),
            "GUARANTEES.md's guarantees-suite table lacks {}",
            scenario.name
        );
        // Background load makes each history different: such scenarios
        // are judged by verdict and path only. Scripted ones may snapshot.
        let schedule = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../suites")
                .join(&scenario.schedule),
        )
        .unwrap();
        if schedule.contains("[workload.background]") {
            assert!(!scenario.snapshot, "{}: verdicts only", scenario.name);
        }
    }
}

#[test]
fn the_anomaly_table_is_what_epochal_anomalies_prints() {
    let doc = doc();
    let table = epochal::checker::anomaly::table();
    assert!(
        doc.contains(&table),
        "GUARANTEES.md's \"Anomaly kinds\" table differs from `epochal anomalies`; paste its output:\n{table}"
    );
    // Each kind's checker is one the guarantee table lists.
    for kind in epochal::checker::Anomaly::ALL {
        assert!(
            doc.contains(&format!("`{}`", kind.checker())),
            "{kind}: checker {} is not in GUARANTEES.md",
            kind.checker()
        );
    }
}
