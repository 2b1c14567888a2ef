//! An application's acknowledged writes, known by where they were put ([apps]):
//! an `epochal up` user's own application writes whatever values it likes,
//! often the same value twice, so a record it sent is known by the partition,
//! the offset its acknowledgement named (the answer's base offset, plus its
//! place in the batch) and its bytes — not by its value, as the harness's
//! own writes are (lost-write, offset-changed). A record acknowledged with
//! acks=all must be in the partition's final log at that offset with those
//! bytes (compared in the kept form the application's op holds: the text of
//! a short UTF-8 value, else its length and FNV-1a hash), unless an excuse of
//! the lost-write rule applies to it (GUARANTEES.md, "Excuses").

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::CheckOutcome;
use super::evidence::AppWriteLost;
use super::excuses::{Excuses, Judgement};
use super::final_log::FinalLog;
use super::index::{AckedValue, EVIDENCE_MAX, RunIndex, excused_by, unknown_message};
use super::{Anomaly, CheckResult, Checker, Evidence};
use crate::history::{Acked, Op, OpType, Process, Send, kept_form};
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "app-writes";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A record an application sent and the broker acknowledged with acks=all is in \
            the partition's final log at the offset the acknowledgement named, with the bytes it \
            sent, unless an unclean leader election followed the ack or every member of its ISR \
            lost it in disk faults. A record is known by its partition, offset and bytes: an \
            application's values need not be unique.",
        source: "Kafka documentation, Design §4.7 Replication (a committed message is not lost \
            while an in-sync replica is alive; the offset of a committed record never changes); \
            the producer's acknowledgement (ProduceResponse's base offset); GUARANTEES.md, \
            \"Excuses\".",
        not_checked: "Sends whose values are all decimal numbers (lost-write and offset-changed \
            judge those, as the harness's own). acks=0 sends (no offset is named). acks=1 records \
            not held are counted, not judged. Partitions with no final log make the verdict \
            unknown.",
        needs: &[],
        check,
    }
}

/// Whether `op` is an application's send this checker judges: one whose
/// values are kept in its `app` object.
pub fn judges(op: &Op) -> bool {
    op.send()
        .and_then(|s| s.app.as_ref())
        .is_some_and(|app| !app.values.is_empty())
}

/// What a partition's final log holds at each offset, in kept form, with
/// the leader epoch of its batch.
type Held = BTreeMap<i64, (i32, Value)>;

fn held(log: &FinalLog) -> Held {
    log.replica
        .records()
        .map(|(batch, record)| {
            let kept = kept_form(record.value.as_ref().map(|v| v.as_bytes()));
            (record.offset, (batch.partition_leader_epoch, kept))
        })
        .collect()
}

/// The tallies of one check.
#[derive(Default)]
struct Tally<'a> {
    evidence: Vec<Evidence>,
    counts: BTreeMap<&'static str, u64>,
    unknown: BTreeMap<String, String>,
    excuses: BTreeSet<String>,
    held: HashMap<&'a PartitionRef, Held>,
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let excusable = Excuses::of(run);
    let mut tally = Tally::default();
    // Each process's latest invoke: a process runs one op at a time.
    let mut invoked: HashMap<Process, u64> = HashMap::new();
    for op in &run.history {
        if op.kind == OpType::Invoke {
            invoked.insert(op.process, op.index);
        }
        let Some((send, acked)) = op.acked_send() else {
            continue;
        };
        if !judges(op) {
            continue;
        }
        let invoke = invoked.get(&op.process).copied().unwrap_or(op.index);
        judge_send(index, &excusable, &mut tally, (op, invoke), (send, acked));
    }
    let Tally {
        evidence,
        counts,
        unknown,
        excuses,
        ..
    } = tally;
    let lost = counts.get("lost-acks-all").copied().unwrap_or(0);
    let mut result = CheckResult::fold(
        NAME,
        evidence,
        |_| {
            format!("{lost} acknowledged acks=all record(s) of the application not at their offset")
        },
        unknown_message(unknown),
        || {
            format!(
                "every acknowledged acks=all record of the application is at its offset{}",
                excused_by(&excuses)
            )
        },
    );
    for (name, n) in counts {
        result = result.with_count(name, n);
    }
    Ok(result)
}

/// Judges each record of one acknowledged application send.
fn judge_send<'a>(
    index: &'a RunIndex,
    excusable: &Excuses,
    tally: &mut Tally<'a>,
    (op, invoke): (&'a Op, u64),
    (send, acked): (&'a Send, &'a Acked),
) {
    let app = send.app.as_ref().expect("judged sends keep their values");
    let (acks, partition) = (send.acks, &send.partition);
    let Some(base) = app.base_offset.filter(|_| acks != Acks::None) else {
        *tally.counts.entry("not-judged-no-offset").or_default() += app.values.len() as u64;
        return;
    };
    let log = match index.final_log(partition) {
        Ok(indexed) => &indexed.log,
        Err(why) => {
            if acks == Acks::All {
                tally
                    .unknown
                    .entry(why.to_string())
                    .or_insert_with(|| format!("history index {}", op.index));
            }
            return;
        }
    };
    let held = tally.held.entry(partition).or_insert_with(|| held(log));
    for (i, sent) in app.values.iter().enumerate() {
        let offset = base + i as i64;
        *tally.counts.entry("checked").or_default() += 1;
        let there = held.get(&offset);
        if there.is_some_and(|(_, kept)| kept == sent) {
            continue;
        }
        if acks != Acks::All {
            *tally.counts.entry("not-held-acks-1").or_default() += 1;
            continue;
        }
        let value = AckedValue {
            index: op.index,
            invoked: invoke,
            partition: std::borrow::Cow::Borrowed(partition),
            value: 0,
            acks,
            offset: Some(offset),
            isr: acked.isr.as_deref(),
            leader_epoch: acked.leader_epoch,
        };
        match excusable.judge(&value) {
            Judgement::Excused(why) => {
                *tally.counts.entry("lost-acks-all-excused").or_default() += 1;
                tally.excuses.insert(why);
            }
            Judgement::Undetermined(why) => {
                *tally
                    .counts
                    .entry("lost-acks-all-undetermined")
                    .or_default() += 1;
                tally
                    .unknown
                    .entry(why)
                    .or_insert_with(|| format!("{partition} offset {offset}"));
            }
            Judgement::NotExcused => {
                *tally.counts.entry("lost-acks-all").or_default() += 1;
                if tally.evidence.len() < EVIDENCE_MAX {
                    let held = there.map(|(epoch, kept)| (*epoch, kept.clone()));
                    tally
                        .evidence
                        .push(lost(op, &value, app.client_id.clone(), sent, held, log));
                }
            }
        }
    }
}

/// The evidence of an application's acks=all record not at its offset.
fn lost(
    op: &Op,
    value: &AckedValue,
    client_id: Option<String>,
    sent: &Value,
    held: Option<(i32, Value)>,
    log: &FinalLog,
) -> Evidence {
    let offset = value.offset.unwrap_or_default();
    let holds = held.as_ref().map_or("nothing".to_owned(), |(epoch, kept)| {
        format!("{kept} (epoch {epoch})")
    });
    Evidence::new(
        Anomaly::AppWriteLost,
        format!(
            "{} offset {offset}: the application's record {sent} (client {}, history index {}, \
             acks=all, ISR {}, leader epoch {}) is not there in the final log ({}), which holds \
             {holds}",
            value.partition,
            client_id.as_deref().unwrap_or("unknown"),
            op.index,
            value.isr.map_or("unknown".into(), |isr| format!("{isr:?}")),
            value
                .leader_epoch
                .map_or("unknown".into(), |e| e.to_string()),
            log.chosen,
        ),
        AppWriteLost {
            acked_offset: offset,
            client_id,
            final_log: log.chosen.clone(),
            final_log_held: held.map(|(_, kept)| kept),
            final_log_node: log.node,
            history_index: op.index,
            isr: value.isr.map(<[u32]>::to_vec),
            leader_epoch: value.leader_epoch,
            partition: value.partition.clone().into_owned(),
            sent: sent.clone(),
        },
    )
}

#[cfg(test)]
#[path = "app_writes_tests.rs"]
mod tests;
