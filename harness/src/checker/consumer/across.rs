//! Successive polls of one consumer (Jepsen's `nonmonotonic-poll` and
//! cross-poll `poll-skip`): within one assignment, a consumer's next poll of
//! a partition goes on where its last one ended. The first record of a
//! process's poll must be above the last record its previous poll of that
//! partition returned (else `nonmonotonic-poll`), and no record may lie
//! between the two (else `poll-skip`). A rebalance, a client crash or a
//! read of the committed offset by the process starts a new assignment:
//! the consumer may rightly go back to what its group committed, which the
//! committed-offsets checker judges instead.
//!
//! A subscribed consumer's polls (those naming a group) never seek within an
//! assignment, so theirs are held to this strictly. Any other poll names the
//! offset it fetches from, and one from anywhere but where the process's
//! last poll ended is a seek (a scripted step reading from 0 again): it
//! starts afresh, and the per-poll rules (the fetch offset against the
//! records) judge it.

use std::collections::{HashMap, HashSet};

use super::super::evidence::{NonmonotonicPoll, PollSkip};
use super::super::{Anomaly, Evidence};
use crate::history::{Body, Op, OpType, Process, RecordValue};
use crate::topic_partition::PartitionRef;

/// Where a process's last poll of a partition ended: its last record's
/// offset and the poll's history index.
struct Ended {
    last: i64,
    index: u64,
}

/// Evidence over successive polls of each process; `holds_record` says
/// whether an offset holds a data record the poll of that history index
/// (read_committed or not) should have returned (a skip is only a skip of
/// records that existed then), `known_value` what one holds.
pub(super) fn across_polls(
    history: &[Op],
    holds_record: impl Fn(&PartitionRef, i64, bool, u64) -> bool,
    known_value: impl Fn(&PartitionRef, i64) -> RecordValue,
    evidence: &mut Vec<Evidence>,
) {
    let mut ended: HashMap<(Process, &PartitionRef), Ended> = HashMap::new();
    // Processes whose assignment began anew since their last poll.
    let mut renewed: HashSet<Process> = HashSet::new();
    for op in history {
        if op.kind == OpType::Invoke {
            continue;
        }
        match &op.body {
            Body::Rebalance(_) | Body::ClientCrash(_) | Body::Committed(_) => {
                renewed.insert(op.process);
                continue;
            }
            Body::Poll(_) => {}
            _ => continue,
        }
        let Some((poll, read)) = op.read() else {
            continue;
        };
        if renewed.remove(&op.process) {
            ended.retain(|(process, _), _| *process != op.process);
        }
        let (Some(first), Some(last)) = (read.records.first(), read.records.last()) else {
            continue;
        };
        let key = (op.process, &poll.partition);
        let seek = |before: &&Ended| {
            poll.group.is_none() && i64::try_from(poll.from_offset).ok() != Some(before.last + 1)
        };
        if let Some(before) = ended.get(&key).filter(|b| !seek(b)) {
            let offset = first.offset();
            if offset <= before.last {
                evidence.push(Evidence::new(
                    Anomaly::NonmonotonicPoll,
                    format!(
                        "process {}'s poll at index {} of {} began at offset {offset}, at or \
                         below offset {} its poll at index {} returned",
                        op.process, op.index, poll.partition, before.last, before.index
                    ),
                    NonmonotonicPoll {
                        after: before.last,
                        index: op.index,
                        offset,
                        partition: poll.partition.clone(),
                        process: op.process,
                    },
                ));
            } else {
                let skipped: Vec<i64> = (before.last + 1..offset)
                    .filter(|&o| holds_record(&poll.partition, o, poll.read_committed(), op.index))
                    .collect();
                if !skipped.is_empty() {
                    evidence.push(Evidence::new(
                        Anomaly::PollSkip,
                        format!(
                            "process {}'s poll at index {} of {} began at offset {offset}, past \
                             {} record(s) after offset {} its poll at index {} ended with",
                            op.process,
                            op.index,
                            poll.partition,
                            skipped.len(),
                            before.last,
                            before.index
                        ),
                        PollSkip {
                            after: Some(before.last),
                            from_offset: i64::try_from(poll.from_offset).unwrap_or(i64::MAX),
                            index: op.index,
                            offset,
                            partition: poll.partition.clone(),
                            process: op.process,
                            skipped: skipped
                                .iter()
                                .take(10)
                                .map(|&o| (o, known_value(&poll.partition, o)))
                                .collect(),
                            skipped_count: skipped.len(),
                        },
                    ));
                }
            }
        }
        ended.insert(
            key,
            Ended {
                last: last.offset(),
                index: op.index,
            },
        );
    }
}
