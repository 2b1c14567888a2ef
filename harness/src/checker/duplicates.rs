//! Duplicates: a value at two or more offsets of a partition's final log.
//! Without idempotence Kafka allows them (a producer retry after a lost
//! response appends the batch again), so they are reported and counted and
//! the verdict stays valid. An idempotent producer's batches carry a
//! producer id and sequences (KIP-98), and a leader must answer a retried
//! batch with the offset it already has rather than append it again: a value
//! that only idempotent sends wrote, at more offsets than it was sent, makes
//! the run invalid, naming the sends and their stamps.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::CheckOutcome;
use super::evidence::{Duplicate, IdempotentDuplicate, SendRef};
use super::index::{EVIDENCE_MAX, RunIndex, ValueIndex};
use super::{Anomaly, CheckResult, Checker, Evidence};
use crate::history::{Idempotence, Op, OpType, Process};
use crate::topic_partition::PartitionRef;

pub const NAME: &str = "duplicates";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "With an idempotent producer, each send is written once: a value only \
            idempotent sends wrote is at no more offsets of its partition than it was sent. \
            Without one, none asserted: Kafka delivers at least once, so a value may be written \
            at more than one offset; each such value is reported and counted and the verdict is \
            valid.",
        source: "KIP-98 (idempotent producer: producer id, epoch and per-partition sequence \
            numbers, and the leader's duplicate detection); Kafka documentation, Design §4.6 \
            Message Delivery Semantics (at-least-once unless the producer is idempotent, \
            enable.idempotence).",
        not_checked: "Whether a plain producer's duplicate came from a client retry or from the \
            broker (the plain workload client does not retry). A value sent both by idempotent \
            and by plain sends is held to the plain rule. A send that failed counts as sent, so \
            a failed idempotent send whose value appears anyway is not flagged here. Producer ids \
            across processes: a process whose send ended info is retired with its producer, and \
            the workload never sends that value again. Null values. Internal topics (`__consumer_offsets`). When a partition has no \
            final log (no final leader and disagreeing replicas) every replica is examined \
            instead.",
        needs: &[],
        check,
    }
}

/// One send of a value: the op that sent it and, from an idempotent
/// producer, the value's own sequence.
#[derive(Debug, Clone)]
struct SentBy {
    process: Process,
    invoke_index: u64,
    /// The completion's index and type; `None` while still in flight.
    completion: Option<(u64, OpType)>,
    /// The completion's stamp when it has one (it adds `attempts`), else
    /// the invoke's.
    producer: Option<Idempotence>,
    /// The value's sequence: the base sequence plus its place in the send.
    sequence: Option<i32>,
}

impl SentBy {
    fn details(&self) -> SendRef {
        SendRef {
            attempts: self.producer.as_ref().and_then(|p| p.attempts),
            index: self.completion.map(|(index, _)| index),
            invoke_index: self.invoke_index,
            process: self.process,
            producer_epoch: self.producer.as_ref().map(|p| p.epoch),
            producer_id: self.producer.as_ref().map(|p| p.id),
            sequence: self.producer.as_ref().map(|_| self.sequence),
            kind: self.completion.map(|(_, kind)| kind),
        }
    }

    /// `producer 4000 epoch 0 sequence 7 (process 3, history index 10, ok
    /// after 2 attempts)`.
    fn describe(&self) -> String {
        let stamp = self.producer.map_or_else(String::new, |p| {
            format!(
                "producer {} epoch {} sequence {} ",
                p.id,
                p.epoch,
                self.sequence.unwrap_or(p.base_sequence)
            )
        });
        let outcome = match (self.completion, self.producer.and_then(|p| p.attempts)) {
            (Some((_, kind)), Some(n)) => format!(", {kind:?} after {n} attempt(s)"),
            (Some((_, kind)), None) => format!(", {kind:?}"),
            (None, _) => ", never completed".to_owned(),
        };
        format!(
            "{stamp}(process {}, history index {}{})",
            self.process,
            self.invoke_index,
            outcome.to_lowercase()
        )
    }
}

/// The sends of the values a final log holds more than once, keyed by
/// partition and value, and whether any send of the run was idempotent.
/// Only the `wanted` values are gathered: a long run sends millions of
/// values and repeats a handful, and keying every one by its text cost
/// more time and memory than every other checker together (issue 22).
struct Sends {
    by_value: HashMap<(PartitionRef, i64), Vec<SentBy>>,
    idempotent_run: bool,
}

impl Sends {
    fn of(history: &[Op], wanted: &HashSet<(PartitionRef, i64)>) -> Sends {
        let wanted_values: HashSet<i64> = wanted.iter().map(|(_, value)| *value).collect();
        let is_wanted = |partition: &PartitionRef, value: i64| {
            wanted_values.contains(&value) && wanted.contains(&(partition.clone(), value))
        };
        let mut idempotent_run = false;
        // Each process's send in flight, when it sent a wanted value: its
        // place in `all`.
        let mut pending: HashMap<Process, usize> = HashMap::new();
        let mut all: Vec<(&Op, SentBy)> = Vec::new();
        for op in history {
            let Some(send) = op.send() else { continue };
            idempotent_run |= send.producer.is_some();
            if op.kind == OpType::Invoke {
                if !send.values.iter().any(|&v| is_wanted(&send.partition, v)) {
                    pending.remove(&op.process);
                    continue;
                }
                pending.insert(op.process, all.len());
                let sent = SentBy {
                    process: op.process,
                    invoke_index: op.index,
                    completion: None,
                    producer: send.producer,
                    sequence: None,
                };
                all.push((op, sent));
            } else if let Some(i) = pending.remove(&op.process) {
                let sent = &mut all[i].1;
                sent.completion = Some((op.index, op.kind));
                sent.producer = send.producer.or(sent.producer);
            }
        }
        let mut by_value: HashMap<(PartitionRef, i64), Vec<SentBy>> = HashMap::new();
        for (op, sent) in all {
            let send = op.send().expect("only sends were kept");
            for (i, &value) in send.values.iter().enumerate() {
                if !is_wanted(&send.partition, value) {
                    continue;
                }
                let sequence = sent.producer.map(|p| {
                    let place = i32::try_from(i).unwrap_or(i32::MAX);
                    crate::kafka_client::increment_sequence(p.base_sequence, place)
                });
                by_value
                    .entry((send.partition.clone(), value))
                    .or_default()
                    .push(SentBy {
                        sequence,
                        ..sent.clone()
                    });
            }
        }
        Sends {
            by_value,
            idempotent_run,
        }
    }
}

/// The value a send wrote as `text`, if one could have: the workload's
/// values are integers written in their canonical decimal form.
fn sent_value(text: &str) -> Option<i64> {
    text.parse::<i64>()
        .ok()
        .filter(|value| value.to_string() == text)
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let partitions = run.partitions();
    if partitions.is_empty() {
        return Ok(CheckResult::unknown(
            NAME,
            "the run left no replica to examine",
        ));
    }
    // Replicas that agree show the same duplicate once.
    let mut seen: BTreeSet<(&PartitionRef, String, Vec<i64>)> = BTreeSet::new();
    let mut repeated = Vec::new();
    // Kafka's internal topics (`__consumer_offsets`) hold the brokers'
    // records, not the workload's: a group's metadata written twice is no
    // duplicate of a client's value.
    for partition in partitions.iter().filter(|p| !p.topic.starts_with("__")) {
        // The final log's values as the run's index holds them; without a
        // final log, every replica's, indexed here.
        let final_log = index.final_log(partition);
        let each: Vec<(String, ValueIndex<'_>)> = match final_log {
            Ok(_) => Vec::new(),
            Err(_) => run
                .holders(partition)
                .into_iter()
                .map(|(node, replica)| (node.to_string(), ValueIndex::of(replica)))
                .collect(),
        };
        let examined: Vec<(&str, &ValueIndex<'_>)> = match final_log {
            Ok(indexed) => vec![(indexed.log.chosen.as_str(), &indexed.by_value)],
            Err(_) => each
                .iter()
                .map(|(node, values)| (node.as_str(), values))
                .collect(),
        };
        for (source, values) in examined {
            for (value, offsets) in values.repeated() {
                let value = value.into_owned();
                if seen.insert((partition, value.clone(), offsets.clone())) {
                    repeated.push((partition, value, offsets, source.to_owned()));
                }
            }
        }
    }
    let wanted: HashSet<(PartitionRef, i64)> = repeated
        .iter()
        .filter_map(|(partition, value, _, _)| Some(((*partition).clone(), sent_value(value)?)))
        .collect();
    let sends = Sends::of(&run.history, &wanted);
    // Duplicates idempotence forbids, and those Kafka allows.
    let mut forbidden = Vec::new();
    let mut allowed = Vec::new();
    let mut total = 0u64;
    let mut idempotent_duplicates = 0u64;
    for (partition, value, offsets, source) in repeated {
        total += 1;
        let sent = sent_value(&value)
            .and_then(|v| sends.by_value.get(&(partition.clone(), v)))
            .map_or(&[][..], Vec::as_slice);
        let only_idempotent = !sent.is_empty() && sent.iter().all(|s| s.producer.is_some());
        if only_idempotent && offsets.len() > sent.len() {
            idempotent_duplicates += 1;
            if forbidden.len() < EVIDENCE_MAX {
                forbidden.push(idempotent_duplicate(
                    partition, &value, &offsets, &source, sent,
                ));
            }
        } else if allowed.len() < EVIDENCE_MAX {
            allowed.push(Evidence::new(
                Anomaly::Duplicate,
                format!("value {value} is at offsets {offsets:?} of {partition} ({source})"),
                Duplicate {
                    log: source,
                    offsets,
                    partition: partition.clone(),
                    value,
                },
            ));
        }
    }
    let mut result = if idempotent_duplicates > 0 {
        let message = format!(
            "{idempotent_duplicates} value(s) sent by idempotent producers are at more offsets \
             than they were sent ({total} value(s) at more than one offset in all)"
        );
        let mut evidence = forbidden;
        let room = EVIDENCE_MAX.saturating_sub(evidence.len());
        evidence.extend(allowed.into_iter().take(room));
        CheckResult::invalid(NAME, message, evidence)
    } else {
        let mut result = CheckResult::valid(
            NAME,
            if total == 0 {
                "no value at two offsets".to_owned()
            } else {
                format!("{total} value(s) at more than one offset (allowed without idempotence)")
            },
        );
        result.evidence = allowed;
        result
    };
    result = result.with_count("duplicates", total);
    if sends.idempotent_run {
        result = result.with_count("idempotent-duplicates", idempotent_duplicates);
    }
    Ok(result)
}

/// The evidence of a value idempotent sends wrote more often than they sent it.
fn idempotent_duplicate(
    partition: &PartitionRef,
    value: &str,
    offsets: &[i64],
    source: &str,
    sent: &[SentBy],
) -> Evidence {
    let times = match sent.len() {
        1 => "once".to_owned(),
        n => format!("{n} times"),
    };
    let by: Vec<String> = sent.iter().map(SentBy::describe).collect();
    Evidence {
        anomaly: Anomaly::IdempotentDuplicate,
        summary: format!(
            "value {value} is at offsets {offsets:?} of {partition} ({source}), sent {times} by an \
             idempotent producer: {}",
            by.join("; ")
        ),
        details: IdempotentDuplicate {
            log: source.to_owned(),
            offsets: offsets.to_vec(),
            partition: partition.clone(),
            sends: sent.iter().map(SentBy::details).collect(),
            value: value.to_owned(),
        }
        .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::RunData;
    use crate::checker::Verdict;
    use crate::checker::synthetic::{SyntheticSpec, synthetic_run};
    use crate::history::Body;
    use serde_json::json;

    /// A small synthetic run without faults or unknown sends, one value a
    /// send: every replica of every partition holds each acknowledged value
    /// once, in a batch of its own.
    fn run() -> RunData {
        synthetic_run(&SyntheticSpec {
            faults: 0,
            info_send_every: 0,
            values_per_send: 1,
            ..SyntheticSpec::with_ops(300)
        })
    }

    /// The first acknowledged send: its invoke's and completion's places in
    /// the history.
    fn first_acked(run: &RunData) -> (usize, usize) {
        let completion = run
            .history
            .iter()
            .position(|op| op.acked_send().is_some())
            .expect("the run acknowledged a send");
        let process = run.history[completion].process;
        let invoke = run.history[..completion]
            .iter()
            .rposition(|op| op.process == process && op.kind == OpType::Invoke)
            .expect("its invoke");
        (invoke, completion)
    }

    /// Stamps the send at these places as an idempotent producer's.
    fn stamp(run: &mut RunData, places: &[usize], attempts: u32) {
        for &i in places {
            let completion = run.history[i].kind != OpType::Invoke;
            if let Body::Send(send) = &mut run.history[i].body {
                send.producer = Some(Idempotence {
                    id: 4000,
                    epoch: 0,
                    base_sequence: 7,
                    attempts: completion.then_some(attempts),
                });
            }
        }
    }

    /// Appends the batch holding `value` to the end of `partition`'s log once
    /// more, on every replica alike (as a leader that appended a retried
    /// batch again would leave it); the new offsets.
    fn append_again(run: &mut RunData, partition: &PartitionRef, value: i64) -> Vec<i64> {
        let text = value.to_string();
        let mut appended = Vec::new();
        for dir in run.replicas.values_mut() {
            let replica = dir
                .replicas
                .iter_mut()
                .find(|r| r.partition_ref() == *partition)
                .expect("every node holds every partition");
            let batch = replica
                .segments
                .iter()
                .flat_map(|s| &s.batches)
                .find(|b| {
                    b.records
                        .iter()
                        .any(|r| r.value.as_ref().and_then(|v| v.as_str()) == Some(&text))
                })
                .expect("the value is in the log")
                .clone();
            let shift = replica.log_end_offset - batch.base_offset;
            let mut again = batch;
            again.base_offset += shift;
            again.last_offset += shift;
            for record in &mut again.records {
                record.offset += shift;
            }
            appended = again.records.iter().map(|r| r.offset).collect();
            replica.log_end_offset = again.last_offset + 1;
            replica.high_watermark = Some(replica.log_end_offset);
            replica.segments.last_mut().unwrap().batches.push(again);
        }
        appended
    }

    #[test]
    fn an_idempotent_send_written_twice_is_invalid_naming_its_op_and_stamp() {
        let mut run = run();
        let (invoke, completion) = first_acked(&run);
        stamp(&mut run, &[invoke, completion], 2);
        let (send, acked) = run.history[completion].acked_send().unwrap();
        let (partition, value) = (send.partition.clone(), send.values[0]);
        let first = acked.offsets.as_ref().unwrap()[0];
        let again = append_again(&mut run, &partition, value);

        let result = checker().check_run(&run).unwrap();
        assert_eq!(result.verdict, Verdict::Invalid, "{result:#?}");
        assert_eq!(result.counts["idempotent-duplicates"], 1);
        assert!(result.counts["duplicates"] >= 1);
        let evidence = &result.evidence[0];
        assert_eq!(evidence.anomaly, Anomaly::IdempotentDuplicate);
        assert_eq!(evidence.details.json()["value"], value.to_string());
        assert_eq!(evidence.details.json()["offsets"][0], first);
        assert_eq!(evidence.details.json()["offsets"][1], again[0]);
        let sent = &evidence.details.json()["sends"][0];
        assert_eq!(sent["process"], json!(run.history[invoke].process));
        assert_eq!(sent["invoke_index"], run.history[invoke].index);
        assert_eq!(sent["index"], run.history[completion].index);
        assert_eq!(sent["type"], "ok");
        assert_eq!(sent["producer_id"], 4000);
        assert_eq!(sent["sequence"], 7);
        assert_eq!(sent["attempts"], 2);
        assert!(
            evidence
                .summary
                .contains("sent once by an idempotent producer")
                && evidence
                    .summary
                    .contains("producer 4000 epoch 0 sequence 7"),
            "{}",
            evidence.summary
        );
    }

    #[test]
    fn a_plain_send_written_twice_is_counted_and_valid_as_before() {
        let mut run = run();
        let (_, completion) = first_acked(&run);
        let send = run.history[completion].send().unwrap();
        let (partition, value) = (send.partition.clone(), send.values[0]);
        append_again(&mut run, &partition, value);

        let result = checker().check_run(&run).unwrap();
        assert_eq!(result.verdict, Verdict::Valid, "{result:#?}");
        assert_eq!(result.counts["duplicates"], 1);
        assert!(!result.counts.contains_key("idempotent-duplicates"));
        assert_eq!(
            result.message,
            "1 value(s) at more than one offset (allowed without idempotence)"
        );
        assert_eq!(result.evidence[0].anomaly, Anomaly::Duplicate);
        assert!(result.evidence[0].details.json().get("sends").is_none());
    }

    #[test]
    fn a_value_two_idempotent_sends_wrote_may_be_at_two_offsets() {
        let mut run = run();
        let (invoke, completion) = first_acked(&run);
        stamp(&mut run, &[invoke, completion], 1);
        let send = run.history[completion].send().unwrap();
        let (partition, value) = (send.partition.clone(), send.values[0]);
        // A second op sending the same value: two sends, two copies.
        let mut second = vec![run.history[invoke].clone(), run.history[completion].clone()];
        let next = run.history.last().unwrap().index + 1;
        for (i, op) in second.iter_mut().enumerate() {
            op.index = next + i as u64;
            op.process = Process::Client(9_999);
        }
        run.history.extend(second);
        append_again(&mut run, &partition, value);

        let result = checker().check_run(&run).unwrap();
        assert_eq!(result.verdict, Verdict::Valid, "{result:#?}");
        assert_eq!(result.counts["idempotent-duplicates"], 0);
        assert_eq!(result.counts["duplicates"], 1);
    }
}
