//! When did a failing campaign first show its anomaly? The power table's
//! time to detect, read back from a run directory after the run, measured
//! from the campaign's start (its first client op: the background workload
//! starts with the nemesis).
//!
//! The time is when a client could first have *seen* the anomaly, from the
//! history alone. Damage to a log (a lost write, replicas that part, an
//! offset that changed) is seen at the first conflicting observation of a
//! record the evidence names: the first ack or poll at that partition and
//! offset whose value differs from the first one observed there (the write
//! that took a lost one's offset, a poll that read the other replica's
//! record). An anomaly a client op shows by itself (a poll that went
//! backwards, a committed offset read low, a second ack out of order) is
//! seen at the latest op it names. A broker's applied decision
//! (`stale-controller-epoch-applied`, `leader-epoch-regressed`,
//! `decision-out-of-order`, `two-leaders-applied`,
//! `uncommitted-decision-applied`) is placed at its state-change log time
//! on the history's clock (`clock.json`: one machine, one wall clock).
//! Damage no client observed is placed at its own latest named op (the
//! final read, for `unseen`) or the last ack or read at a named record,
//! and marked `observed: false`; evidence naming none of these (an etcd
//! revision, an epoch file alone) is not placed, and the run is counted as
//! detected at the campaign's end (`placed: false`).
//!
//! [`Detection::from_ns`] is the other end: the earliest moment the
//! evidence names (the ack of the write later lost). The damage happened
//! between the two; `epochal shrink` starts its search there. Measuring by
//! bisecting `--duration` instead would cost a run per probe and, since a
//! campaign's timing is not replayed exactly, answer no better.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::checker::{Anomaly, Details, Report, Verdict};
use crate::history::{Body, Op, OpType, Process};
use crate::run_dir::RunDir;

/// When a failing run's anomaly first showed, in seconds from the
/// campaign's start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detection {
    pub evidence_s: f64,
    /// The same moment on the history's clock (ns since it was opened).
    pub at_ns: u64,
    /// The earliest moment the evidence names (ns on the history's clock):
    /// the damage came between it and `at_ns`.
    pub from_ns: u64,
    /// The kind whose evidence came first.
    pub anomaly: Anomaly,
    /// The history op that showed it (absent for a state-change entry, or
    /// when not placed).
    pub history_index: Option<u64>,
    /// Whether a client op observed it then (false: damage nobody read,
    /// placed at its last named op).
    pub observed: bool,
    /// The first fault invoked at or after it (absent: none was).
    pub next_fault_s: Option<f64>,
    /// Faults (not undoes) that landed before it.
    pub faults_before: usize,
    /// False when no evidence could be placed: `evidence_s` is then the
    /// campaign's length.
    pub placed: bool,
}

/// The forbidden kinds a report names, sorted, once each.
pub fn forbidden_kinds(report: &Report) -> Vec<Anomaly> {
    let mut kinds: Vec<Anomaly> = report
        .results
        .iter()
        .filter(|r| r.verdict == Verdict::Invalid)
        .flat_map(|r| &r.evidence)
        .map(|e| e.anomaly)
        .filter(|a| a.forbidden())
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The detection of an invalid run, from its history; `None` for a run that
/// is not invalid or has no history to read. `campaign_s` is the campaign's
/// length, where unplaced evidence is counted.
pub fn detect(dir: &RunDir, report: &Report, campaign_s: f64) -> Option<Detection> {
    if report.verdict != Verdict::Invalid {
        return None;
    }
    let ops = crate::history::read_history(dir.history()).ok()?;
    Some(detect_in(&ops, report, dir.read_clock(), campaign_s))
}

/// [`detect`] over a history already read; `opened_unix_ms` is when it was
/// opened (`clock.json`), to place state-change log entries.
pub fn detect_in(
    ops: &[Op],
    report: &Report,
    opened_unix_ms: Option<u64>,
    campaign_s: f64,
) -> Detection {
    let start_ns = ops
        .iter()
        .find(|op| matches!(op.process, Process::Client(_)))
        .map_or(0, |op| op.time_ns);
    let seconds = |ns: u64| ns.saturating_sub(start_ns) as f64 / 1e9;
    let history = Observed::of(ops);
    let mut first: Option<(Placed, Anomaly)> = None;
    let mut from_ns: Option<u64> = None;
    for evidence in report
        .results
        .iter()
        .filter(|r| r.verdict == Verdict::Invalid)
        .flat_map(|r| &r.evidence)
        .filter(|e| e.anomaly.forbidden())
    {
        let placed = history.place(&evidence.details).or_else(|| {
            let ns = applied_ms(&evidence.details)?.checked_sub(opened_unix_ms?)? * 1_000_000;
            Some(Placed {
                index: None,
                ns,
                from_ns: ns,
                observed: true,
            })
        });
        let Some(p) = placed else { continue };
        from_ns = Some(from_ns.map_or(p.from_ns, |f| f.min(p.from_ns)));
        // An observed placement beats an unobserved one; then the earliest.
        let key = |q: &Placed| (!q.observed, q.ns);
        if first.as_ref().is_none_or(|(q, _)| key(&p) < key(q)) {
            first = Some((p, evidence.anomaly));
        }
    }
    let Some((p, anomaly)) = first else {
        let anomaly = forbidden_kinds(report)
            .first()
            .copied()
            .unwrap_or(Anomaly::LostAcknowledgedWrite);
        return Detection {
            evidence_s: campaign_s,
            at_ns: start_ns + (campaign_s * 1e9) as u64,
            from_ns: start_ns,
            anomaly,
            history_index: None,
            observed: false,
            next_fault_s: None,
            faults_before: landed_faults(ops).count(),
            placed: false,
        };
    };
    Detection {
        evidence_s: seconds(p.ns),
        at_ns: p.ns,
        from_ns: from_ns.unwrap_or(p.from_ns).min(p.ns),
        anomaly,
        history_index: p.index,
        observed: p.observed,
        next_fault_s: landed_faults(ops)
            .map(|op| op.time_ns)
            .find(|&t| t >= p.ns)
            .map(seconds),
        faults_before: landed_faults(ops).filter(|op| op.time_ns < p.ns).count(),
        placed: true,
    }
}

/// Where one piece of evidence was placed.
struct Placed {
    index: Option<u64>,
    ns: u64,
    from_ns: u64,
    observed: bool,
}

/// An ack or a read of one record: when, by which op, the value seen.
type Seen = (u64, u64, Option<i64>);

/// What clients observed at each record, from the history: every ack and
/// every record a poll returned, in time order, with its value.
struct Observed {
    time_of: BTreeMap<u64, u64>,
    at: BTreeMap<(String, i64), Vec<Seen>>,
}

impl Observed {
    fn of(ops: &[Op]) -> Observed {
        let mut at: BTreeMap<(String, i64), Vec<Seen>> = BTreeMap::new();
        for op in ops.iter().filter(|op| op.kind == OpType::Ok) {
            match &op.body {
                Body::Send(send) => {
                    let offsets = send.acked.as_ref().and_then(|a| a.offsets.as_ref());
                    for (offset, value) in offsets.into_iter().flatten().zip(&send.values) {
                        at.entry((send.partition.to_string(), *offset))
                            .or_default()
                            .push((op.time_ns, op.index, Some(*value)));
                    }
                }
                Body::Poll(poll) => {
                    for record in poll.read.iter().flat_map(|r| &r.records) {
                        at.entry((poll.partition.to_string(), record.offset()))
                            .or_default()
                            .push((op.time_ns, op.index, record.value().as_number()));
                    }
                }
                _ => {}
            }
        }
        Observed {
            time_of: ops.iter().map(|op| (op.index, op.time_ns)).collect(),
            at,
        }
    }

    fn seen(&self, partition: &str, offset: i64) -> &[Seen] {
        self.at
            .get(&(partition.to_owned(), offset))
            .map_or(&[], Vec::as_slice)
    }

    /// The first observation at a record whose value differs from the first.
    fn conflict(&self, partition: &str, offset: i64) -> Option<(u64, u64)> {
        let seen = self.seen(partition, offset);
        let first = seen.first()?.2;
        seen.iter()
            .find(|(_, _, v)| *v != first)
            .map(|&(t, i, _)| (t, i))
    }

    /// The module doc's rule for one piece of evidence.
    fn place(&self, details: &Details) -> Option<Placed> {
        let times: Vec<(u64, u64)> = details
            .ops()
            .into_iter()
            .filter_map(|i| self.time_of.get(&i).map(|&t| (t, i)))
            .collect();
        let records: Vec<(String, i64)> = details
            .records()
            .into_iter()
            .map(|(p, o)| (p.to_string(), o))
            .collect();
        let earliest_op = times.iter().map(|&(t, _)| t).min();
        let placed = |(ns, index): (u64, u64), observed, from: Option<u64>| Placed {
            index: Some(index),
            ns,
            from_ns: from.unwrap_or(ns).min(ns),
            observed,
        };
        let damage = matches!(
            details,
            Details::LostWrite(_)
                | Details::OffsetChanged(_)
                | Details::Unseen(_)
                | Details::Divergence(_)
                | Details::InconsistentOffsets(_)
                | Details::TruncatedRead(_)
                | Details::EpochDisagrees(_)
                | Details::EpochNotAtBatchStart(_)
        );
        if !damage {
            let latest = times.iter().copied().max()?;
            return Some(placed(latest, true, earliest_op));
        }
        let from = earliest_op.or_else(|| {
            records
                .iter()
                .filter_map(|(p, o)| self.seen(p, *o).first().map(|f| f.0))
                .min()
        });
        if let Some(seen) = records
            .iter()
            .filter_map(|(p, o)| self.conflict(p, *o))
            .min()
        {
            return Some(placed(seen, true, from));
        }
        let unobserved = times.iter().copied().max().or_else(|| {
            records
                .iter()
                .filter_map(|(p, o)| self.seen(p, *o).last().map(|&(t, i, _)| (t, i)))
                .min()
        })?;
        Some(placed(unobserved, false, from))
    }
}

/// When a broker applied the decision the evidence names (its state-change
/// log's wall time, ms since the epoch): the earliest entry it cites.
fn applied_ms(details: &Details) -> Option<u64> {
    match details {
        Details::StaleEpochApplied(d) => Some(d.stale.time_ms),
        Details::UncommittedApplied(d) => Some(d.applied.time_ms),
        Details::OutOfOrderApplied(d) => Some(d.applied.time_ms),
        Details::LeadersApplied(d) => d
            .leaders
            .iter()
            .flat_map(|l| &l.applied)
            .map(|a| a.time_ms)
            .min(),
        _ => None,
    }
}

/// The invokes of nemesis ops that are faults, not undoes, and landed: the
/// nemesis's next op (its completion) carries no error.
fn landed_faults(ops: &[Op]) -> impl Iterator<Item = &Op> {
    let nemesis: Vec<&Op> = ops
        .iter()
        .filter(|op| op.process == Process::Nemesis)
        .collect();
    let landed: Vec<&Op> = nemesis
        .windows(2)
        .filter(|w| {
            w[0].kind == OpType::Invoke
                && w[1].kind != OpType::Invoke
                && w[1].error.is_none()
                && w[0].fault().is_some_and(|f| f.verb.kind().is_some())
        })
        .map(|w| w[0])
        .collect();
    landed.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::{CheckResult, Evidence};

    fn op(index: u64, ms: u64, process: Process, kind: OpType, body: &str) -> Op {
        let line = format!(
            r#"{{"index":{index},"time_ns":{},"process":{},"type":{},{body}}}"#,
            ms * 1_000_000,
            match process {
                Process::Client(n) => n.to_string(),
                Process::Nemesis => "\"nemesis\"".into(),
            },
            serde_json::to_string(&kind).unwrap()
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn report(evidence: Evidence) -> Report {
        Report {
            verdict: Verdict::Invalid,
            results: vec![CheckResult {
                checker: "c".into(),
                verdict: Verdict::Invalid,
                message: String::new(),
                evidence: vec![evidence],
                counts: BTreeMap::new(),
            }],
            coverage: None,
        }
    }

    fn evidence(anomaly: Anomaly, details: serde_json::Value) -> Evidence {
        Evidence::new(anomaly, "s", Details::parse(anomaly, details).unwrap())
    }

    #[test]
    fn damage_is_detected_when_a_client_first_sees_the_record_change() {
        let send = |v: i64| {
            format!(r#""f":"send","value":{{"partition":"t-0","values":[{v}],"acks":"all"}}"#)
        };
        let acked = |v: i64| {
            format!(
                r#""f":"send","value":{{"partition":"t-0","values":[{v}],"acks":"all","offsets":[4]}}"#
            )
        };
        let fault = |verb: &str, done: bool| {
            if done {
                format!(r#""f":"{verb}","value":{{"target":"b1","nodes":["b1"]}}"#)
            } else {
                format!(r#""f":"{verb}","value":{{"target":"b1"}}"#)
            }
        };
        let (c, n) = (Process::Client(0), Process::Nemesis);
        let ops = vec![
            op(0, 1_000, c, OpType::Invoke, &send(1)),
            op(1, 1_010, c, OpType::Ok, &acked(1)),
            op(2, 3_000, n, OpType::Invoke, &fault("crash", false)),
            op(3, 3_001, n, OpType::Info, &fault("crash", true)),
            op(4, 3_400, c, OpType::Invoke, &send(2)),
            // Offset 4 again, another value: the first write is gone.
            op(5, 3_500, c, OpType::Ok, &acked(2)),
            op(6, 4_000, n, OpType::Invoke, &fault("pause", false)),
            op(7, 4_001, n, OpType::Info, &fault("pause", true)),
        ];
        let divergence = evidence(
            Anomaly::ReplicaDivergence,
            serde_json::json!({"common_end": 5, "holds": {}, "offset": 4,
                "partition": "t-0", "replicas": ["b1", "b2"]}),
        );
        let d = detect_in(&ops, &report(divergence), None, 60.0);
        assert!(d.placed && d.observed, "{d:?}");
        assert_eq!(d.history_index, Some(5));
        assert!((d.evidence_s - 2.5).abs() < 1e-9, "{d:?}");
        assert_eq!(d.from_ns, 1_010_000_000);
        assert_eq!(d.next_fault_s, Some(3.0));
        assert_eq!(d.faults_before, 1);

        // A lost write at an offset nobody observed again: placed at its
        // ack, not observed.
        let lost = evidence(
            Anomaly::LostAcknowledgedWrite,
            serde_json::json!({"acked_offset": 4, "acks": "all", "final_log": "b2",
                "final_log_findings": 0, "final_log_node": "b2", "history_index": 1,
                "isr": [1, 2], "lacking": ["b2"], "leader_epoch": 0,
                "partition": "t-0", "value": 1}),
        );
        let d = detect_in(&ops[..5], &report(lost), None, 60.0);
        assert!(d.placed && !d.observed, "{d:?}");
        assert_eq!(d.history_index, Some(1));
    }
}
