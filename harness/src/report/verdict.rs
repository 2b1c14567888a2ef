//! The verdict: each checker's result, and each piece of evidence with links
//! to what it names — the history ops and final-log records its typed
//! details point at (`Details::ops`, `Details::records`) — and its details
//! as JSON for the rest.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::checker::{Evidence, Report};

use super::html::{escape, log_anchor, op_anchor};

/// The history indices a piece of evidence names.
pub fn named_ops(evidence: &Evidence) -> BTreeSet<u64> {
    evidence.details.ops()
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
        a = escape(evidence.anomaly.name()),
        s = escape(&evidence.summary)
    );
    let ops = named_ops(evidence);
    let rows = evidence.details.records();
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
                log_anchor(&partition.to_string(), offset),
                escape(&partition.to_string())
            );
        }
        out.push_str("</div>");
    }
    let pretty = serde_json::to_string_pretty(&evidence.details).unwrap_or_default();
    let _ = write!(
        out,
        "<details><summary>details</summary><pre>{}</pre></details>",
        escape(&pretty)
    );
    out.push_str("</li>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::evidence::{Anomaly, LostWrite};
    use crate::schedule::Acks;
    use crate::topic_partition::PartitionRef;

    #[test]
    fn evidence_links_the_op_and_the_record_it_names() {
        let t0 = PartitionRef::new("t", 0);
        let evidence = Evidence::new(
            Anomaly::LostAcknowledgedWrite,
            "y",
            LostWrite {
                acked_offset: Some(1),
                acks: Acks::All,
                final_log: "b1".into(),
                final_log_findings: 0,
                final_log_node: Some(crate::node::NodeId::new(1)),
                history_index: 7,
                isr: Some(vec![1, 2]),
                lacking: vec![],
                leader_epoch: Some(0),
                partition: t0.clone(),
                value: 4,
            },
        );
        assert_eq!(named_ops(&evidence), BTreeSet::from([7]));
        assert_eq!(evidence.details.records(), vec![(&t0, 1)]);
        let mut html = String::new();
        item(&evidence, &mut html);
        assert!(html.contains(r##"href="#log-t-0-1""##), "{html}");
        assert!(html.contains("op 7"), "{html}");
    }
}
