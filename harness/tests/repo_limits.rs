//! Limits the project keeps by a test rather than by hand: no Rust source or
//! test file over 800 lines in any crate (a file that outgrows it is split by
//! concept), and no README line over 100 characters.

use std::path::{Path, PathBuf};

const FILE_LINES_MAX: usize = 800;
const README_COLUMNS_MAX: usize = 100;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_rust_file_of_the_workspace_is_over_800_lines() {
    let mut files = Vec::new();
    for dir in [
        "broker/src",
        "broker/tests",
        "faults/src",
        "faults/tests",
        "faults/benches",
    ] {
        rust_files(&root().join(dir), &mut files);
    }
    for dir in ["harness/src", "harness/tests", "harness/benches"] {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 300, "found only {} files", files.len());
    let over: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            (lines > FILE_LINES_MAX).then(|| format!("{} ({lines} lines)", path.display()))
        })
        .collect();
    assert!(
        over.is_empty(),
        "over {FILE_LINES_MAX} lines (split by concept): {over:#?}"
    );
}

#[test]
fn no_readme_line_is_over_100_characters() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let over: Vec<String> = readme
        .lines()
        .enumerate()
        .filter(|(_, line)| line.chars().count() > README_COLUMNS_MAX)
        .map(|(i, line)| format!("README.md:{}: {} characters", i + 1, line.chars().count()))
        .collect();
    assert!(over.is_empty(), "{over:#?}");
}
