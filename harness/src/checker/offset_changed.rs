//! Acknowledged offsets are stable: a value the broker acknowledged at offset
//! o is, in the partition's final log, at o. A value found only elsewhere was
//! truncated away at o and written again (or o was rewritten), which Kafka
//! allows only with the excuses of the lost-write rule.
//!
//! Its database twin, `database-offset-changed`, holds the same writes
//! against a system's database as read after the run: a row whose offset
//! holds other content than the client was acknowledged there, while the
//! acknowledged value sits at another offset.

use std::collections::{BTreeMap, BTreeSet};

use super::CheckOutcome;
use super::evidence::{AckedWrite, EpochValue, OffsetChanged};
use super::excuses::{Excuses, Judgement};
use super::final_log::FinalLog;
use super::index::{AckedValue, EVIDENCE_MAX, LogOf, RunIndex, excused_by, unknown_message};
use super::{Anomaly, CheckResult, Checker, Evidence, Need};
use crate::schedule::Acks;

pub const NAME: &str = "offset-changed";
pub const DATABASE_NAME: &str = "database-offset-changed";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A value acknowledged with acks=all at offset o is at offset o in the partition's \
            final log (the offset of a committed record never changes), unless an unclean leader \
            election followed the ack or every member of its ISR (at the ack, or as it last stood) \
            lost it in disk faults (power loss, truncate-log).",
        source: "Kafka documentation, Design §4.7 Replication (committed messages and the log's \
            offsets are the same on every in-sync replica); KIP-101 (truncation by leader epoch so \
            that replicas never diverge at a committed offset) and KIP-279 (the fix for fast \
            leader changes); GUARANTEES.md, \"Excuses\".",
        not_checked: "Values not in the final log at all (lost-write reports them). acks=0 writes \
            (the broker names no offset). acks=1 moves are only counted. A value at its acked offset \
            and also elsewhere is a duplicate, not a move (see duplicates). Partitions with no final \
            log, and acks=all moves that cannot be judged, make the verdict unknown.",
        needs: &[],
        check,
    }
}

/// `offset-changed` over a system's database in place of the final log.
pub fn database_checker() -> Checker {
    Checker {
        name: DATABASE_NAME,
        guarantee: "A value acknowledged with acks=all at offset o is at offset o in the system's \
            database as the harness reads it after the run (a committed record's offset never \
            changes, in the store the brokers keep it in either), excuses as offset-changed's.",
        source: "Kafka documentation, Design §4.7 Replication (the offset of a committed record \
            never changes); GUARANTEES.md, \"A system's database\".",
        not_checked: "As offset-changed's: a value not in the database at all is \
            database-lost-write's (its evidence says what the database holds at the acked \
            offset). A database that could not be read makes the verdict unknown with the \
            read's error.",
        needs: &[Need::Database],
        check: |index| check_against(index, LogOf::Database),
    }
}

fn check(index: &RunIndex) -> CheckOutcome {
    check_against(index, LogOf::Final)
}

/// Every acknowledged value's offset held against `of`.
fn check_against(index: &RunIndex, of: LogOf) -> CheckOutcome {
    let run = index.run;
    let acked = index.acked_sends().values()?;
    let excusable = Excuses::of(run);
    let mut evidence = Vec::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    // Why not → the first value it held back.
    let mut unknown: BTreeMap<String, String> = BTreeMap::new();
    let mut excuses: BTreeSet<String> = BTreeSet::new();
    // Entered in `counts` at the end: a map entry a value costs more than
    // the lookup.
    let mut checked = 0u64;
    for a in acked {
        let Some(offset) = a.offset else { continue };
        checked += 1;
        let indexed = match index.log(of, &a.partition) {
            Ok(found) => found,
            Err(why) => {
                if a.acks == Acks::All {
                    unknown
                        .entry(why.to_string())
                        .or_insert_with(|| a.describe());
                }
                continue;
            }
        };
        let log = &indexed.log;
        let values = &indexed.by_value;
        // Absent (lost-write's business) or at its acked offset: nothing here.
        if !values.contains(a.value) || values.offsets(a.value).any(|o| o == offset) {
            continue;
        }
        let found: Vec<i64> = values.offsets(a.value).collect();
        if a.acks != Acks::All {
            *counts.entry("offset-changed-acks-1").or_default() += 1;
            continue;
        }
        match excusable.judge(&a) {
            Judgement::Excused(why) => {
                *counts.entry("offset-changed-acks-all-excused").or_default() += 1;
                excuses.insert(why);
            }
            Judgement::Undetermined(why) => {
                *counts
                    .entry("offset-changed-acks-all-undetermined")
                    .or_default() += 1;
                unknown.entry(why).or_insert_with(|| a.describe());
            }
            Judgement::NotExcused => {
                *counts.entry("offset-changed-acks-all").or_default() += 1;
                if evidence.len() >= EVIDENCE_MAX {
                    continue;
                }
                evidence.push(offset_changed(&a, offset, found, log, of));
            }
        }
    }
    if checked > 0 {
        counts.insert("checked", checked);
    }
    let moved = counts.get("offset-changed-acks-all").copied().unwrap_or(0);
    let mut result = CheckResult::fold(
        NAME,
        evidence,
        |_| format!("{moved} acknowledged acks=all value(s) moved from their acked offset"),
        unknown_message(unknown),
        || {
            format!(
                "every acknowledged value found is at its acked offset, or excused{}",
                excused_by(&excuses)
            )
        },
    );
    for (name, n) in counts {
        result = result.with_count(name, n);
    }
    Ok(result)
}

/// The evidence of an acknowledged acks=all value found only at `found` in
/// the final log, not at its acked `offset`: what the log holds there instead.
fn offset_changed(
    a: &AckedValue,
    offset: i64,
    found: Vec<i64>,
    log: &FinalLog,
    of: LogOf,
) -> Evidence {
    let there = log
        .replica
        .compact()
        .records
        .into_iter()
        .find(|r| r.offset == offset);
    let holds = there.as_ref().map_or("nothing".to_owned(), |r| {
        format!(
            "{} (epoch {})",
            r.value
                .as_ref()
                .map_or("a null value".into(), |v| v.to_string()),
            r.epoch
        )
    });
    let AckedWrite {
        acked_offset,
        acks,
        history_index,
        isr,
        leader_epoch,
        partition,
        value,
    } = a.details();
    let details = OffsetChanged {
        acked_offset,
        acks,
        final_log: log.chosen.clone(),
        final_log_at_acked_offset: there.map(|r| EpochValue {
            epoch: r.epoch,
            value: r.value,
        }),
        final_log_node: log.node,
        found_at: found.clone(),
        history_index,
        isr,
        leader_epoch,
        partition,
        value,
    };
    Evidence::new(
        Anomaly::AcknowledgedOffsetChanged,
        format!(
            "{} is at offset {found:?} in {}, which holds {holds} at offset {offset}",
            a.describe(),
            of.place(log),
        ),
        details,
    )
}
