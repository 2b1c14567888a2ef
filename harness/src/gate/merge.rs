//! `epochal merge`: one JUnit report from the reports of a sharded gate or
//! campaign run (`--shard I/N` on N runners), so CI shows a night's work as
//! one set of cases. Suites of the same name become one suite, their cases
//! in the order the inputs give them; the counts are recomputed from the
//! cases, never trusted from the inputs.

use std::path::{Path, PathBuf};

use quick_junit::{Report, TestSuite};

/// A report that could not be read, named by its file.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a JUnit report: {source}", path.display())]
    NotJunit {
        path: PathBuf,
        #[source]
        source: quick_junit::DeserializeError,
    },
}

/// Merges the reports at `paths` into one named `name`.
pub fn merge(name: &str, paths: &[PathBuf]) -> Result<Report, MergeError> {
    let mut suites: Vec<TestSuite> = Vec::new();
    for path in paths {
        for suite in read(path)?.test_suites {
            let at = match suites.iter().position(|s| s.name == suite.name) {
                Some(at) => at,
                None => {
                    suites.push(TestSuite::new(suite.name.clone()));
                    suites.len() - 1
                }
            };
            suites[at].add_test_cases(suite.test_cases);
        }
    }
    let mut report = Report::new(name);
    report.add_test_suites(suites);
    Ok(report)
}

fn read(path: &Path) -> Result<Report, MergeError> {
    let text = std::fs::read_to_string(path).map_err(|source| MergeError::Read {
        path: path.to_owned(),
        source,
    })?;
    Report::deserialize_from_str(&text).map_err(|source| MergeError::NotJunit {
        path: path.to_owned(),
        source,
    })
}
