//! What a gate tells: the table on stdout and the JUnit XML for CI.

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
            test.set_system_out(format!("run: {}", dir.display()));
        }
        suites.last_mut().expect("pushed above").add_test_case(test);
    }
    report.add_test_suites(suites);
    report
        .to_string()
        .expect("a report of plain strings serializes")
}
