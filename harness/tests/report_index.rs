//! The store's `index.html` (report/index.rs): every run directory in the
//! store, in the gate's, ad-hoc and campaign layouts, listed newest first with
//! its suite, scenario, setting and verdict and a link that leads to it; odd
//! names escaped; the page valid HTML; written whole under concurrent
//! writers; and written by `epochal run` and `epochal gate` themselves, even
//! when their runs fail.

use crate::common::html;

use std::path::{Path, PathBuf};
use std::process::Command;

use epochal::report::index::{INDEX_FILE, write_store_index};

/// A run directory as the harness leaves one: a history, then maybe its
/// results and report.
fn fake_run(store: &Path, relative: &str, results: Option<&str>, report: bool) -> PathBuf {
    let dir = store.join(relative);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("history.jsonl"), "").unwrap();
    if let Some(results) = results {
        std::fs::write(dir.join("results.json"), results).unwrap();
    }
    if report {
        std::fs::write(dir.join("report.html"), "<!DOCTYPE html><title>r</title>").unwrap();
    }
    dir
}

fn verdict(v: &str) -> String {
    format!(r#"{{"verdict": "{v}", "results": []}}"#)
}

/// The table's rows as the DOM holds them: each cell's text, then the link's
/// text and target.
fn rows(page: &html::Page) -> Vec<(Vec<String>, String)> {
    let tbody = html::elements(&page.document, "tbody");
    assert_eq!(tbody.len(), 1, "one table body");
    html::elements(&tbody[0], "tr")
        .iter()
        .map(|tr| {
            let cells = html::elements(tr, "td").iter().map(html::text).collect();
            let links = html::elements(tr, "a");
            assert_eq!(links.len(), 1, "one link per row");
            (
                cells,
                html::attr(&links[0], "href").expect("the link has a target"),
            )
        })
        .collect()
}

/// Where an href of the index leads, as a browser would resolve it against
/// the store's root (percent-decoded, byte for byte).
fn target(store: &Path, href: &str) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(href).collect();
    store.join(std::ffi::OsStr::from_bytes(&decoded))
}

fn read_index(store: &Path) -> String {
    std::fs::read_to_string(store.join(INDEX_FILE)).unwrap()
}

/// Runs in every layout the store holds — the gate's, ad-hoc, campaigns' —
/// with every kind of results; returns the high-watermark run and the
/// unchecked one.
fn fake_runs(store: &Path) -> (PathBuf, PathBuf) {
    let hw = fake_run(
        store,
        "bugs/kip-101-scenario-1/truncation-high-watermark/20261130T130501Z-0",
        Some(&verdict("invalid")),
        true,
    );
    fake_run(
        store,
        "bugs/kip-101-scenario-1/truncation-current/20261130T130502Z-0",
        Some(&verdict("valid")),
        true,
    );
    fake_run(
        store,
        "adhoc/my-schedule/20261201T090000Z-0",
        Some(&verdict("unknown")),
        false,
    );
    // Same second, the later `-<n>`: newer.
    let unchecked = fake_run(store, "adhoc/my-schedule/20261201T090000Z-1", None, false);
    fake_run(
        store,
        "campaign/seed-7/20261129T000000Z-0",
        Some("{not json"),
        false,
    );
    fake_run(
        store,
        "guarantees/campaign-seed-3/default/20261128T000000Z-0",
        Some(&verdict("valid")),
        false,
    );
    (hw, unchecked)
}

/// What is not a run of the store: `latest` (its run would show twice), a
/// dot-directory, a history under a run's (`hw`'s) `nodes/`, a group with no
/// run, a file.
fn fake_non_runs(store: &Path, hw: &Path) {
    std::os::unix::fs::symlink("adhoc/my-schedule/20261201T090000Z-1", store.join("latest"))
        .unwrap();
    fake_run(
        store,
        ".trash/x/20261202T000000Z-0",
        Some(&verdict("valid")),
        false,
    );
    fake_run(
        hw,
        "nodes/b1/20261203T000000Z-0",
        Some(&verdict("valid")),
        false,
    );
    std::fs::create_dir_all(store.join("adhoc/never-ran")).unwrap();
    std::fs::write(store.join("junit.xml"), "<testsuites/>").unwrap();
}

/// Every run, newest first (the same second's later `-<n>` first), with its
/// time, suite, scenario, setting, verdict and what its link opens.
fn assert_rows_newest_first(rows: &[(Vec<String>, String)]) {
    let cells: Vec<Vec<&str>> = rows
        .iter()
        .map(|(cells, _)| cells.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(
        cells,
        vec![
            vec![
                "2026-12-01 09:00:00",
                "adhoc",
                "my-schedule",
                "",
                "not checked",
                "",
                "—",
                "files"
            ],
            vec![
                "2026-12-01 09:00:00",
                "adhoc",
                "my-schedule",
                "",
                "unknown",
                "",
                "—",
                "files"
            ],
            vec![
                "2026-11-30 13:05:02",
                "bugs",
                "kip-101-scenario-1",
                "truncation-current",
                "valid",
                "",
                "—",
                "report"
            ],
            vec![
                "2026-11-30 13:05:01",
                "bugs",
                "kip-101-scenario-1",
                "truncation-high-watermark",
                "invalid",
                "",
                "—",
                "report"
            ],
            vec![
                "2026-11-29 00:00:00",
                "campaign",
                "seed-7",
                "",
                "unreadable",
                "",
                "—",
                "files"
            ],
            vec![
                "2026-11-28 00:00:00",
                "guarantees",
                "campaign-seed-3",
                "default",
                "valid",
                "",
                "—",
                "files"
            ],
        ]
    );
}

/// Each link leads where it says: the report when there is one, else the
/// directory (with its slash, so its own relative links work).
fn assert_links_lead_to_the_runs(store: &Path, rows: &[(Vec<String>, String)], unchecked: &Path) {
    let hrefs: Vec<&str> = rows.iter().map(|(_, href)| href.as_str()).collect();
    assert_eq!(hrefs[0], "adhoc/my-schedule/20261201T090000Z-1/");
    assert_eq!(target(store, hrefs[0]), unchecked);
    assert_eq!(
        hrefs[3],
        "bugs/kip-101-scenario-1/truncation-high-watermark/20261130T130501Z-0/report.html"
    );
    for href in &hrefs {
        let to = target(store, href);
        assert!(
            if href.ends_with('/') {
                to.is_dir()
            } else {
                to.is_file()
            },
            "{href} leads nowhere"
        );
        assert!(
            !href.starts_with('/'),
            "{href}: relative, so the index opens from a file too"
        );
    }
}

/// The verdict is coloured: its cell carries the verdict's class, and the
/// page's style gives that class a colour.
fn assert_verdicts_coloured(page: &html::Page) {
    let verdict_cells: Vec<String> = html::elements(&page.document, "td")
        .iter()
        .filter_map(|td| html::attr(td, "class"))
        .collect();
    assert!(
        verdict_cells.contains(&"verdict invalid".to_owned()),
        "{verdict_cells:?}"
    );
    assert!(
        verdict_cells.contains(&"verdict valid".to_owned()),
        "{verdict_cells:?}"
    );
    let style = html::text(&html::elements(&page.document, "style")[0]);
    assert!(style.contains(".verdict.invalid{color:"), "{style}");
}

/// Self-contained: nothing fetched.
fn assert_self_contained(page: &html::Page) {
    for tag in ["script", "link", "img", "iframe"] {
        assert!(
            html::elements(&page.document, tag).is_empty(),
            "a <{tag}> in the index"
        );
    }
}

#[test]
fn index_lists_every_run_newest_first_with_its_verdict_and_a_link_that_leads_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    let (hw, unchecked) = fake_runs(store);
    fake_non_runs(store, &hw);

    let written = write_store_index(store).unwrap();
    assert_eq!(written, store.join("index.html"));
    let text = read_index(store);
    let page = html::assert_parses(&text);
    let rows = rows(&page);
    assert_rows_newest_first(&rows);
    assert_links_lead_to_the_runs(store, &rows, &unchecked);
    assert_verdicts_coloured(&page);
    assert_self_contained(&page);
}

/// A gate's run: its results with coverage, and what the gate expected.
fn gate_run(store: &Path, relative: &str, verdict: &str, expected: &str, met: bool) {
    let coverage = r#"{"faults": [{"history_index": 3, "verb": "crash", "nodes": ["b1"],
        "at_ms": 100, "window_ms": 900, "ended_by": "restart", "in_flight": 1,
        "invoked": 4, "acked": 3}], "acked_during_faults": 3, "timeline": {
        "leader_changes": 2, "isr_shrinks": 1, "isr_expands": 1, "unclean_elections": 0},
        "truncations": 0, "partitions_unwritten_during_faults": []}"#;
    let results = format!(r#"{{"verdict": "{verdict}", "results": [], "coverage": {coverage}}}"#);
    let dir = fake_run(store, relative, Some(&results), true);
    let failures = if met {
        "[]"
    } else {
        r#"["expected valid, got invalid"]"#
    };
    std::fs::write(
        dir.join("expectation.json"),
        format!(r#"{{"expected": "{expected}", "met": {met}, "failures": {failures}}}"#),
    )
    .unwrap();
}

#[test]
fn index_shows_a_gate_runs_expectation_beside_its_verdict_and_its_coverage() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    gate_run(
        store,
        "bugs/kip-101-scenario-1/truncation-high-watermark/20261130T130503Z-0",
        "invalid",
        "invalid (lost-acknowledged-write)",
        true,
    );
    gate_run(
        store,
        "bugs/kip-101-scenario-1/truncation-current/20261130T130502Z-0",
        "invalid",
        "valid",
        false,
    );
    fake_run(
        store,
        "adhoc/s/20261130T130501Z-0",
        Some(&verdict("valid")),
        false,
    );
    write_store_index(store).unwrap();
    let text = read_index(store);
    let page = html::assert_parses(&text);
    let rows = rows(&page);
    let cells: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|(c, _)| (c[4].as_str(), c[5].as_str(), c[6].as_str()))
        .collect();
    assert_eq!(
        cells,
        [
            (
                "invalid",
                "invalid (lost-acknowledged-write) met",
                "1 fault · ≥5 ops each · 3 acked · 2 leader changes"
            ),
            (
                "invalid",
                "valid missed",
                "1 fault · ≥5 ops each · 3 acked · 2 leader changes"
            ),
            ("valid", "", "—"),
        ]
    );
    // An expected invalid is drawn as met, not as red as a regression.
    let classes: Vec<String> = html::elements(&page.document, "tr")
        .iter()
        .filter_map(|tr| html::attr(tr, "class"))
        .collect();
    assert_eq!(
        classes,
        ["invalid expected-met", "invalid expected-missed", "valid"]
    );
    let style = html::text(&html::elements(&page.document, "style")[0]);
    assert!(style.contains("tr.expected-met .verdict{"), "{style}");
    let summary = html::text(&html::elements(&page.document, "p")[0]);
    assert!(
        summary.contains("gate runs: 1 met their expectation, 1 missed it"),
        "{summary}"
    );
}

#[test]
fn index_escapes_odd_names_in_text_and_links() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    let odd = r#"<b>bold<i> & "q" 'a' #1 ?x=1 %41 ü"#;
    let dir = fake_run(
        store,
        &format!("adhoc/{odd}/20261130T130501Z-0"),
        Some(&verdict("invalid")),
        true,
    );
    write_store_index(store).unwrap();
    let text = read_index(store);
    let page = html::assert_parses(&text);
    // The name is text, not markup: no element came of it, and it reads back
    // exactly.
    assert!(html::elements(&page.document, "b").is_empty(), "{text}");
    assert!(html::elements(&page.document, "i").is_empty(), "{text}");
    assert!(!text.contains("<b>"), "{text}");
    let rows = rows(&page);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0[2], odd);
    // The link still names that directory: `#`, `?`, `%` and the space
    // encoded, so a browser neither cuts it short nor decodes `%41` to `A`.
    let href = &rows[0].1;
    for raw in ['#', '?', ' ', '"', '<'] {
        assert!(!href.contains(raw), "{href} holds a raw {raw:?}");
    }
    assert_eq!(target(store, href), dir.join("report.html"));
}

#[test]
fn index_of_an_empty_store_says_so_and_of_a_missing_store_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    write_store_index(tmp.path()).unwrap();
    let text = read_index(tmp.path());
    let page = html::assert_parses(&text);
    assert!(html::elements(&page.document, "table").is_empty());
    assert!(
        html::text(&page.document).contains("No runs yet."),
        "{text}"
    );

    let missing = tmp.path().join("no-such-store");
    let error = write_store_index(&missing).unwrap_err();
    assert_eq!(error.path, missing);
    assert!(
        !missing.exists(),
        "writing the index does not create a store"
    );
}

/// Parallel gate jobs and runs rewrite the index at once: a reader always
/// sees a whole page, and no temporary file is left behind.
#[test]
fn index_written_by_many_writers_at_once_is_always_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().to_owned();
    for i in 0..50 {
        fake_run(
            &store,
            &format!("adhoc/s{i}/20261130T130501Z-0"),
            Some(&verdict("valid")),
            false,
        );
    }
    write_store_index(&store).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (store, done) = (store.clone(), done.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let text = read_index(&store);
                assert!(
                    text.ends_with("</html>\n"),
                    "a torn index: {} bytes",
                    text.len()
                );
                assert_eq!(text.matches("<tr class=").count(), 50);
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    write_store_index(&store).unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().expect("every read saw a whole page");
    assert!(reads > 0);
    let left: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// A store of thousands of runs costs a walk and a small read per run; the
/// time is printed (this machine is shared, so it is not asserted).
#[test]
fn index_of_two_thousand_runs_lists_them_all() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..2000 {
        let results = (i % 3 != 0).then(|| verdict(["valid", "invalid", "unknown"][i % 3]));
        fake_run(
            tmp.path(),
            &format!("suite/scenario-{}/setting/20261130T{:06}Z-0", i % 40, i),
            results.as_deref(),
            i % 2 == 0,
        );
    }
    let started = std::time::Instant::now();
    write_store_index(tmp.path()).unwrap();
    println!("index of 2000 runs written in {:?}", started.elapsed());
    let text = read_index(tmp.path());
    assert_eq!(text.matches("<tr class=").count(), 2000);
    assert_eq!(text.matches(r#"<tr class="unchecked">"#).count(), 667);
}

fn epochal() -> Command {
    Command::new(env!("CARGO_BIN_EXE_epochal"))
}

fn schedule() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/schedules/kip-101-scenario-1.toml")
}

/// `epochal run` updates the index when its run ends, here a run that could
/// not start its cluster (no etcd): its directory, kept with its history, is
/// listed as not checked.
#[test]
fn a_run_that_ends_updates_the_index_even_when_it_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let output = epochal()
        .arg("run")
        .arg(schedule())
        .args(["--quiet", "--etcd", "/nonexistent/etcd", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let page = html::assert_parses(&read_index(&store));
    let rows = rows(&page);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[0].0[1..5],
        ["adhoc", "kip-101-scenario-1", "", "not checked"]
    );
    assert!(target(&store, &rows[0].1).join("history.jsonl").is_file());
}

/// `epochal gate` updates the index at its end: the case's run is listed
/// under its suite, scenario and setting.
#[test]
fn a_gate_updates_the_index_at_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let suite = tmp.path().join("mine.toml");
    std::fs::write(
        &suite,
        format!(
            "[[scenario]]\nname = \"kip-101-scenario-1\"\nschedule = {:?}\n\n\
             [[scenario.setting]]\nset = [\"truncation=high-watermark\"]\nexpect = \"invalid\"\n",
            schedule().display().to_string()
        ),
    )
    .unwrap();
    let output = epochal()
        .arg("gate")
        .arg(&suite)
        .args(["--etcd", "/nonexistent/etcd", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let page = html::assert_parses(&read_index(&store));
    let rows = rows(&page);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[0].0[1..5],
        [
            "mine",
            "kip-101-scenario-1",
            "truncation-high-watermark",
            "not checked"
        ]
    );
}
