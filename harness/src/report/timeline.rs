//! The timeline: one lane per client (processes packed into lanes the way a
//! worker runs them, one after another), one for the nemesis, every op a bar
//! from its invoke to its completion coloured by how it ended, and every
//! fault's interval shaded across all lanes — Jepsen's `timeline.html`, plus
//! the lanes etcd's timeline adds (etcd.rs).
//!
//! Past [`DETAIL_LIMIT`] client ops a lane is drawn as buckets a few pixels
//! wide, coloured by the worst outcome in each and titled with its counts;
//! ops the checkers name are still drawn one by one on top, so every
//! evidence link has its target.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::fault::{Ends, Kind, Role, Shade, Undo};
use crate::history::Verb;
use crate::history::op::{Aim, Body};
use crate::history::{Op, OpType, Process};
use crate::node::NodeId;

use super::html::{Axis, escape, op_anchor};

/// Client ops drawn one by one up to this many; beyond, lanes aggregate.
pub const DETAIL_LIMIT: usize = 4000;
/// Width of an aggregate bucket, in pixels.
const BUCKET_PX: f64 = 3.0;
pub const LANE_HEIGHT: f64 = 18.0;

/// One op: its invoke and its completion (none if the history ends first).
#[derive(Debug, Clone)]
pub struct Span<'a> {
    pub invoke: &'a Op,
    pub completion: Option<&'a Op>,
}

impl Span<'_> {
    pub fn start_ns(&self) -> u64 {
        self.invoke.time_ns
    }

    pub fn end_ns(&self, history_end: u64) -> u64 {
        self.completion.map_or(history_end, |c| c.time_ns)
    }

    /// `ok`, `fail`, `info`, or `open` when it never completed; a fault
    /// that worked is `nemesis` (its completion is `info` by convention,
    /// not because its outcome is unknown).
    pub fn outcome(&self) -> &'static str {
        if let Some(Body::Fault(fault)) = self.completion.map(|c| &c.body)
            && fault.done.is_some()
        {
            return "nemesis";
        }
        match self.completion.map(|c| c.kind) {
            Some(OpType::Ok) => "ok",
            Some(OpType::Fail) => "fail",
            Some(OpType::Info) | Some(OpType::Invoke) => "info",
            None => "open",
        }
    }

    /// The index links use: the completion's, else the invoke's.
    pub fn index(&self) -> u64 {
        self.completion.map_or(self.invoke.index, |c| c.index)
    }
}

/// Every op of the history as a span, in invoke order.
pub fn spans(history: &[Op]) -> Vec<Span<'_>> {
    let mut open: std::collections::HashMap<Process, usize> = Default::default();
    let mut spans: Vec<Span<'_>> = Vec::new();
    for op in history {
        if op.kind == OpType::Invoke {
            open.insert(op.process, spans.len());
            spans.push(Span {
                invoke: op,
                completion: None,
            });
        } else if let Some(at) = open.remove(&op.process) {
            spans[at].completion = Some(op);
        }
    }
    spans
}

/// A fault in force over an interval: from its invoke to the completion of
/// what undid it (the restart, resume, start or heal), or to the end.
#[derive(Debug, Clone)]
pub struct FaultInterval {
    pub verb: Verb,
    pub label: String,
    pub nodes: Vec<NodeId>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The fault op's index (its completion).
    pub index: u64,
    /// An instant fault (truncate-log) rather than an interval.
    pub instant: bool,
}

/// Each fault that worked, paired with what undid it.
pub fn fault_intervals(spans: &[Span<'_>], history_end: u64) -> Vec<FaultInterval> {
    let mut intervals: Vec<FaultInterval> = Vec::new();
    for (i, span) in spans.iter().enumerate() {
        // A fault that worked completes (as Jepsen's nemesis does, `info`)
        // with what it did; one that failed has no `done`.
        let Some(completion) = span.completion else {
            continue;
        };
        let Body::Fault(fault) = &completion.body else {
            continue;
        };
        if fault.done.is_none() {
            continue;
        }
        let nodes = fault
            .done
            .as_ref()
            .map(|d| d.nodes.clone())
            .unwrap_or_default();
        let spec = fault.verb.spec();
        if spec.role == Role::Undo {
            continue;
        }
        let requests = match &fault.aim {
            Aim::Requests { from, to, api, .. } => Some((from, to, api)),
            _ => None,
        };
        // Nothing undoes it: it is done once it fired (truncate-log).
        let instant = spec.undo == Undo::Never;
        let cut_id = match &fault.aim {
            Aim::OneWay { id, .. } | Aim::Target { id, .. } => id.clone(),
            _ => None,
        };
        let end_ns = if instant {
            completion.time_ns
        } else {
            spans[i + 1..]
                .iter()
                .filter_map(|later| {
                    let done = later.completion?;
                    let Body::Fault(undo) = &done.body else {
                        return None;
                    };
                    undo.done.as_ref()?;
                    let ends = undo.verb.spec().ends;
                    if !ends.ends(spec.undo) {
                        return None;
                    }
                    let matches = match (ends, &undo.aim) {
                        // The same link and API, as written.
                        (Ends::Requests, Aim::Requests { from, to, api, .. }) => {
                            requests == Some((from, to, api))
                        }
                        // A named heal ends its cut only, never a request fault.
                        (Ends::Cuts, Aim::HealCut { heal }) => {
                            requests.is_none() && cut_id.as_deref() == Some(heal.as_str())
                        }
                        (Ends::Cuts | Ends::Database(_), _) => true,
                        (Ends::OnItsNodes(_), _) => {
                            let undone: BTreeSet<NodeId> = undo
                                .done
                                .as_ref()
                                .map(|d| d.nodes.iter().copied().collect())
                                .unwrap_or_default();
                            nodes.iter().any(|n| undone.contains(n))
                        }
                        _ => false,
                    };
                    matches.then_some(done.time_ns)
                })
                .next()
                .unwrap_or(history_end)
        };
        let label = match fault.done.as_ref().and_then(|d| d.blocked.as_ref()) {
            Some(blocked) if !blocked.is_empty() => format!("{} {}", fault.verb, blocked.join(" ")),
            // `hold-requests clients->b1 EndTxn`, its ends as resolved.
            _ if requests.is_some() => {
                let (from, _, api) = requests.expect("matched");
                let ends: Vec<String> = nodes.iter().map(NodeId::to_string).collect();
                let link = match (from, ends.as_slice()) {
                    (crate::schedule::Sender::Clients, [to]) => format!("clients->{to}"),
                    (_, [from, to]) => format!("{from}->{to}"),
                    _ => ends.join(","),
                };
                format!("{} {link} {api}", fault.verb)
            }
            _ => format!(
                "{} {}",
                fault.verb,
                nodes
                    .iter()
                    .map(NodeId::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        intervals.push(FaultInterval {
            verb: fault.verb,
            label,
            nodes,
            start_ns: span.start_ns(),
            end_ns,
            index: completion.index,
            instant,
        });
    }
    intervals
}

/// Each fault kind's shade beyond the default, as CSS rules after the
/// page's own: its spec says what it does to a node (src/fault/), and this
/// gives that a colour.
pub fn fault_style() -> String {
    let fills = [
        (Shade::Down, "fill:#e53935"),
        (Shade::Paused, "fill:#1e88e5"),
        (Shade::CutLog, "fill:#000;fill-opacity:.5"),
    ];
    let mut out = String::new();
    for (shade, fill) in fills {
        let rules: Vec<String> = Kind::ALL
            .iter()
            .filter(|k| k.spec().shade == shade)
            .map(|k| format!("rect.fault-{}", k.name()))
            .collect();
        if !rules.is_empty() {
            let _ = write!(out, "{}{{{fill}}}", rules.join(","));
        }
    }
    out
}

/// Client processes packed into lanes: a process joins the first lane whose
/// last op ended before its first began (a worker's processes follow each
/// other, Jepsen's fresh process after an indefinite op), in order of first
/// op. Returns the lane of each process and each lane's label.
fn lanes(spans: &[Span<'_>], history_end: u64) -> (BTreeMap<u64, usize>, Vec<String>) {
    let mut first_last: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for span in spans {
        if let Process::Client(p) = span.invoke.process {
            let entry = first_last.entry(p).or_insert((span.start_ns(), 0));
            entry.0 = entry.0.min(span.start_ns());
            entry.1 = entry.1.max(span.end_ns(history_end));
        }
    }
    let mut order: Vec<(u64, u64, u64)> = first_last
        .into_iter()
        .map(|(p, (a, b))| (a, p, b))
        .collect();
    order.sort();
    let mut lane_end: Vec<u64> = Vec::new();
    let mut members: Vec<Vec<u64>> = Vec::new();
    let mut lane_of = BTreeMap::new();
    for (first, process, last) in order {
        let lane = match lane_end.iter().position(|&end| end < first) {
            Some(lane) => lane,
            None => {
                lane_end.push(0);
                members.push(Vec::new());
                lane_end.len() - 1
            }
        };
        lane_end[lane] = last;
        members[lane].push(process);
        lane_of.insert(process, lane);
    }
    let labels = members
        .iter()
        .map(|ps| match ps.as_slice() {
            [one] => format!("process {one}"),
            [first, .., last] => format!("processes {first}…{last} ({})", ps.len()),
            [] => String::new(),
        })
        .collect();
    (lane_of, labels)
}

/// A one-line description of an op, for its bar's title.
fn describe(span: &Span<'_>) -> String {
    let op = span.completion.unwrap_or(span.invoke);
    let what = match &op.body {
        Body::Send(send) => format!("send {:?} to {}", send.values, send.partition),
        Body::Poll(poll) => format!("poll {} from {}", poll.partition, poll.from_offset),
        Body::Commit(c) => format!("commit {} of {} for {}", c.offset, c.partition, c.group),
        Body::Committed(c) => format!("committed {} for {}", c.partition, c.group),
        Body::Rebalance(r) => match (&r.generation, &r.partitions) {
            (Some(generation), Some(partitions)) => {
                let names: Vec<String> = partitions.iter().map(|p| p.to_string()).collect();
                format!(
                    "rebalance of {}: generation {generation}, assigned [{}]",
                    r.group,
                    names.join(", ")
                )
            }
            _ => format!("rebalance of {}", r.group),
        },
        Body::ClientCrash(_) => "client crash".to_owned(),
        Body::StableOffsets(look) => match look.offsets() {
            Some((lso, hw)) => format!(
                "stable offsets of {}: last stable {lso}, high watermark {hw}",
                look.partition
            ),
            None => format!("stable offsets of {}", look.partition),
        },
        Body::Txn(txn) => {
            let intent = match txn.intent {
                crate::history::Intent::Commit => "commit",
                crate::history::Intent::Abort => "abort",
            };
            format!(
                "txn of {} ({} micro-ops, to {intent})",
                txn.transactional_id,
                txn.ops.len()
            )
        }
        Body::Life(life) => match (&life.value, &life.records) {
            (Some(value), _) => format!(
                "{} {value} to life {} of {}",
                life.step.f(),
                life.life,
                life.topic
            ),
            (_, Some(records)) => format!(
                "{} of life {} of {}: {} records",
                life.step.f(),
                life.life,
                life.topic,
                records.len()
            ),
            _ => format!("{} (life {} of {})", life.step.f(), life.life, life.topic),
        },
        Body::Fault(fault) => fault.verb.to_string(),
    };
    let error = op
        .error
        .as_deref()
        .map(|e| format!(" — {e}"))
        .unwrap_or_default();
    format!("#{} {} {}{}", span.index(), what, span.outcome(), error)
}

/// The op lanes and the fault shading, as one SVG; `named` are the ops the
/// checkers' evidence names (always drawn one by one). The etcd lanes are
/// appended below by the caller through `extra` (height and SVG body).
pub fn svg(
    spans: &[Span<'_>],
    faults: &[FaultInterval],
    axis: &Axis,
    history_end: u64,
    named: &BTreeSet<u64>,
    extra: (f64, &str),
) -> String {
    let (lane_of, labels) = lanes(spans, history_end);
    let client_ops = spans
        .iter()
        .filter(|s| matches!(s.invoke.process, Process::Client(_)))
        .count();
    let detailed = client_ops <= DETAIL_LIMIT;
    let top = 24.0;
    let lane_y = |lane: usize| top + 12.0 + LANE_HEIGHT * (lane as f64 + 1.0);
    let lanes_bottom = lane_y(labels.len()) + LANE_HEIGHT;
    let height = lanes_bottom + extra.0 + 8.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg id="timeline" class="timeline" width="{:.0}" height="{height:.0}" viewBox="0 0 {:.0} {height:.0}">"#,
        axis.left + axis.width + 10.0,
        axis.left + axis.width + 10.0
    );
    axis.ticks(top - 4.0, height - 4.0, &mut out);
    for fault in faults {
        let x = axis.x(fault.start_ns);
        let w = (axis.x(fault.end_ns) - x).max(if fault.instant { 2.0 } else { 1.0 });
        let nodes = fault
            .nodes
            .iter()
            .map(NodeId::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        let _ = write!(
            out,
            r##"<rect class="fault fault-{verb}" data-fault="{verb}" data-nodes="{nodes}" data-op="{index}" x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}"><title>{label}: {from} → {to}</title></rect>"##,
            verb = fault.verb,
            index = fault.index,
            h = height - top - 4.0,
            label = escape(&fault.label),
            from = super::html::duration(fault.start_ns),
            to = super::html::duration(fault.end_ns),
        );
        // Named in the margin above the lanes, as much as its width allows.
        let label = super::html::fit(&fault.label, w.max(60.0));
        let _ = write!(
            out,
            r#"<text class="fault-label" x="{:.1}" y="{:.1}">{}</text>"#,
            x + 1.0,
            top + 10.0,
            escape(&label)
        );
    }
    // Lane labels and guides.
    let nemesis_y = top + 12.0;
    let _ = write!(
        out,
        r#"<text class="lane" x="4" y="{:.1}">nemesis</text>"#,
        nemesis_y + 13.0
    );
    for (lane, label) in labels.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text class="lane" x="4" y="{:.1}">{}</text>"#,
            lane_y(lane) + 13.0,
            escape(label)
        );
    }
    let bar = |out: &mut String, span: &Span<'_>, y: f64| {
        let x = axis.x(span.start_ns());
        let w = (axis.x(span.end_ns(history_end)) - x).max(1.5);
        let index = span.index();
        // The invoke's index is a link target too (some evidence names it).
        let group = match span.completion {
            Some(_) => format!(r#" id="{}""#, op_anchor(span.invoke.index)),
            None => String::new(),
        };
        let _ = write!(
            out,
            r#"<g{group}><rect id="{}" class="op {}" data-op="{index}" x="{x:.1}" y="{:.1}" width="{w:.1}" height="{:.1}"><title>{}</title></rect></g>"#,
            op_anchor(index),
            span.outcome(),
            y + 2.0,
            LANE_HEIGHT - 4.0,
            escape(&describe(span)),
        );
    };
    if !detailed {
        aggregate(spans, &lane_of, axis, history_end, lane_y, &mut out);
    }
    for span in spans {
        let y = match span.invoke.process {
            Process::Nemesis => nemesis_y,
            Process::Client(p) => lane_y(lane_of[&p]),
        };
        let named_op = named.contains(&span.index()) || named.contains(&span.invoke.index);
        if detailed || matches!(span.invoke.process, Process::Nemesis) || named_op {
            bar(&mut out, span, y);
        }
    }
    let _ = write!(
        out,
        r#"<g transform="translate(0 {lanes_bottom:.1})">{}</g>"#,
        extra.1
    );
    out.push_str("</svg>");
    out
}

/// Client lanes as buckets: per lane and bucket, how many ops completed ok,
/// fail and info; the bucket's colour is its worst outcome.
fn aggregate(
    spans: &[Span<'_>],
    lane_of: &BTreeMap<u64, usize>,
    axis: &Axis,
    history_end: u64,
    lane_y: impl Fn(usize) -> f64,
    out: &mut String,
) {
    let buckets = (axis.width / BUCKET_PX).ceil() as usize;
    let mut counts: BTreeMap<(usize, usize), [u32; 3]> = BTreeMap::new();
    for span in spans {
        let Process::Client(p) = span.invoke.process else {
            continue;
        };
        let end = span.end_ns(history_end);
        let bucket = ((end as f64 / axis.end_ns as f64) * buckets as f64) as usize;
        let slot = match span.outcome() {
            "ok" => 0,
            "fail" => 1,
            _ => 2,
        };
        counts
            .entry((lane_of[&p], bucket.min(buckets - 1)))
            .or_default()[slot] += 1;
    }
    for ((lane, bucket), [ok, fail, info]) in counts {
        let class = if info > 0 {
            "info"
        } else if fail > 0 {
            "fail"
        } else {
            "ok"
        };
        let _ = write!(
            out,
            r#"<rect class="op bucket {class}" x="{:.1}" y="{:.1}" width="{BUCKET_PX:.1}" height="{:.1}"><title>{ok} ok, {fail} fail, {info} info</title></rect>"#,
            axis.left + bucket as f64 * BUCKET_PX,
            lane_y(lane) + 2.0,
            LANE_HEIGHT - 4.0,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(lines: &[&str]) -> Vec<Op> {
        lines
            .iter()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn a_fault_is_in_force_until_what_undoes_it_on_the_same_node_or_the_named_heal() {
        let history = ops(&[
            r#"{"index":0,"time_ns":10,"process":"nemesis","type":"invoke","f":"crash","value":{"target":"b1"}}"#,
            r#"{"index":1,"time_ns":20,"process":"nemesis","type":"info","f":"crash","value":{"nodes":["b1"],"target":"b1"}}"#,
            r#"{"index":2,"time_ns":30,"process":"nemesis","type":"invoke","f":"isolate","value":{"target":"b2","id":"cut"}}"#,
            r#"{"index":3,"time_ns":40,"process":"nemesis","type":"info","f":"isolate","value":{"nodes":["b2"],"blocked":["b2->b1"],"target":"b2","id":"cut"}}"#,
            // A restart of another node does not end b1's crash.
            r#"{"index":4,"time_ns":50,"process":"nemesis","type":"invoke","f":"restart","value":{"target":"b3"}}"#,
            r#"{"index":5,"time_ns":60,"process":"nemesis","type":"info","f":"restart","value":{"nodes":["b3"],"target":"b3"}}"#,
            // A heal of another cut does not end this one.
            r#"{"index":6,"time_ns":70,"process":"nemesis","type":"invoke","f":"heal","value":{"heal":"other"}}"#,
            r#"{"index":7,"time_ns":80,"process":"nemesis","type":"info","f":"heal","value":{"heal":"other","nodes":[]}}"#,
            r#"{"index":8,"time_ns":90,"process":"nemesis","type":"invoke","f":"restart","value":{"target":"b1"}}"#,
            r#"{"index":9,"time_ns":100,"process":"nemesis","type":"info","f":"restart","value":{"nodes":["b1"],"target":"b1"}}"#,
            r#"{"index":10,"time_ns":110,"process":"nemesis","type":"invoke","f":"heal","value":{"heal":"cut"}}"#,
            r#"{"index":11,"time_ns":120,"process":"nemesis","type":"info","f":"heal","value":{"heal":"cut","nodes":[]}}"#,
            // Never undone: in force to the end.
            r#"{"index":12,"time_ns":130,"process":"nemesis","type":"invoke","f":"pause","value":{"target":"b3"}}"#,
            r#"{"index":13,"time_ns":140,"process":"nemesis","type":"info","f":"pause","value":{"nodes":["b3"],"target":"b3"}}"#,
        ]);
        let spans = spans(&history);
        let faults = fault_intervals(&spans, 500);
        let seen: Vec<(Verb, u64, u64)> = faults
            .iter()
            .map(|f| (f.verb, f.start_ns, f.end_ns))
            .collect();
        assert_eq!(
            seen,
            vec![
                (Verb::Crash, 10, 100),
                (Verb::Isolate, 30, 120),
                (Verb::Pause, 130, 500)
            ]
        );
        assert_eq!(faults[1].label, "isolate b2->b1");
        assert!(spans.iter().all(|s| s.outcome() == "nemesis"));
    }

    #[test]
    fn each_kind_is_shaded_as_its_spec_says() {
        assert_eq!(
            fault_style(),
            "rect.fault-crash,rect.fault-stop,rect.fault-power-loss,rect.fault-crash-database\
             {fill:#e53935}rect.fault-pause,rect.fault-pause-database{fill:#1e88e5}\
             rect.fault-truncate-log{fill:#000;fill-opacity:.5}"
        );
    }

    #[test]
    fn a_worker_s_successive_processes_share_a_lane() {
        let history = ops(&[
            r#"{"index":0,"time_ns":10,"process":0,"type":"invoke","f":"poll","value":{"partition":"t-0","from_offset":0}}"#,
            r#"{"index":1,"time_ns":15,"process":1,"type":"invoke","f":"poll","value":{"partition":"t-0","from_offset":0}}"#,
            r#"{"index":2,"time_ns":20,"process":0,"type":"info","f":"poll","value":{"partition":"t-0","from_offset":0},"error":"timeout"}"#,
            r#"{"index":3,"time_ns":30,"process":2,"type":"invoke","f":"poll","value":{"partition":"t-0","from_offset":0}}"#,
        ]);
        let spans = spans(&history);
        assert_eq!(
            spans.iter().map(Span::outcome).collect::<Vec<_>>(),
            ["info", "open", "open"]
        );
        let (lane_of, labels) = lanes(&spans, 40);
        // Process 2 begins after process 0 ended: it takes process 0's lane.
        assert_eq!(lane_of[&0], lane_of[&2]);
        assert_ne!(lane_of[&0], lane_of[&1]);
        assert_eq!(labels.len(), 2);
    }
}
