//! A suite names the anomaly a bug reproduction must show by its kind
//! (`checker::Anomaly`); a misspelt kind is refused when the suite loads,
//! naming the file, the line and the kind it was probably meant to be —
//! never found out later as a gate case failing for the wrong reason.

use epochal::checker::Anomaly;
use epochal::gate::load_suites;

const SUITE: &str = r#"# a suite with one bug reproduction
[[scenario]]
name = "kip-101-scenario-1"
description = "an acknowledged write is lost"
schedule = "kip-101-scenario-1.toml"

[[scenario.setting]]
set = ["truncation=high-watermark"]
expect = "invalid"
anomaly = "ANOMALY"
"#;

fn load(anomaly: &str) -> Result<Vec<epochal::gate::LoadedSuite>, epochal::gate::SuiteError> {
    let dir = tempfile::tempdir().unwrap();
    let schedule = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../suites/schedules/kip-101-scenario-1.toml");
    std::fs::copy(schedule, dir.path().join("kip-101-scenario-1.toml")).unwrap();
    let file = dir.path().join("bugs.toml");
    std::fs::write(&file, SUITE.replace("ANOMALY", anomaly)).unwrap();
    load_suites(&[file])
}

#[test]
fn a_misspelt_anomaly_fails_the_load_naming_file_line_and_the_closest_kind() {
    let error = load("lost-acknowledged-writes").unwrap_err().to_string();
    assert!(error.contains("bugs.toml:10"), "file and line: {error}");
    assert!(
        error.contains("did you mean `lost-acknowledged-write`?"),
        "closest kind: {error}"
    );
    assert!(error.contains("replica-divergence"), "the kinds: {error}");
}

#[test]
fn a_known_anomaly_loads_as_its_kind() {
    let suites = load("lost-acknowledged-write").unwrap();
    let setting = &suites[0].suite.scenarios[0].settings[0];
    assert_eq!(setting.anomaly, Some(Anomaly::LostAcknowledgedWrite));
}
