//! `epochal gate` over the real suites: every case meets its expectation, the
//! JUnit file parses and lists every scenario and setting, and a suite whose
//! expectation is wrong fails the gate naming the scenario.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::scenario::{epochal, schedule_file, show, suite_file};

fn gate(args: &[&str], store: &Path) -> Output {
    epochal()
        .arg("gate")
        .args(args)
        .arg("--store")
        .arg(store)
        .output()
        .expect("epochal runs")
}

/// The suite files under `suites/` (those with `[[scenario]]` tables), in
/// name order, read as plain TOML: what the gate must have run.
fn declared_suites(dir: &Path) -> Vec<(String, toml::Table)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let table: toml::Table =
                toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            (table.contains_key("scenario") || table.contains_key("campaign")).then(|| {
                let name = path.file_stem().unwrap().to_string_lossy().into_owned();
                (name, table)
            })
        })
        .collect()
}

/// The README's main command: the gate over every suite in `suites/`.
#[test]
fn cluster_gate_over_every_suite_meets_every_expectation_and_writes_junit() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let suites = suite_file("");
    let output = gate(
        &[
            suites.to_str().unwrap(),
            "--jobs",
            "2",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &dir.path().join("store"),
    );
    if output.status.code() != Some(0) {
        // A failing case's run directory is the evidence: the paths the
        // gate printed must still exist after the test (a campaign case that
        // failed once under load could not be studied because they were gone).
        let kept = dir.keep();
        panic!(
            "{}\nthe store is kept at {}",
            show(&output),
            kept.join("store").display()
        );
    }
    assert!(String::from_utf8_lossy(&output.stdout).contains("PASS"));

    // Every scenario and setting each suite names is one JUnit case, passed,
    // and the bug and guarantees suites are both there.
    let text = std::fs::read_to_string(&junit).unwrap();
    let report = quick_junit::Report::deserialize_from_str(&text).expect("JUnit parses");
    let declared = declared_suites(&suites);
    let names: Vec<&str> = declared.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"bugs") && names.contains(&"guarantees"),
        "{names:?}"
    );
    let mut expected = Vec::new();
    for (_, suite) in &declared {
        let none = Vec::new();
        for scenario in suite
            .get("scenario")
            .and_then(|s| s.as_array())
            .unwrap_or(&none)
        {
            for setting in scenario["setting"].as_array().unwrap() {
                let set: Vec<&str> = setting["set"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                expected.push(format!(
                    "{} [{}]",
                    scenario["name"].as_str().unwrap(),
                    set.join(",")
                ));
            }
        }
        for campaign in suite
            .get("campaign")
            .and_then(|c| c.as_array())
            .unwrap_or(&none)
        {
            let set: Vec<&str> = campaign["set"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            for seed in campaign["seeds"].as_array().unwrap() {
                expected.push(format!(
                    "{}/seed-{} [{}]",
                    campaign["name"].as_str().unwrap(),
                    seed.as_integer().unwrap(),
                    set.join(",")
                ));
            }
        }
    }
    let cases: Vec<String> = report
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .map(|c| c.name.to_string())
        .collect();
    assert_eq!(cases, expected);
    assert_eq!(report.failures, 0);
    assert_eq!(report.errors, 0);

    // Each scripted scenario and setting against its snapshot: the history
    // (times and etcd revisions redacted), each replica's final log and epoch
    // file, etcd's timeline and the verdict with its evidence.
    let store = dir.path().join("store");
    let mut snapshotted = 0;
    for loaded in epochal::gate::load_suites(&[suites]).unwrap() {
        for scenario in &loaded.suite.scenarios {
            for setting in scenario.snapshotted() {
                let setting_dir = epochal::gate::setting_dir(setting);
                let parent = store
                    .join(&loaded.name)
                    .join(&scenario.name)
                    .join(&setting_dir);
                let runs: Vec<PathBuf> = std::fs::read_dir(&parent)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect();
                assert_eq!(runs.len(), 1, "{runs:?}");
                let normalized =
                    epochal::snapshot::normalized(&epochal::run_dir::RunDir::open(&runs[0]))
                        .unwrap();
                insta::with_settings!({
                    snapshot_path => "../../snapshots",
                    prepend_module_to_snapshot => false,
                }, {
                    insta::assert_json_snapshot!(
                        format!("{}__{}__{}", loaded.name, scenario.name, setting_dir),
                        normalized
                    );
                });
                snapshotted += 1;
            }
        }
    }
    assert!(snapshotted >= 17, "{snapshotted} snapshots compared");
}

#[test]
fn cluster_gate_fails_when_a_bug_reproduction_stops_reproducing() {
    // The KIP-101 schedule under a setting that fixes the bug, with the suite
    // claiming it must reproduce: an unexpected pass fails the gate.
    let dir = tempfile::tempdir().unwrap();
    let schedule = schedule_file("kip-101-scenario-1.toml");
    let suite = dir.path().join("wrong.toml");
    std::fs::write(
        &suite,
        format!(
            "[[scenario]]\nname = \"claims-a-bug\"\nschedule = {:?}\n\n[[scenario.setting]]\nset = [\"truncation=current\"]\nexpect = \"invalid\"\nanomaly = \"lost-acknowledged-write\"\n",
            schedule.display().to_string()
        ),
    )
    .unwrap();
    let junit = dir.path().join("junit.xml");
    let output = gate(
        &[suite.to_str().unwrap(), "--junit", junit.to_str().unwrap()],
        &dir.path().join("store"),
    );
    assert_eq!(output.status.code(), Some(1), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("FAIL   wrong/claims-a-bug"), "{stdout}");
    assert!(stdout.contains("the bug did not reproduce"), "{stdout}");
    let report =
        quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap())
            .unwrap();
    assert_eq!(report.failures, 1);
}

/// `schedule`'s text with the broker failpoint `follower-truncate-to-hw` armed
/// on every node, through the schedule's own `[cluster.node.bN] failpoints`,
/// so the run directory records that the fix was removed.
fn with_fix_removed(schedule: &Path) -> String {
    let mut table: toml::Table =
        toml::from_str(&std::fs::read_to_string(schedule).unwrap()).unwrap();
    let cluster = table["cluster"].as_table_mut().unwrap();
    let brokers = cluster["brokers"].as_integer().unwrap();
    let nodes = cluster
        .entry("node")
        .or_insert_with(|| toml::Table::new().into())
        .as_table_mut()
        .unwrap();
    for id in 1..=brokers {
        let node = nodes
            .entry(format!("b{id}"))
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
            .unwrap();
        let failpoints = node
            .entry("failpoints")
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
            .unwrap();
        failpoints.insert("follower-truncate-to-hw".into(), "return".into());
    }
    toml::to_string(&table).unwrap()
}

#[test]
fn cluster_gate_fails_when_the_broker_has_a_fix_removed() {
    // The broker's `follower-truncate-to-hw` failpoint, armed on every node,
    // undoes the KIP-101 fix (followers truncate to their high watermark
    // again, whatever `truncation` says); the scenario that passes on
    // `current` must now fail the gate, naming itself and the anomaly.
    let dir = tempfile::tempdir().unwrap();
    let schedule = dir.path().join("kip-101-scenario-1.toml");
    std::fs::write(
        &schedule,
        with_fix_removed(&schedule_file("kip-101-scenario-1.toml")),
    )
    .unwrap();
    let suite = dir.path().join("fixed.toml");
    std::fs::write(
        &suite,
        format!(
            "[[scenario]]\nname = \"kip-101-scenario-1\"\nschedule = {:?}\n\n[[scenario.setting]]\nset = [\"truncation=current\"]\nexpect = \"valid\"\n",
            schedule.display().to_string()
        ),
    )
    .unwrap();
    let output = epochal()
        .arg("gate")
        .arg(&suite)
        .arg("--store")
        .arg(dir.path().join("store"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", show(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("FAIL ")
            && l.contains(" fixed/kip-101-scenario-1 ")
            && l.contains(" truncation=current ")),
        "{stdout}"
    );
    assert!(stdout.contains("expected valid, got invalid"), "{stdout}");
    assert!(
        stdout.contains("lost-acknowledged-write: value 2 acked at offset 1"),
        "{stdout}"
    );
}

#[test]
fn gate_rejects_a_malformed_suite_naming_file_and_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("bad.toml");
    std::fs::write(
        &suite,
        "[[scenario]]\nname = \"x\"\nschedule = \"missing.toml\"\n\n[[scenario.setting]]\nexpect = \"valid\"\n",
    )
    .unwrap();
    let output = gate(&[suite.to_str().unwrap()], &dir.path().join("store"));
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.toml")
            && stderr.contains("scenario x")
            && stderr.contains("missing.toml"),
        "{stderr}"
    );
    std::fs::write(&suite, "[[scenario]]\nname = \"x\"\nschedul = \"a.toml\"\n").unwrap();
    let output = gate(&[suite.to_str().unwrap()], &dir.path().join("store"));
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("bad.toml:3:"));
}

#[test]
fn cluster_gate_shards_merge_into_the_unsharded_report() {
    // Four cases (crash_restart under two settings, twice over), two shards:
    // each runs its slice on a real cluster, and `epochal merge` joins their
    // JUnit files into the cases the unsharded gate lists.
    let dir = tempfile::tempdir().unwrap();
    let schedule = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedules/crash_restart.toml");
    let suite = dir.path().join("small.toml");
    let mut text = String::new();
    for name in ["first", "second"] {
        text.push_str(&format!(
            "[[scenario]]\nname = \"{name}\"\nschedule = {:?}\nsnapshot = false\n\n\
             [[scenario.setting]]\nset = [\"truncation=current\"]\nexpect = \"valid\"\n\n\
             [[scenario.setting]]\nset = [\"truncation=kip-279\"]\nexpect = \"valid\"\n\n",
            schedule.display().to_string()
        ));
    }
    std::fs::write(&suite, text).unwrap();
    let mut shards = Vec::new();
    for shard in ["1/2", "2/2"] {
        let junit = dir
            .path()
            .join(format!("junit-{}.xml", shard.replace('/', "-")));
        let output = gate(
            &[
                suite.to_str().unwrap(),
                "--shard",
                shard,
                "--junit",
                junit.to_str().unwrap(),
            ],
            &dir.path().join("store"),
        );
        assert_eq!(output.status.code(), Some(0), "{}", show(&output));
        shards.push(junit);
    }
    let merged = dir.path().join("junit.xml");
    let output = epochal()
        .arg("merge")
        .args(&shards)
        .arg("--junit")
        .arg(&merged)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("4 cases, 0 failures, 0 errors"),
        "{}",
        show(&output)
    );
    let report =
        quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(&merged).unwrap())
            .unwrap();
    assert_eq!(report.test_suites.len(), 1, "one suite, merged");
    let mut got: Vec<String> = report.test_suites[0]
        .test_cases
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "first [truncation=current]",
            "first [truncation=kip-279]",
            "second [truncation=current]",
            "second [truncation=kip-279]"
        ]
    );

    // A missing or foreign input is named, and nothing is written.
    let not_junit = dir.path().join("not.xml");
    std::fs::write(&not_junit, "hello").unwrap();
    for bad in [dir.path().join("missing.xml"), not_junit] {
        let out = dir.path().join("never.xml");
        let output = epochal()
            .arg("merge")
            .arg(&shards[0])
            .arg(&bad)
            .arg("--junit")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{}", show(&output));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(&bad.display().to_string()),
            "{}",
            show(&output)
        );
        assert!(!out.exists());
    }
}
