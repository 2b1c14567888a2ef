//! The high watermark, or what a consumer consumed, going backwards.
//!
//! Two rules over the ok polls of each partition:
//!
//! - `high-watermark-regressed`: poll B was invoked after poll A completed
//!   (history order), both were served by the same node, and B saw a lower
//!   high watermark than A, while etcd's timeline shows that node leading the
//!   partition in one leader epoch only. Within a leader epoch the leader's
//!   high watermark only advances (Kafka's leader moves it forward as the
//!   ISR's log end offsets do), so this holds across client processes too.
//! - `consumed-offset-regressed`: a poll returned a record below the
//!   from_offset it asked for — below the position it asked to consume from.
//!   Every poll here names its from_offset, so a consumer that re-reads older
//!   offsets asked to, and that is not an anomaly.
//!
//! - `read-above-high-watermark`: a fetch answer returned a record at or
//!   above the high watermark it reported itself. A leader gives clients only
//!   committed records, those below its high watermark; the client cuts a
//!   poll there, and keeps what it cut as the evidence.
//!
//! Across a leader change the high watermark may go backwards in Kafka:
//! KIP-207 describes a new leader whose high watermark lags the old one's
//! until its followers catch up, and fixes only ListOffsets (which answers
//! OFFSET_NOT_AVAILABLE meanwhile), not Fetch. So a drop between polls served
//! by different nodes, or by a node that led in several epochs, is counted,
//! not invalid; a drop on one node when there is no timeline to tell is
//! unknown.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::CheckOutcome;
use super::evidence::{
    ConsumedRegressed, EarlierPoll, LaterPoll, ReadAboveWatermark, WatermarkRegressed,
};
use super::index::{OkPoll, RunIndex};
use super::{Anomaly, CheckResult, Checker, Evidence, RunData};
use crate::history::Process;
use crate::node::NodeId;
use crate::observe::timeline::Timeline;
use crate::topic_partition::PartitionRef;

const NAME: &str = "high-watermark";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "The high watermark a partition's leader reports to consumers never decreases \
            while it stays leader in one leader epoch: a poll invoked after another completed on \
            the same leader sees a high watermark at least as high, whichever client made it. \
            A poll never returns records below the offset it asked to fetch from. A fetch \
            answer to a consumer holds no record at or above the high watermark it reports.",
        source: "Kafka documentation, Design 4.7 (the high watermark is the offset of the last \
            committed message; only committed messages are given to consumers) and the Fetch \
            API (records are returned from the fetch offset on); KIP-207 for where the high \
            watermark may go backwards (a new leader lagging its predecessor), which this \
            checker therefore does not hold against Kafka.",
        not_checked: "A drop across a leader change is counted, not invalid (KIP-207): polls \
            served by different nodes, or by a node that led the partition in more than one \
            leader epoch per etcd's timeline. Without a timeline a same-node drop is unknown. \
            Polls whose intervals overlap are not ordered. ListOffsets answers and the high \
            watermarks in replicas' checkpoints are not compared here. A record above the high \
            watermark is seen only in the answers the harness's own polls receive; the final \
            read and real clients' fetches are not looked at.",
        needs: &[],
        check,
    }
}

/// The distinct leader epochs in which `node` led `partition`, per the
/// timeline; `None` when the timeline says nothing about the partition.
fn epochs_led(
    timeline: &Timeline,
    partition: &PartitionRef,
    node: NodeId,
) -> Option<BTreeSet<i32>> {
    let states = timeline.states_of(&partition.topic, partition.partition);
    if states.is_empty() {
        return None;
    }
    Some(
        states
            .iter()
            .filter(|s| s.leader == node.broker_id())
            .map(|s| s.leader_epoch)
            .collect(),
    )
}

fn check(index: &RunIndex) -> CheckOutcome {
    let run = index.run;
    let polls = index.ok_polls();
    let mut evidence = Vec::new();
    records_below_from_offset(polls, &mut evidence);
    records_above_high_watermark(polls, &mut evidence);
    let drops = watermark_drops(run, polls, &mut evidence);
    let unresolved = drops.unresolved;
    let result = CheckResult::fold(
        NAME,
        evidence,
        super::anomalies_message,
        unresolved.first().map(|first| {
            // Written as its JSON, as results.json has always said it.
            let first = serde_json::to_string(first).expect("serializes");
            format!(
                "{} high watermark drop(s) on one node with no timeline to tell whether \
                 leadership changed between, first: {first}",
                unresolved.len()
            )
        }),
        || {
            format!(
                "{} polls: no high watermark drop on one leader, no record below a from_offset",
                polls.len()
            )
        },
    );
    Ok(result
        .with_count("polls", polls.len() as u64)
        .with_count("drops-across-leaders", drops.across_leaders)
        .with_count("drops-after-leader-change", drops.after_leader_change))
}

/// Evidence of each poll whose fetch answers held records at or above the
/// high watermark they reported.
fn records_above_high_watermark(polls: &[OkPoll], evidence: &mut Vec<Evidence>) {
    for poll in polls.iter().filter(|p| !p.above_high_watermark.is_empty()) {
        let offsets: Vec<i64> = poll.above_high_watermark.iter().map(|&(o, _)| o).collect();
        let high_watermark = poll.above_high_watermark[0].1;
        evidence.push(Evidence::new(
            Anomaly::ReadAboveHighWatermark,
            format!(
                "poll at index {} of {} (served by {}) was answered with offsets {offsets:?} \
                 at or above the high watermark {high_watermark} the answer reported",
                poll.index,
                poll.partition,
                poll.node.map_or("?".to_owned(), |n| n.to_string())
            ),
            ReadAboveWatermark {
                high_watermark,
                index: poll.index,
                node: poll.node,
                offsets,
                partition: poll.partition.clone(),
            },
        ));
    }
}

/// Evidence of each poll that returned a record below the offset it asked
/// to fetch from, with the highest offset its process had consumed before.
fn records_below_from_offset(polls: &[OkPoll], evidence: &mut Vec<Evidence>) {
    // (process, partition) → the highest offset it consumed so far.
    let mut consumed: HashMap<(Process, &PartitionRef), i64> = HashMap::new();
    for poll in polls {
        let key = (poll.process, poll.partition);
        let before = consumed.get(&key).copied();
        if let Some(last) = poll.records.iter().map(|r| r.offset()).max() {
            consumed.insert(key, before.map_or(last, |b| b.max(last)));
        }
        if let Some(record) = poll.records.iter().find(|r| r.offset() < poll.from_offset) {
            let offset = record.offset();
            evidence.push(Evidence::new(
                Anomaly::ConsumedOffsetRegressed,
                format!(
                    "poll at index {} of {} asked from offset {} and returned offset {offset}",
                    poll.index, poll.partition, poll.from_offset
                ),
                ConsumedRegressed {
                    consumed_before: before,
                    from_offset: poll.from_offset,
                    index: poll.index,
                    offset,
                    partition: poll.partition.clone(),
                    process: poll.process,
                },
            ));
        }
    }
}

/// High watermark drops that are not evidence: counted, or left unknown.
struct Drops {
    /// Same-node drops with no timeline to tell whether leadership changed.
    unresolved: Vec<WatermarkRegressed>,
    /// Polls that saw a lower high watermark than an earlier poll served by
    /// another (or an unnamed) node.
    across_leaders: u64,
    /// Same-node drops where the node led in several leader epochs.
    after_leader_change: u64,
}

/// Compares each poll with the polls of its partition that completed before
/// it was invoked (the highest high watermark per serving node): a drop on
/// one node within one leader epoch is evidence; the rest are counted.
fn watermark_drops(run: &RunData, polls: &[OkPoll], evidence: &mut Vec<Evidence>) -> Drops {
    let mut drops = Drops {
        unresolved: Vec::new(),
        across_leaders: 0,
        after_leader_change: 0,
    };
    let mut by_completion: Vec<&OkPoll> = polls.iter().collect();
    by_completion.sort_by_key(|p| p.index);
    let mut by_invoke: Vec<&OkPoll> = polls.iter().collect();
    by_invoke.sort_by_key(|p| p.invoke_index);
    // (partition, node) → the poll with the highest HW completed so far.
    let mut highest: BTreeMap<(&PartitionRef, Option<NodeId>), &OkPoll> = BTreeMap::new();
    let mut completed = by_completion.into_iter().peekable();
    for later in by_invoke {
        while let Some(done) = completed.next_if(|p| p.index < later.invoke_index) {
            let key = (done.partition, done.node);
            let best = highest.entry(key).or_insert(done);
            if done.high_watermark > best.high_watermark {
                *best = done;
            }
        }
        let mut other_node_higher = false;
        for ((partition, node), earlier) in &highest {
            if *partition != later.partition || earlier.high_watermark <= later.high_watermark {
                continue;
            }
            // An unnamed server cannot be the same leader as anyone.
            let Some(node) = node.filter(|&node| Some(node) == later.node) else {
                other_node_higher = true;
                continue;
            };
            let epochs = run
                .timeline
                .as_ref()
                .and_then(|t| epochs_led(t, partition, node));
            let details = WatermarkRegressed {
                earlier: EarlierPoll {
                    high_watermark: earlier.high_watermark,
                    index: earlier.index,
                    process: earlier.process,
                },
                later: LaterPoll {
                    high_watermark: later.high_watermark,
                    index: later.index,
                    invoke_index: later.invoke_index,
                    process: later.process,
                },
                leader_epochs_of_node: epochs,
                node,
                partition: (*partition).clone(),
            };
            match &details.leader_epochs_of_node {
                Some(epochs) if epochs.len() == 1 => evidence.push(Evidence::new(
                    Anomaly::HighWatermarkRegressed,
                    format!(
                        "{partition} on {node}: poll at index {} saw high watermark {}, poll at \
                         index {} (invoked after) saw {}, within {node}'s one leader epoch",
                        earlier.index, earlier.high_watermark, later.index, later.high_watermark
                    ),
                    details,
                )),
                Some(epochs) if epochs.len() > 1 => drops.after_leader_change += 1,
                _ => drops.unresolved.push(details),
            }
        }
        if other_node_higher {
            drops.across_leaders += 1;
        }
    }
    drops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::RunData;
    use crate::checker::{Details, Verdict};
    use crate::history::{Body, Op, OpType, Poll, PolledRecord, Read, RecordValue};
    use crate::observe::timeline::PartitionStateChange;

    fn op(index: u64, process: u64, kind: OpType, poll: Poll) -> Op {
        Op {
            index,
            time_ns: index,
            process: Process::Client(process),
            kind,
            body: Body::Poll(poll),
            error: None,
        }
    }

    /// The invoke of a poll of t-0 from offset 0, its server not yet known.
    fn invoke() -> Poll {
        Poll::new(PartitionRef::new("t", 0), 0, None)
    }

    /// An ok poll of t-0 served by broker `node`; `records` as `(offset, value)`.
    fn ok(node: u32, from: u64, records: &[(i64, i64)], hw: i64) -> Poll {
        let read = Read {
            records: records
                .iter()
                .map(|&(offset, value)| PolledRecord(offset, RecordValue::Number(value)))
                .collect(),
            high_watermark: hw,
            leader_epoch: None,
            above_high_watermark: Vec::new(),
        };
        Poll {
            from_offset: from,
            node: Some(NodeId::new(node)),
            read: Some(read),
            ..invoke()
        }
    }

    fn leader(revision: i64, leader: i32, leader_epoch: i32) -> PartitionStateChange {
        PartitionStateChange::of_t0(revision, leader, leader_epoch, &[1, 2, 3])
    }

    fn run(history: Vec<Op>, states: Option<Vec<PartitionStateChange>>) -> RunData {
        RunData {
            history,
            timeline: states.map(|partition_states| Timeline {
                partition_states,
                controllers: Vec::new(),
                registrations: Vec::new(),
            }),
            ..RunData::default()
        }
    }

    /// Process 0 polls b1 (HW 5), then process 1 polls `node` (HW 3).
    fn two_polls(node: u32) -> Vec<Op> {
        vec![
            op(0, 0, OpType::Invoke, invoke()),
            op(1, 0, OpType::Ok, ok(1, 0, &[], 5)),
            op(2, 1, OpType::Invoke, invoke()),
            op(3, 1, OpType::Ok, ok(node, 0, &[], 3)),
        ]
    }

    #[test]
    fn an_answer_holding_records_at_or_above_its_high_watermark_is_named() {
        let mut served = ok(1, 0, &[(0, 1), (1, 2)], 2);
        let history = |served: Poll| {
            vec![
                op(0, 0, OpType::Invoke, invoke()),
                op(1, 0, OpType::Ok, served),
            ]
        };
        let result = checker()
            .check_run(&run(history(served.clone()), None))
            .unwrap();
        assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
        served.read.as_mut().unwrap().above_high_watermark = vec![(2, 2), (3, 2)];
        let result = checker().check_run(&run(history(served), None)).unwrap();
        assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
        let e = &result.evidence[0];
        assert_eq!(e.anomaly, Anomaly::ReadAboveHighWatermark);
        let Details::ReadAboveWatermark(d) = &e.details else {
            panic!("{:?}", e.details)
        };
        assert_eq!(
            (d.offsets.clone(), d.high_watermark, d.index),
            (vec![2, 3], 2, 1)
        );
    }

    #[test]
    fn checker_watermark_drop_on_one_leader_epoch_is_invalid_across_processes() {
        let result = checker()
            .check_run(&run(two_polls(1), Some(vec![leader(1, 1, 0)])))
            .unwrap();
        assert_eq!(result.verdict, Verdict::Invalid);
        let e = &result.evidence[0];
        assert_eq!(e.anomaly, Anomaly::HighWatermarkRegressed);
        let Details::WatermarkRegressed(d) = &e.details else {
            panic!("{:?}", e.details)
        };
        assert_eq!((d.earlier.high_watermark, d.later.index), (5, 3));
    }

    #[test]
    fn checker_watermark_drop_across_leaders_is_counted_not_invalid() {
        let mut states = vec![leader(1, 1, 0), leader(2, 2, 1)];
        let result = checker()
            .check_run(&run(two_polls(2), Some(states.clone())))
            .unwrap();
        assert_eq!(result.verdict, Verdict::Valid);
        assert_eq!(result.counts["drops-across-leaders"], 1);
        // b1 led again in a later epoch: a drop on b1 is KIP-207's case too.
        states.push(leader(3, 1, 2));
        let result = checker()
            .check_run(&run(two_polls(1), Some(states)))
            .unwrap();
        assert_eq!(result.verdict, Verdict::Valid);
        assert_eq!(result.counts["drops-after-leader-change"], 1);
        // No timeline: the same-node drop cannot be judged.
        let result = checker().check_run(&run(two_polls(1), None)).unwrap();
        assert_eq!(result.verdict, Verdict::Unknown);
    }

    #[test]
    fn checker_watermark_overlapping_polls_are_not_ordered() {
        let history = vec![
            op(0, 0, OpType::Invoke, invoke()),
            op(1, 1, OpType::Invoke, invoke()),
            op(2, 0, OpType::Ok, ok(1, 0, &[], 5)),
            op(3, 1, OpType::Ok, ok(1, 0, &[], 3)),
        ];
        let result = checker()
            .check_run(&run(history, Some(vec![leader(1, 1, 0)])))
            .unwrap();
        assert_eq!(result.verdict, Verdict::Valid, "{:?}", result.evidence);
    }

    #[test]
    fn checker_watermark_record_below_from_offset_is_invalid() {
        let history = vec![
            op(0, 0, OpType::Invoke, invoke()),
            op(1, 0, OpType::Ok, ok(1, 0, &[(0, 10), (3, 13)], 5)),
            op(2, 0, OpType::Invoke, invoke()),
            op(3, 0, OpType::Ok, ok(1, 4, &[(3, 13), (4, 14)], 5)),
        ];
        let result = checker()
            .check_run(&run(history.clone(), Some(vec![leader(1, 1, 0)])))
            .unwrap();
        assert_eq!(result.verdict, Verdict::Invalid);
        assert_eq!(result.evidence.len(), 1);
        let e = &result.evidence[0];
        assert_eq!(e.anomaly, Anomaly::ConsumedOffsetRegressed);
        let Details::ConsumedRegressed(d) = &e.details else {
            panic!("{:?}", e.details)
        };
        assert_eq!((d.offset, d.index, d.consumed_before), (3, 3, Some(3)));
        // Asking for offset 3 again is a re-read the consumer asked for.
        let mut history = history;
        if let Body::Poll(poll) = &mut history[3].body {
            poll.from_offset = 3;
        }
        let result = checker()
            .check_run(&run(history, Some(vec![leader(1, 1, 0)])))
            .unwrap();
        assert_eq!(result.verdict, Verdict::Valid, "{:?}", result.evidence);
    }
}
