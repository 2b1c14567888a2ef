//! The verdict: each checker's result, and each piece of evidence with links
//! to what it names — history ops (any `…index` field of its details) and
//! final-log rows (a `partition` with an `…offset` field) — and its details
//! as JSON for the rest.

use std::collections::BTreeSet;
use std::fmt::Write;

use serde_json::Value;

use crate::checker::{Evidence, Report};

use super::html::{escape, log_anchor, op_anchor};

/// The history indices a piece of evidence names, wherever they sit in its
/// details: a number or list of numbers under a key ending in `index`.
pub fn named_ops(evidence: &Evidence) -> BTreeSet<u64> {
    let mut found = BTreeSet::new();
    walk(&evidence.details, &mut |key, value| {
        if key.ends_with("index") || key.ends_with("indices") {
            match value {
                Value::Number(n) => found.extend(n.as_u64()),
                Value::Array(items) => found.extend(items.iter().filter_map(Value::as_u64)),
                _ => {}
            }
        }
    });
    found
}

/// The final-log rows a piece of evidence names: its `partition` with each
/// number under a key ending in `offset`.
fn named_rows(evidence: &Evidence) -> Vec<(String, i64)> {
    let Some(partition) = evidence.details.get("partition").and_then(Value::as_str) else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    walk(&evidence.details, &mut |key, value| {
        if key.ends_with("offset")
            && let Some(offset) = value.as_i64()
        {
            rows.push((partition.to_owned(), offset));
        }
    });
    rows.sort();
    rows.dedup();
    rows
}

/// Calls `visit` with every (key, value) pair in `value`, depth first.
fn walk(value: &Value, visit: &mut impl FnMut(&str, &Value)) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                visit(key, inner);
                walk(inner, visit);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| walk(item, visit)),
        _ => {}
    }
}

/// Every op any evidence names.
pub fn all_named_ops(report: &Report) -> BTreeSet<u64> {
    report
        .results
        .iter()
        .flat_map(|r| &r.evidence)
        .flat_map(named_ops)
        .collect()
}

/// Evidence items drawn per checker; the rest are counted (results.json has
/// them all).
const EVIDENCE_LIMIT: usize = 200;

pub fn section(report: &Report) -> String {
    let mut out = String::from(
        r#"<table class="checkers"><thead><tr><th>checker</th><th>verdict</th><th>result</th></tr></thead><tbody>"#,
    );
    for result in &report.results {
        let counts = result
            .counts
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            out,
            r##"<tr class="{v}"><td><a href="#checker-{c}">{c}</a></td><td class="verdict {v}">{v}</td><td>{m}{counts}</td></tr>"##,
            c = escape(&result.checker),
            v = result.verdict,
            m = escape(&result.message),
            counts = if counts.is_empty() {
                String::new()
            } else {
                format!(r#"<div class="counts">{}</div>"#, escape(&counts))
            },
        );
    }
    out.push_str("</tbody></table>");
    for result in report.results.iter().filter(|r| !r.evidence.is_empty()) {
        // What a valid checker lists is what Kafka allows (an excused loss,
        // an acks=1 write lost): folded, so the anomalies come first.
        let allowed = result.verdict != crate::checker::Verdict::Invalid;
        let _ = write!(
            out,
            r#"<details class="{class}" id="checker-{c}"{open}><summary><h3>{c}: {n} {what}</h3></summary><ol class="evidence">"#,
            c = escape(&result.checker),
            n = result.evidence.len(),
            class = if allowed { "allowed" } else { "anomalies" },
            open = if allowed { "" } else { " open" },
            what = if allowed {
                "allowed or excused (not anomalies)"
            } else {
                "evidence"
            },
        );
        for evidence in result.evidence.iter().take(EVIDENCE_LIMIT) {
            item(evidence, &mut out);
        }
        if result.evidence.len() > EVIDENCE_LIMIT {
            let _ = write!(
                out,
                "<li>… {} more in results.json</li>",
                result.evidence.len() - EVIDENCE_LIMIT
            );
        }
        out.push_str("</ol></details>");
    }
    out
}

fn item(evidence: &Evidence, out: &mut String) {
    let _ = write!(
        out,
        r#"<li class="evidence-item" data-anomaly="{a}"><span class="anomaly">{a}</span> {s}"#,
        a = escape(&evidence.anomaly),
        s = escape(&evidence.summary)
    );
    let ops = named_ops(evidence);
    let rows = named_rows(evidence);
    if !ops.is_empty() || !rows.is_empty() {
        out.push_str(r#"<div class="links">"#);
        for index in ops {
            let _ = write!(
                out,
                r##"<a class="op-link" href="#{}">op {index}</a> "##,
                op_anchor(index)
            );
        }
        for (partition, offset) in rows {
            let _ = write!(
                out,
                r##"<a class="row-link" href="#{}">{}@{offset}</a> "##,
                log_anchor(&partition, offset),
                escape(&partition)
            );
        }
        out.push_str("</div>");
    }
    if !evidence.details.is_null() {
        let pretty = serde_json::to_string_pretty(&evidence.details).unwrap_or_default();
        let _ = write!(
            out,
            "<details><summary>details</summary><pre>{}</pre></details>",
            escape(&pretty)
        );
    }
    out.push_str("</li>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_links_every_index_and_offset_it_names() {
        let evidence = Evidence {
            anomaly: "x".into(),
            summary: "y".into(),
            details: serde_json::json!({
                "partition": "t-0",
                "history_index": 7,
                "acked_offset": 1,
                "polls": [{"invoke_index": 9, "offset": 3}],
                "isr": [1, 2],
            }),
        };
        assert_eq!(named_ops(&evidence), BTreeSet::from([7, 9]));
        assert_eq!(
            named_rows(&evidence),
            vec![("t-0".into(), 1), ("t-0".into(), 3)]
        );
    }
}
