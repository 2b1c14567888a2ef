//! An acks=all acknowledgement is a promise that every ISR member holds the
//! write: the leader answers once its high watermark passed the batch, and
//! the high watermark passes an offset only when every ISR member's fetch
//! has (Kafka documentation, Replication: "A message is considered committed
//! when all in sync replicas for that partition have applied it to their
//! log"; the leader learns what a follower holds only from its Fetch
//! requests' offsets, KIP-101/KIP-392's fetch protocol). The lost-write
//! checker sees a broken promise only when a fault also loses the write;
//! this one sees the promise itself, where it is made.
//!
//! The evidence is the proxy's recording of every Fetch a replica sent
//! (`epochal-proxy --record`, `reader::frames`) and the ISR etcd named in a
//! read begun after the client had the answer. A member of that ISR holds
//! the acknowledged offset by then, whichever way it got there: in the ISR
//! since before the ack, its fetch past the offset reached the leader before
//! the leader's high watermark could pass it; joined after, it had caught up
//! to a high watermark above the offset to join. So a member whose first
//! fetch from past the offset went through the proxy only after the op
//! completed (the ISR read ends before that), or never, was counted on for a
//! write it did not hold: `ack-before-isr-held`.

use super::evidence::AckBeforeIsrHeld;
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence, Need, RunIndex};
use crate::history::Op;
use crate::reader::frames::Fetches;
use crate::schedule::Acks;

pub const NAME: &str = "isr-acks";

/// How much later than the op's completion a first fetch must be to count
/// as after it: the recordings' wall clock and the history's are one
/// machine's, tied by `clock.json` to the millisecond.
const CLOCK_MARGIN_NS: u64 = 50_000_000;

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "Every member of the ISR etcd names just after an acks=all \
            acknowledgement held the acknowledged offsets by then: its first Fetch from \
            past them went through the proxy before the op completed.",
        source: "Kafka documentation, Replication (a message is committed when all in-sync \
            replicas have applied it; acks=all waits for the full ISR); KIP-101 (the \
            follower's fetch offset is what the leader knows of its log).",
        not_checked: "Sends whose request was retried (an idempotent producer's resend \
            may be answered by another leader) and members the op's own broker is \
            (leaders do not fetch) are skipped, as are members whose links' recordings \
            have a gap (the proxy dropped requests it could not record) or that the \
            recordings never show fetching the partition. Only writes whose op recorded \
            the ISR (systems with etcd's layout). A run without recordings (before the \
            proxy recorded) is not applicable. The 50 ms margin hides a premature ack \
            that the member caught up with within it.",
        needs: &[Need::EtcdTimeline],
        check,
    }
}

pub fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let (Some(fetches), Some(opened_ms)) = (&run.fetches, run.history_opened_unix_ms) else {
        return Ok(CheckResult::not_applicable(
            NAME,
            "the run has no recording of the brokers' fetches (epochal-proxy --record) or \
             no clock.json to place it",
        ));
    };
    let opened_ns = opened_ms * 1_000_000;
    let mut evidence = Vec::new();
    let (mut writes, mut members) = (0u64, 0u64);
    for op in &run.history {
        let Some(checked) = check_op(op, fetches, opened_ns, &mut evidence) else {
            continue;
        };
        writes += 1;
        members += checked;
    }
    let result = CheckResult::fold(
        NAME,
        evidence,
        |evidence| {
            format!(
                "{} acks=all acknowledgement(s) counted on an ISR member that had not \
                 fetched past the offset",
                evidence.len()
            )
        },
        None,
        || {
            format!(
                "{writes} acks=all write(s) checked against {members} ISR member(s)' recorded \
                 fetches: each had fetched past the offset before the ISR was read"
            )
        },
    );
    Ok(result
        .with_count("writes", writes)
        .with_count("members", members))
}

/// Checks one op if it is a checkable acks=all ack; the members checked.
fn check_op(
    op: &Op,
    fetches: &Fetches,
    opened_ns: u64,
    evidence: &mut Vec<Evidence>,
) -> Option<u64> {
    let (send, acked) = op.acked_send()?;
    if send.acks != Acks::All
        || send
            .producer
            .as_ref()
            .is_some_and(|p| p.attempts.unwrap_or(1) > 1)
    {
        return None;
    }
    let (node, isr, offsets) = (send.node?, acked.isr.as_ref()?, acked.offsets.as_ref()?);
    let last = *offsets.iter().max()?;
    let (topic, partition) = (&send.partition.topic, send.partition.wire_partition());
    let completed_ns = opened_ns + op.time_ns;
    let mut checked = 0;
    for &member in isr {
        let member = member as i32;
        let key = (member, topic.clone(), partition);
        if member == node.broker_id() || fetches.gapped.contains(&member) {
            continue;
        }
        let Some(seen) = fetches.by_replica.get(&key) else {
            continue;
        };
        checked += 1;
        let first = fetches.first_past(member, topic, partition, last);
        if first.is_some_and(|t| t <= completed_ns + CLOCK_MARGIN_NS) {
            continue;
        }
        let before = seen
            .iter()
            .take_while(|&&(t, _)| t <= completed_ns)
            .last()
            .map(|&(_, offset)| offset);
        evidence.push(Evidence {
            anomaly: Anomaly::AckBeforeIsrHeld,
            summary: format!(
                "{}-{partition} offset {last} acknowledged by b{} (acks=all, ISR {isr:?} read \
                 after) though ISR member b{member} had {} by then, and first fetched past it \
                 {}",
                topic,
                node.id(),
                before.map_or("sent no fetch of it".to_owned(), |o| format!(
                    "fetched only from offset {o}"
                )),
                first.map_or("never".to_owned(), |t| format!(
                    "{} ms after the op completed",
                    (t - completed_ns) / 1_000_000
                )),
            ),
            details: AckBeforeIsrHeld {
                first_past_ms_after: first.map(|t| (t - completed_ns) / 1_000_000),
                history_index: op.index,
                isr: isr.clone(),
                last_fetch_offset_before: before,
                leader: node.id(),
                member: member as u32,
                offset: last,
                partition: send.partition.clone(),
            }
            .into(),
        });
    }
    Some(checked)
}
