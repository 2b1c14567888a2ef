//! The run report (issue [report]) of KIP-101 scenario 1 on
//! `truncation=high-watermark`, the run that loses acknowledged value 2: the
//! real binary writes `report.html`, html5ever parses it without an error,
//! and Debian's headless Chromium loads it, runs its script and hands back
//! the DOM it built and a screenshot. From that DOM: the lost value is
//! highlighted in the final-log view, and the crash of the leader (b1) is a
//! shaded interval of the timeline that starts at the crash and runs to b1's
//! start.

use crate::common;
use crate::common::html;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::scenario;
use epochal::history::OpType;

/// Chromium's whole run, start to exit, is bounded by this.
const CHROMIUM_DEADLINE: Duration = Duration::from_secs(120);

/// Runs headless Chromium on `page` with `args`, its profile in `profile`;
/// returns stdout. Killed and failed past the deadline.
fn chromium(page: &Path, profile: &Path, args: &[String]) -> String {
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            // Nothing but the file: no component updates, no field trials.
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium (Debian's package) runs; ci/dev.sh installs it");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium exited {status}");
            break;
        }
        if started.elapsed() > CHROMIUM_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {CHROMIUM_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

fn by_class(
    root: &markup5ever_rcdom::Handle,
    tag: &str,
    class: &str,
) -> Vec<markup5ever_rcdom::Handle> {
    html::elements(root, tag)
        .into_iter()
        .filter(|e| html::attr(e, "class").is_some_and(|c| c.split(' ').any(|c| c == class)))
        .collect()
}

fn number(node: &markup5ever_rcdom::Handle, name: &str) -> f64 {
    html::attr(node, name).unwrap().parse().unwrap()
}

/// What the DOM of the report must show, whoever built it.
fn assert_report_shows_the_loss(
    document: &markup5ever_rcdom::Handle,
    crash_ns: u64,
    start_ns: u64,
    end_ns: u64,
) {
    // The final-log view: a row marked lost, for value 2 at offset 1.
    let logs: Vec<_> = by_class(document, "table", "log");
    assert_eq!(logs.len(), 1, "one partition, one log table");
    let lost = by_class(&logs[0], "tr", "lost");
    assert_eq!(lost.len(), 1, "exactly the one lost row");
    assert_eq!(html::attr(&lost[0], "data-value").as_deref(), Some("2"));
    let row = html::text(&lost[0]);
    assert!(row.starts_with('1'), "at offset 1: {row}");
    assert!(
        row.contains("lost") && row.contains("acknowledged 2"),
        "{row}"
    );

    // The timeline: b1's crash shaded from the crash to b1's start.
    let timeline: Vec<_> = html::elements(document, "svg")
        .into_iter()
        .filter(|e| html::attr(e, "id").as_deref() == Some("timeline"))
        .collect();
    assert_eq!(timeline.len(), 1);
    let crashes: Vec<_> = by_class(&timeline[0], "rect", "fault-crash")
        .into_iter()
        .filter(|r| html::attr(r, "data-nodes").as_deref() == Some("b1"))
        .collect();
    assert_eq!(crashes.len(), 1, "b1 crashed once");
    let (x, width) = (number(&crashes[0], "x"), number(&crashes[0], "width"));
    // The axis: 150 px of labels, then 1100 px for the history's length.
    let at = |ns: u64| 150.0 + 1100.0 * ns as f64 / end_ns as f64;
    assert!(
        (x - at(crash_ns)).abs() < 1.0,
        "starts at the crash: x {x}, crash at {}",
        at(crash_ns)
    );
    assert!(
        (x + width - at(start_ns)).abs() < 1.0,
        "ends at b1's start: {}",
        x + width
    );
    assert!(width > 100.0, "b1 was down for most of the run: {width} px");
}

#[test]
fn cluster_report_of_kip_101_shows_the_lost_value_and_the_shaded_crash_in_chromium() {
    let run = scenario::run_truncation(
        "kip-101-scenario-1.toml",
        "high-watermark",
        &["unclean_leader_election = false"],
        1,
    );
    let page = run.dir.join("report.html");
    let text = std::fs::read_to_string(&page).expect("the run wrote report.html");
    assert!(
        !text.contains("http://") && !text.contains("https://"),
        "self-contained: no URL to fetch"
    );

    // When b1 crashed, and when it started again (its completion).
    let time_of = |f: &str, node: &str| {
        run.nemesis_ops()
            .find(|op| op.f() == f && op.value()["nodes"] == serde_json::json!([node]))
            .map(|op| op.time_ns)
            .unwrap_or_else(|| panic!("{f} {node} in the history"))
    };
    let crash_invoke = run
        .ops
        .iter()
        .rev()
        .find(|op| op.f() == "crash" && op.kind == OpType::Invoke && op.value()["target"] == "b1")
        .unwrap()
        .time_ns;
    assert!(time_of("crash", "b1") >= crash_invoke);
    let start = time_of("start", "b1");
    let end = run.ops.last().unwrap().time_ns;

    // As written: html5ever finds no parse error, and the DOM shows it all.
    let parsed = html::assert_parses(&text);
    assert_report_shows_the_loss(&parsed.document, crash_invoke, start, end);

    // As a browser builds it, script run: the same, and a screenshot.
    let profile = tempfile::tempdir().unwrap();
    let dumped = chromium(&page, profile.path(), &["--dump-dom".into()]);
    let browser = html::parse(&dumped);
    assert_report_shows_the_loss(&browser.document, crash_invoke, start, end);
    let loaded = html::elements(&browser.document, "body")
        .first()
        .and_then(|b| html::attr(b, "data-load-ms"));
    assert!(
        loaded.is_some(),
        "the page's script ran to its load handler"
    );

    let shot = run.dir.join("report.png");
    chromium(
        &page,
        profile.path(),
        &[
            "--window-size=1400,1600".into(),
            format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a real screenshot: {} bytes",
        png.len()
    );
    // Kept where a person can look at it after the test.
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-kip-101-high-watermark.png");
    std::fs::copy(&shot, &keep).unwrap();
    println!("screenshot: {}", keep.display());
}
