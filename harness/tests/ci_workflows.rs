//! The workflow files in `ci/workflows/` call scripts in `ci/` that also run by
//! hand: every `bash ci/...` they name exists, the nightly and release
//! workflows run the gate on both runtimes, and the benchmarks run nightly and,
//! in their quick mode, in every CI run.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn workflow(name: &str) -> String {
    std::fs::read_to_string(root().join("ci/workflows").join(name)).unwrap()
}

/// The `ci/` scripts a workflow calls with `bash ci/NAME`.
fn scripts(text: &str) -> Vec<String> {
    text.split("bash ci/")
        .skip(1)
        .map(|rest| {
            rest.split(|c: char| c.is_whitespace() || c == '"')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn every_script_a_workflow_calls_exists() {
    for name in ["nightly.yml", "release.yml"] {
        let text = workflow(name);
        let called = scripts(&text);
        assert!(!called.is_empty(), "{name} calls no ci/ script");
        for script in called {
            let path = root().join("ci").join(&script);
            assert!(path.is_file(), "{name} calls ci/{script}, which is missing");
        }
    }
    // The nightly script runs the gate on both runtimes and the determinism
    // check; the release workflow gates on both runtimes.
    let nightly = std::fs::read_to_string(root().join("ci/nightly.sh")).unwrap();
    assert!(nightly.contains("ci/gate.sh process docker"), "{nightly}");
    assert!(nightly.contains("ci/determinism 5"), "{nightly}");
    assert!(nightly.contains("ci/campaigns.sh"), "{nightly}");
    assert!(nightly.contains("ci/fuzz.sh"), "{nightly}");
    assert!(workflow("nightly.yml").contains("EPOCHAL_SHARD: ${{ matrix.shard }}"));
    assert!(workflow("nightly.yml").contains("upload-artifact"));
    assert!(workflow("nightly.yml").contains("bash ci/merge.sh shards"));
    assert!(workflow("release.yml").contains("bash ci/gate.sh process docker"));
    assert!(workflow("release.yml").contains("needs: gate"));
    // The benchmarks and the power table: full size nightly (the benches
    // compared with the night before), not in every CI run, which keeps to
    // its 35 minutes (docs/benchmarks.md, "CI's own time").
    assert!(workflow("nightly.yml").contains("bash ci/bench.sh"));
    assert!(workflow("nightly.yml").contains("EPOCHAL_BENCH_PREVIOUS"));
    assert!(workflow("nightly.yml").contains("bash ci/power.sh"));
    // The mutation score, a slice a night.
    assert!(workflow("nightly.yml").contains("bash ci/mutants.sh"));
    let dev = std::fs::read_to_string(root().join("ci/dev.sh")).unwrap();
    assert!(!dev.contains("bash ci/bench.sh --quick"), "{dev}");
    // CI builds only the third-party systems it tests and gates (tansu,
    // noida): `bash ci/tools.sh` with no name would build every system
    // file's tool, nisshi's among them (about an hour of one core).
    assert!(dev.contains("bash ci/tools.sh tansu noida >"), "{dev}");
    assert!(!dev.contains("bash ci/tools.sh >"), "{dev}");
    // clippy lints the one build CI makes, functions held to 120 lines and
    // every warning an error (clippy.toml).
    assert!(
        dev.contains("export RUSTC_WORKSPACE_WRAPPER=$clippy_driver"),
        "{dev}"
    );
    assert!(
        dev.contains("-D__CLIPPY_HACKERY__clippy::too_many_lines__"),
        "{dev}"
    );
    assert!(dev.contains("-D__CLIPPY_HACKERY__warnings__"), "{dev}");
    assert!(
        dev.contains("cargo build --workspace --all-targets"),
        "{dev}"
    );
}

/// A plain YAML scalar may not contain ": " (the step name `this runner's
/// slice: gate ...` once made nightly.yml unparseable, so GitHub would not
/// have run it, ci/fuzz.sh included): such a value must be quoted. Checked
/// for `name:` and `run:` values, the ones written as free text.
#[test]
fn free_text_values_in_workflows_are_valid_yaml() {
    for name in ["nightly.yml", "release.yml"] {
        for (number, line) in workflow(name).lines().enumerate() {
            let item = line.trim_start().trim_start_matches("- ");
            for key in ["name: ", "run: "] {
                let Some(value) = item.strip_prefix(key) else {
                    continue;
                };
                let quoted = value.starts_with('"') || value.starts_with('\'');
                let block = value.starts_with('|') || value.starts_with('>');
                assert!(
                    quoted || block || !value.contains(": "),
                    "{name}:{}: quote this value, it contains \": \": {line}",
                    number + 1
                );
            }
        }
    }
}
