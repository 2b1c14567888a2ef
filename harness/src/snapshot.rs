//! A stored run in the form snapshot tests compare: the history with only what
//! varies between identical runs taken out (times, wall-clock `time_ms`
//! stamps in evidence, etcd revisions), each
//! replica's final `(offset, epoch, value)` log and epoch file, the etcd
//! timeline without revisions, and each checker's verdict, message and
//! evidence (not its counts, some of which count control traffic, nor its
//! coverage, whose fault windows are times). Offsets,
//! epochs, values, nodes and outcomes all stay: a change in any of them is a
//! change in behaviour.

use serde_json::{Value, json};

use crate::checker::{LoadError, RunData};
use crate::history::Op;
use crate::reader::FindingKind;
use crate::run_dir::RunDir;

/// The normalized form of the run in `dir`.
pub fn normalized(dir: &RunDir) -> Result<Value, LoadError> {
    let run = RunData::load(dir)?;
    let history: Vec<Value> = run.history.iter().map(Op::normalized).collect();
    let replicas: serde_json::Map<String, Value> = run
        .replicas
        .iter()
        .map(|(node, state)| {
            let replicas: Vec<Value> = state
                .compact()
                .replicas
                .into_iter()
                .map(|r| {
                    json!({
                        "partition": format!("{}-{}", r.topic, r.partition),
                        "log": r.records,
                        "leader_epochs": r.leader_epochs,
                        "log_end_offset": r.log_end_offset,
                        // Kinds only, and not a checkpoint past the log end:
                        // whether the periodic HW checkpoint ran between a
                        // truncation and the freeze is timing, not behaviour.
                        "findings": r
                            .findings
                            .iter()
                            .filter(|f| !matches!(f.kind, FindingKind::CheckpointPastLogEnd { .. }))
                            .map(|f| format!("{}", f.kind))
                            .collect::<Vec<_>>(),
                    })
                })
                .collect();
            (node.to_string(), json!(replicas))
        })
        .collect();
    let timeline = run.timeline.as_ref().map(|t| {
        let states: Vec<Value> = t
            .partition_states
            .iter()
            .map(|s| {
                json!({
                    "partition": format!("{}-{}", s.topic, s.partition),
                    "leader": s.leader,
                    "leader_epoch": s.leader_epoch,
                    "isr": s.isr,
                    "controller_epoch": s.controller_epoch,
                })
            })
            .collect();
        let controllers: Vec<Value> = t.controllers.iter().map(|c| json!(c.broker_id)).collect();
        json!({ "partition_states": states, "controllers": controllers })
    });
    let mut results: Value = std::fs::read_to_string(dir.results())
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    // Verdicts, messages and evidence stay; the checkers' counts go: some count
    // control traffic (decisions applied, states written), which retries and
    // timing vary without any change in what the cluster did to the data.
    // Coverage goes too: its windows are times, and what a window caught
    // varies with them; the coverage tests judge it (checker/coverage.rs).
    if let Some(results) = results.as_object_mut() {
        results.remove("coverage");
    }
    if let Some(list) = results.get_mut("results").and_then(Value::as_array_mut) {
        for result in list {
            if let Some(result) = result.as_object_mut() {
                result.remove("counts");
            }
        }
    }
    let mut normalized = json!({
        "run": dir.read_end(),
        "history": history,
        "replicas": replicas,
        "timeline": timeline,
        "results": results,
    });
    redact(&mut normalized);
    Ok(normalized)
}

/// etcd revisions count every write in the cluster (registrations, controller
/// moves), so they are redacted wherever they appear: `revision`/`revisions`
/// fields and "revision N" in text. Wall-clock stamps (`time_ms`, e.g. of a
/// state-change entry quoted as evidence) go too.
fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key.contains("revision") {
                    *v = json!("[revision]");
                } else if key.ends_with("time_ms") || key == "time_ns" {
                    *v = json!("[time]");
                } else {
                    redact(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::String(text) if text.contains("revision") => *text = redact_text(text),
        _ => {}
    }
}

fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("revision") {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        // "revision 18", "revisions [3, 7]", "revision=18"
        let word_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        out.push_str(&after[..word_end]);
        let tail = &after[word_end..];
        let skip = tail
            .find(|c: char| !(c.is_ascii_digit() || " =,[]".contains(c)))
            .unwrap_or(tail.len());
        if tail[..skip].chars().any(|c| c.is_ascii_digit()) {
            out.push_str(" [revision]");
            let trailing = &tail[..skip];
            if trailing.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push_str(&tail[..skip]);
        }
        rest = &tail[skip..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_and_times_are_redacted_in_fields_and_text_and_nothing_else() {
        let mut value = json!({
            "revision": 18,
            "summary": "b2, the final leader (etcd revision 18); leader epoch 2",
            "list": ["etcd revisions [3, 7] name b1", 5],
            "offset": 18,
            "stale": { "time_ms": 1796058852532_u64, "leader_epoch": 2 },
        });
        redact(&mut value);
        assert_eq!(
            value,
            json!({
                "revision": "[revision]",
                "summary": "b2, the final leader (etcd revision [revision]); leader epoch 2",
                "list": ["etcd revisions [revision] name b1", 5],
                "offset": 18,
                "stale": { "time_ms": "[time]", "leader_epoch": 2 },
            })
        );
    }
}
