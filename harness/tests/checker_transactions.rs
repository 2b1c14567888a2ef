//! The transaction checkers ([transactions]) on synthetic runs with
//! transactional producers (`SyntheticSpec::with_transactions`): valid when
//! intact, with every other checker valid beside them though the logs hold
//! aborted transactions; and each anomaly kind caught on a run damaged to
//! show it.

use epochal::checker::synthetic::{SyntheticSpec, synthetic_run};
use epochal::checker::{Anomaly, CheckResult, Report, RunData, Verdict, check, for_run};
use epochal::history::{Body, Intent, MicroOp, OpType, PolledRecord, RecordValue, Txn};
use epochal::reader::Payload;
use epochal::reader::txn::TxnOutcome;
use epochal::topic_partition::PartitionRef;

const TRANSACTION_CHECKERS: [&str; 3] = ["transactions", "txn-cycles", "hanging-transactions"];

fn txn_run() -> RunData {
    synthetic_run(&SyntheticSpec::with_transactions(6_000))
}

fn report(run: &RunData) -> Report {
    check(run, &for_run(run))
}

fn result<'a>(report: &'a Report, name: &str) -> &'a CheckResult {
    report
        .results
        .iter()
        .find(|r| r.checker == name)
        .unwrap_or_else(|| panic!("{name} not run: {report:#?}"))
}

fn kinds(result: &CheckResult) -> Vec<Anomaly> {
    result.evidence.iter().map(|e| e.anomaly).collect()
}

/// Every `txn` op that ended ok: its place in the history and its body.
fn ok_txns(run: &RunData) -> Vec<(usize, Txn)> {
    run.history
        .iter()
        .enumerate()
        .filter(|(_, op)| op.kind == OpType::Ok)
        .filter_map(|(i, op)| Some((i, op.txn()?.clone())))
        .collect()
}

/// (partition, value, offset) of each send of `txn`.
fn writes(txn: &Txn) -> Vec<(PartitionRef, i64, i64)> {
    txn.sends()
        .map(|s| (s.partition.clone(), s.value, s.acked_offset().unwrap()))
        .collect()
}

fn poll_partition(txn: &Txn) -> PartitionRef {
    txn.polls().next().unwrap().partition.clone()
}

/// Adds `[offset, value]` to the poll of the txn op at history place `at`.
fn add_read(run: &mut RunData, at: usize, offset: i64, value: i64) {
    let Body::Txn(txn) = &mut run.history[at].body else {
        panic!("not a txn at {at}");
    };
    for op in &mut txn.ops {
        if let MicroOp::Poll(poll) = op {
            poll.records
                .as_mut()
                .unwrap()
                .push(PolledRecord(offset, RecordValue::Number(value)));
        }
    }
}

/// Applies `edit` to every batch of `partition` on every replica.
fn edit_batches(
    run: &mut RunData,
    partition: &PartitionRef,
    mut edit: impl FnMut(&mut Vec<epochal::reader::Batch>),
) {
    for dir in run.replicas.values_mut() {
        for replica in &mut dir.replicas {
            if replica.partition_ref() == *partition {
                for segment in &mut replica.segments {
                    edit(&mut segment.batches);
                }
            }
        }
    }
}

fn payload(value: i64) -> Payload {
    Payload::from(value.to_string().into_bytes())
}

#[test]
fn a_healthy_transactional_run_is_valid_for_every_checker_with_aborted_transactions_in_the_log() {
    let run = txn_run();
    let listed: Vec<&str> = for_run(&run).iter().map(|c| c.name).collect();
    for name in TRANSACTION_CHECKERS {
        assert!(listed.contains(&name), "{name} not listed: {listed:?}");
    }
    let report = report(&run);
    for r in &report.results {
        assert_eq!(r.verdict, Verdict::Valid, "{r:#?}");
    }
    // The logs hold aborted transactions, and the checkers looked.
    let replica = &run.replicas.values().next().unwrap().replicas[0];
    let aborted = replica
        .transactions()
        .txns
        .iter()
        .filter(|t| t.outcome == TxnOutcome::Aborted)
        .count();
    assert!(aborted > 10, "{aborted} aborted transactions");
    let txns = result(&report, "transactions");
    assert!(txns.counts["transactions"] > 500, "{txns:#?}");
    assert!(txns.counts["read-committed-reads"] > 500, "{txns:#?}");
    let cycles = result(&report, "txn-cycles");
    assert!(
        cycles.counts["ww-edges"] > 100 && cycles.counts["wr-edges"] > 100,
        "{cycles:#?}"
    );
    assert_eq!(cycles.counts["write-cycles"], 0, "{cycles:#?}");
    assert!(result(&report, "hanging-transactions").counts["logged-transactions"] > 300);
    // The consumer checker judged read_committed polls that skipped them.
    assert!(result(&report, "consumer").counts["records-read"] > 1_000);
    assert!(result(&report, "lost-write").counts["acknowledged"] > 1_000);
}

#[test]
fn a_run_without_transactions_does_not_list_their_checkers() {
    let run = synthetic_run(&SyntheticSpec::with_ops(2_000));
    let listed: Vec<&str> = for_run(&run).iter().map(|c| c.name).collect();
    for name in TRANSACTION_CHECKERS {
        assert!(!listed.contains(&name), "{name} listed: {listed:?}");
    }
}

#[test]
fn a_read_of_an_aborted_transactions_write_is_an_aborted_read() {
    let mut run = txn_run();
    let txns = ok_txns(&run);
    let (writer, written) = txns
        .iter()
        .find(|(_, t)| t.intent == Intent::Abort)
        .expect("an aborted transaction");
    let (partition, value, offset) = writes(written)[0].clone();
    let (reader, _) = txns
        .iter()
        .find(|(_, t)| t.intent == Intent::Commit && poll_partition(t) == partition)
        .expect("a committed reader of the partition");
    add_read(&mut run, *reader, offset, value);
    let report = report(&run);
    let r = result(&report, "transactions");
    assert_eq!(r.verdict, Verdict::Invalid, "{r:#?}");
    assert_eq!(kinds(r), vec![Anomaly::AbortedRead]);
    let ops = r.evidence[0].details.ops();
    assert!(
        ops.contains(&(run.history[*reader].index)) && ops.contains(&run.history[*writer].index),
        "{ops:?}"
    );
}

#[test]
fn a_read_completed_before_its_writer_sent_end_txn_is_a_precommitted_read() {
    let mut run = txn_run();
    let txns = ok_txns(&run);
    let (reader, writer) = txns
        .iter()
        .filter(|(_, w)| w.intent == Intent::Commit)
        .find_map(|(w_at, w)| {
            let commit_ns = w.commit_ns.unwrap();
            let (partition, value, offset) = writes(w)[0].clone();
            txns.iter()
                .find(|(r_at, r)| {
                    r_at < w_at
                        && r.intent == Intent::Commit
                        && poll_partition(r) == partition
                        && run.history[*r_at].time_ns < commit_ns
                })
                .map(|(r_at, _)| (*r_at, (value, offset)))
        })
        .expect("a reader before a committed writer");
    add_read(&mut run, reader, writer.1, writer.0);
    let report = report(&run);
    let r = result(&report, "transactions");
    assert_eq!(r.verdict, Verdict::Invalid, "{r:#?}");
    assert_eq!(kinds(r), vec![Anomaly::PrecommittedRead]);
}

#[test]
fn a_committed_transaction_with_a_write_missing_from_the_log_is_torn() {
    let mut run = txn_run();
    let txns = ok_txns(&run);
    let (_, torn) = txns
        .iter()
        .find(|(_, t)| {
            let w = writes(t);
            t.intent == Intent::Commit && w.len() == 2 && w[0].0 != w[1].0
        })
        .expect("a committed transaction over two partitions");
    let (partition, value, _) = writes(torn)[0].clone();
    edit_batches(&mut run, &partition, |batches| {
        for batch in batches {
            batch
                .records
                .retain(|r| r.value.as_ref() != Some(&payload(value)));
        }
    });
    let report = report(&run);
    let r = result(&report, "transactions");
    assert_eq!(r.verdict, Verdict::Invalid, "{r:#?}");
    assert_eq!(kinds(r), vec![Anomaly::TornTransaction]);
    assert!(
        r.evidence[0].summary.contains("missing"),
        "{}",
        r.evidence[0].summary
    );
}

#[test]
fn writes_ordered_one_way_in_one_partition_and_the_other_way_in_another_are_a_write_cycle() {
    let mut run = txn_run();
    let txns = ok_txns(&run);
    let committed: Vec<&(usize, Txn)> = txns
        .iter()
        .filter(|(_, t)| t.intent == Intent::Commit)
        .collect();
    // Two committed transactions that wrote the same two partitions.
    let (a, b) = committed
        .iter()
        .enumerate()
        .find_map(|(i, (_, a))| {
            let wa = writes(a);
            let parts = |w: &[(PartitionRef, i64, i64)]| {
                let mut p: Vec<PartitionRef> = w.iter().map(|x| x.0.clone()).collect();
                p.sort();
                p
            };
            if wa[0].0 == wa[1].0 {
                return None;
            }
            committed[i + 1..]
                .iter()
                .find(|(_, b)| parts(&writes(b)) == parts(&wa))
                .map(|(_, b)| (wa.clone(), writes(b)))
        })
        .expect("two committed transactions over the same partitions");
    // In the first partition, swap which of them wrote first.
    let (partition, a_value, _) = a[0].clone();
    let b_value = b.iter().find(|w| w.0 == partition).unwrap().1;
    edit_batches(&mut run, &partition, |batches| {
        for batch in batches {
            for record in &mut batch.records {
                if record.value.as_ref() == Some(&payload(a_value)) {
                    record.value = Some(payload(b_value));
                } else if record.value.as_ref() == Some(&payload(b_value)) {
                    record.value = Some(payload(a_value));
                }
            }
        }
    });
    let report = report(&run);
    let r = result(&report, "txn-cycles");
    // Allowed: Kafka does not isolate transactions' writes.
    assert_eq!(r.verdict, Verdict::Valid, "{r:#?}");
    assert!(r.counts["write-cycles"] >= 1, "{r:#?}");
    assert!(kinds(r).contains(&Anomaly::WriteCycle), "{r:#?}");
    let evidence = r.evidence[0].details.json();
    assert!(
        evidence["edges"].as_array().unwrap().len() >= 2,
        "{evidence}"
    );
}

#[test]
fn two_committed_transactions_reading_each_others_writes_are_a_read_cycle() {
    let mut run = txn_run();
    let txns = ok_txns(&run);
    let committed: Vec<&(usize, Txn)> = txns
        .iter()
        .filter(|(_, t)| t.intent == Intent::Commit)
        .collect();
    let wrote = |t: &Txn, p: &PartitionRef| writes(t).into_iter().find(|w| w.0 == *p);
    let ((a_at, a_read), (b_at, b_read)) = committed
        .iter()
        .enumerate()
        .find_map(|(i, (a_at, a))| {
            committed[i + 1..].iter().find_map(|(b_at, b)| {
                let a_reads = wrote(b, &poll_partition(a))?;
                let b_reads = wrote(a, &poll_partition(b))?;
                Some(((*a_at, a_reads), (*b_at, b_reads)))
            })
        })
        .expect("two committed transactions each writing where the other reads");
    add_read(&mut run, a_at, a_read.2, a_read.1);
    add_read(&mut run, b_at, b_read.2, b_read.1);
    let report = report(&run);
    let r = result(&report, "txn-cycles");
    assert_eq!(r.verdict, Verdict::Invalid, "{r:#?}");
    assert_eq!(kinds(r)[0], Anomaly::ReadCycle, "{r:#?}");
    let ops = r.evidence[0].details.ops();
    assert!(
        ops.contains(&run.history[a_at].index) && ops.contains(&run.history[b_at].index),
        "{ops:?}"
    );
}

#[test]
fn a_transaction_no_marker_ends_past_the_timeout_is_hanging() {
    let mut run = txn_run();
    // A long quiet end: every producer's last op is past the timeout.
    run.history.last_mut().unwrap().time_ns += 120_000_000_000;
    assert_eq!(
        result(&report(&run), "hanging-transactions").verdict,
        Verdict::Valid
    );
    // Take the last marker of t-1 away on every replica.
    let partition = PartitionRef::new("t", 1);
    let mut first_open = None;
    edit_batches(&mut run, &partition, |batches| {
        if let Some(at) = batches.iter().rposition(|b| b.is_control()) {
            let marker = batches.remove(at);
            first_open.get_or_insert(
                batches
                    .iter()
                    .filter(|b| b.producer_id == marker.producer_id && !b.is_control())
                    .map(|b| b.base_offset)
                    .filter(|&o| o < marker.base_offset)
                    .max()
                    .unwrap(),
            );
        }
    });
    let report = report(&run);
    let r = result(&report, "hanging-transactions");
    assert_eq!(r.verdict, Verdict::Invalid, "{r:#?}");
    assert_eq!(kinds(r), vec![Anomaly::HangingTransaction]);
    let details = r.evidence[0].details.json();
    assert_eq!(details["partition"], "t-1");
    assert_eq!(details["first_offset"], first_open.unwrap());
    assert!(details["last_op"].is_u64(), "{details}");
}

/// A plain poll passes over a marker by design. When a later loss cuts the
/// marker away and the offset is written again, the record now there was
/// sent after the poll: no skip (found by a transactional campaign, seed 2,
/// whose partitions lost every replica's log). The same offset holding a
/// value sent before the poll is a skip.
#[test]
fn a_poll_past_a_marker_later_rewritten_is_no_skip_unless_the_record_there_was_sent_before_it() {
    let base = txn_run();
    // A plain poll with a marker between two of its records.
    let (poll_index, partition, gap) = base
        .history
        .iter()
        .filter(|op| op.kind == OpType::Ok)
        .find_map(|op| {
            let (poll, read) = op.read()?;
            let gap = read
                .records
                .windows(2)
                .find(|w| w[1].offset() > w[0].offset() + 1)?[0]
                .offset()
                + 1;
            Some((op.index, poll.partition.clone(), gap))
        })
        .expect("a plain poll that passed a marker");
    let consumer_skips = |run: &RunData| {
        kinds(result(&report(run), "consumer"))
            .into_iter()
            .filter(|k| matches!(k, Anomaly::IntPollSkip | Anomaly::PollSkip))
            .count()
    };
    assert_eq!(consumer_skips(&base), 0);
    // The marker at `gap` replaced by a data record of `value`.
    let rewrite = |run: &mut RunData, value: i64| {
        edit_batches(run, &partition, |batches| {
            for b in batches
                .iter_mut()
                .filter(|b| b.base_offset == gap && b.is_control())
            {
                b.attributes &= !0x30;
                b.producer_id = -1;
                b.records[0].key = None;
                b.records[0].value = Some(payload(value));
            }
        });
    };
    // Sent only after the run's last op: the poll could not have seen it.
    let mut later = base.clone();
    rewrite(&mut later, 77_777_777);
    let last = later.history.last().unwrap().clone();
    let send = epochal::history::Send {
        partition: partition.clone(),
        values: vec![77_777_777],
        acks: epochal::schedule::Acks::All,
        node: None,
        producer: None,
        acked: None,
        app: None,
    };
    for (i, kind) in [OpType::Invoke, OpType::Info].into_iter().enumerate() {
        later.history.push(epochal::history::Op {
            index: last.index + 1 + i as u64,
            time_ns: last.time_ns + 1 + i as u64,
            process: epochal::history::Process::Client(999_999),
            kind,
            body: Body::Send(send.clone()),
            error: (kind == OpType::Info).then(|| "timeout".to_owned()),
        });
    }
    assert_eq!(consumer_skips(&later), 0, "a record sent after the poll");
    // A value some send carried before the poll: a skip.
    let earlier_value = base
        .history
        .iter()
        .filter(|op| op.index < poll_index && op.kind == OpType::Invoke)
        .find_map(|op| op.send().map(|s| s.values[0]))
        .expect("a send before the poll");
    let mut earlier = base.clone();
    rewrite(&mut earlier, earlier_value);
    assert!(
        consumer_skips(&earlier) > 0,
        "a record sent before the poll"
    );
}

#[test]
fn an_aborted_transaction_whose_marker_became_a_commit_is_an_aborted_write_committed() {
    let mut run = txn_run();
    let txns = ok_txns(&run);
    let (_, aborted) = txns
        .iter()
        .find(|(_, t)| t.intent == Intent::Abort && !writes(t).is_empty())
        .expect("an aborted transaction with a write");
    let (partition, _, offset) = writes(aborted)[0].clone();
    // Its partition's abort marker after the write, made a COMMIT marker
    // (control record key: version 0, type 1) on every replica.
    let mut flipped = false;
    edit_batches(&mut run, &partition, |batches| {
        let producer = batches
            .iter()
            .find(|b| b.base_offset <= offset && offset <= b.last_offset)
            .map(|b| b.producer_id)
            .expect("the write's batch");
        let marker = batches
            .iter_mut()
            .find(|b| b.is_control() && b.producer_id == producer && b.base_offset > offset)
            .expect("its abort marker");
        marker.records[0].key = Some(Payload::from(vec![0u8, 0, 0, 1]));
        flipped = true;
    });
    assert!(flipped);
    let report = report(&run);
    let r = result(&report, "transactions");
    assert_eq!(r.verdict, Verdict::Invalid, "{r:#?}");
    assert_eq!(kinds(r), vec![Anomaly::AbortedCommitted]);
    assert!(
        r.evidence[0].summary.contains("never committed"),
        "{}",
        r.evidence[0].summary
    );
}
