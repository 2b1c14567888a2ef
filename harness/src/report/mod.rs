//! Seeing a run (issue [report]): `report.html` in every run directory, one
//! self-contained page (inline CSS, JS and SVG; nothing fetched) drawn from
//! the same files the checkers read — the history, etcd's timeline, every
//! replica's log and leader-epoch file, and the checkers' report — plus the
//! store's `index.html` (index.rs) and `epochal serve` (serve.rs).
//!
//! The page is drawn here, in Rust, as static SVG and tables, so what it
//! shows is in the DOM whether or not a script runs; the inline script only
//! adds the inspector (an op's JSON on click). Large histories are
//! aggregated past a bound, never drawn op by op, so a 100,000-op run's page
//! stays small enough to load in a browser in well under three seconds.

mod coverage;
mod etcd;
pub mod html;
pub mod index;
mod logs;
mod rates;
pub mod serve;
mod timeline;
mod verdict;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;

use crate::checker::{Report, RunData};
use crate::history::Process;
use crate::run_dir::{RunDir, RunEnd};
use crate::store::StoreError;

use html::{Axis, escape, script_json};

/// The report's file name inside a run directory.
pub const REPORT_FILE: &str = "report.html";

/// Writes `report.html` into the run's directory and returns its path. The
/// page is written to a temporary name and renamed, so a reader (a browser
/// on `epochal serve`) never sees half a page.
pub fn write(
    dir: &RunDir,
    run: &RunData,
    report: &Report,
    end: &RunEnd,
) -> Result<PathBuf, StoreError> {
    let html = render(run, report, end, dir.read_clock());
    let path = dir.path().join(REPORT_FILE);
    let temporary = dir
        .path()
        .join(format!(".{REPORT_FILE}.{}", std::process::id()));
    let error = |path: &PathBuf| {
        let path = path.clone();
        move |source| StoreError { path, source }
    };
    std::fs::write(&temporary, html).map_err(error(&temporary))?;
    std::fs::rename(&temporary, &path).map_err(error(&path))?;
    Ok(path)
}

/// The whole page. `clock`: `clock.json`'s wall-clock zero, when the run
/// wrote one.
pub fn render(run: &RunData, report: &Report, end: &RunEnd, clock: Option<u64>) -> String {
    let history_end = run.history.last().map_or(0, |op| op.time_ns);
    let axis = Axis::new(history_end);
    let spans = timeline::spans(&run.history);
    let faults = timeline::fault_intervals(&spans, history_end);
    let named = verdict::all_named_ops(report);
    let empty = crate::observe::timeline::Timeline::default();
    let etcd_timeline = run.timeline.as_ref().unwrap_or(&empty);
    let clock = etcd::RevisionClock::new(run, etcd_timeline, etcd::wall_zero_ms(run, clock));
    let etcd_lanes = etcd::lanes(etcd_timeline, &clock, &axis, history_end);
    let timeline_svg = timeline::svg(
        &spans,
        &faults,
        &axis,
        history_end,
        &named,
        (etcd_lanes.0, &etcd_lanes.1),
    );

    let title = std::fs::canonicalize(&run.dir)
        .unwrap_or_else(|_| run.dir.clone())
        .display()
        .to_string();
    let mut page = String::with_capacity(64 * 1024);
    let _ = write!(
        page,
        r##"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>epochal: {verdict} — {title}</title><style>{STYLE}{fault_style}</style></head>
<body><header><h1><span class="verdict {verdict}" id="verdict">{verdict}</span> {title}</h1>{summary}<nav><a href="#checks">checks</a> <a href="#coverage">coverage</a> <a href="#timeline-section">timeline</a> <a href="#rates">throughput and latency</a> <a href="#logs">final logs</a> <a href="#etcd">etcd</a></nav></header>
<main><section id="checks"><h2>Checks</h2>{checks}</section>
<section id="coverage"><h2>Coverage</h2><p>Where the faults landed: each fault's window runs from its invoke to the next nemesis op (its undo, or the next fault); a fault no client op overlapped could not have broken anything.</p>{coverage}</section>
<section id="timeline-section"><h2>Timeline</h2><p class="legend"><span class="swatch ok"></span> ok <span class="swatch fail"></span> fail <span class="swatch info"></span> info (indefinite) <span class="swatch open"></span> never completed <span class="swatch nemesis"></span> fault op <span class="swatch fault"></span> fault in force; click an op for its JSON. {aggregate}</p><div class="scroll">{timeline_svg}</div></section>
<section id="rates"><h2>Throughput and latency</h2><div class="scroll">{rates}</div></section>
<section id="logs"><h2>Final replica logs</h2>{logs}</section>
<section id="etcd"><h2>etcd's decisions</h2><p>Times are when a broker first applied each state (its state-change log), interpolated by revision for the rest{clock_note}.</p>{etcd_table}</section>
</main><aside id="inspector" hidden><button type="button" id="inspector-close">close</button><pre id="inspector-text"></pre></aside>
<script type="application/json" id="ops">{ops}</script><script>{SCRIPT}</script></body></html>
"##,
        verdict = report.verdict,
        fault_style = timeline::fault_style(),
        title = escape(&title),
        summary = summary(run, end),
        checks = verdict::section(report),
        coverage = coverage::section(report.coverage.as_ref()),
        aggregate = if spans
            .iter()
            .filter(|s| matches!(s.invoke.process, Process::Client(_)))
            .count()
            > timeline::DETAIL_LIMIT
        {
            format!(
                "More than {} client ops: each lane is drawn in buckets coloured by their worst outcome (hover for counts); ops the checkers name are drawn one by one.",
                timeline::DETAIL_LIMIT
            )
        } else {
            String::new()
        },
        rates = rates::section(&spans, &faults, &axis, history_end),
        logs = logs::section(run, report),
        clock_note = if clock.is_known() {
            ""
        } else {
            " (no state-change log could be placed on the history's clock, so none are placed)"
        },
        etcd_table = etcd::table(etcd_timeline, &clock),
        ops = script_json(&ops_json(&spans, &named)),
    );
    page
}

/// What the page says first: how the run ended, its size, its settings.
fn summary(run: &RunData, end: &RunEnd) -> String {
    let ended = match (&end.unknown, end.completed) {
        (Some(why), _) => format!("ended unknown: {}", escape(why)),
        (None, true) => "completed".into(),
        (None, false) => "did not complete".into(),
    };
    let ops = run.history.len();
    let duration = html::duration(run.history.last().map_or(0, |op| op.time_ns));
    let settings = run
        .schedule
        .as_ref()
        .map(|s| {
            s.cluster
                .settings
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let brokers = run.schedule.as_ref().map_or(0, |s| s.cluster.brokers);
    format!(
        r#"<p class="summary">The run {ended}. {ops} history lines over {duration}; {brokers} brokers. Settings: {}.</p>"#,
        if settings.is_empty() {
            "the defaults".into()
        } else {
            escape(&settings)
        }
    )
}

/// The ops the inspector can show, keyed by index (invoke and completion
/// both point to the pair): every op of a detailed timeline, else the
/// nemesis's and those the checkers name.
fn ops_json(
    spans: &[timeline::Span<'_>],
    named: &std::collections::BTreeSet<u64>,
) -> serde_json::Value {
    let detailed = spans
        .iter()
        .filter(|s| matches!(s.invoke.process, Process::Client(_)))
        .count()
        <= timeline::DETAIL_LIMIT;
    let mut map: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for span in spans {
        let wanted = detailed
            || matches!(span.invoke.process, Process::Nemesis)
            || named.contains(&span.invoke.index)
            || span.completion.is_some_and(|c| named.contains(&c.index));
        if !wanted {
            continue;
        }
        let pair = serde_json::json!([span.invoke, span.completion]);
        map.insert(span.invoke.index.to_string(), pair.clone());
        if let Some(c) = span.completion {
            map.insert(c.index.to_string(), pair);
        }
    }
    serde_json::to_value(map).unwrap_or_default()
}

const STYLE: &str = r#"
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{padding:12px 20px;background:#fff;border-bottom:1px solid #ddd;position:sticky;top:0;z-index:2}
h1{font-size:17px;margin:0 0 4px;word-break:break-all}h2{font-size:16px;margin:18px 0 8px}h3{font-size:14px;margin:14px 0 6px}
main{padding:0 20px 40px}nav a{margin-right:14px}
.verdict{display:inline-block;padding:1px 8px;border-radius:4px;color:#fff;font-weight:600}
.verdict.valid{background:#2e7d32}.verdict.invalid{background:#c62828}.verdict.unknown{background:#8d6e00}.verdict.not-applicable{background:#757575}
table{border-collapse:collapse;background:#fff;margin:6px 0 12px}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}.counts{color:#666;font-size:12px}
.evidence .anomaly{font-weight:600;color:#c62828}.allowed .evidence .anomaly{color:#8d6e00}summary h3{display:inline}.evidence li{margin:4px 0}.links a{margin-right:8px}
pre{white-space:pre-wrap;font-size:12px;background:#f4f4f4;padding:6px;margin:4px 0}
.scroll{overflow-x:auto;background:#fff;border:1px solid #ddd}
svg text{font:11px system-ui,sans-serif;fill:#333}.tick{fill:#888}.grid{stroke:#eee}
rect.op{cursor:pointer}rect.op.ok{fill:#66bb6a}rect.op.fail{fill:#ef5350}rect.op.info{fill:#ffa726}rect.op.open{fill:#9e9e9e}rect.op.nemesis{fill:#7e57c2}
rect.op.selected{stroke:#000;stroke-width:2}
rect.fault{fill:#7e57c2;fill-opacity:.13;stroke:#7e57c2;stroke-opacity:.5}
g.etcd rect{fill:#e3f2fd;stroke:#90caf9}g.etcd.none rect{fill:#ffcdd2;stroke:#e57373}
.swatch{display:inline-block;width:12px;height:10px;margin-left:8px}.swatch.ok{background:#66bb6a}.swatch.fail{background:#ef5350}.swatch.info{background:#ffa726}.swatch.open{background:#9e9e9e}.swatch.nemesis{background:#7e57c2}.fault-label{fill:#4a148c;font-size:10px}.swatch.fault{background:#d1c4e9}
polyline.series{fill:none;stroke-width:1.5}.sends{stroke:#2e7d32;fill:#2e7d32}.polls{stroke:#1565c0;fill:#1565c0}.failed{stroke:#c62828;fill:#c62828}.median{stroke:#1565c0;fill:#1565c0}.worst{stroke:#c62828;fill:#c62828}
table.log td.rec .epoch{color:#888;font-size:11px}table.log td.absent{color:#bbb}
tr.diverge td{background:#fff3e0}tr.first-divergence td{border-top:2px solid #e65100}
tr.idle td{background:#fff3e0}tr.truncated td{background:#fff8e1}tr.lost td{background:#ffcdd2;font-weight:600}tr.fold td{color:#888;font-style:italic}
:target td,:target{outline:2px solid #1565c0}
#inspector{position:fixed;right:12px;bottom:12px;width:min(560px,45vw);max-height:60vh;overflow:auto;background:#fff;border:1px solid #888;box-shadow:0 2px 8px #0003;padding:8px;z-index:3}
"#;

const SCRIPT: &str = r#"
(function(){
  var ops = JSON.parse(document.getElementById('ops').textContent);
  var box = document.getElementById('inspector'), text = document.getElementById('inspector-text');
  var selected = null;
  function show(index){
    var pair = ops[index];
    text.textContent = pair ? pair.filter(Boolean).map(function(op){return JSON.stringify(op, null, 1);}).join('\n') : 'op ' + index + ': not kept in this page (see history.jsonl)';
    box.hidden = false;
    if (selected) selected.classList.remove('selected');
    selected = document.getElementById('op-' + index);
    if (selected && selected.classList) selected.classList.add('selected');
  }
  document.addEventListener('click', function(e){
    var t = e.target.closest('[data-op]');
    if (t) { show(t.getAttribute('data-op')); return; }
    var a = e.target.closest('a.op-link');
    if (a) show(a.getAttribute('href').replace('#op-', ''));
  });
  document.getElementById('inspector-close').addEventListener('click', function(){ box.hidden = true; });
  // How long the page took to load, for the report bench (benches/report.rs).
  window.addEventListener('load', function(){
    document.body.setAttribute('data-load-ms', String(Math.round(performance.now())));
  });
})();
"#;
