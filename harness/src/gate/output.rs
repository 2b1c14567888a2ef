//! What a gate tells: the table on stdout and the JUnit XML for CI.

use std::path::Path;

use super::run::CaseResult;

/// The summary table on stdout.
pub fn write_table(cases: &[CaseResult], out: &mut impl std::io::Write) -> std::io::Result<()> {
    let names: Vec<String> = cases
        .iter()
        .map(|c| format!("{}/{}", c.suite, c.scenario))
        .collect();
    // Each column as wide as its widest cell, so long settings stay aligned.
    fn width(header: &str, cells: impl Iterator<Item = usize>) -> usize {
        cells.fold(header.len(), usize::max)
    }
    let scenario_w = width("scenario", names.iter().map(String::len));
    let setting_w = width("setting", cases.iter().map(|c| c.setting.len()));
    let expected_w = width("expected", cases.iter().map(|c| c.expected.len()));
    let got_w = width("got", cases.iter().map(|c| c.got.len()));
    writeln!(
        out,
        "{:<6} {:<scenario_w$} {:<setting_w$} {:<expected_w$} {:<got_w$} {:>7}",
        "result", "scenario", "setting", "expected", "got", "time"
    )?;
    for (case, name) in cases.iter().zip(&names) {
        writeln!(
            out,
            "{:<6} {name:<scenario_w$} {:<setting_w$} {:<expected_w$} {:<got_w$} {:>6.1}s",
            if case.met { "ok" } else { "FAIL" },
            case.setting,
            case.expected,
            case.got,
            case.duration.as_secs_f64()
        )?;
        for failure in &case.failures {
            writeln!(out, "       {failure}")?;
        }
        if !case.met
            && let Some(dir) = &case.run_dir
        {
            writeln!(out, "       run: {}", dir.display())?;
        }
    }
    let met = cases.iter().filter(|c| c.met).count();
    writeln!(
        out,
        "gate: {met}/{} met — {}",
        cases.len(),
        if met == cases.len() && !cases.is_empty() {
            "PASS"
        } else {
            "FAIL"
        }
    )
}

/// JUnit XML: one test suite per suite file, one case per scenario and setting.
pub fn junit(cases: &[CaseResult]) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("epochal-gate");
    let mut suites: Vec<TestSuite> = Vec::new();
    for case in cases {
        if suites.last().is_none_or(|s| s.name.as_str() != case.suite) {
            suites.push(TestSuite::new(case.suite.as_str()));
        }
        let status = if case.met {
            TestCaseStatus::success()
        } else {
            let mut status = TestCaseStatus::non_success(if case.got == "error" {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            });
            status.set_message(case.failures.join("; "));
            status
        };
        let mut test = TestCase::new(format!("{} [{}]", case.scenario, case.setting), status);
        test.set_classname(format!("{}.{}", case.suite, case.scenario));
        test.set_time(case.duration);
        if let Some(dir) = &case.run_dir {
            link_run(&mut test, dir);
        }
        suites.last_mut().expect("pushed above").add_test_case(test);
    }
    report.add_test_suites(suites);
    report
        .to_string()
        .expect("a report of plain strings serializes")
}

/// Points a JUnit case at its run, in the forms CI tools read: properties
/// `run_dir` and `report` (shown by tools that show a case's properties), and
/// in system-out the paths as lines (`run: ...` first, as before) plus a
/// `[[ATTACHMENT|path]]` line for the report, the convention by which
/// GitLab and Jenkins' attachments plugin offer a case's file. The report is
/// named only when it exists, so no CI page links to nothing. Paths are as
/// the gate was given them (`--store`), so relative to where it ran, which is
/// what CI attachment paths expect.
fn link_run(test: &mut quick_junit::TestCase, dir: &Path) {
    use quick_junit::Property;
    let mut out = format!("run: {}", dir.display());
    test.add_property(Property::new("run_dir", dir.display().to_string()));
    let report = dir.join(crate::report::REPORT_FILE);
    if report.is_file() {
        let report = report.display().to_string();
        test.add_property(Property::new("report", report.as_str()));
        out.push_str(&format!("\nreport: {report}\n[[ATTACHMENT|{report}]]"));
    }
    test.set_system_out(out);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn case(run_dir: Option<&Path>, met: bool) -> CaseResult {
        CaseResult {
            suite: "bugs".into(),
            scenario: "kip-101-scenario-1".into(),
            setting: "truncation=high-watermark".into(),
            expected: "invalid (lost-acknowledged-write)".into(),
            got: if met { "invalid" } else { "valid" }.into(),
            met,
            failures: if met {
                Vec::new()
            } else {
                vec!["expected invalid, the run is valid".into()]
            },
            run_dir: run_dir.map(Path::to_owned),
            duration: Duration::from_millis(1500),
        }
    }

    fn parsed(xml: &str) -> quick_junit::TestCase {
        let report = quick_junit::Report::deserialize_from_str(xml).expect("JUnit parses");
        report.test_suites[0].test_cases[0].clone()
    }

    fn property(case: &quick_junit::TestCase, name: &str) -> Option<String> {
        case.properties
            .iter()
            .find(|p| p.name.as_str() == name)
            .map(|p| p.value.to_string())
    }

    #[test]
    fn junit_cases_link_their_run_directory_and_report() {
        let store = tempfile::tempdir().unwrap();
        let dir = store
            .path()
            .join("bugs/kip-101-scenario-1/high-watermark/20261130T130501Z-0");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("report.html"), "<!DOCTYPE html>").unwrap();
        let report = dir.join("report.html").display().to_string();

        let test = parsed(&junit(&[case(Some(&dir), false)]));
        assert_eq!(property(&test, "run_dir"), Some(dir.display().to_string()));
        assert_eq!(property(&test, "report"), Some(report.clone()));
        let out = test.system_out.expect("system-out").to_string();
        assert_eq!(
            out,
            format!(
                "run: {}\nreport: {report}\n[[ATTACHMENT|{report}]]",
                dir.display()
            )
        );
        // The failure itself is still told as before.
        match test.status {
            quick_junit::TestCaseStatus::NonSuccess { message, .. } => assert_eq!(
                message.map(|m| m.to_string()),
                Some("expected invalid, the run is valid".into())
            ),
            other => panic!("a failed case reads back as {other:?}"),
        }
    }

    #[test]
    fn junit_names_no_report_that_is_not_there() {
        let store = tempfile::tempdir().unwrap();
        let dir = store.path().join("adhoc/x/20261130T130501Z-0");
        std::fs::create_dir_all(&dir).unwrap();
        let test = parsed(&junit(&[case(Some(&dir), true)]));
        assert_eq!(property(&test, "run_dir"), Some(dir.display().to_string()));
        assert_eq!(property(&test, "report"), None);
        assert_eq!(
            test.system_out.map(|o| o.to_string()),
            Some(format!("run: {}", dir.display()))
        );

        // A case whose run never started links nothing.
        let test = parsed(&junit(&[case(None, false)]));
        assert!(test.properties.is_empty());
        assert_eq!(test.system_out, None);
    }
}
