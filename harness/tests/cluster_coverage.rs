//! Coverage and vacuous runs ([power] item 1), on a real cluster: the same
//! three sends and one pause of a follower, declaring `[workload]
//! min_ops_per_fault = 1`. With the pause (and its resume) before any
//! client op the run is unknown, "vacuous: …" — it could not have broken
//! anything — and with the pause among the sends it is valid. Both runs'
//! coverage is in results.json, the summary and report.html, and `epochal
//! check` recomputes the same from the stored files.

use crate::common;
use crate::common::html;

use std::path::{Path, PathBuf};

use common::scenario::run;

fn schedule(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schedules")
        .join(name)
}

/// The fault rows of report.html's coverage table, as (verb, ops) pairs.
fn fault_rows(dir: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let page = html::assert_parses(&text);
    let sections: Vec<_> = html::elements(&page.document, "section")
        .into_iter()
        .filter(|s| html::attr(s, "id").as_deref() == Some("coverage"))
        .collect();
    assert_eq!(sections.len(), 1, "report.html has one coverage section");
    html::elements(&sections[0], "tr")
        .into_iter()
        .filter_map(|row| {
            let ops = html::attr(&row, "data-ops")?.parse().unwrap();
            let verb = html::text(&html::elements(&row, "td")[0]);
            Some((verb, ops))
        })
        .collect()
}

#[test]
fn cluster_coverage_a_fault_before_any_client_op_is_vacuous_and_among_them_valid() {
    // Exit 2, unknown; `epochal check` of the stored run prints the same
    // report, coverage included (scenario::run).
    let vacuous = run(&schedule("vacuous_fault_first.toml"), &[], 2);
    let (results, stdout) = (&vacuous.results, &vacuous.stdout);
    assert_eq!(results["verdict"], "unknown", "{results}");
    let coverage_result = &results["results"][0];
    assert_eq!(coverage_result["checker"], "coverage");
    assert_eq!(coverage_result["verdict"], "unknown");
    let reason = coverage_result["message"].as_str().unwrap();
    assert!(
        reason.starts_with("vacuous: min_ops_per_fault = 1: 1 of 1 faults overlapped fewer"),
        "{reason}"
    );
    assert!(
        reason.contains("pause b3") && reason.ends_with("(1 short)"),
        "{reason}"
    );
    // Every checker of the data is valid: only coverage holds the run back.
    for result in results["results"].as_array().unwrap().iter().skip(1) {
        assert_ne!(result["verdict"], "invalid", "{result}");
        assert_ne!(result["verdict"], "unknown", "{result}");
    }
    let fault = &results["coverage"]["faults"][0];
    assert_eq!(fault["verb"], "pause", "{results}");
    assert_eq!(fault["nodes"], serde_json::json!(["b3"]));
    assert_eq!(fault["ended_by"], "resume");
    assert_eq!(
        (&fault["in_flight"], &fault["invoked"]),
        (&0.into(), &0.into())
    );
    assert_eq!(results["coverage"]["acked_during_faults"], 0);
    assert_eq!(
        results["coverage"]["partitions_unwritten_during_faults"],
        serde_json::json!(["t-0"])
    );
    assert!(
        stdout.contains("faults: 1 landed; client ops overlapped per fault: fewest 0"),
        "{stdout}"
    );
    assert_eq!(fault_rows(&vacuous.dir), [("pause".to_owned(), 0)]);

    let amid = run(&schedule("fault_amid_ops.toml"), &[], 0);
    let (results, stdout) = (&amid.results, &amid.stdout);
    assert_eq!(results["verdict"], "valid", "{results}");
    assert_eq!(results["results"][0]["checker"], "coverage");
    assert_eq!(results["results"][0]["verdict"], "valid");
    let fault = &results["coverage"]["faults"][0];
    assert_eq!(fault["verb"], "pause", "{results}");
    assert_eq!(fault["invoked"], 1, "the send between pause and resume");
    assert_eq!(results["coverage"]["acked_during_faults"], 1);
    assert_eq!(
        results["coverage"]["partitions_unwritten_during_faults"],
        serde_json::json!([])
    );
    assert!(
        stdout.contains("writes acknowledged during faults: 1"),
        "{stdout}"
    );
    assert_eq!(fault_rows(&amid.dir), [("pause".to_owned(), 1)]);
}
