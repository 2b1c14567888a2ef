//! Send order (Jepsen's `nonmonotonic-send`, [groups]): a partition is one
//! log, so a write acknowledged with acks=all before another write to the
//! same partition was sent sits at a lower offset than it. Jepsen checks
//! this along each client's own sends; real-time order across clients is
//! the same guarantee (an acks=all write is committed when acknowledged,
//! and the leader appends after its committed prefix), so it is checked
//! across every client here, which includes Jepsen's case.

use std::collections::HashMap;

use super::evidence::NonmonotonicSend;
use super::excuses::{Excuses, Judgement};
use super::index::{AckedValue, EVIDENCE_MAX, RunIndex};
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence};
use crate::history::{OpType, Process};
use crate::schedule::Acks;
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "send-order";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "Writes to a partition are ordered as they happened: a write acknowledged \
            with acks=all before another write to the partition was sent has the lower offset.",
        source: "Kafka documentation, Introduction (a partition is an ordered, immutable sequence \
            of records, each appended with the next offset) and Design §4.7 (an acks=all write \
            is committed when acknowledged); Jepsen's Kafka workload (jepsen.tests.kafka) for \
            the name nonmonotonic-send.",
        not_checked: "Writes with acks=1 or acks=0 on either side (Kafka lets an acks=1 write be \
            lost and its offset reused), and an earlier write whose loss an unclean election or \
            disk faults excuse (lost-write's rule). Sends that overlap in time are not ordered. \
            Jepsen's int-send-skip and int-nonmonotonic-send concern several sends inside one \
            operation (a transaction); one send here is one batch, whose offsets Kafka's \
            produce answer gives as its base offset + i, so they come with transactions.",
        needs: &[],
        check,
    }
}

/// The highest-offset acks=all value acknowledged so far in a partition.
#[derive(Clone)]
struct Highest<'a> {
    offset: i64,
    value: AckedValue<'a>,
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let excuses = Excuses::of(run);
    // acks=all values by the index of their ok, in history order.
    let mut acked: Vec<AckedValue> = index
        .acked_sends()
        .values()?
        .filter(|a| a.acks == Acks::All && a.offset.is_some())
        .collect();
    acked.sort_by_key(|a| a.index);
    // Walk the history: at each send's invoke, note the partition's highest
    // acknowledged offset so far; at its ok, its offsets must be above it.
    let mut highest: HashMap<&PartitionRef, Highest> = HashMap::new();
    let mut at_invoke: HashMap<Process, Option<Highest>> = HashMap::new();
    let mut next = 0;
    let mut evidence = Vec::new();
    let (mut checked, mut nonmonotonic) = (0u64, 0u64);
    for op in &run.history {
        let Some(send) = op.send() else {
            continue;
        };
        if op.process == Process::Nemesis {
            continue;
        }
        if op.kind == OpType::Invoke {
            at_invoke.insert(op.process, highest.get(&send.partition).cloned());
            continue;
        }
        let before = at_invoke.remove(&op.process).flatten();
        // This op's own values, and every value acked up to it, raise the
        // partition's highest after the comparison.
        let mut own = Vec::new();
        while next < acked.len() && acked[next].index <= op.index {
            if acked[next].index == op.index {
                own.push(acked[next].clone());
            } else {
                raise(&mut highest, &acked[next]);
            }
            next += 1;
        }
        if let Some(before) = before
            && let Some(first) = own.first()
        {
            checked += 1;
            let offset = first.offset.expect("acks=all values have offsets");
            if offset <= before.offset
                && !matches!(excuses.judge(&before.value), Judgement::Excused(_))
            {
                nonmonotonic += 1;
                if evidence.len() < EVIDENCE_MAX {
                    evidence.push(Evidence {
                        anomaly: Anomaly::NonmonotonicSend,
                        summary: format!(
                            "{} after {} was acknowledged before it was sent",
                            first.describe(),
                            before.value.describe()
                        ),
                        details: NonmonotonicSend {
                            earlier: before.value.details(),
                            later: first.details(),
                        }
                        .into(),
                    });
                }
            }
        }
        for value in &own {
            raise(&mut highest, value);
        }
    }
    let result = if nonmonotonic == 0 {
        CheckResult::valid(
            NAME,
            format!("{checked} acks=all send(s) after an earlier ack: each at a higher offset"),
        )
    } else {
        CheckResult::invalid(
            NAME,
            format!(
                "{nonmonotonic} acks=all send(s) at or below an offset acknowledged before they \
                 were sent"
            ),
            evidence,
        )
    };
    Ok(result
        .with_count("checked", checked)
        .with_count("nonmonotonic", nonmonotonic))
}

fn raise<'a>(highest: &mut HashMap<&'a PartitionRef, Highest<'a>>, value: &AckedValue<'a>) {
    let Some(offset) = value.offset else {
        return;
    };
    let partition: &'a PartitionRef = match &value.partition {
        std::borrow::Cow::Borrowed(p) => p,
        std::borrow::Cow::Owned(_) => return,
    };
    let entry = highest.entry(partition).or_insert_with(|| Highest {
        offset,
        value: value.clone(),
    });
    if offset > entry.offset {
        *entry = Highest {
            offset,
            value: value.clone(),
        };
    }
}
