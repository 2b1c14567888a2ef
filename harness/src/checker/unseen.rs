//! Unseen writes (Jepsen's `unseen`, [groups]): once the run's final read
//! (`[workload] final_read`) has read a partition from its beginning to its
//! high watermark, every acknowledged write to it must have been returned
//! by some poll of the run. Jepsen can only count such writes, since it
//! cannot tell a write the consumers never reached from one that is gone;
//! epochal settles each against the partition's final log: a value the log
//! holds that no poll returned, not even a fresh consumer reading the whole
//! partition, is `unseen` (the broker did not serve what it holds); a value
//! the log lacks is a lost write, the lost-write checker's to judge, and is
//! only counted here.

use std::collections::{BTreeMap, HashSet};

use super::evidence::Unseen;
use super::index::{EVIDENCE_MAX, RunIndex};
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence};
use crate::history::{Op, OpType, RecordValue};
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "unseen";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "Every acknowledged write a partition's log holds can be read: a consumer that \
            reads the partition from its beginning to its high watermark returns it.",
        source: "Kafka documentation, Design §4.7 (a committed message is given to consumers) and \
            the consumer's contract (records are returned in offset order from the position on); \
            Jepsen's Kafka workload (jepsen.tests.kafka) for the name `unseen` and the final \
            read that makes it meaningful.",
        not_checked: "Partitions the final read did not reach (no leader, no answer within its \
            bound) and runs without `[workload] final_read`; writes with acks=0 (no offset) \
            and those that ended info or fail. A value the final log lacks is lost-write's \
            business (counted here as `absent`, never reported). Values are matched by value \
            within the partition, not by offset (offset-changed judges positions).",
        needs: &[],
        check,
    }
}

/// Whether a run has a final read: the checker is listed only then.
pub fn judges(op: &Op) -> bool {
    op.poll().is_some_and(|p| p.final_read)
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    // Partitions the final read returned, with the index and high
    // watermark of the read.
    let mut final_reads: BTreeMap<&PartitionRef, (u64, i64)> = BTreeMap::new();
    for op in &run.history {
        if op.kind == OpType::Ok
            && let Some((poll, read)) = op.read()
            && poll.final_read
        {
            final_reads.insert(&poll.partition, (op.index, read.high_watermark));
        }
    }
    // The values polls returned, per partition: the workload's numbers
    // sorted (a million-op run returns millions of records, and a sorted
    // list looked up by halving costs a fraction of a hash set of them),
    // any other value in a set.
    let mut numbers: BTreeMap<&PartitionRef, Vec<i64>> = BTreeMap::new();
    let mut others: HashSet<(&PartitionRef, &RecordValue)> = HashSet::new();
    for poll in index.ok_polls() {
        let list = numbers.entry(poll.partition).or_default();
        for record in poll.records {
            match record.value().as_number() {
                Some(n) => list.push(n),
                None => {
                    others.insert((poll.partition, record.value()));
                }
            }
        }
    }
    for list in numbers.values_mut() {
        list.sort_unstable();
        list.dedup();
    }
    let seen = |partition: &PartitionRef, value: i64| {
        numbers
            .get(partition)
            .is_some_and(|list| list.binary_search(&value).is_ok())
    };
    let mut evidence = Vec::new();
    let (mut checked, mut unseen, mut absent, mut not_read) = (0u64, 0u64, 0u64, 0u64);
    for a in index.acked_sends().values()? {
        if a.acks == Acks::None {
            continue;
        }
        let Some(&(read_index, high_watermark)) = final_reads.get(a.partition.as_ref()) else {
            not_read += 1;
            continue;
        };
        checked += 1;
        if seen(&a.partition, a.value) {
            continue;
        }
        let held = match index.final_log(&a.partition) {
            Ok(log) => log.by_value.contains(a.value),
            Err(_) => false,
        };
        if !held {
            absent += 1;
            continue;
        }
        unseen += 1;
        if evidence.len() < EVIDENCE_MAX {
            evidence.push(Evidence {
                anomaly: Anomaly::Unseen,
                summary: format!(
                    "{}: held by the final log, but no poll returned it, not even the final \
                     read to high watermark {high_watermark} (history index {read_index})",
                    a.describe()
                ),
                details: Unseen {
                    write: a.details(),
                    final_read_index: read_index,
                    final_high_watermark: high_watermark,
                }
                .into(),
            });
        }
    }
    let result = if unseen > 0 {
        CheckResult::invalid(
            NAME,
            format!("{unseen} acknowledged write(s) held by the log that no poll returned"),
            evidence,
        )
    } else if final_reads.is_empty() {
        CheckResult::unknown(NAME, "the run's final read returned no partition")
    } else {
        CheckResult::valid(
            NAME,
            format!(
                "{checked} acknowledged write(s) in {} finally-read partition(s): each returned \
                 by a poll, or absent from the log ({absent})",
                final_reads.len()
            ),
        )
    };
    Ok(result
        .with_count("checked", checked)
        .with_count("unseen", unseen)
        .with_count("absent", absent)
        .with_count("not-finally-read", not_read))
}
