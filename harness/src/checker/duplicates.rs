//! Duplicates: a value at two or more offsets of a partition's final log.
//! Without idempotence Kafka allows them (a producer retry after a lost
//! response appends the batch again), so they are reported and counted and
//! the verdict stays valid.

use std::collections::BTreeSet;

use serde_json::json;

use super::final_log::FinalLog;
use super::lost_write::{EVIDENCE_MAX, ValueIndex};
use super::{CheckResult, Checker, Evidence, RunData};
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "duplicates";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "None asserted: without an idempotent producer Kafka delivers at least once, so \
            a value may be written at more than one offset. Each such value is reported and \
            counted; the verdict is valid.",
        source: "Kafka documentation, Design §4.6 Message Delivery Semantics (at-least-once unless \
            the producer is idempotent, enable.idempotence / KIP-98).",
        not_checked: "Whether a duplicate came from a client retry or from the broker (the workload \
            client does not retry; a duplicate with an idempotent producer would be a bug this \
            checker does not flag). Null values. When a partition has no final log (no final \
            leader and disagreeing replicas) every replica is examined instead.",
        check,
    }
}

fn check(run: &RunData) -> Result<CheckResult, String> {
    let partitions = run.partitions();
    if partitions.is_empty() {
        return Ok(CheckResult::unknown(
            NAME,
            "the run left no replica to examine",
        ));
    }
    let mut evidence = Vec::new();
    let mut total = 0u64;
    // Replicas that agree show the same duplicate once.
    let mut seen: BTreeSet<(&PartitionRef, String, Vec<i64>)> = BTreeSet::new();
    for partition in &partitions {
        let examined: Vec<(String, _)> = match FinalLog::of(run, partition) {
            Ok(log) => vec![(log.chosen.clone(), log.replica)],
            Err(_) => run
                .holders(partition)
                .into_iter()
                .map(|(node, replica)| (node.to_string(), replica))
                .collect(),
        };
        for (source, replica) in examined {
            for (value, offsets) in ValueIndex::of(replica).repeated() {
                let value = value.into_owned();
                if !seen.insert((partition, value.clone(), offsets.clone())) {
                    continue;
                }
                total += 1;
                if evidence.len() < EVIDENCE_MAX {
                    evidence.push(Evidence {
                        anomaly: "duplicate".into(),
                        summary: format!(
                            "value {value} is at offsets {offsets:?} of {partition} ({source})"
                        ),
                        details: json!({
                            "partition": partition,
                            "value": value,
                            "offsets": offsets,
                            "log": source,
                        }),
                    });
                }
            }
        }
    }
    let mut result = CheckResult::valid(
        NAME,
        if total == 0 {
            "no value at two offsets".to_owned()
        } else {
            format!("{total} value(s) at more than one offset (allowed without idempotence)")
        },
    )
    .with_count("duplicates", total);
    result.evidence = evidence;
    Ok(result)
}
