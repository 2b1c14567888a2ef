//! Coverage: whether a run's faults landed where they could have broken
//! something. A valid verdict means something only if, while faults were in
//! force, clients were writing and the cluster was changing leaders; a run
//! whose faults all fell in quiet moments is "vacuously valid" (Jepsen's
//! term). This file measures that from what the run left — the history and
//! etcd's timeline — and holds it to the minimums a schedule declares
//! (`[workload] min_*`): below one, a run that would be valid is unknown,
//! its reason starting "vacuous: ". It never makes a run invalid and never
//! hides an anomaly: the merge keeps invalid over unknown.
//!
//! A fault's *window* runs from its invoke to the invoke of the next nemesis
//! op that landed (its undo — resume, restart, heal — or the next fault), or
//! to the end of the history. Per fault it counts the client ops in flight
//! when it fired, the ops invoked inside its window and the writes
//! acknowledged inside it. Over the run it counts, from etcd's timeline, the
//! leader changes, ISR shrinks and expands and unclean elections after each
//! partition's first state (the first is the topic's creation, not the run's
//! doing), and, from the history, the replicas a disk fault truncated.
//!
//! What it does not see: a follower's truncation at a leader change leaves
//! no trace in any stored file of the reference broker (its state-change log
//! records decisions, not truncations), so only the nemesis's own cuts are
//! counted; leader changes are counted over the run, not per fault, because
//! etcd's revisions carry no time.
//!
//! A pure function of the run directory, so `epochal check` recomputes it.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::context::RunData;
use super::verdict::CheckResult;
use crate::fault::Role;
use crate::history::{Op, OpType, Process, Verb};
use crate::node::NodeId;
use crate::observe::timeline::Timeline;
use crate::schedule::Workload;
use crate::topic_partition::PartitionRef;

/// The checker name coverage's result carries in the report.
pub const NAME: &str = "coverage";

/// A run's coverage (results.json's `coverage`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Each fault that landed, in history order.
    pub faults: Vec<FaultCoverage>,
    /// Writes acknowledged inside some fault's window (windows never overlap).
    pub acked_during_faults: u64,
    /// From etcd's timeline; `None` when the run has none.
    pub timeline: Option<TimelineCoverage>,
    /// Replicas a disk fault (power loss, truncate-log) cut records from.
    pub truncations: u64,
    /// Partitions no send reached while a fault was in force (a send that
    /// overlapped a window counts, whatever its outcome).
    pub partitions_unwritten_during_faults: Vec<PartitionRef>,
}

/// One fault and the client ops around it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCoverage {
    /// The fault's completion in `history.jsonl`.
    pub history_index: u64,
    pub verb: Verb,
    /// What its target resolved to when it fired.
    pub nodes: Vec<NodeId>,
    /// Its invoke, in ms since the history opened.
    pub at_ms: u64,
    /// How long its window lasted.
    pub window_ms: u64,
    /// The nemesis op that ended the window; `None`: the history's end.
    pub ended_by: Option<Verb>,
    /// Client ops invoked before the fault and completed after it fired
    /// (or never).
    pub in_flight: u64,
    /// Client ops invoked inside the window.
    pub invoked: u64,
    /// Writes acknowledged inside the window.
    pub acked: u64,
}

impl FaultCoverage {
    /// The client ops the fault overlapped: in flight when it fired, or
    /// invoked inside its window.
    pub fn ops(&self) -> u64 {
        self.in_flight + self.invoked
    }

    /// `pause b3 at 1.2 s`, as a person finds it in the report.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(NodeId::to_string).collect();
        format!(
            "{} {} at {:.1} s",
            self.verb,
            nodes.join(","),
            self.at_ms as f64 / 1000.0
        )
    }
}

/// What etcd's timeline shows the run caused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineCoverage {
    /// New leader epochs with a leader, after each partition's first state.
    pub leader_changes: u64,
    /// States whose ISR lost a member of the one before.
    pub isr_shrinks: u64,
    /// States whose ISR gained a member.
    pub isr_expands: u64,
    /// Leaders elected from outside the previous ISR
    /// ([`Timeline::unclean_elections`]).
    pub unclean_elections: u64,
}

impl TimelineCoverage {
    pub fn of(timeline: &Timeline) -> TimelineCoverage {
        let mut coverage = TimelineCoverage {
            unclean_elections: timeline.unclean_elections().len() as u64,
            ..TimelineCoverage::default()
        };
        let mut last = HashMap::new();
        for state in &timeline.partition_states {
            let Some(previous) = last.insert((&state.topic, state.partition), state) else {
                continue;
            };
            if state.leader != -1 && state.leader_epoch != previous.leader_epoch {
                coverage.leader_changes += 1;
            }
            if previous.isr.iter().any(|m| !state.isr.contains(m)) {
                coverage.isr_shrinks += 1;
            }
            if state.isr.iter().any(|m| !previous.isr.contains(m)) {
                coverage.isr_expands += 1;
            }
        }
        coverage
    }
}

/// One client op from its invoke to its completion.
struct Span<'a> {
    invoked_ns: u64,
    /// `u64::MAX`: never completed.
    completed_ns: u64,
    /// The send's partition, for a send.
    partition: Option<&'a PartitionRef>,
    acked: bool,
}

/// Client ops as spans, leaving out the final read (after the final heal,
/// never a workload op).
fn spans(history: &[Op]) -> Vec<Span<'_>> {
    let mut open: HashMap<Process, &Op> = HashMap::new();
    let mut spans = Vec::new();
    for op in history {
        if op.process == Process::Nemesis || op.poll().is_some_and(|p| p.final_read) {
            continue;
        }
        match op.kind {
            OpType::Invoke => {
                open.insert(op.process, op);
            }
            _ => {
                if let Some(invoke) = open.remove(&op.process) {
                    spans.push(span(invoke, op.time_ns, op.acked_send().is_some()));
                }
            }
        }
    }
    spans.extend(
        open.into_values()
            .map(|invoke| span(invoke, u64::MAX, false)),
    );
    spans
}

/// The span of `invoke`, completed at `completed_ns`.
fn span(invoke: &Op, completed_ns: u64, acked: bool) -> Span<'_> {
    Span {
        invoked_ns: invoke.time_ns,
        completed_ns,
        partition: invoke.send().map(|s| &s.partition),
        acked,
    }
}

/// A nemesis op that landed: its invoke's time and its completion.
struct Landed<'a> {
    invoked_ns: u64,
    done: &'a Op,
    verb: Verb,
}

/// Nemesis ops that completed without an error, in history order.
fn landed(history: &[Op]) -> Vec<Landed<'_>> {
    let mut invoked_ns = None;
    let mut landed = Vec::new();
    for op in history.iter().filter(|op| op.process == Process::Nemesis) {
        match (op.kind, op.fault()) {
            (OpType::Invoke, _) => invoked_ns = Some(op.time_ns),
            (_, Some(fault)) if op.error.is_none() => landed.push(Landed {
                invoked_ns: invoked_ns.take().unwrap_or(op.time_ns),
                done: op,
                verb: fault.verb,
            }),
            _ => invoked_ns = None,
        }
    }
    landed
}

impl Coverage {
    /// The coverage of a loaded run.
    pub fn of(run: &RunData) -> Coverage {
        let spans = spans(&run.history);
        let nemesis = landed(&run.history);
        let end_ns = run.history.last().map_or(0, |op| op.time_ns);
        let mut coverage = Coverage {
            timeline: run.timeline.as_ref().map(TimelineCoverage::of),
            ..Coverage::default()
        };
        let mut written = BTreeSet::new();
        for (i, fault) in nemesis.iter().enumerate() {
            if fault.verb.role() == Role::Undo {
                continue;
            }
            let next = nemesis.get(i + 1);
            let (start, end) = (fault.invoked_ns, next.map_or(end_ns, |n| n.invoked_ns));
            let mut counted = FaultCoverage {
                history_index: fault.done.index,
                verb: fault.verb,
                nodes: fault
                    .done
                    .fault()
                    .and_then(|f| f.done.as_ref())
                    .map_or_else(Vec::new, |done| done.nodes.clone()),
                at_ms: start / 1_000_000,
                window_ms: end.saturating_sub(start) / 1_000_000,
                ended_by: next.map(|n| n.verb),
                in_flight: 0,
                invoked: 0,
                acked: 0,
            };
            for span in &spans {
                let inside = |ns: u64| start <= ns && ns < end;
                if span.invoked_ns < start && span.completed_ns > start {
                    counted.in_flight += 1;
                }
                if inside(span.invoked_ns) {
                    counted.invoked += 1;
                }
                if span.acked && inside(span.completed_ns) {
                    counted.acked += 1;
                }
                if span.invoked_ns < end && span.completed_ns > start {
                    written.extend(span.partition);
                }
            }
            coverage.acked_during_faults += counted.acked;
            coverage.faults.push(counted);
            coverage.truncations += truncations(fault.done);
        }
        let mut partitions = run.partitions();
        partitions.extend(spans.iter().filter_map(|s| s.partition.cloned()));
        coverage.partitions_unwritten_during_faults = partitions
            .into_iter()
            // Kafka's internal topics take the brokers' writes, not the workload's.
            .filter(|p| !p.topic.starts_with("__") && !written.contains(p))
            .collect();
        coverage
    }

    /// Holds the coverage to `workload`'s declared minimums: `None` when it
    /// declares none, else the coverage's own result — valid when each is
    /// met, unknown ("vacuous: …", naming each minimum missed and by how
    /// much) when one is not. A minimum over what the system under test
    /// does not let the harness see (`sees_timeline`) is not held, and the
    /// result says so.
    pub fn judge(&self, workload: &Workload, sees_timeline: bool) -> Option<CheckResult> {
        let declared = [
            workload.min_faults,
            workload.min_ops_per_fault,
            workload.min_acked_during_faults,
            workload.min_leader_changes,
        ];
        if declared.iter().all(Option::is_none) {
            return None;
        }
        let mut missed: Vec<String> = Vec::new();
        let mut unseen = Vec::new();
        if let Some(min) = workload.min_faults {
            let n = self.faults.len() as u64;
            missed.extend(short("min_faults", min, n, || format!("{n} faults landed")));
        }
        if let Some(min) = workload.min_ops_per_fault {
            match self.faults.iter().min_by_key(|f| f.ops()) {
                None if min > 0 => missed.push(format!(
                    "min_ops_per_fault = {min}: no fault landed to overlap an op ({min} short)"
                )),
                None => {}
                Some(fewest) => missed.extend(short("min_ops_per_fault", min, fewest.ops(), || {
                    let below = self.faults.iter().filter(|f| f.ops() < min).count();
                    format!(
                        "{below} of {} faults overlapped fewer than {min} client ops, the fewest {} ({})",
                        self.faults.len(),
                        fewest.ops(),
                        fewest.describe()
                    )
                })),
            }
        }
        if let Some(min) = workload.min_acked_during_faults {
            let n = self.acked_during_faults;
            missed.extend(short("min_acked_during_faults", min, n, || {
                format!("{n} writes acknowledged during faults")
            }));
        }
        if let Some(min) = workload.min_leader_changes {
            match &self.timeline {
                _ if !sees_timeline => unseen.push(
                    "min_leader_changes not held: the system under test keeps no etcd \
                     timeline to count leader changes in",
                ),
                None => missed.push(format!(
                    "min_leader_changes = {min}: the run has no etcd timeline to count them in"
                )),
                Some(t) => {
                    missed.extend(short("min_leader_changes", min, t.leader_changes, || {
                        format!("etcd shows {} leader changes", t.leader_changes)
                    }))
                }
            }
        }
        let result = if missed.is_empty() {
            let mut met = "every declared minimum met".to_owned();
            for note in &unseen {
                met.push_str("; ");
                met.push_str(note);
            }
            CheckResult::valid(NAME, met)
        } else {
            CheckResult::unknown(NAME, format!("vacuous: {}", missed.join("; ")))
        };
        Some(result)
    }
}

impl Coverage {
    /// The fewest and the median client ops a fault overlapped; `None` with
    /// no fault.
    pub fn ops_per_fault(&self) -> Option<(u64, u64)> {
        let mut ops: Vec<u64> = self.faults.iter().map(FaultCoverage::ops).collect();
        ops.sort_unstable();
        Some((*ops.first()?, ops[ops.len() / 2]))
    }

    /// The coverage in a few lines for a person (the run's summary, `epochal
    /// check`), each starting with what it counts.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let idle = self.faults.iter().filter(|f| f.ops() == 0).count();
        lines.push(match self.ops_per_fault() {
            None => "faults: none landed".to_owned(),
            Some((fewest, median)) => format!(
                "faults: {} landed; client ops overlapped per fault: fewest {fewest}, median \
                 {median}; {idle} overlapped none",
                self.faults.len()
            ),
        });
        lines.push(format!(
            "writes acknowledged during faults: {}",
            self.acked_during_faults
        ));
        lines.push(match &self.timeline {
            None => "etcd: no timeline".to_owned(),
            Some(t) => format!(
                "etcd: {} leader changes, {} ISR shrinks, {} ISR expands, {} unclean elections",
                t.leader_changes, t.isr_shrinks, t.isr_expands, t.unclean_elections
            ),
        });
        lines.push(format!(
            "replicas truncated by disk faults: {}",
            self.truncations
        ));
        if !self.partitions_unwritten_during_faults.is_empty() {
            let names: Vec<String> = self
                .partitions_unwritten_during_faults
                .iter()
                .map(PartitionRef::to_string)
                .collect();
            lines.push(format!(
                "partitions no write reached during a fault: {}",
                names.join(", ")
            ));
        }
        lines
    }
}

/// `key = min: what (n short)` when `got` falls short of `min`.
fn short(key: &str, min: u64, got: u64, what: impl FnOnce() -> String) -> Option<String> {
    (got < min).then(|| format!("{key} = {min}: {} ({} short)", what(), min - got))
}

/// Replicas `done`, a disk fault's completion, cut records from.
fn truncations(done: &Op) -> u64 {
    let cuts = done.fault().and_then(|f| f.done.as_ref()?.cut.as_ref());
    cuts.into_iter()
        .flatten()
        .flat_map(|node| node.replicas())
        .filter(|cut| cut.log_end_offset_after < cut.log_end_offset_before)
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::timeline::PartitionStateChange;
    use crate::schedule::Schedule;

    /// `(time_ns, process, type, f, value, error)`: one history line.
    type Row<'a> = (u64, &'a str, &'a str, &'a str, &'a str, Option<&'a str>);

    /// A history from rows, indexed in order.
    fn history(rows: &[Row<'_>]) -> Vec<Op> {
        rows.iter()
            .enumerate()
            .map(|(index, (time_ns, process, kind, f, value, error))| {
                let process = match *process {
                    "nemesis" => "\"nemesis\"".to_owned(),
                    n => n.to_owned(),
                };
                let error = error.map_or(String::new(), |e| format!(r#","error":"{e}""#));
                let line = format!(
                    r#"{{"index":{index},"time_ns":{time_ns},"process":{process},"type":"{kind}","f":"{f}","value":{value}{error}}}"#
                );
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
            })
            .collect()
    }

    const SEND_0: &str = r#"{"acks":"1","node":"b1","partition":"t-0","values":[1]}"#;
    const ACK_0: &str = r#"{"acks":"1","node":"b1","offsets":[0],"partition":"t-0","values":[1]}"#;
    const SEND_1: &str = r#"{"acks":"1","node":"b1","partition":"t-1","values":[2]}"#;
    const SEND_2: &str = r#"{"acks":"1","node":"b1","partition":"t-2","values":[3]}"#;
    const ACK_2: &str = r#"{"acks":"1","node":"b1","offsets":[0],"partition":"t-2","values":[3]}"#;
    const FINAL_READ: &str = r#"{"final_read":true,"from_offset":0,"node":"b2","partition":"t-0"}"#;
    const READ: &str = r#"{"final_read":true,"from_offset":0,"high_watermark":1,"node":"b2","partition":"t-0","records":[[0,1]]}"#;

    use PartitionStateChange as State;

    /// A write to t-2 before any fault; a pause of b3 with a send to t-0 in
    /// flight across it and one to t-1 invoked (and failed) inside it; a
    /// crash that did not land; a crash of b1 that no op overlapped, its
    /// window running to the end; the final read after it.
    fn run() -> RunData {
        let history = history(&[
            (1, "3", "invoke", "send", SEND_2, None),
            (5, "3", "ok", "send", ACK_2, None),
            (10, "0", "invoke", "send", SEND_0, None),
            (
                20_000_000,
                "nemesis",
                "invoke",
                "pause",
                r#"{"target":"b3"}"#,
                None,
            ),
            (
                21_000_000,
                "nemesis",
                "info",
                "pause",
                r#"{"target":"b3","nodes":["b3"]}"#,
                None,
            ),
            (30_000_000, "0", "ok", "send", ACK_0, None),
            (40_000_000, "1", "invoke", "send", SEND_1, None),
            (
                45_000_000,
                "1",
                "fail",
                "send",
                SEND_1,
                Some("NOT_LEADER_OR_FOLLOWER"),
            ),
            (
                50_000_000,
                "nemesis",
                "invoke",
                "resume",
                r#"{"target":"b3"}"#,
                None,
            ),
            (
                51_000_000,
                "nemesis",
                "info",
                "resume",
                r#"{"target":"b3","nodes":["b3"]}"#,
                None,
            ),
            (
                55_000_000,
                "nemesis",
                "invoke",
                "crash",
                r#"{"target":"controller"}"#,
                None,
            ),
            (
                56_000_000,
                "nemesis",
                "info",
                "crash",
                r#"{"target":"controller"}"#,
                Some("resolves to no node"),
            ),
            (
                60_000_000,
                "nemesis",
                "invoke",
                "crash",
                r#"{"target":"b1"}"#,
                None,
            ),
            (
                61_000_000,
                "nemesis",
                "info",
                "crash",
                r#"{"target":"b1","nodes":["b1"]}"#,
                None,
            ),
            (70_000_000, "2", "invoke", "poll", FINAL_READ, None),
            (80_000_000, "2", "ok", "poll", READ, None),
        ]);
        let timeline = Timeline {
            partition_states: vec![
                // The topic's creation: not the run's doing.
                State::of_t0(2, 1, 0, &[1, 2, 3]),
                State::of_t0(3, 1, 0, &[1, 2]),
                State::of_t0(4, 2, 1, &[2]),
                State::of_t0(5, 2, 1, &[2, 1]),
                // 3 was not in [2, 1]: unclean.
                State::of_t0(6, 3, 2, &[3]),
            ],
            controllers: vec![],
            registrations: Vec::new(),
        };
        RunData {
            history,
            timeline: Some(timeline),
            ..RunData::default()
        }
    }

    #[test]
    fn each_fault_counts_the_ops_across_and_inside_its_window() {
        let coverage = Coverage::of(&run());
        let [pause, crash] = coverage.faults.as_slice() else {
            panic!("two faults landed: {coverage:#?}");
        };
        assert_eq!(
            (pause.verb, pause.nodes.as_slice(), pause.history_index),
            (Verb::Pause, &[NodeId::new(3)][..], 4)
        );
        assert_eq!((pause.at_ms, pause.window_ms), (20, 30));
        assert_eq!(pause.ended_by, Some(Verb::Resume));
        assert_eq!((pause.in_flight, pause.invoked, pause.acked), (1, 1, 1));
        assert_eq!(pause.ops(), 2);
        // The failed crash ended nothing; the final read is no workload op.
        assert_eq!(
            (crash.verb, crash.ended_by, crash.ops()),
            (Verb::Crash, None, 0)
        );
        assert_eq!(crash.window_ms, 20);
        assert_eq!(coverage.acked_during_faults, 1);
        assert_eq!(coverage.ops_per_fault(), Some((0, 2)));
        assert_eq!(
            coverage.partitions_unwritten_during_faults,
            vec![PartitionRef::new("t", 2)],
            "t-0 was written across the pause, t-1 inside it (failing counts)"
        );
        assert_eq!(
            coverage.timeline,
            Some(TimelineCoverage {
                leader_changes: 2,
                isr_shrinks: 3,
                isr_expands: 2,
                unclean_elections: 1,
            })
        );
        assert_eq!(coverage.truncations, 0);
        let lines = coverage.lines();
        assert_eq!(
            lines[0],
            "faults: 2 landed; client ops overlapped per fault: fewest 0, median 2; 1 overlapped none"
        );
        assert_eq!(lines[4], "partitions no write reached during a fault: t-2");
    }

    fn workload(keys: &str) -> Workload {
        let text = format!(
            "[cluster]\nbrokers = 3\n[[cluster.topic]]\nname = \"t\"\npartitions = 3\n\
             replication_factor = 3\n[workload]\n{keys}\n"
        );
        Schedule::parse("s.toml", &text).unwrap().workload
    }

    #[test]
    fn a_minimum_missed_is_vacuous_and_says_which_and_by_how_much() {
        let coverage = Coverage::of(&run());
        assert_eq!(coverage.judge(&workload(""), true), None);
        let met = coverage
            .judge(&workload("min_faults = 2\nmin_leader_changes = 2"), true)
            .unwrap();
        assert_eq!(
            (met.verdict, met.message.as_str(), met.checker.as_str()),
            (
                crate::checker::Verdict::Valid,
                "every declared minimum met",
                NAME
            )
        );
        let missed = coverage
            .judge(
                &workload(
                    "min_faults = 3\nmin_ops_per_fault = 1\nmin_acked_during_faults = 1\n\
                     min_leader_changes = 5",
                ),
                true,
            )
            .unwrap();
        assert_eq!(missed.verdict, crate::checker::Verdict::Unknown);
        assert_eq!(
            missed.message,
            "vacuous: min_faults = 3: 2 faults landed (1 short); min_ops_per_fault = 1: 1 of 2 \
             faults overlapped fewer than 1 client ops, the fewest 0 (crash b1 at 0.1 s) (1 \
             short); min_leader_changes = 5: etcd shows 2 leader changes (3 short)"
        );
        // With no fault at all a minimum per fault is missed, not met.
        let quiet = Coverage::default();
        let none = quiet
            .judge(&workload("min_ops_per_fault = 2"), true)
            .unwrap();
        assert_eq!(
            none.message,
            "vacuous: min_ops_per_fault = 2: no fault landed to overlap an op (2 short)"
        );
        // A count the system does not let the harness see is not held.
        let unseen = quiet
            .judge(&workload("min_leader_changes = 1"), false)
            .unwrap();
        assert_eq!(unseen.verdict, crate::checker::Verdict::Valid);
        assert!(unseen.message.contains("not held"), "{}", unseen.message);
        let no_timeline = quiet
            .judge(&workload("min_leader_changes = 1"), true)
            .unwrap();
        assert_eq!(no_timeline.verdict, crate::checker::Verdict::Unknown);
    }

    #[test]
    fn a_disk_fault_that_cut_records_is_a_truncation() {
        let cut = r#"{"target":"b2","nodes":["b2"],"cut":[{"node":"b2","cuts":[{"bytes_removed":70,"log_end_offset_after":1,"log_end_offset_before":2,"replica":"t-0","segments_deleted":[]},{"bytes_removed":0,"log_end_offset_after":4,"log_end_offset_before":4,"replica":"t-1","segments_deleted":[]}]}]}"#;
        let run = RunData {
            history: history(&[
                (
                    1,
                    "nemesis",
                    "invoke",
                    "power-loss",
                    r#"{"target":"b2"}"#,
                    None,
                ),
                (2, "nemesis", "info", "power-loss", cut, None),
            ]),
            ..RunData::default()
        };
        assert_eq!(Coverage::of(&run).truncations, 1);
    }
}
