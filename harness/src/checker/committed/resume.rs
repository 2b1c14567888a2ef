//! At-least-once across rebalances (`resume-skip`): a subscribed consumer
//! takes up a partition at its group's committed offset, and a group only
//! commits what its members polled, so every record below the offset a
//! member polls from was returned to some member of the group before. Kafka
//! documents this as the consumer's at-least-once delivery with commits
//! after processing: after a rebalance or a restart a member resumes at
//! most at the last committed offset, and nothing between the last commit
//! and the resume is skipped. A committed offset that ran ahead of what the
//! group consumed (a coordinator answering another group's offset, an
//! offset no member committed, a commit of a member fenced out by a newer
//! generation that the coordinator took anyway) shows here as records the
//! group never saw.
//!
//! The records a partition holds are those any poll of the run returned
//! (the final read, when the run has one, returns them all); each group
//! poll's fetch offset is held against the records below it that no poll of
//! the group had returned by the time it was sent.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::super::evidence::ResumeSkip;
use super::super::index::{EVIDENCE_MAX, OkPoll};
use super::super::{Anomaly, Evidence};
use crate::history::{Body, Op, OpType};
use crate::topic_partition::PartitionRef;

/// What one group has been returned of one partition.
#[derive(Default)]
struct Consumed {
    offsets: HashSet<i64>,
    /// Index into the partition's known offsets of the lowest not yet
    /// returned to the group (everything below it was).
    lowest_unseen: usize,
    last_acked_commit: Option<i64>,
}

/// Checks every group poll; the evidence (at most [`EVIDENCE_MAX`]), how
/// many group polls were checked and how many skipped.
pub(super) fn resume_skips(
    history: &[Op],
    polls: &[OkPoll],
    evidence: &mut Vec<Evidence>,
) -> (u64, u64) {
    let mut known: BTreeMap<&PartitionRef, Vec<i64>> = BTreeMap::new();
    for poll in polls {
        known
            .entry(poll.partition)
            .or_default()
            .extend(poll.records.iter().map(|r| r.offset()));
    }
    for offsets in known.values_mut() {
        offsets.sort_unstable();
        offsets.dedup();
    }
    let mut groups: HashMap<(&str, &PartitionRef), Consumed> = HashMap::new();
    let (mut checked, mut skipped) = (0u64, 0u64);
    for op in history {
        match &op.body {
            Body::Commit(c) if op.kind == OpType::Ok => {
                groups
                    .entry((c.group.as_str(), &c.partition))
                    .or_default()
                    .last_acked_commit = (!c.deleted).then_some(c.offset);
            }
            Body::Poll(poll) => {
                let Some(group) = poll.group.as_deref() else {
                    continue;
                };
                let consumed = groups.entry((group, &poll.partition)).or_default();
                if op.kind == OpType::Ok {
                    if let Some((_, read)) = op.read() {
                        consumed
                            .offsets
                            .extend(read.records.iter().map(|r| r.offset()));
                    }
                    continue;
                }
                if op.kind != OpType::Invoke {
                    continue;
                }
                checked += 1;
                let Some(offsets) = known.get(&poll.partition) else {
                    continue;
                };
                while consumed
                    .offsets
                    .contains(offsets.get(consumed.lowest_unseen).unwrap_or(&i64::MAX))
                {
                    consumed.lowest_unseen += 1;
                }
                let from = i64::try_from(poll.from_offset).unwrap_or(i64::MAX);
                let Some(&gap) = offsets.get(consumed.lowest_unseen).filter(|&&o| o < from) else {
                    continue;
                };
                skipped += 1;
                if evidence.len() >= EVIDENCE_MAX {
                    continue;
                }
                let count = offsets[consumed.lowest_unseen..]
                    .iter()
                    .take_while(|&&o| o < from)
                    .filter(|o| !consumed.offsets.contains(o))
                    .count() as u64;
                let commit = consumed
                    .last_acked_commit
                    .map_or("no commit acknowledged".to_owned(), |c| {
                        format!("its last acknowledged commit {c}")
                    });
                evidence.push(Evidence {
                    anomaly: Anomaly::ResumeSkip,
                    summary: format!(
                        "process {} of group {group} polled {} from offset {from} (history \
                         index {}), but no poll of the group had returned offset {gap} ({count} \
                         record(s) below {from} unseen by the group; {commit})",
                        op.process, poll.partition, op.index
                    ),
                    details: ResumeSkip {
                        group: group.to_owned(),
                        partition: poll.partition.clone(),
                        poll_index: op.index,
                        process: op.process,
                        from_offset: from,
                        skipped_offset: gap,
                        skipped_count: count,
                        last_acked_commit: consumed.last_acked_commit,
                    }
                    .into(),
                });
            }
            _ => {}
        }
    }
    (checked, skipped)
}
