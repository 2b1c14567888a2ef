//! Each replica's `leader-epoch-checkpoint` is what Kafka's
//! `LeaderEpochFileCache` can leave behind, and agrees with the epochs its
//! batches carry.
//!
//! The rule, from the cache's contract (apache/kafka's
//! `storage/.../internals/epoch/LeaderEpochFileCache.java` and
//! `core/src/test/scala/unit/kafka/server/epoch/LeaderEpochFileCacheTest.scala`;
//! `endOffsetFor`'s answers as KIP-101 and KIP-279 define them):
//!
//! 1. Epochs strictly increase and start offsets never decrease. `assign`
//!    drops any entry with an epoch ≥ or a start offset ≥ the new one
//!    (KAFKA-7415 enforces monotonic epochs and offsets), so today's cache
//!    even has strictly increasing start offsets; equal start offsets are
//!    tolerated because pre-KAFKA-7415 caches appended `(e+1, o)` after an
//!    `(e, o)` whose leader wrote nothing.
//! 2. Every intact batch's partition leader epoch is the epoch of the last
//!    entry whose start offset ≤ the batch's base offset (`epochForOffset`):
//!    the cache is assigned from each batch a follower appends and from each
//!    new leader's log end, so the entry covering a batch is the epoch that
//!    wrote it. A batch below the first entry has no epoch in the file and
//!    disagrees too.
//! 3. An entry whose start offset is inside the log (≥ the log start, < the
//!    log end) starts at a batch's base offset, unless the next entry has the
//!    same start offset (an epoch whose leader appended nothing, superseded at
//!    the same offset). An epoch begins where its first batch was appended or
//!    where a new leader's log ended, never in the middle of a batch: an entry
//!    mid-batch would make `endOffsetFor` answer a follower with an offset
//!    inside a committed batch, and the follower would truncate it.
//!
//! Legitimate states not flagged: entries at or past the log end (the cache is
//! written before the append it announces, and a truncation or power loss of
//! the log leaves the checkpoint as it was until Kafka reloads and truncates
//! it — the reader still notes them as findings); an epoch file that is
//! absent (Kafka creates an empty one and recovery reassigns from batches).

use crate::node::NodeId;
use crate::reader::{EpochEntry, FindingKind, ReplicaState};

use super::CheckOutcome;
use super::evidence::{
    BatchSpan, EpochDisagrees, EpochNotAtBatchStart, EpochNotMonotonic, EpochUnreadable,
};
use super::{Anomaly, CheckResult, Checker, Evidence, Need, RunIndex};

pub const NAME: &str = "epoch-file";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "Each replica's leader-epoch-checkpoint has strictly increasing epochs and \
            non-decreasing start offsets; every intact batch carries the epoch of the last entry \
            starting at or before its base offset; and an entry inside the log starts at a batch's \
            base offset (unless superseded by an entry at the same offset).",
        source: "KIP-101 (the leader epoch cache and OffsetsForLeaderEpoch), KIP-279 and KAFKA-7415 \
            (monotonic epochs and start offsets; a new leader records (epoch, log end)); Kafka's \
            LeaderEpochFileCache (`endOffsetFor`) and LeaderEpochFileCacheTest.",
        not_checked: "Entries at or past the log end, and entries below the log start (left by \
            truncation, power loss or start-offset truncation; the reader reports entries past the \
            log end as findings). Replicas with no epoch file. Batches in damaged (non-intact) \
            frames. Whether an epoch in the file was ever an epoch in etcd (one-leader-per-epoch \
            checkers compare with the timeline). Whether replicas' files agree with each other.",
        needs: &[Need::ReplicaFiles],
        check,
    }
}

/// What one intact batch contributes: base, last offset and epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchEpoch {
    pub base: i64,
    pub last: i64,
    pub epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Entry `index` (0-based) does not follow the one before it.
    NotMonotonic {
        index: usize,
        previous: EpochEntry,
        entry: EpochEntry,
    },
    /// Batches `first_base..=last_offset` carry `batch_epoch` but the file
    /// says `file_epoch` (from the entry starting at `entry_start`).
    Disagrees {
        first_base: i64,
        last_offset: i64,
        batches: usize,
        batch_epoch: i32,
        file_epoch: Option<i32>,
        entry_start: Option<i64>,
    },
    /// The entry starts inside the log but at no batch's base offset.
    NotAtBatchStart {
        entry: EpochEntry,
        inside: Option<BatchEpoch>,
    },
}

/// The three rules over one replica's file and batches (`intact` ones for
/// rule 2; `bases` of every readable frame for rule 3).
pub(crate) fn problems(
    entries: &[EpochEntry],
    intact: &[BatchEpoch],
    bases: &[i64],
    log_start: i64,
    log_end: i64,
) -> Vec<Problem> {
    let mut found = Vec::new();
    for (index, pair) in entries.windows(2).enumerate() {
        let (previous, entry) = (pair[0], pair[1]);
        if entry.epoch <= previous.epoch || entry.start_offset < previous.start_offset {
            found.push(Problem::NotMonotonic {
                index: index + 1,
                previous,
                entry,
            });
        }
    }
    for batch in intact {
        let covering = entries
            .iter()
            .rev()
            .find(|entry| entry.start_offset <= batch.base);
        let file_epoch = covering.map(|entry| entry.epoch);
        if file_epoch == Some(batch.epoch) {
            continue;
        }
        let entry_start = covering.map(|entry| entry.start_offset);
        if let Some(Problem::Disagrees {
            last_offset,
            batches,
            batch_epoch,
            file_epoch: previous_file_epoch,
            entry_start: previous_start,
            ..
        }) = found.last_mut()
            && *batch_epoch == batch.epoch
            && *previous_file_epoch == file_epoch
            && *previous_start == entry_start
            && *last_offset + 1 == batch.base
        {
            *last_offset = batch.last;
            *batches += 1;
            continue;
        }
        found.push(Problem::Disagrees {
            first_base: batch.base,
            last_offset: batch.last,
            batches: 1,
            batch_epoch: batch.epoch,
            file_epoch,
            entry_start,
        });
    }
    for (index, entry) in entries.iter().enumerate() {
        let o = entry.start_offset;
        let superseded = entries
            .get(index + 1)
            .is_some_and(|next| next.start_offset == o);
        if superseded || o <= log_start || o >= log_end || bases.contains(&o) {
            continue;
        }
        found.push(Problem::NotAtBatchStart {
            entry: *entry,
            inside: intact.iter().find(|b| b.base < o && o <= b.last).copied(),
        });
    }
    found
}

fn evidence_of(node: NodeId, replica: &ReplicaState, problem: &Problem) -> Evidence {
    let where_ = format!("{node} {}/leader-epoch-checkpoint", replica.dir.display());
    let partition = replica.partition_ref();
    match problem {
        Problem::NotMonotonic {
            index,
            previous,
            entry,
        } => Evidence {
            anomaly: Anomaly::EpochFileNotMonotonic,
            summary: format!(
                "{where_}: entry {index} ({} {}) follows ({} {}): epochs must increase and start \
                 offsets must not decrease",
                entry.epoch, entry.start_offset, previous.epoch, previous.start_offset
            ),
            details: EpochNotMonotonic {
                entry: *index,
                entry_value: (entry.epoch, entry.start_offset),
                node,
                partition,
                previous: (previous.epoch, previous.start_offset),
            }
            .into(),
        },
        Problem::Disagrees {
            first_base,
            last_offset,
            batches,
            batch_epoch,
            file_epoch,
            entry_start,
        } => Evidence {
            anomaly: Anomaly::EpochFileDisagreesWithBatch,
            summary: format!(
                "{where_}: {batches} batch(es) at offsets {first_base}..={last_offset} carry epoch \
                 {batch_epoch} but the file gives {}",
                match (file_epoch, entry_start) {
                    (Some(e), Some(s)) => format!("epoch {e} (entry starting at {s})"),
                    _ => "no epoch (no entry starts at or before them)".into(),
                }
            ),
            details: EpochDisagrees {
                batch_epoch: *batch_epoch,
                batches: *batches,
                entry_start_offset: *entry_start,
                epoch_file: replica.leader_epochs.as_ref().map(|entries| {
                    entries
                        .iter()
                        .map(|e| (i64::from(e.epoch), e.start_offset))
                        .collect()
                }),
                file_epoch: *file_epoch,
                first_base_offset: *first_base,
                last_offset: *last_offset,
                node,
                partition,
            }
            .into(),
        },
        Problem::NotAtBatchStart { entry, inside } => Evidence {
            anomaly: Anomaly::EpochEntryNotAtBatchStart,
            summary: format!(
                "{where_}: epoch {} starts at {}, which is no batch's base offset{}",
                entry.epoch,
                entry.start_offset,
                inside.map_or(String::new(), |b| format!(
                    " (it is inside the batch {}..={} of epoch {})",
                    b.base, b.last, b.epoch
                ))
            ),
            details: EpochNotAtBatchStart {
                entry: (entry.epoch, entry.start_offset),
                inside_batch: inside.map(|b| BatchSpan {
                    base_offset: b.base,
                    epoch: b.epoch,
                    last_offset: b.last,
                }),
                node,
                partition,
            }
            .into(),
        },
    }
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let mut evidence = Vec::new();
    let (mut checked, mut without) = (0u64, 0u64);
    for (&node, dir) in &run.replicas {
        for replica in &dir.replicas {
            let epoch_file = replica.dir.join("leader-epoch-checkpoint");
            let unreadable = replica.findings.iter().find(|f| {
                f.file == epoch_file
                    && matches!(
                        f.kind,
                        FindingKind::MalformedCheckpoint { .. } | FindingKind::Unreadable { .. }
                    )
            });
            if let Some(finding) = unreadable {
                evidence.push(Evidence::new(
                    Anomaly::EpochFileUnreadable,
                    format!("{node} {}: {}", epoch_file.display(), finding.kind),
                    EpochUnreadable {
                        finding: finding.clone(),
                        node,
                    },
                ));
                continue;
            }
            let Some(entries) = &replica.leader_epochs else {
                without += 1;
                continue;
            };
            checked += 1;
            let intact: Vec<BatchEpoch> = replica
                .batches()
                .filter(|b| b.intact)
                .map(|b| BatchEpoch {
                    base: b.base_offset,
                    last: b.last_offset,
                    epoch: b.partition_leader_epoch,
                })
                .collect();
            let bases: Vec<i64> = replica.batches().map(|b| b.base_offset).collect();
            let log_start = replica.segments.first().map_or(0, |s| s.base_offset);
            for problem in problems(entries, &intact, &bases, log_start, replica.log_end_offset) {
                evidence.push(evidence_of(node, replica, &problem));
            }
        }
    }
    let result = CheckResult::fold(
        NAME,
        evidence,
        |evidence| format!("{} epoch-file problem(s)", evidence.len()),
        (checked == 0).then(|| "no replica had a leader-epoch-checkpoint to check".to_owned()),
        || format!("{checked} epoch file(s) monotonic and in agreement with their batches"),
    );
    Ok(result
        .with_count("epoch-files-checked", checked)
        .with_count("replicas-without-epoch-file", without))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    fn b(base: i64, last: i64, epoch: i32) -> BatchEpoch {
        BatchEpoch { base, last, epoch }
    }

    fn run(entries: &[EpochEntry], batches: &[BatchEpoch], log_end: i64) -> Vec<Problem> {
        let bases: Vec<i64> = batches.iter().map(|b| b.base).collect();
        problems(entries, batches, &bases, 0, log_end)
    }

    const LOG: [BatchEpoch; 4] = [
        BatchEpoch {
            base: 0,
            last: 4,
            epoch: 0,
        },
        BatchEpoch {
            base: 5,
            last: 7,
            epoch: 1,
        },
        BatchEpoch {
            base: 8,
            last: 9,
            epoch: 2,
        },
        BatchEpoch {
            base: 10,
            last: 12,
            epoch: 2,
        },
    ];

    #[test]
    fn a_file_matching_its_batches_passes_with_legitimate_leftovers() {
        assert_eq!(run(&[e(0, 0), e(1, 5), e(2, 8)], &LOG, 13), vec![]);
        // An epoch whose leader wrote nothing, superseded at the same offset.
        assert_eq!(
            run(
                &[e(0, 0), e(1, 5), e(2, 8), e(3, 8)],
                &[b(0, 4, 0), b(5, 7, 1), b(8, 9, 3)],
                10
            ),
            vec![]
        );
        // Entries at or past the log end, after a truncation or power loss.
        assert_eq!(
            run(&[e(0, 0), e(1, 5), e(2, 8), e(4, 20)], &LOG[..2], 8),
            vec![]
        );
        // An epoch skipped entirely (its leader wrote nothing, elsewhere).
        assert_eq!(
            run(&[e(0, 0), e(3, 5)], &[b(0, 4, 0), b(5, 6, 3)], 7),
            vec![]
        );
    }

    #[test]
    fn a_non_monotonic_file_is_named_by_entry() {
        let problems = run(&[e(0, 0), e(2, 5), e(1, 8)], &[], 0);
        assert_eq!(
            problems,
            vec![Problem::NotMonotonic {
                index: 2,
                previous: e(2, 5),
                entry: e(1, 8)
            }]
        );
        let problems = run(&[e(0, 6), e(1, 5)], &[], 0);
        assert!(matches!(
            problems[..],
            [Problem::NotMonotonic { index: 1, .. }]
        ));
    }

    #[test]
    fn batches_carrying_another_epoch_are_one_problem_per_run() {
        // The file says epoch 1 ran until 10, but 8..=12 were written in epoch 2.
        let problems = run(&[e(0, 0), e(1, 5), e(2, 10)], &LOG, 13);
        assert_eq!(
            problems,
            vec![Problem::Disagrees {
                first_base: 8,
                last_offset: 9,
                batches: 1,
                batch_epoch: 2,
                file_epoch: Some(1),
                entry_start: Some(5)
            }]
        );
        // No entry at all for the first batches.
        let problems = run(&[e(2, 8)], &LOG, 13);
        assert_eq!(
            problems[0],
            Problem::Disagrees {
                first_base: 0,
                last_offset: 4,
                batches: 1,
                batch_epoch: 0,
                file_epoch: None,
                entry_start: None
            }
        );
    }

    #[test]
    fn an_entry_inside_a_batch_is_named_with_the_batch() {
        let problems = run(&[e(0, 0), e(1, 5), e(2, 7)], &LOG, 13);
        assert!(problems.contains(&Problem::NotAtBatchStart {
            entry: e(2, 7),
            inside: Some(b(5, 7, 1))
        }));
    }
}
