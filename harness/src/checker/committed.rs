//! Committed offsets ([groups]): a group's committed offset of a partition
//! never goes backwards without a commit that moved it back. A read of the
//! committed offset (`committed`, Kafka's OffsetFetch) must answer at least
//! the offset of every commit acknowledged before the read began, unless a
//! commit of exactly what it answered was sent after that acknowledgement
//! (a reset, or a commit still in flight). A commit the coordinator
//! acknowledged and then lost — acknowledged before its offsets partition's
//! followers had it (`offsets.commit.required.acks=1`), or left out of what a
//! new coordinator loaded (KAFKA-5600) — shows as a read below it: consumers
//! that resume from it re-read what they had already processed.

use std::collections::{BTreeMap, HashMap};

use super::evidence::CommittedRegressed;
use super::excuses::Excuses;
use super::index::{EVIDENCE_MAX, RunIndex};
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence};
use crate::history::{Body, Op, OpType};
use crate::node::NodeId;
use crate::topic_partition::{OFFSETS_TOPIC, PartitionRef, offsets_partition_of};

mod resume;
mod txn_offsets;
#[cfg(test)]
mod txn_offsets_tests;

pub const NAME: &str = "committed-offsets";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A group's committed offset of a partition never goes backwards without a \
            commit that moved it back: a read of it (OffsetFetch) answers at least the offset \
            of every commit acknowledged before the read began, on the coordinator that \
            acknowledged it and on every coordinator after it. And a group consumes at least \
            once: a member that takes up a partition (after a rebalance, a crash, a coordinator \
            failover) resumes at most at the group's last commit, so no record below the \
            offset it polls from went unreturned to the group.",
        source: "Kafka documentation, Design §4.6 and the consumer's committed-position contract \
            (KafkaConsumer#committed); offsets.commit.required.acks (default -1: a commit is \
            acknowledged once every in-sync replica of the offsets partition has it); \
            KAFKA-5600 (0.11.0.0: a new coordinator loaded part of a multi-segment offsets log; \
            fixed in 0.11.0.1); the consumer's delivery semantics (Design §4.6: committing \
            after processing gives at-least-once).",
        not_checked: "Commits and reads of groups with members (the generation-checked commits \
            of subscribe-mode consumers) are judged alike, by offset alone. Resume skips are \
            judged against the records some poll of the run returned (all of them when the run \
            ends with a final read), not against the replicas; a group's offsets reset on \
            purpose would show as skips (the workload never resets one). A commit that ended info may or may not have taken effect: it may explain \
            a later read equal to it, and never makes a read invalid. A commit lost as \
            lost-write's rule excuses a lost write (disk faults that took the group's offsets \
            partition from every member of its ISR as it last stood, or an unclean election of \
            it) is counted as `regressed-excused`, not invalid; the commit's place in that log \
            is not known, so any recorded cut of the partition counts. A read answered by a \
            coordinator etcd no longer named leader of the group's offsets partition just after \
            (a deposed coordinator serving its cache, as Kafka's does until it resigns: the \
            KAFKA-4362 discussion) is `stale-committed-read`, allowed and counted: Kafka does not \
            promise a linearizable OffsetFetch.",
        needs: &[],
        check,
    }
}

/// Whether a run has anything this checker judges: it is listed only then.
pub fn judges(op: &Op) -> bool {
    matches!(op.body, Body::Commit(_) | Body::Committed(_))
        || op.poll().is_some_and(|p| p.group.is_some())
        || op.txn().is_some_and(|t| t.group.is_some())
}

/// One commit: its offset, when it was invoked and (if acknowledged) when.
struct CommitSpan {
    offset: i64,
    invoked_ns: u64,
    acked: Option<(u64, u64)>,
    /// A transaction's offsets (KIP-447): acknowledged once EndTxn(commit)
    /// was answered, before the commit marker reaches the offsets
    /// partition, so only a stable read is held to them.
    txn: bool,
}

/// One read: what it answered, when it was invoked, its completion's index.
struct ReadSpan {
    offset: i64,
    invoked_ns: u64,
    index: u64,
    /// Asked with `require_stable` (KIP-447).
    stable: bool,
    /// The coordinator that answered, when etcd named another leader of
    /// the group's offsets partition just after: (answered, leader).
    deposed: Option<(NodeId, NodeId)>,
}

/// Spans of one kind by (group, partition).
type ByGroup<T> = BTreeMap<(String, PartitionRef), Vec<T>>;

/// A read of `key`'s committed offset below the acknowledged commit of
/// `floor_offset` (history `acked_index`): allowed when a deposed
/// coordinator answered it (`stale-committed-read`), else a regression.
fn read_below(
    (group, partition): &(String, PartitionRef),
    read: &ReadSpan,
    floor_offset: i64,
    acked_index: u64,
) -> Evidence {
    let (anomaly, by) = match read.deposed {
        Some((node, leader)) => (
            Anomaly::StaleCommittedRead,
            format!(
                " from {node}, a deposed coordinator (etcd named {leader} leader of the group's \
                 offsets partition just after)"
            ),
        ),
        None => (Anomaly::CommittedOffsetRegressed, String::new()),
    };
    Evidence {
        anomaly,
        summary: format!(
            "group {group}'s committed offset of {partition} read {} (history index {}){by} after \
             a commit of {floor_offset} was acknowledged (history index {acked_index})",
            read.offset, read.index
        ),
        details: CommittedRegressed {
            acked_index,
            acked_offset: floor_offset,
            group: group.clone(),
            partition: partition.clone(),
            read_index: read.index,
            read_offset: read.offset,
        }
        .into(),
    }
}

/// Every commit that took or may have taken effect (plain, `ok` or `info`; or a
/// transaction's that committed or may have) and
/// every read of a committed offset, by (group, partition), each with the
/// time its op began.
fn spans(run: &RunIndex) -> (ByGroup<CommitSpan>, ByGroup<ReadSpan>) {
    let mut commits: BTreeMap<(String, PartitionRef), Vec<CommitSpan>> = BTreeMap::new();
    let mut reads: BTreeMap<(String, PartitionRef), Vec<ReadSpan>> = BTreeMap::new();
    // Each process's invoke waits for its completion (one op at a time).
    let mut open: HashMap<crate::history::Process, u64> = HashMap::new();
    for op in &run.run.history {
        let process = op.process;
        if op.kind == OpType::Invoke {
            if judges(op) {
                open.insert(process, op.time_ns);
            }
            continue;
        }
        let Some(invoked_ns) = open.remove(&process) else {
            continue;
        };
        match &op.body {
            // A commit that failed was refused before anything was
            // appended (workload/commit.rs, session/app_groups.rs): it
            // moved nothing, so it explains no read.
            Body::Commit(_) if op.kind == OpType::Fail => {}
            Body::Commit(c) => commits
                .entry((c.group.clone(), c.partition.clone()))
                .or_default()
                .push(CommitSpan {
                    offset: c.offset,
                    invoked_ns,
                    acked: (op.kind == OpType::Ok).then_some((op.time_ns, op.index)),
                    txn: false,
                }),
            Body::Committed(c) if op.kind == OpType::Ok => {
                if let Some(offset) = c.offset {
                    reads
                        .entry((c.group.clone(), c.partition.clone()))
                        .or_default()
                        .push(ReadSpan {
                            offset,
                            invoked_ns,
                            index: op.index,
                            stable: c.stable,
                            deposed: c.node.zip(c.leader).filter(|(node, leader)| node != leader),
                        });
                }
            }
            _ => {}
        }
    }
    // A subscribed consumer's transactions' offsets: those of one that
    // committed are acknowledged at its completion, those of one that may
    // have (info) may have moved the offset; one that never committed moved
    // nothing (txn_offsets.rs holds that).
    for t in &run.txns().txns {
        let Some(group) = &t.txn.group else { continue };
        if t.fate.never_committed() {
            continue;
        }
        let invoked_ns = run
            .run
            .history
            .get(t.invoke_index as usize)
            .filter(|op| op.index == t.invoke_index)
            .map_or(0, |op| op.time_ns);
        let acked = (t.fate == crate::checker::txn_index::Fate::Committed)
            .then_some(t.completed)
            .flatten()
            .map(|(index, ns)| (ns, index));
        for (partition, &offset) in &t.txn.offsets {
            commits
                .entry((group.clone(), partition.clone()))
                .or_default()
                .push(CommitSpan {
                    offset,
                    invoked_ns,
                    acked,
                    txn: true,
                });
        }
    }
    (commits, reads)
}

fn check(run: &RunIndex) -> CheckOutcome {
    let (commits, mut reads) = spans(run);
    let mut evidence = Vec::new();
    let (mut regressed, mut excused, mut stale, mut checked) = (0u64, 0u64, 0u64, 0u64);
    // A lost commit is held to the rule for lost writes: built only when a
    // read went back.
    let mut excuses: Option<Excuses> = None;
    let offsets_partitions = run
        .run
        .partitions()
        .iter()
        .filter(|p| p.topic == OFFSETS_TOPIC)
        .count() as u32;
    for (key, reads) in &mut reads {
        let sent = commits.get(key).map(Vec::as_slice).unwrap_or_default();
        // The acknowledged commits in acknowledgement order, and for each
        // offset the latest time a commit of it was sent: one pass over the
        // reads in the order they began (linear but for the sorts).
        // Two floors: of every acknowledged commit, for stable reads; of
        // plain commits alone, for the others.
        let acked_of = |with_txns: bool| {
            let mut acked: Vec<(u64, i64, u64)> = sent
                .iter()
                .filter(|c| with_txns || !c.txn)
                .filter_map(|c| c.acked.map(|(ns, index)| (ns, c.offset, index)))
                .collect();
            acked.sort_unstable();
            acked
        };
        let (acked_any, acked_plain) = (acked_of(true), acked_of(false));
        let mut last_sent: HashMap<i64, u64> = HashMap::new();
        for c in sent {
            let latest = last_sent.entry(c.offset).or_insert(c.invoked_ns);
            *latest = (*latest).max(c.invoked_ns);
        }
        reads.sort_by_key(|r| r.invoked_ns);
        let (mut next_any, mut next_plain) = (0, 0);
        let (mut floor_any, mut floor_plain): (Option<(u64, i64, u64)>, _) = (None, None);
        for read in reads.iter() {
            checked += 1;
            for (acked, next, floor) in [
                (&acked_any, &mut next_any, &mut floor_any),
                (&acked_plain, &mut next_plain, &mut floor_plain),
            ] {
                while *next < acked.len() && acked[*next].0 < read.invoked_ns {
                    *floor = Some(acked[*next]);
                    *next += 1;
                }
            }
            let floor = if read.stable { floor_any } else { floor_plain };
            // The latest-acknowledged commit before the read began.
            let Some((acked_ns, floor_offset, acked_index)) = floor else {
                continue;
            };
            if read.offset >= floor_offset {
                continue;
            }
            // A commit of exactly this offset sent after the floor's
            // acknowledgement moved it back (or may have).
            if last_sent.get(&read.offset).is_some_and(|&ns| ns > acked_ns) {
                continue;
            }
            let group = &key.0;
            if offsets_partitions > 0 {
                let excuses = excuses.get_or_insert_with(|| Excuses::of(run.run));
                let log = offsets_partition_of(group, offsets_partitions);
                if excuses.excuses_lost_commit(acked_index, &log).is_some() {
                    excused += 1;
                    continue;
                }
            }
            let found = read_below(key, read, floor_offset, acked_index);
            if found.anomaly == Anomaly::StaleCommittedRead {
                stale += 1;
            } else {
                regressed += 1;
            }
            if evidence.len() < EVIDENCE_MAX {
                evidence.push(found);
            }
        }
    }
    let (group_polls, skipped) =
        resume::resume_skips(&run.run.history, run.ok_polls(), &mut evidence);
    let txns = txn_offsets::check(run, &mut evidence);
    let aborted = txns.aborted_reads + txns.aborted_finals;
    let result = if regressed == 0 && skipped == 0 && aborted == 0 {
        // Stale reads of deposed coordinators are allowed, and listed.
        let mut result = CheckResult::valid(
            NAME,
            format!(
                "{checked} read(s) of committed offsets, none below an acknowledged commit but \
                 from a deposed coordinator ({stale}); {group_polls} subscribed poll(s), none \
                 past a record its group had not seen{}",
                txn_offsets::valid_part(&txns)
            ),
        );
        result.evidence = evidence;
        result
    } else {
        CheckResult::invalid(
            NAME,
            format!(
                "{regressed} read(s) of a committed offset below an acknowledged commit; \
                 {skipped} subscribed poll(s) past records their group never saw{}",
                if aborted == 0 {
                    String::new()
                } else {
                    format!("; {aborted} committed offset(s) only aborted transactions sent")
                }
            ),
            evidence,
        )
    };
    let result = txn_offsets::with_counts(result, &txns);
    Ok(result
        .with_count("reads", checked)
        .with_count(
            "commits-acknowledged",
            commits
                .values()
                .flatten()
                .filter(|c| c.acked.is_some())
                .count() as u64,
        )
        .with_count("regressed", regressed)
        .with_count("regressed-excused", excused)
        .with_count("stale-reads", stale)
        .with_count("group-polls", group_polls)
        .with_count("resume-skips", skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::RunData;
    use crate::history::{Commit, Committed, Process};

    fn op(index: u64, process: u64, kind: OpType, body: Body) -> Op {
        Op {
            index,
            time_ns: index * 10,
            process: Process::Client(process),
            kind,
            body,
            error: None,
        }
    }

    fn commit(offset: i64) -> Body {
        Body::Commit(Commit {
            group: "g".into(),
            partition: PartitionRef::new("t", 0),
            offset,
            node: None,
            generation: None,
            member: None,
            deleted: false,
        })
    }

    fn read(offset: Option<i64>) -> Body {
        Body::Committed(Committed {
            group: "g".into(),
            partition: PartitionRef::new("t", 0),
            node: None,
            offset,
            leader: None,
            stable: false,
        })
    }

    fn verdict(history: Vec<Op>) -> CheckResult {
        let run = RunData {
            history,
            ..RunData::default()
        };
        checker().check_run(&run).unwrap()
    }

    #[test]
    fn a_read_below_an_acknowledged_commit_is_named_and_a_reset_is_not() {
        let acked = |at| {
            [
                op(at, 0, OpType::Invoke, commit(10)),
                op(at + 1, 0, OpType::Ok, commit(10)),
            ]
        };
        let mut history: Vec<Op> = acked(0).into();
        history.push(op(2, 0, OpType::Invoke, read(None)));
        history.push(op(3, 0, OpType::Ok, read(Some(1))));
        let result = verdict(history.clone());
        assert_eq!(result.evidence.len(), 1, "{result:?}");
        assert_eq!(
            result.evidence[0].anomaly,
            Anomaly::CommittedOffsetRegressed
        );
        assert_eq!(result.evidence[0].details.ops(), [1, 3].into());

        // A commit of 1 sent after the commit of 10 moved it back (here it
        // ended info: it may have taken effect).
        history.splice(
            2..2,
            [
                op(2, 1, OpType::Invoke, commit(1)),
                op(3, 1, OpType::Info, commit(1)),
            ],
        );
        for (i, op) in history.iter_mut().enumerate() {
            op.index = i as u64;
            op.time_ns = i as u64 * 10;
        }
        assert!(verdict(history.clone()).evidence.is_empty());

        // The same commit refused (fail: nothing was appended) explains
        // nothing: the read below 10 is a regression again.
        history[3].kind = OpType::Fail;
        let result = verdict(history);
        assert_eq!(result.evidence.len(), 1, "{result:?}");
        assert_eq!(
            result.evidence[0].anomaly,
            Anomaly::CommittedOffsetRegressed
        );

        // A read of at least the commit, or a read begun before the
        // commit was acknowledged, is fine.
        let mut history = vec![op(0, 0, OpType::Invoke, commit(10))];
        history.push(op(1, 1, OpType::Invoke, read(None)));
        history.push(op(2, 0, OpType::Ok, commit(10)));
        history.push(op(3, 1, OpType::Ok, read(Some(-1))));
        history.push(op(4, 1, OpType::Invoke, read(None)));
        history.push(op(5, 1, OpType::Ok, read(Some(10))));
        assert!(verdict(history).evidence.is_empty());
    }

    /// An acknowledged deletion of the group's offset (OffsetDelete,
    /// DeleteGroups) leaves no commit: a read of -1 after it is not a
    /// regression, where without it the same read is one; a commit after
    /// the deletion is the floor again.
    #[test]
    fn a_read_of_no_commit_after_an_acknowledged_deletion_is_not_a_regression() {
        let deletion = || {
            let mut body = commit(-1);
            if let Body::Commit(c) = &mut body {
                c.deleted = true;
            }
            body
        };
        let history = |deleted: OpType| {
            vec![
                op(0, 0, OpType::Invoke, commit(10)),
                op(1, 0, OpType::Ok, commit(10)),
                op(2, 0, OpType::Invoke, deletion()),
                op(3, 0, deleted, deletion()),
                op(4, 0, OpType::Invoke, read(None)),
                op(5, 0, OpType::Ok, read(Some(-1))),
            ]
        };
        assert!(verdict(history(OpType::Ok)).evidence.is_empty());
        // Without the deletion the same read is a lost commit.
        let mut kept = history(OpType::Ok);
        kept.drain(2..4);
        for (i, op) in kept.iter_mut().enumerate() {
            op.index = i as u64;
            op.time_ns = i as u64 * 10;
        }
        assert_eq!(
            verdict(kept).evidence[0].anomaly,
            Anomaly::CommittedOffsetRegressed
        );
        let mut again = history(OpType::Ok);
        again.splice(
            4..4,
            [
                op(4, 0, OpType::Invoke, commit(7)),
                op(5, 0, OpType::Ok, commit(7)),
            ],
        );
        for (i, op) in again.iter_mut().enumerate() {
            op.index = i as u64;
            op.time_ns = i as u64 * 10;
        }
        assert_eq!(
            verdict(again).evidence[0].anomaly,
            Anomaly::CommittedOffsetRegressed
        );
    }

    #[test]
    fn a_stale_read_from_a_deposed_coordinator_is_allowed_and_listed() {
        let answered_by = |node: u32, leader: u32| {
            let mut body = read(Some(1));
            if let Body::Committed(c) = &mut body {
                c.node = Some(NodeId::new(node));
                c.leader = Some(NodeId::new(leader));
            }
            body
        };
        let history = |answer: Body| {
            vec![
                op(0, 0, OpType::Invoke, commit(10)),
                op(1, 0, OpType::Ok, commit(10)),
                op(2, 0, OpType::Invoke, read(None)),
                op(3, 0, OpType::Ok, answer),
            ]
        };
        // b1 answered while etcd already named b3: allowed, listed.
        let result = verdict(history(answered_by(1, 3)));
        assert_eq!(result.verdict, crate::checker::Verdict::Valid, "{result:?}");
        assert_eq!(result.evidence[0].anomaly, Anomaly::StaleCommittedRead);
        assert_eq!(result.counts["stale-reads"], 1);
        // The leader itself answering low is the anomaly.
        let result = verdict(history(answered_by(3, 3)));
        assert_eq!(result.verdict, crate::checker::Verdict::Invalid);
        assert_eq!(
            result.evidence[0].anomaly,
            Anomaly::CommittedOffsetRegressed
        );
    }
}
