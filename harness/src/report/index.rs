//! The store's `index.html`: every run in the store, newest first, with its
//! suite, scenario, setting, verdict (beside a gate's expectation of it and
//! whether it was met), coverage and time, linking to its `report.html`
//! (or to its directory when it has none yet). One self-contained page —
//! inline CSS, no script, nothing fetched — so it opens from a file as well
//! as through `epochal serve`.
//!
//! It is rebuilt whole from the directory tree each time (after every run,
//! after a gate, at `epochal serve`'s start), never patched: the tree is the
//! truth, and a run deleted by hand simply drops out. Rebuilding reads one
//! small file per run (`results.json`) and never a history, so a store of
//! thousands of runs costs a directory walk. Parallel gate jobs and runs
//! write it at once, so it is written to a temporary file in the store and
//! renamed over the old one: a reader sees one whole page or the other.
//!
//! The walk never follows a symlink (`latest` would list its run twice, and a
//! link could loop) and never descends into a run directory (its `nodes/` is
//! the cluster's, not the store's).

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::html::escape;
use crate::checker::Coverage;
use crate::run_dir::{Expectation, RunDir};
use crate::store::{StoreError, utc_stamp};

/// The index's file name at the store's root.
pub const INDEX_FILE: &str = "index.html";

/// How deep under the store a run directory may be: the gate's runs are at
/// depth 4 (`suite/scenario/setting/stamp`); anything deeper is not ours.
const RUN_DEPTH_MAX: usize = 8;

/// A run's verdict as the index shows it: the checkers' three values, and
/// what stands in for one when `results.json` says nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum IndexVerdict {
    Valid,
    Unknown,
    Invalid,
    /// No `results.json`: the run is going on, was cut off, or failed before
    /// its check.
    NotChecked,
    /// A `results.json` that does not say valid, unknown or invalid.
    Unreadable,
}

impl IndexVerdict {
    pub fn label(self) -> &'static str {
        match self {
            IndexVerdict::Valid => "valid",
            IndexVerdict::Unknown => "unknown",
            IndexVerdict::Invalid => "invalid",
            IndexVerdict::NotChecked => "not checked",
            IndexVerdict::Unreadable => "unreadable",
        }
    }

    fn class(self) -> &'static str {
        match self {
            IndexVerdict::Valid => "valid",
            IndexVerdict::Unknown => "unknown",
            IndexVerdict::Invalid => "invalid",
            IndexVerdict::NotChecked => "unchecked",
            IndexVerdict::Unreadable => "unreadable",
        }
    }

    /// Reads `results.json`'s `verdict` and `coverage`, and nothing else of it.
    fn of(dir: &RunDir) -> (IndexVerdict, Option<Coverage>) {
        #[derive(serde::Deserialize)]
        struct Results {
            verdict: crate::checker::Verdict,
            #[serde(default)]
            coverage: Option<Coverage>,
        }
        let text = match std::fs::read(dir.results()) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return (IndexVerdict::NotChecked, None);
            }
            Err(_) => return (IndexVerdict::Unreadable, None),
        };
        match serde_json::from_slice::<Results>(&text) {
            Ok(Results { verdict, coverage }) => (
                match verdict {
                    crate::checker::Verdict::Valid => IndexVerdict::Valid,
                    // A run's verdict is never not-applicable (checker::check).
                    crate::checker::Verdict::Unknown | crate::checker::Verdict::NotApplicable => {
                        IndexVerdict::Unknown
                    }
                    crate::checker::Verdict::Invalid => IndexVerdict::Invalid,
                },
                coverage,
            ),
            Err(_) => (IndexVerdict::Unreadable, None),
        }
    }
}

/// A run's coverage in one cell: faults, the fewest client ops a fault
/// overlapped, writes acknowledged during faults and leader changes; `idle`
/// when some fault overlapped no op.
fn coverage_cell(coverage: Option<&Coverage>) -> (String, &'static str) {
    let Some(coverage) = coverage else {
        return ("—".into(), "");
    };
    let Some((fewest, _)) = coverage.ops_per_fault() else {
        return ("no fault".into(), "");
    };
    let n = coverage.faults.len();
    let mut cell = format!(
        "{n} fault{} · ≥{fewest} ops each · {} acked",
        if n == 1 { "" } else { "s" },
        coverage.acked_during_faults
    );
    if let Some(t) = &coverage.timeline {
        let _ = write!(cell, " · {} leader changes", t.leader_changes);
    }
    (cell, if fewest == 0 { "idle" } else { "" })
}

/// One run directory as the index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreRun {
    /// Relative to the store.
    pub path: PathBuf,
    /// The group's first component: a suite's name, or `adhoc`, `campaign`,
    /// `shrink`.
    pub suite: String,
    /// The group's middle: the scenario (a gate's), schedule or seed.
    pub scenario: String,
    /// The group's last component when it has three or more (the gate's
    /// setting directory); empty otherwise.
    pub setting: String,
    /// The run directory's own name, `20261130T130501Z-0`.
    pub stamp: String,
    pub verdict: IndexVerdict,
    /// What a gate expected of the run and whether it was met; `None` for a
    /// run no gate judged.
    pub expectation: Option<Expectation>,
    /// From results.json; `None` before the run was checked, or for a run
    /// checked before coverage was.
    pub coverage: Option<Coverage>,
    pub has_report: bool,
}

impl StoreRun {
    /// `2026-11-30 13:05:01`, or the stamp as it is when it is not one of ours.
    pub fn time(&self) -> String {
        parse_stamp(&self.stamp).map_or_else(|| self.stamp.clone(), |(t, _)| readable(t))
    }

    /// The link from the store's root: the report when there is one, else the
    /// directory (with its trailing slash, so relative links inside work).
    pub fn href(&self) -> String {
        let mut href = url_path(&self.path);
        href.push('/');
        if self.has_report {
            href.push_str(super::REPORT_FILE);
        }
        href
    }
}

/// `20261130T130501Z` (checked by [`parse_stamp`]) → `2026-11-30 13:05:01`.
fn readable(t: &str) -> String {
    format!(
        "{}-{}-{} {}:{}:{}",
        &t[0..4],
        &t[4..6],
        &t[6..8],
        &t[9..11],
        &t[11..13],
        &t[13..15]
    )
}

/// `20261130T130501Z-3` → (`20261130T130501Z`, 3).
fn parse_stamp(name: &str) -> Option<(&str, u64)> {
    let (time, n) = name.rsplit_once('-')?;
    let b = time.as_bytes();
    let shaped = b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit);
    Some((time, n.parse().ok()?)).filter(|_| shaped)
}

/// Every run directory under `store`, newest first (by the stamp each was
/// created with; ties by path). Unreadable subdirectories are skipped — a run
/// being deleted while we walk is not an error — but an unreadable store is.
pub fn scan(store: &Path) -> Result<Vec<StoreRun>, StoreError> {
    std::fs::read_dir(store).map_err(|source| StoreError {
        path: store.to_owned(),
        source,
    })?;
    let mut runs = Vec::new();
    let mut pending = vec![(PathBuf::new(), 0usize)];
    while let Some((relative, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(store.join(&relative)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            // `file_type` does not follow symlinks: `latest` and any other
            // link are left out here.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if !is_dir || name.as_bytes().starts_with(b".") {
                continue;
            }
            let child = relative.join(&name);
            let dir = RunDir::open(store.join(&child));
            if dir.is_run() {
                runs.push(store_run(child, &dir));
            } else if depth + 1 < RUN_DEPTH_MAX {
                pending.push((child, depth + 1));
            }
        }
    }
    runs.sort_by(|a, b| {
        let (ka, kb) = (parse_stamp(&a.stamp), parse_stamp(&b.stamp));
        // Ours first, newest first; a name of our shape sorts as it reads.
        kb.is_some()
            .cmp(&ka.is_some())
            .then(kb.cmp(&ka))
            .then(a.path.cmp(&b.path))
    });
    Ok(runs)
}

fn store_run(path: PathBuf, dir: &RunDir) -> StoreRun {
    let parts: Vec<String> = path
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let (group, stamp) = parts.split_at(parts.len() - 1);
    let (suite, scenario, setting) = match group {
        [] => (String::new(), String::new(), String::new()),
        [suite] => (suite.clone(), String::new(), String::new()),
        [suite, scenario] => (suite.clone(), scenario.clone(), String::new()),
        [suite, middle @ .., setting] => (suite.clone(), middle.join("/"), setting.clone()),
    };
    let (verdict, coverage) = IndexVerdict::of(dir);
    StoreRun {
        suite,
        scenario,
        setting,
        stamp: stamp[0].clone(),
        verdict,
        expectation: dir.read_expectation(),
        coverage,
        has_report: dir.path().join(super::REPORT_FILE).is_file(),
        path,
    }
}

/// The page for `runs` (as [`scan`] gives them); `store` is named in its
/// heading as given.
pub fn render(store: &Path, runs: &[StoreRun]) -> String {
    let mut html = String::with_capacity(2048 + runs.len() * 400);
    let title = format!("epochal store {}", store.display());
    let count = |v: IndexVerdict| runs.iter().filter(|r| r.verdict == v).count();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let _ = write!(html, "<p class=\"summary\">{} runs:", runs.len());
    for v in [
        IndexVerdict::Invalid,
        IndexVerdict::Unknown,
        IndexVerdict::Valid,
        IndexVerdict::NotChecked,
        IndexVerdict::Unreadable,
    ] {
        let n = count(v);
        if n > 0 {
            let _ = write!(
                html,
                " <span class=\"verdict {}\">{n} {}</span>",
                v.class(),
                v.label()
            );
        }
    }
    let judged: Vec<&Expectation> = runs.iter().filter_map(|r| r.expectation.as_ref()).collect();
    if !judged.is_empty() {
        let missed = judged.iter().filter(|e| !e.met).count();
        let _ = write!(
            html,
            "; gate runs: <span class=\"met\">{} met their expectation</span>",
            judged.len() - missed
        );
        if missed > 0 {
            let _ = write!(html, ", <span class=\"missed\">{missed} missed it</span>");
        }
    }
    let _ = writeln!(
        html,
        ". Written {} UTC.</p>",
        readable(&utc_stamp(SystemTime::now()))
    );
    if runs.is_empty() {
        html.push_str("<p>No runs yet.</p>\n");
    } else {
        html.push_str(
            "<table>\n<thead><tr><th>time (UTC)</th><th>suite</th><th>scenario</th>\
             <th>setting</th><th>verdict</th><th>expected</th><th>coverage</th><th>run</th>\
             </tr></thead>\n<tbody>\n",
        );
        for run in runs {
            // A verdict a gate expected is drawn as met, not in its own
            // colour: an expected `invalid` (a bug reproduced) is no regression.
            let (expected, met_class) = match &run.expectation {
                None => (String::new(), ""),
                Some(e) if e.met => (
                    format!("{} <span class=\"met\">met</span>", escape(&e.expected)),
                    " expected-met",
                ),
                Some(e) => (
                    format!(
                        "{} <span class=\"missed\" title=\"{}\">missed</span>",
                        escape(&e.expected),
                        escape(&e.failures.join("; "))
                    ),
                    " expected-missed",
                ),
            };
            let (coverage, idle) = coverage_cell(run.coverage.as_ref());
            let _ = writeln!(
                html,
                "<tr class=\"{class}{met_class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td class=\"verdict {class}\">{}</td><td class=\"expected\">{expected}</td>\
                 <td class=\"coverage {idle}\">{}</td>\
                 <td><a href=\"{}\" title=\"{}\">{}</a></td></tr>",
                escape(&run.time()),
                escape(&run.suite),
                escape(&run.scenario),
                escape(&run.setting),
                run.verdict.label(),
                escape(&coverage),
                escape(&run.href()),
                escape(&run.path.to_string_lossy()),
                if run.has_report { "report" } else { "files" },
                class = run.verdict.class(),
            );
        }
        html.push_str("</tbody>\n</table>\n");
    }
    html.push_str("</body>\n</html>\n");
    html
}

const STYLE: &str = "\
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.3em}\
table{border-collapse:collapse}\
th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:left;white-space:nowrap}\
th{background:#f4f4f4;position:sticky;top:0}\
tbody tr:hover{background:#f8f8ff}\
.verdict{font-weight:600;border-radius:3px;padding:.1em .4em}\
.verdict.valid{color:#14532d;background:#dcfce7}\
.verdict.invalid{color:#7f1d1d;background:#fee2e2}\
.verdict.unknown{color:#78350f;background:#fef3c7}\
.verdict.unchecked,.verdict.unreadable{color:#444;background:#eee}\
tr.expected-met .verdict{background:#f1f5f9;color:#334155;outline:1px solid #94a3b8}\
.met{color:#14532d;font-weight:600}.missed{color:#7f1d1d;font-weight:600}\
td.coverage{color:#555}td.coverage.idle{color:#92400e}";

/// Rebuilds `<store>/index.html` from the store's tree and returns its path.
pub fn write_store_index(store: &Path) -> Result<PathBuf, StoreError> {
    let runs = scan(store)?;
    let html = render(store, &runs);
    let path = store.join(INDEX_FILE);
    write_atomically(&path, html.as_bytes())?;
    Ok(path)
}

/// [`write_store_index`], a failure told on stderr and otherwise ignored: the
/// index is a convenience, never a reason for a run or a gate to fail.
pub fn update_store_index(store: &Path) {
    if let Err(e) = write_store_index(store) {
        eprintln!("epochal: warning: the store's index was not updated: {e}");
    }
}

/// Writes `path` through a temporary file beside it (same directory, same
/// file system) and a rename, so concurrent writers and readers each see a
/// whole file. The temporary name is unique per process and call; it starts
/// with a dot so the walk and the listings skip it.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or(OsStr::new("index.html"));
    let temporary = dir.join(format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let error = |path: &Path| {
        let path = path.to_owned();
        move |source| StoreError { path, source }
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(error(&temporary))
        .and_then(|()| std::fs::rename(&temporary, path).map_err(error(path)));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// A relative path as a URL path: each component's bytes percent-encoded
/// except the unreserved characters, joined by `/`. A name with `#`, `?`,
/// `%` or a space then still names its directory.
pub fn url_path(path: &Path) -> String {
    path.iter()
        .map(|c| url_component(c.as_bytes()))
        .collect::<Vec<_>>()
        .join("/")
}

/// One path component percent-encoded (RFC 3986: all but unreserved).
pub fn url_component(bytes: &[u8]) -> String {
    const COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::percent_encode(bytes, COMPONENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_run() -> StoreRun {
        StoreRun {
            path: PathBuf::new(),
            suite: String::new(),
            scenario: String::new(),
            setting: String::new(),
            stamp: String::new(),
            verdict: IndexVerdict::NotChecked,
            expectation: None,
            coverage: None,
            has_report: false,
        }
    }

    #[test]
    fn stamps_read_as_times_and_others_stay_as_they_are() {
        let run = |stamp: &str| StoreRun {
            stamp: stamp.into(),
            ..empty_run()
        };
        assert_eq!(run("20261130T130501Z-0").time(), "2026-11-30 13:05:01");
        assert_eq!(run("20261130T130501Z").time(), "20261130T130501Z");
        assert_eq!(run("2026113XT130501Z-1").time(), "2026113XT130501Z-1");
        assert_eq!(
            parse_stamp("20261130T130501Z-12"),
            Some(("20261130T130501Z", 12))
        );
    }

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(url_component(b"a b#?%/.."), "a%20b%23%3F%25%2F..");
    }
}
