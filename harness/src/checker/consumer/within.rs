//! The consumer checker's judgement inside one poll (`int-poll-skip`,
//! `int-nonmonotonic-poll`, and `poll-skip` from a poll's `from_offset`),
//! and when each value was sent, which decides whether an offset a poll
//! passed over held a record then.

use std::collections::HashMap;

use crate::checker::Evidence;
use crate::checker::anomaly::Anomaly;
use crate::checker::evidence::{NonmonotonicPoll, PollSkip};
use crate::checker::index::OkPoll;
use crate::history::RecordValue;
use crate::topic_partition::PartitionRef;

/// Evidence of skips and of offsets out of order, within each poll;
/// `not_returned` says an offset holds what a poll returns by design
/// (a marker; for a read_committed poll, an aborted record too),
/// `skipped` whether a gap's offset held a record the poll should have
/// returned, `known_value` what a skipped offset holds.
pub(super) fn skips_and_order(
    polls: &[OkPoll],
    not_returned: impl Fn(&PartitionRef, i64, bool) -> bool,
    known_value: impl Fn(&PartitionRef, i64) -> RecordValue,
    skipped: impl Fn(&PartitionRef, i64, bool, u64) -> bool,
    evidence: &mut Vec<Evidence>,
) {
    for poll in polls {
        let mut expected = poll.from_offset;
        let mut previous: Option<i64> = None;
        for record in poll.records {
            let offset = record.offset();
            if let Some(prev) = previous
                && offset <= prev
            {
                evidence.push(Evidence::new(
                    Anomaly::IntNonmonotonicPoll,
                    format!(
                        "poll at index {} of {} returned offset {offset} after offset {prev}",
                        poll.index, poll.partition
                    ),
                    NonmonotonicPoll {
                        after: prev,
                        index: poll.index,
                        offset,
                        partition: poll.partition.clone(),
                        process: poll.process,
                    },
                ));
            } else if offset > expected {
                let skipped: Vec<i64> = (expected..offset)
                    .filter(|o| {
                        !not_returned(poll.partition, *o, poll.read_committed)
                            && skipped(poll.partition, *o, poll.read_committed, poll.index)
                    })
                    .collect();
                if !skipped.is_empty() {
                    let anomaly = if previous.is_some() {
                        Anomaly::IntPollSkip
                    } else {
                        Anomaly::PollSkip
                    };
                    let shown: Vec<(i64, RecordValue)> = skipped
                        .iter()
                        .take(10)
                        .map(|&o| (o, known_value(poll.partition, o)))
                        .collect();
                    let from = match previous {
                        Some(prev) => format!("offset {prev}"),
                        None => format!("from_offset {}", poll.from_offset),
                    };
                    evidence.push(Evidence::new(
                        anomaly,
                        format!(
                            "poll at index {} of {} went from {from} to offset {offset}, \
                             skipping {} record(s)",
                            poll.index,
                            poll.partition,
                            skipped.len()
                        ),
                        PollSkip {
                            after: previous,
                            from_offset: poll.from_offset,
                            index: poll.index,
                            offset,
                            partition: poll.partition.clone(),
                            process: poll.process,
                            skipped: shown,
                            skipped_count: skipped.len(),
                        },
                    ));
                }
            }
            expected = expected.max(offset + 1);
            previous = Some(offset);
        }
    }
}

/// The history index of the invoke of each value's send (plain sends and
/// transactions' sends).
pub(super) fn sent_at(history: &[crate::history::Op]) -> HashMap<i64, u64> {
    let mut at = HashMap::new();
    for op in history
        .iter()
        .filter(|op| op.kind == crate::history::OpType::Invoke)
    {
        match &op.body {
            crate::history::Body::Send(send) => {
                for &v in &send.values {
                    at.entry(v).or_insert(op.index);
                }
            }
            crate::history::Body::Txn(txn) => {
                for send in txn.sends() {
                    at.entry(send.value).or_insert(op.index);
                }
            }
            _ => {}
        }
    }
    at
}
