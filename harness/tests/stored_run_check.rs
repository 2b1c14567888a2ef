//! A run stored before the [redesign] still checks the same: `epochal check`
//! on it gives the verdict the harness of the time wrote into its
//! `results.json`, checker by checker, with the same anomalies. (At the
//! redesign the whole report was identical; checkers have since learned to
//! count more, so counts and wording may grow, but no verdict may move, and
//! a checker written since must find the run valid.) The fixtures under
//! `tests/fixtures/stored-runs/` are real run directories written by epochal at
//! commit bd91b01 (`epochal run suites/schedules/kip-101-scenario-1.toml --set
//! truncation=high-watermark`, invalid: an acknowledged write lost; and
//! `epochal run suites/schedules/guarantee-leader-hard-bounce.toml`, valid, with
//! background producers and consumers), kept whole but for etcd's own data and
//! the broker logs. The history format is the one every run writes, so a
//! stored history that stops reading, or reads differently, fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

use epochal::checker::Report;
use epochal::run_dir::RunDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stored-runs")
        .join(name)
}

/// The report the harness wrote when the run was made.
fn stored_report(dir: &Path) -> Report {
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Each checker's verdict and the anomalies it names, in report order.
fn verdicts(report: &Report) -> Vec<(String, String, Vec<String>)> {
    report
        .results
        .iter()
        .map(|r| {
            (
                r.checker.clone(),
                r.verdict.to_string(),
                r.evidence
                    .iter()
                    .map(|e| e.anomaly.name().to_owned())
                    .collect(),
            )
        })
        .collect()
}

fn assert_checks_as_stored(name: &str, exit_code: i32) {
    let dir = fixture(name);
    let stored = stored_report(&dir);
    let now = epochal::run::check_dir(&RunDir::open(&dir)).unwrap();
    assert_eq!(now.verdict, stored.verdict, "{name}");
    // Checkers written since the run was stored ([groups]' send-order) judge
    // it too: each must find it valid (or, below, not applicable for want of
    // an input the run never recorded), and the stored ones must not move.
    let known: Vec<String> = stored.results.iter().map(|r| r.checker.clone()).collect();
    let (old, new): (Vec<_>, Vec<_>) = verdicts(&now)
        .into_iter()
        .partition(|(checker, _, _)| known.contains(checker));
    assert_eq!(
        old,
        verdicts(&stored),
        "{name}: a checker's verdict differs from the one stored with the run"
    );
    // A checker that reads what the run did not record then (isr-acks: the
    // proxy's recordings of the followers' fetches) is not applicable to it.
    for (checker, verdict, anomalies) in &new {
        let verdict = if checker == "isr-acks" && verdict == "not-applicable" {
            "valid"
        } else {
            verdict.as_str()
        };
        assert_eq!(
            (verdict, anomalies.len()),
            ("valid", 0),
            "{name}: {checker}, written since, finds the stored run {verdict}: {anomalies:?}"
        );
    }
    // `epochal check` draws report.html into the run directory: on a copy,
    // so the committed fixture is never written.
    let copy = tempfile::tempdir().unwrap();
    copy_dir(&dir, copy.path());
    let out = Command::new(env!("CARGO_BIN_EXE_epochal"))
        .arg("check")
        .arg(copy.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(exit_code), "{name}: {stdout}");
    assert!(
        stdout.contains(&format!("verdict: {}", stored.verdict)),
        "{name}: {stdout}"
    );
    // A run stored before the report existed gets one, naming its verdict.
    let page = std::fs::read_to_string(copy.path().join("report.html")).unwrap();
    assert!(
        page.contains(&format!(
            r#"<span class="verdict {v}" id="verdict">{v}</span>"#,
            v = stored.verdict
        )),
        "{name}"
    );
}

/// `from`'s files and directories, recursively, into `to`.
fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_stored_invalid_run_checks_invalid_with_the_same_evidence() {
    assert_checks_as_stored("kip-101-scenario-1", 1);
}

#[test]
fn a_stored_run_with_background_load_checks_valid_with_the_same_report() {
    assert_checks_as_stored("guarantee-leader-hard-bounce", 0);
}
