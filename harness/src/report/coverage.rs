//! The report's coverage section: where the run's faults landed
//! (checker/coverage.rs) — the run-wide counts, then one row per fault with
//! the client ops it overlapped, faults that overlapped none marked.

use std::fmt::Write;

use crate::checker::Coverage;

use super::html::{escape, op_anchor};

/// Fault rows drawn; the rest are counted (results.json has them all).
const FAULT_ROWS_MAX: usize = 300;

pub fn section(coverage: Option<&Coverage>) -> String {
    let Some(coverage) = coverage else {
        return "<p>No coverage: the report was drawn without it.</p>".into();
    };
    let mut out = String::from(r#"<ul class="coverage">"#);
    for line in coverage.lines() {
        let _ = write!(out, "<li>{}</li>", escape(&line));
    }
    out.push_str("</ul>");
    if coverage.faults.is_empty() {
        return out;
    }
    out.push_str(
        r#"<table class="faults"><thead><tr><th>fault</th><th>nodes</th><th>at</th><th>window</th><th>ended by</th><th>in flight</th><th>invoked</th><th>acknowledged</th></tr></thead><tbody>"#,
    );
    for fault in coverage.faults.iter().take(FAULT_ROWS_MAX) {
        let nodes: Vec<String> = fault.nodes.iter().map(ToString::to_string).collect();
        let _ = write!(
            out,
            r##"<tr class="{class}" data-ops="{ops}"><td><a class="op-link" href="#{anchor}">{verb}</a></td><td>{nodes}</td><td>{at:.1} s</td><td>{window} ms</td><td>{ended}</td><td>{in_flight}</td><td>{invoked}</td><td>{acked}</td></tr>"##,
            class = if fault.ops() == 0 { "idle" } else { "busy" },
            ops = fault.ops(),
            anchor = op_anchor(fault.history_index),
            verb = fault.verb,
            nodes = escape(&nodes.join(", ")),
            at = fault.at_ms as f64 / 1000.0,
            window = fault.window_ms,
            ended = fault
                .ended_by
                .map_or("the run's end".to_owned(), |v| v.to_string()),
            in_flight = fault.in_flight,
            invoked = fault.invoked,
            acked = fault.acked,
        );
    }
    out.push_str("</tbody></table>");
    if coverage.faults.len() > FAULT_ROWS_MAX {
        let _ = write!(
            out,
            "<p>… {} more faults in results.json</p>",
            coverage.faults.len() - FAULT_ROWS_MAX
        );
    }
    out
}
