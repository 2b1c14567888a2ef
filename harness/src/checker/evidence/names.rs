//! What a piece of evidence names: the history ops and the log records it
//! points at, which the report and the gate ask for instead of reading the
//! details' JSON.

use std::collections::BTreeSet;

use super::{Details, OpRef};
use crate::topic_partition::PartitionRef;

impl Details {
    /// The history ops the evidence names: the acknowledging op of a lost or
    /// moved write, a poll, the sends of a duplicated value.
    pub fn ops(&self) -> BTreeSet<OpRef> {
        match self {
            Details::AckedWrite(d) => BTreeSet::from([d.history_index]),
            Details::LostWrite(d) => BTreeSet::from([d.history_index]),
            Details::OffsetChanged(d) => BTreeSet::from([d.history_index]),
            Details::ConsumedRegressed(d) => BTreeSet::from([d.index]),
            Details::ReadAboveWatermark(d) => BTreeSet::from([d.index]),
            Details::AckBeforeIsrHeld(d) => BTreeSet::from([d.history_index]),
            Details::WatermarkRegressed(d) => {
                BTreeSet::from([d.earlier.index, d.later.index, d.later.invoke_index])
            }
            Details::NonmonotonicPoll(d) => BTreeSet::from([d.index]),
            Details::PollSkip(d) => BTreeSet::from([d.index]),
            Details::RestartFailed(d) => BTreeSet::from([d.history_index]),
            Details::CommittedRegressed(d) => BTreeSet::from([d.acked_index, d.read_index]),
            Details::Unseen(d) => BTreeSet::from([d.write.history_index, d.final_read_index]),
            Details::NonmonotonicSend(d) => {
                BTreeSet::from([d.earlier.history_index, d.later.history_index])
            }
            Details::ResumeSkip(d) => BTreeSet::from([d.poll_index]),
            Details::TxnRead(d) => std::iter::once(d.read_index)
                .chain(d.writer.as_ref().map(|w| w.index))
                .chain(d.failed_send_index)
                .collect(),
            Details::TornTxn(d) => BTreeSet::from([d.txn.index]),
            Details::TxnCycle(d) => d.ops.iter().copied().collect(),
            Details::Hanging(d) => d.last_op.into_iter().collect(),
            Details::IdempotentDuplicate(d) => d
                .sends
                .iter()
                .flat_map(|s| std::iter::once(s.invoke_index).chain(s.index))
                .collect(),
            _ => BTreeSet::new(),
        }
    }

    /// The log records the evidence names, as (partition, offset), in order:
    /// where a write was acknowledged, what a poll returned or skipped to,
    /// where replicas part, the batches an epoch entry disagrees with.
    pub fn records(&self) -> Vec<(&PartitionRef, i64)> {
        let mut rows: Vec<(&PartitionRef, i64)> = match self {
            Details::AckedWrite(d) => d
                .acked_offset
                .map(|o| (&d.partition, o))
                .into_iter()
                .collect(),
            Details::LostWrite(d) => d
                .acked_offset
                .map(|o| (&d.partition, o))
                .into_iter()
                .collect(),
            Details::OffsetChanged(d) => d
                .acked_offset
                .map(|o| (&d.partition, o))
                .into_iter()
                .collect(),
            Details::Divergence(d) => vec![(&d.partition, d.offset)],
            Details::DatabaseDivergence(d) => vec![(&d.partition, d.offset)],
            Details::EpochDisagrees(d) => [
                Some(d.first_base_offset),
                Some(d.last_offset),
                d.entry_start_offset,
            ]
            .into_iter()
            .flatten()
            .map(|o| (&d.partition, o))
            .collect(),
            Details::EpochNotAtBatchStart(d) => d
                .inside_batch
                .iter()
                .flat_map(|b| [b.base_offset, b.last_offset])
                .map(|o| (&d.partition, o))
                .collect(),
            Details::ConsumedRegressed(d) => {
                vec![(&d.partition, d.from_offset), (&d.partition, d.offset)]
            }
            Details::ReadAboveWatermark(d) => {
                d.offsets.iter().map(|&o| (&d.partition, o)).collect()
            }
            Details::AckBeforeIsrHeld(d) => vec![(&d.partition, d.offset)],
            Details::InconsistentOffsets(d) => vec![(&d.partition, d.offset)],
            Details::NonmonotonicPoll(d) => vec![(&d.partition, d.offset)],
            Details::PollSkip(d) => vec![(&d.partition, d.from_offset), (&d.partition, d.offset)],
            Details::TruncatedRead(d) => vec![(&d.partition, d.offset)],
            Details::Unseen(d) => d
                .write
                .acked_offset
                .map(|o| (&d.write.partition, o))
                .into_iter()
                .collect(),
            Details::NonmonotonicSend(d) => [&d.earlier, &d.later]
                .into_iter()
                .filter_map(|w| w.acked_offset.map(|o| (&w.partition, o)))
                .collect(),
            Details::ResumeSkip(d) => vec![
                (&d.partition, d.skipped_offset),
                (&d.partition, d.from_offset),
            ],
            Details::TxnRead(d) => vec![(&d.partition, d.offset)],
            Details::TornTxn(d) => d
                .writes
                .iter()
                .filter_map(|w| w.offset.or(w.acked_offset).map(|o| (&w.partition, o)))
                .collect(),
            Details::TxnCycle(d) => d
                .edges
                .iter()
                .flat_map(|e| {
                    std::iter::once((&e.partition, e.offset))
                        .chain(e.then_offset.map(|o| (&e.partition, o)))
                })
                .collect(),
            Details::Hanging(d) => vec![(&d.partition, d.first_offset)],
            _ => Vec::new(),
        };
        rows.sort();
        rows.dedup();
        rows
    }
}
