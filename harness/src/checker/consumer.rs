//! Consumer anomalies in the terms of Jepsen's Kafka workload
//! (`jepsen.tests.kafka`), over this harness's bounded polls:
//!
//! - `inconsistent-offsets`: one offset of a partition carries two different
//!   values across every ok poll and every acknowledged `acks=all` send.
//! - `poll-skip`: a poll asked from `from_offset` and its first record is at a
//!   higher offset: the records between were skipped.
//! - `int-poll-skip`: within one poll, two successive records have offsets
//!   with a gap between them.
//! - `int-nonmonotonic-poll`: within one poll, a record's offset is not above
//!   the previous record's.
//! - `truncated-read`: a poll saw value v at offset o, and after the final
//!   heal a replica of the partition holds another value, or nothing, at o.
//!
//! Skips rely on Kafka offsets being contiguous: this workload uses no
//! compaction, so every offset below the log end holds a record. Offsets a
//! replica holds as control records (transaction markers, which the client
//! drops) are exempt from the skip rules, and for a read_committed poll so
//! are the records of aborted transactions (KIP-98: such a consumer is
//! told to drop them).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::CheckOutcome;
use super::evidence::{HeldAfterHeal, InconsistentOffsets, TruncatedRead, ValueSeen};
use super::excuses::{Excuses, Judgement};
use super::index::{AckedSends, OkPoll, RunIndex};
use super::{Anomaly, CheckResult, Checker, Evidence, RunData};
use crate::history::RecordValue;
use crate::node::NodeId;
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;
use index::{FirstSeen, HeldValues};
use within::{sent_at, skips_and_order};

const NAME: &str = "consumer";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A partition is one totally ordered log in which each offset holds one record \
            for good: every poll and every acknowledged (acks=all) send agree on the value at an \
            offset; a poll returns the records from its fetch offset on, contiguously and in \
            strictly increasing offset order; and a record a consumer saw (below the high \
            watermark, so committed) is still at its offset in every replica after the final heal.",
        source: "Kafka documentation: Introduction (each partition is an ordered, immutable \
            sequence of records, each assigned a sequential offset) and Design 4.7 Replication \
            (a message is committed once all \
            in-sync replicas have it, and only committed messages are given to consumers; a \
            committed message will not be lost as long as one in-sync replica is alive). \
            Jepsen's Kafka workload (jepsen.tests.kafka) for the anomalies' names: \
            inconsistent-offsets, poll-skip, nonmonotonic-poll, int-poll-skip, \
            int-nonmonotonic-poll.",
        not_checked: "Successive polls of one consumer are compared within one assignment only \
            (a rebalance, a crash or a committed-offset read starts a new one), and a poll not \
            of a subscribed consumer that fetches from anywhere but where the process's last \
            poll ended is a seek, judged by the per-poll rules alone. A poll that ends before its high watermark, or returns nothing \
            though its from_offset is below it, is not a skip here. Sends with acks=1 or 0 \
            are not sources for inconsistent-offsets (Kafka lets an acks=1 write be lost and \
            its offset reused), nor is an acks=all send whose loss GUARANTEES.md's lost-write rule excuses \
            (an unclean election, or disk faults — power loss, truncate-log — that cut its \
            offset from every member of its ISR at the ack or as it last stood, after the ack: \
            see lost-write), nor a read of a record that such a loss later removed (an unclean \
            election in a later epoch than the poll's, or disk faults after the poll's invoke \
            (the read may have been served at any moment after it) that cut its \
            offset from every member of the ISR as it last stood; counted as reads-excused — \
            a read after the loss that excuses its write is not excused); lost or duplicated \
            writes are other checkers' business. \
            Truncated reads are judged on the replicas as read after the final heal: a replica \
            that never caught up (a run that did not quiesce) shows as holding nothing, and a \
            partition no replica hosts makes this rule unknown. Values are compared as the \
            workload writes them (decimal text); keys, headers and timestamps are not compared.",
        needs: &[],
        check,
    }
}

/// What the replicas hold for one partition after the final heal.
struct AfterHeal<'a> {
    /// Node → (log end offset, findings, offset → value of its data
    /// records), for each node hosting the partition.
    replicas: BTreeMap<NodeId, (i64, usize, HeldValues<'a>)>,
    /// Offsets some replica holds as control records.
    control: BTreeSet<i64>,
    /// Offsets some replica holds in an aborted transaction's data batch:
    /// a read_committed consumer skips them.
    aborted: BTreeSet<i64>,
}

impl<'a> AfterHeal<'a> {
    fn read(run: &'a RunData, partition: &PartitionRef) -> AfterHeal<'a> {
        let mut log = AfterHeal {
            replicas: BTreeMap::new(),
            control: BTreeSet::new(),
            aborted: BTreeSet::new(),
        };
        for (node, replica) in run.holders(partition) {
            let txns = replica.transactions();
            let records: usize = replica
                .batches()
                .filter(|b| b.intact)
                .map(|b| b.records.len())
                .sum();
            let mut values = Vec::with_capacity(records);
            for (batch, record) in replica.records() {
                if batch.is_control() {
                    log.control.insert(record.offset);
                } else {
                    if batch.is_transactional() && txns.aborted(record.offset) {
                        log.aborted.insert(record.offset);
                    }
                    values.push((record.offset, record.value.as_ref()));
                }
            }
            log.replicas.insert(
                node,
                (
                    replica.log_end_offset,
                    replica.findings.len(),
                    HeldValues::new(values),
                ),
            );
        }
        log
    }
}

/// A value seen at an offset, by an acknowledged send or a poll.
struct Sighting<'a> {
    partition: &'a PartitionRef,
    offset: i64,
    value: Cow<'a, RecordValue>,
    index: u64,
    /// Polls: the index of the invoke (the read may have been served at any
    /// moment after it); sends: the same as `index`.
    invoked: u64,
    send: bool,
    /// Polls: the leader epoch etcd named just after.
    leader_epoch: Option<i32>,
}

/// Where a value at an offset was seen: history indices of polls and sends.
struct Sightings {
    value: RecordValue,
    polls: Vec<u64>,
    sends: Vec<u64>,
}

/// Calls `see` with every sighting, in the order seen: each acknowledged
/// acks=all send's values whose loss is not excused (by `excused`, (ok
/// index, value)), in history order, then each ok poll's records. Returns
/// the acks=all sends with offsets, and the values left out as excused.
fn each_sighting<'a>(
    sends: &AckedSends<'a>,
    polls: &[OkPoll<'a>],
    excused: &BTreeSet<(u64, i64)>,
    mut see: impl FnMut(Sighting<'a>),
) -> (u64, u64) {
    let mut acked_sends = 0u64;
    let mut excused_sends = 0u64;
    for &(op, send, ack) in &sends.sends {
        let Some(offsets) = &ack.offsets else {
            continue;
        };
        if send.acks != Acks::All {
            continue;
        }
        acked_sends += 1;
        for (&value, &offset) in send.values.iter().zip(offsets) {
            if !excused.is_empty() && excused.contains(&(op.index, value)) {
                excused_sends += 1;
                continue;
            }
            see(Sighting {
                partition: &send.partition,
                offset,
                value: Cow::Owned(RecordValue::Number(value)),
                index: op.index,
                invoked: op.index,
                send: true,
                leader_epoch: None,
            });
        }
    }
    for poll in polls {
        for record in poll.records {
            see(Sighting {
                partition: poll.partition,
                offset: record.offset(),
                value: Cow::Borrowed(record.value()),
                index: poll.index,
                invoked: poll.invoke_index,
                send: false,
                leader_epoch: poll.leader_epoch,
            });
        }
    }
    (acked_sends, excused_sends)
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let polls = index.ok_polls();
    let sends = index.acked_sends();
    let excuses = Excuses::of(run);
    let excused = excused_values(sends, &excuses);
    // Below, a read is excused (`Excuses::excuses_read`) by what followed it,
    // never by its write's excuse: an unclean election or a disk fault
    // explains a value disappearing, not a replica serving it after it was
    // gone (offsets-backwards on the high-watermark setting reads a lost value
    // after the election that lost it, beside its replacement at the same
    // offset — an anomaly).
    // Every value seen at each (partition, offset), in the order seen, is
    // grouped by offset below. Only the first value an offset was seen with
    // is kept for each; the sightings of an offset seen with two values are
    // then gathered again, and only they are sorted.
    let mut first_seen = FirstSeen::new(run);
    let (acked_sends, excused_sends) = each_sighting(sends, polls, &excused, |s| {
        first_seen.see(s.partition, s.offset, &s.value);
    });
    let differing = Differing::gather(&first_seen, sends, polls, &excused);
    let mut evidence = Vec::new();
    // Reads of records a later excused loss removed (a disk fault of the
    // ISR as it last stood, an unclean election): counted, not evidence.
    let mut excused_reads = inconsistent_offsets(&differing, &excuses, &mut evidence);

    let partitions: BTreeSet<&PartitionRef> = polls.iter().map(|p| p.partition).collect();
    let logs: BTreeMap<&PartitionRef, AfterHeal> = partitions
        .iter()
        .map(|&p| (p, AfterHeal::read(run, p)))
        .collect();
    let known_value = |partition: &PartitionRef, offset: i64| -> RecordValue {
        // The first in JSON text order, as evidence lists an offset's values.
        differing
            .at(partition, offset)
            .iter()
            .map(|s| &*s.value)
            .min_by_key(|value| value.to_string())
            .cloned()
            .or_else(|| first_seen.only(partition, offset))
            .or_else(|| {
                logs.get(partition)?
                    .replicas
                    .values()
                    .find_map(|(_, _, values)| values.get(offset))
            })
            .unwrap_or(RecordValue::Null)
    };
    // When each value's send was invoked (each value is sent once in a
    // run): a record the final log holds at an offset a poll passed over is
    // no skip if it was sent only after the poll ended — that poll passed a
    // marker (or, read_committed, an aborted record) that a later loss cut
    // away, and the offset was written again.
    let sent_at: HashMap<i64, u64> = sent_at(&run.history);
    let written_after = |partition: &PartitionRef, offset: i64, poll_index: u64| -> bool {
        let final_value = logs.get(partition).and_then(|log| {
            log.replicas
                .values()
                .find_map(|(_, _, values)| values.get(offset))
        });
        matches!(final_value, Some(RecordValue::Number(v))
            if sent_at.get(&v).is_some_and(|&invoked| invoked > poll_index))
    };
    // A skip between two polls is of offsets holding data: seen by a poll
    // or held by a replica (control records and gaps are not records).
    // Built only if a gap between two polls needs it.
    // Each polled (partition, offset), with the earliest moment a value
    // polled there was sent (0 when a value's send is not in the history).
    let polled: std::cell::OnceCell<HashMap<(&PartitionRef, i64), u64>> =
        std::cell::OnceCell::new();
    let holds_record = |partition: &PartitionRef, offset: i64, read_committed: bool, poll: u64| {
        // What the replicas hold decides first: a marker (and, for a
        // read_committed poll, an aborted record) is no record to return,
        // nor is a record sent only after the poll; only other offsets need
        // the polls' set.
        if written_after(partition, offset, poll) {
            return false;
        }
        if let Some(log) = logs.get(partition)
            && (log.control.contains(&offset) || (read_committed && log.aborted.contains(&offset)))
        {
            return false;
        }
        let sent_before = polled
            .get_or_init(|| {
                let mut earliest: HashMap<(&PartitionRef, i64), u64> = HashMap::new();
                for p in polls {
                    for r in p.records {
                        let sent = match r.value() {
                            RecordValue::Number(v) => sent_at.get(v).copied().unwrap_or(0),
                            _ => 0,
                        };
                        let slot = earliest.entry((p.partition, r.offset())).or_insert(sent);
                        *slot = (*slot).min(sent);
                    }
                }
                earliest
            })
            .get(&(partition, offset))
            // Seen by a poll: a record the poll should have returned only
            // if some value seen there was sent before it ended.
            .is_some_and(|&sent| sent < poll);
        sent_before
            || logs.get(partition).is_some_and(|log| {
                log.replicas
                    .values()
                    .any(|(_, _, values)| values.get(offset).is_some())
            })
    };
    // Within one poll, a gap is a skip. With transactions in the run a gap
    // may be a marker a later loss took from every replica, so there only
    // offsets known to have held a record sent before the poll count.
    let transactional = run.history.iter().any(|op| op.f() == "txn")
        || logs.values().any(|log| !log.control.is_empty());
    let skipped = |partition: &PartitionRef, offset: i64, read_committed: bool, poll: u64| {
        if transactional {
            holds_record(partition, offset, read_committed, poll)
        } else {
            !written_after(partition, offset, poll)
        }
    };
    // Markers, and for read_committed aborted records, are not returned by
    // design.
    let not_returned = |partition: &PartitionRef, offset: i64, read_committed: bool| {
        let log = &logs[partition];
        log.control.contains(&offset) || (read_committed && log.aborted.contains(&offset))
    };
    skips_and_order(polls, not_returned, known_value, skipped, &mut evidence);
    across::across_polls(&run.history, holds_record, known_value, &mut evidence);

    let (reads, unhosted) = reads_not_held(polls, &logs);
    excused_reads += truncated_reads(&reads, polls, &logs, sends, &excuses, &mut evidence);

    Ok(verdict(
        evidence,
        polls,
        &unhosted,
        acked_sends,
        excused_sends,
        excused_reads,
    ))
}

/// The acks=all values whose loss is excused, by (ok index, value): once such
/// a write may be gone, its offset may hold another write, as after a lost
/// acks=1 write.
fn excused_values(sends: &AckedSends, excuses: &Excuses) -> BTreeSet<(u64, i64)> {
    let excused_acks: Vec<_> = sends
        .values()
        .map(|acked| {
            acked
                .filter(|a| {
                    a.acks == Acks::All && matches!(excuses.judge(a), Judgement::Excused(_))
                })
                .collect()
        })
        .unwrap_or_default();
    excused_acks.iter().map(|a| (a.index, a.value)).collect()
}

/// The sightings of every offset seen with two values, sorted by (partition,
/// offset), then the order seen.
struct Differing<'a> {
    /// The partitions sighted, sorted: a sighting is keyed by its
    /// partition's rank here, not its name, as comparing names dominated
    /// the sort of millions of sightings.
    names: Vec<&'a PartitionRef>,
    seen: Vec<((usize, i64), Sighting<'a>)>,
}

impl<'a> Differing<'a> {
    /// Gathers again the sightings of each offset `first_seen` saw with two
    /// values, and sorts only them.
    fn gather(
        first_seen: &FirstSeen<'_>,
        sends: &AckedSends<'a>,
        polls: &[OkPoll<'a>],
        excused: &BTreeSet<(u64, i64)>,
    ) -> Differing<'a> {
        let mut differing: Vec<Sighting> = Vec::new();
        if first_seen.any_differ {
            each_sighting(sends, polls, excused, |s| {
                if first_seen.differ(s.partition, s.offset) {
                    differing.push(s);
                }
            });
        }
        let names: Vec<&PartitionRef> = differing
            .iter()
            .map(|s| s.partition)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut seen: Vec<((usize, i64), Sighting)> = differing
            .into_iter()
            .map(|s| {
                let partition = names
                    .binary_search(&s.partition)
                    .expect("every sighting's partition is named");
                ((partition, s.offset), s)
            })
            .collect();
        // Stable: within an offset, the order seen.
        seen.sort_by_key(|(key, _)| *key);
        Differing { names, seen }
    }

    /// The sightings of `offset` in `partition`, if it was seen with two
    /// values, in the order seen.
    fn at(&self, partition: &PartitionRef, offset: i64) -> Vec<&Sighting<'a>> {
        let Some(key) = self
            .names
            .binary_search(&partition)
            .ok()
            .map(|p| (p, offset))
        else {
            return Vec::new();
        };
        let start = self.seen.partition_point(|(k, _)| *k < key);
        self.seen[start..]
            .iter()
            .take_while(|(k, _)| *k == key)
            .map(|(_, s)| s)
            .collect()
    }
}

/// Evidence of each offset still seen with two values once the reads a later
/// excused loss explains are left out; returns how many reads were so excused.
fn inconsistent_offsets(
    differing: &Differing,
    excuses: &Excuses,
    evidence: &mut Vec<Evidence>,
) -> u64 {
    let mut excused_reads = 0u64;
    for group in differing.seen.chunk_by(|a, b| a.0 == b.0) {
        if group.iter().all(|(_, s)| s.value == group[0].1.value) {
            continue;
        }
        // Only where an offset was seen with two values is each read judged.
        let kept: Vec<&Sighting> = group
            .iter()
            .map(|(_, s)| s)
            .filter(|s| {
                let excused = !s.send
                    && excuses.excuses_read(s.invoked, s.partition, s.offset, s.leader_epoch);
                excused_reads += u64::from(excused);
                !excused
            })
            .collect();
        if kept.iter().all(|s| s.value == kept[0].value) {
            continue;
        }
        evidence.push(inconsistent_offset(&kept));
    }
    excused_reads
}

/// The evidence of one offset seen with two values: each value with the
/// polls and sends that saw it.
fn inconsistent_offset(group: &[&Sighting]) -> Evidence {
    let (partition, offset) = (group[0].partition, group[0].offset);
    // Keyed by the value's JSON text, so evidence lists them in the
    // order it always has.
    let mut values: BTreeMap<String, Sightings> = BTreeMap::new();
    for sighting in group {
        let entry = values
            .entry(sighting.value.to_string())
            .or_insert_with(|| Sightings {
                value: sighting.value.clone().into_owned(),
                polls: Vec::new(),
                sends: Vec::new(),
            });
        if sighting.send {
            entry.sends.push(sighting.index);
        } else {
            entry.polls.push(sighting.index);
        }
    }
    let shown: Vec<String> = values.values().map(|s| s.value.to_string()).collect();
    let summary = format!(
        "{partition} offset {offset} was seen with {} values: {}",
        values.len(),
        shown.join(", ")
    );
    let listed: Vec<ValueSeen> = values
        .into_values()
        .map(|s| ValueSeen {
            polls: s.polls,
            sends: s.sends,
            value: s.value,
        })
        .collect();
    Evidence::new(
        Anomaly::InconsistentOffsets,
        summary,
        InconsistentOffsets {
            offset,
            partition: partition.clone(),
            values: listed,
        },
    )
}

/// Reads of values some replica does not hold after the final heal, by
/// (partition, offset, value's JSON text): the value and every poll that read it.
type ReadsNotHeld<'a> = BTreeMap<(&'a PartitionRef, i64, String), (&'a RecordValue, Vec<u64>)>;

/// Gathers the reads some replica does not hold after the final heal, and
/// the partitions polled that no replica hosts.
fn reads_not_held<'a>(
    polls: &[OkPoll<'a>],
    logs: &BTreeMap<&PartitionRef, AfterHeal>,
) -> (ReadsNotHeld<'a>, BTreeSet<&'a PartitionRef>) {
    let mut reads: ReadsNotHeld = BTreeMap::new();
    let mut unhosted: BTreeSet<&PartitionRef> = BTreeSet::new();
    for poll in polls {
        if poll.records.is_empty() {
            continue;
        }
        if logs[poll.partition].replicas.is_empty() {
            unhosted.insert(poll.partition);
            continue;
        }
        let replicas = &logs[poll.partition].replicas;
        for record in poll.records {
            let (offset, value) = (record.offset(), record.value());
            // Every replica holding what was read is the common case; only
            // the others are gathered by value.
            if replicas
                .values()
                .all(|(_, _, values)| values.holds(offset, value))
            {
                continue;
            }
            reads
                .entry((poll.partition, record.offset(), record.value().to_string()))
                .or_insert_with(|| (record.value(), Vec::new()))
                .1
                .push(poll.index);
        }
    }
    (reads, unhosted)
}

/// Evidence of each read no excused loss explains whose value some replica
/// does not hold after the final heal (one per (partition, offset, value),
/// with every poll that read it); returns how many reads were excused.
fn truncated_reads(
    reads: &ReadsNotHeld,
    polls: &[OkPoll],
    logs: &BTreeMap<&PartitionRef, AfterHeal>,
    sends: &AckedSends,
    excuses: &Excuses,
    evidence: &mut Vec<Evidence>,
) -> u64 {
    let mut excused_reads = 0u64;
    // Each poll's invoke and leader epoch, by its completion's index.
    let poll_of: HashMap<u64, (u64, Option<i32>)> = polls
        .iter()
        .map(|p| (p.index, (p.invoke_index, p.leader_epoch)))
        .collect();
    // Acknowledged values by (partition, value), built only for evidence.
    let mut written: Option<HashMap<(PartitionRef, i64), u64>> = None;
    for ((partition, offset, _), (value, indices)) in reads {
        // A read that an excused loss later took away is not a truncated read.
        if indices.iter().all(|index| {
            let (invoked, epoch) = poll_of.get(index).copied().unwrap_or((*index, None));
            excuses.excuses_read(invoked, partition, *offset, epoch)
        }) {
            excused_reads += indices.len() as u64;
            continue;
        }
        let replicas = &logs[partition].replicas;
        let held: BTreeMap<NodeId, Option<RecordValue>> = replicas
            .iter()
            .map(|(node, (_, _, values))| (*node, values.get(*offset)))
            .collect();
        if held.values().all(|v| v.as_ref() == Some(*value)) {
            continue;
        }
        // Whether the value was an acknowledged write, and how lost-write
        // judged losing it: what a reader of the failure asks first.
        let write = match value {
            RecordValue::Number(v) => match written
                .get_or_insert_with(|| acknowledged_values(sends))
                .get(&((*partition).clone(), *v))
            {
                Some(index) => format!("; its write was acknowledged at history index {index}"),
                None => "; its write was never acknowledged".to_string(),
            },
            _ => String::new(),
        };
        evidence.push(truncated_read(
            partition, *offset, value, indices, replicas, &held, &write,
        ));
    }
    excused_reads
}

/// Each acknowledged value's ok index, by (partition, value).
fn acknowledged_values(sends: &AckedSends) -> HashMap<(PartitionRef, i64), u64> {
    sends
        .values()
        .map(|acked| {
            acked
                .map(|a| ((a.partition.into_owned(), a.value), a.index))
                .collect()
        })
        .unwrap_or_default()
}

/// The evidence of one value polls read at an offset that replicas do not
/// all hold after the final heal (`held`: what each holds there).
fn truncated_read(
    partition: &PartitionRef,
    offset: i64,
    value: &RecordValue,
    polls: &[u64],
    replicas: &BTreeMap<NodeId, (i64, usize, HeldValues)>,
    held: &BTreeMap<NodeId, Option<RecordValue>>,
    write: &str,
) -> Evidence {
    let shown: Vec<String> = held
        .iter()
        .filter(|(_, v)| v.as_ref() != Some(value))
        .map(|(node, v)| match v {
            Some(other) => format!("{node} holds {other}"),
            None => match replicas.get(node) {
                Some((end, ..)) => format!("{node} holds nothing (log end {end})"),
                _ => format!("{node} holds nothing"),
            },
        })
        .collect();
    let replicas: BTreeMap<NodeId, HeldAfterHeal> = replicas
        .iter()
        .map(|(node, (leo, findings, values))| {
            let held = HeldAfterHeal {
                findings: *findings,
                log_end_offset: *leo,
                value: values.get(offset),
            };
            (*node, held)
        })
        .collect();
    Evidence::new(
        Anomaly::TruncatedRead,
        format!(
            "{partition} offset {offset}: polls read {value}, after the final heal {}{write}",
            shown.join(", ")
        ),
        TruncatedRead {
            offset,
            partition: partition.clone(),
            polls: polls.to_vec(),
            replicas,
            value: value.clone(),
        },
    )
}

/// The checker's verdict over the evidence, with its counts; the excused
/// counts only when an excuse applied, so runs without one report as before.
fn verdict(
    evidence: Vec<Evidence>,
    polls: &[OkPoll],
    unhosted: &BTreeSet<&PartitionRef>,
    acked_sends: u64,
    excused_sends: u64,
    excused_reads: u64,
) -> CheckResult {
    let records_read: usize = polls.iter().map(|p| p.records.len()).sum();
    let result = CheckResult::fold(
        NAME,
        evidence,
        super::anomalies_message,
        (!unhosted.is_empty()).then(|| {
            let unhosted: Vec<String> = unhosted.iter().map(|p| p.to_string()).collect();
            format!(
                "no other anomaly, but no replica hosts {}: truncated reads not checked there",
                unhosted.join(", ")
            )
        }),
        || {
            format!(
                "{} polls ({records_read} records) and {acked_sends} acks=all sends agree; \
                 no skips, no reordering, every read record still held",
                polls.len()
            )
        },
    );
    let result = result
        .with_count("polls", polls.len() as u64)
        .with_count("records-read", records_read as u64)
        .with_count("acks-all-sends", acked_sends);
    let result = if excused_sends > 0 {
        result.with_count("acks-all-values-excused", excused_sends)
    } else {
        result
    };
    if excused_reads > 0 {
        result.with_count("reads-excused", excused_reads)
    } else {
        result
    }
}

mod across;
mod index;
#[cfg(test)]
mod tests;
mod within;
