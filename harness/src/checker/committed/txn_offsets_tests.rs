//! The transaction-offsets rule's tests (txn_offsets.rs), beside it so that
//! file imports nothing back from committed.rs.

use super::checker;
use crate::checker::{Anomaly, RunData, Verdict};
use crate::history::{Body, Committed, Intent, MicroOp, Op, OpType, Process, Txn, TxnPoll};
use crate::history::{PolledRecord, RecordValue};
use crate::topic_partition::PartitionRef;

fn op(index: u64, process: u64, kind: OpType, body: Body) -> Op {
    Op {
        index,
        time_ns: index * 10,
        process: Process::Client(process),
        kind,
        body,
        error: None,
    }
}

/// A member's transaction that read t-0 up to `to` and sent `to` + 1 as
/// group g's offset (on its completion).
fn txn(intent: Intent, to: i64, done: bool) -> Body {
    let records = (0..=to)
        .map(|o| PolledRecord(o, RecordValue::Number(o)))
        .collect();
    Body::Txn(Txn {
        transactional_id: "rpw-0".into(),
        intent,
        ops: vec![MicroOp::Poll(TxnPoll {
            partition: PartitionRef::new("t", 0),
            records: done.then_some(records),
        })],
        node: None,
        group: Some("g".into()),
        offsets: if done {
            [(PartitionRef::new("t", 0), to + 1)].into()
        } else {
            Default::default()
        },
        producer: None,
        commit_ns: None,
    })
}

fn read(offset: Option<i64>) -> Body {
    Body::Committed(Committed {
        group: "g".into(),
        partition: PartitionRef::new("t", 0),
        node: None,
        offset,
        leader: None,
        stable: true,
    })
}

/// A committed transaction sent 5, an aborted one 9, then a stable read
/// answered `answer`.
fn history(answer: i64) -> Vec<Op> {
    vec![
        op(0, 0, OpType::Invoke, txn(Intent::Commit, 4, false)),
        op(1, 0, OpType::Ok, txn(Intent::Commit, 4, true)),
        op(2, 0, OpType::Invoke, txn(Intent::Abort, 8, false)),
        op(3, 0, OpType::Ok, txn(Intent::Abort, 8, true)),
        op(4, 1, OpType::Invoke, read(None)),
        op(5, 1, OpType::Ok, read(Some(answer))),
    ]
}

fn verdict(history: Vec<Op>) -> crate::checker::CheckResult {
    let run = RunData {
        history,
        ..RunData::default()
    };
    checker().check_run(&run).unwrap()
}

#[test]
fn an_aborted_transactions_offset_read_back_is_an_aborted_read() {
    let result = verdict(history(5));
    assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    assert_eq!(result.counts["txn-offsets"], 2);

    // Damaged: the group's offset read back as the aborted one's.
    let result = verdict(history(9));
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(result.evidence[0].anomaly, Anomaly::AbortedRead);
    assert_eq!(result.evidence[0].details.ops(), [3, 5].into());
    assert_eq!(result.counts["aborted-offsets-read"], 1);

    // The same offset also sent by a transaction that may have
    // committed (info) explains the read.
    let mut explained = history(9);
    explained.insert(4, op(4, 2, OpType::Invoke, txn(Intent::Commit, 8, false)));
    explained.insert(5, op(5, 2, OpType::Info, txn(Intent::Commit, 8, true)));
    for (i, op) in explained.iter_mut().enumerate() {
        op.index = i as u64;
        op.time_ns = i as u64 * 10;
    }
    assert_eq!(verdict(explained).verdict, Verdict::Valid);
}

#[test]
fn a_stable_read_below_a_committed_transactions_offset_regressed() {
    // Damaged: the read after the committed transaction (5) answered
    // what the group had before it.
    let result = verdict(history(-1));
    assert_eq!(result.verdict, Verdict::Invalid, "{result:?}");
    assert_eq!(
        result.evidence[0].anomaly,
        Anomaly::CommittedOffsetRegressed
    );
    // A plain (not stable) read may lag the commit marker: allowed.
    let mut plain = history(-1);
    for op in &mut plain {
        if let Body::Committed(c) = &mut op.body {
            c.stable = false;
        }
    }
    assert_eq!(verdict(plain).verdict, Verdict::Valid);
}
