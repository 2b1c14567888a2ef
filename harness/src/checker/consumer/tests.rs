//! The consumer checker's unit tests, on hand-built histories.

use super::*;
use crate::checker::Verdict;
use serde_json::{Value, json};

use crate::history::{Body, Op, OpType, Poll, PolledRecord, Process, Read};

fn op(index: u64, kind: OpType, poll: Poll) -> Op {
    Op {
        index,
        time_ns: index,
        process: Process::Client(0),
        kind,
        body: Body::Poll(poll),
        error: None,
    }
}

/// An ok poll of t-0 from b1 on process 0, invoke then ok; `records` as
/// `(offset, value)`.
fn poll(index: u64, from: u64, records: &[(i64, i64)], hw: i64) -> [Op; 2] {
    let invoke = Poll::new(PartitionRef::new("t", 0), from, Some(NodeId::new(1)));
    let read = Read {
        records: records
            .iter()
            .map(|&(offset, value)| PolledRecord(offset, RecordValue::Number(value)))
            .collect(),
        high_watermark: hw,
        leader_epoch: None,
        above_high_watermark: Vec::new(),
    };
    let ok = Poll {
        read: Some(read),
        ..invoke.clone()
    };
    [
        op(index, OpType::Invoke, invoke),
        op(index + 1, OpType::Ok, ok),
    ]
}

fn run(ops: Vec<Op>) -> RunData {
    RunData {
        history: ops,
        ..RunData::default()
    }
}

fn anomalies(result: &CheckResult) -> Vec<&str> {
    result.evidence.iter().map(|e| e.anomaly.name()).collect()
}

#[test]
fn checker_consumer_names_a_within_poll_gap_and_reordering() {
    let ops: Vec<Op> = poll(0, 0, &[(0, 10), (2, 12), (1, 11)], 3).into();
    let result = checker().check_run(&run(ops)).unwrap();
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(
        anomalies(&result),
        vec!["int-poll-skip", "int-nonmonotonic-poll"]
    );
    assert_eq!(
        result.evidence[0].details.json()["skipped"],
        json!([[1, 11]])
    );
    assert_eq!(result.evidence[1].details.json()["index"], json!(1));
}

#[test]
fn checker_consumer_contiguous_polls_are_not_skips() {
    let mut ops: Vec<Op> = poll(0, 3, &[(3, 13), (4, 14)], 5).into();
    ops.extend(poll(2, 5, &[], 5));
    let result = checker().check_run(&run(ops)).unwrap();
    assert!(result.evidence.is_empty(), "{:?}", result.evidence);
    // No replica hosts t-0 here: the truncated-read rule cannot run.
    assert_eq!(result.verdict, Verdict::Unknown);
}

#[test]
fn checker_consumer_a_malformed_ok_poll_never_reaches_the_checker() {
    let malformed =
        json!({"partition": "t-0", "from_offset": 0, "records": [[0]], "high_watermark": 1});
    assert!(crate::history::Body::from_value("poll", OpType::Ok, malformed).is_err());
}

#[test]
fn checker_consumer_stored_values_read_as_the_history_writes_them() {
    let stored = |bytes: Option<&[u8]>| serde_json::to_value(RecordValue::from_bytes(bytes));
    assert_eq!(stored(Some(b"42")).unwrap(), json!(42));
    assert_eq!(stored(Some(b"x")).unwrap(), json!("x"));
    assert_eq!(stored(None).unwrap(), Value::Null);
}

#[test]
fn checker_consumer_a_read_after_the_loss_that_excuses_its_write_is_not_excused() {
    use crate::history::{Acked, Send, Verb};
    use crate::observe::timeline::{PartitionStateChange, Timeline};
    // 10 is acknowledged at offset 0 under ISR [b1]; b1 then loses power
    // and its log is cut to 0, which excuses losing 10 (lost-write); a
    // poll invoked after the fault still reads 10 at offset 0, and a later
    // one reads 20 there. The write's excuse explains 10 disappearing, not a
    // replica serving it after it was gone: the two reads disagree
    // (offsets-backwards on the high-watermark setting is this shape).
    let send = |index, kind, acked| Op {
        index,
        time_ns: index,
        process: Process::Client(1),
        kind,
        body: Body::Send(Send {
            partition: PartitionRef::new("t", 0),
            values: vec![10],
            acks: Acks::All,
            node: Some(NodeId::new(1)),
            producer: None,
            acked,
            app: None,
        }),
        error: None,
    };
    let acked = Acked {
        offsets: Some(vec![0]),
        isr: Some(vec![1]),
        leader_epoch: Some(0),
    };
    let mut ops = vec![
        send(0, OpType::Invoke, None),
        send(1, OpType::Ok, Some(acked)),
    ];
    ops.push(crate::checker::excuses::tests::disk_fault(
        Verb::PowerLoss,
        1,
        2,
        5,
        0,
    ));
    ops.extend(poll(3, 0, &[(0, 10)], 1));
    ops.extend(poll(5, 0, &[(0, 20)], 1));
    let state = PartitionStateChange {
        revision: 1,
        topic: "t".into(),
        partition: 0,
        leader: 1,
        leader_epoch: 0,
        isr: vec![1],
        controller_epoch: 1,
    };
    let data = RunData {
        history: ops,
        timeline: Some(Timeline {
            partition_states: vec![state],
            controllers: vec![],
            registrations: Vec::new(),
        }),
        ..RunData::default()
    };
    let result = checker().check_run(&data).unwrap();
    assert!(
        anomalies(&result).contains(&"inconsistent-offsets"),
        "{:?}",
        result.evidence
    );
    assert!(!result.counts.contains_key("reads-excused"));
    assert_eq!(result.counts["acks-all-values-excused"], 1);
}

#[test]
fn checker_consumer_a_disk_fault_during_a_poll_may_follow_its_read() {
    use crate::history::Verb;
    use crate::observe::timeline::{PartitionStateChange, Timeline};
    // A poll invoked at 0 reads 10 (never acknowledged); b1, the only ISR
    // member, loses power (cut to 0) and that completes at 1, before the
    // poll's completion at 2; 20 is read at offset 0 after. The read may
    // have been served before the cut: excused.
    let [invoke, ok] = poll(0, 0, &[(0, 10)], 1);
    let mut ops = vec![
        invoke,
        crate::checker::excuses::tests::disk_fault(Verb::PowerLoss, 1, 1, 5, 0),
        Op {
            index: 2,
            time_ns: 2,
            ..ok
        },
    ];
    ops.extend(poll(3, 0, &[(0, 20)], 1));
    let data = RunData {
        history: ops,
        timeline: Some(Timeline {
            partition_states: vec![PartitionStateChange {
                revision: 1,
                topic: "t".into(),
                partition: 0,
                leader: 1,
                leader_epoch: 0,
                isr: vec![1],
                controller_epoch: 1,
            }],
            controllers: vec![],
            registrations: Vec::new(),
        }),
        ..RunData::default()
    };
    let result = checker().check_run(&data).unwrap();
    assert!(
        !anomalies(&result).contains(&"inconsistent-offsets"),
        "{:?}",
        result.evidence
    );
    assert_eq!(result.counts["reads-excused"], 1);
}

#[test]
fn checker_consumer_a_read_that_a_later_disk_fault_took_from_the_isr_is_excused() {
    use crate::history::Verb;
    use crate::observe::timeline::{PartitionStateChange, Timeline};
    // 10 is read at offset 0; then b1, etcd's only ISR member, loses
    // power and its log is cut to 0; 20 is read at offset 0 after.
    let mut ops: Vec<Op> = poll(0, 0, &[(0, 10)], 1).into();
    let fault = crate::checker::excuses::tests::disk_fault(Verb::PowerLoss, 1, 2, 5, 0);
    ops.push(fault);
    ops.extend(poll(3, 0, &[(0, 20)], 1));
    let state = |revision, isr: Vec<i32>| PartitionStateChange {
        revision,
        topic: "t".into(),
        partition: 0,
        leader: 1,
        leader_epoch: 0,
        isr,
        controller_epoch: 1,
    };
    let with = |isr: Vec<i32>| RunData {
        history: ops.clone(),
        timeline: Some(Timeline {
            partition_states: vec![state(1, isr)],
            controllers: vec![],
            registrations: Vec::new(),
        }),
        ..RunData::default()
    };
    let excused = checker().check_run(&with(vec![1])).unwrap();
    assert!(
        !anomalies(&excused).contains(&"inconsistent-offsets"),
        "{:?}",
        excused.evidence
    );
    assert_eq!(excused.counts["reads-excused"], 1);
    // With b2 still in the ISR (and holding 10), nothing excuses it.
    let not = checker().check_run(&with(vec![1, 2])).unwrap();
    assert!(
        anomalies(&not).contains(&"inconsistent-offsets"),
        "{:?}",
        not.evidence
    );
}

#[test]
fn checker_consumer_a_read_after_one_isr_member_lost_it_is_excused_once_the_isr_is_only_such_members()
 {
    use crate::history::Verb;
    use crate::observe::timeline::{PartitionStateChange, Timeline};
    // b2 leads epoch 0 with ISR [2, 1]. b1 loses power first (its log cut
    // to 0, done at index 0); a poll invoked after that reads 10 at offset 0
    // from b2, which still holds it, in epoch 0. Then etcd names b1 — dead
    // but registered — the only ISR member of epoch 1, and 20 is read at
    // offset 0. The ISR then held no copy: excused, as lost-write excuses it
    // (suites/found/current-seed-2-concurrent-power-loss). With b2 still in
    // epoch 1's ISR, nothing excuses it.
    let in_epoch = |op: Op, epoch: i32| -> Op {
        let Body::Poll(mut poll) = op.body else {
            unreachable!("a poll")
        };
        if let Some(read) = poll.read.as_mut() {
            read.leader_epoch = Some(epoch);
        }
        Op {
            body: Body::Poll(poll),
            ..op
        }
    };
    let mut ops = vec![crate::checker::excuses::tests::disk_fault(
        Verb::PowerLoss,
        1,
        0,
        5,
        0,
    )];
    ops.extend(poll(1, 0, &[(0, 10)], 1).map(|op| in_epoch(op, 0)));
    ops.extend(poll(3, 0, &[(0, 20)], 1).map(|op| in_epoch(op, 1)));
    let state = |revision, leader, leader_epoch, isr: Vec<i32>| PartitionStateChange {
        revision,
        topic: "t".into(),
        partition: 0,
        leader,
        leader_epoch,
        isr,
        controller_epoch: 1,
    };
    let with = |later_isr: Vec<i32>| RunData {
        history: ops.clone(),
        timeline: Some(Timeline {
            partition_states: vec![state(1, 2, 0, vec![2, 1]), state(7, 1, 1, later_isr)],
            controllers: vec![],
            registrations: Vec::new(),
        }),
        ..RunData::default()
    };
    let excused = checker().check_run(&with(vec![1])).unwrap();
    assert!(
        !anomalies(&excused).contains(&"inconsistent-offsets"),
        "{:?}",
        excused.evidence
    );
    assert_eq!(excused.counts["reads-excused"], 1);
    let not = checker().check_run(&with(vec![1, 2])).unwrap();
    assert!(
        anomalies(&not).contains(&"inconsistent-offsets"),
        "{:?}",
        not.evidence
    );
}
