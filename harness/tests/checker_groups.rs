//! The group checkers on synthetic runs with subscribed consumers
//! (`checker::synthetic`, subscribers.rs): the clean run is valid, and each
//! anomaly kind [groups] added is found in a run damaged to show it.

use epochal::checker::synthetic::{SyntheticSpec, synthetic_run};
use epochal::checker::{Anomaly, RunData, Verdict, check, for_run};
use epochal::history::{Body, OpType};

fn run() -> RunData {
    synthetic_run(&SyntheticSpec::with_ops(6_000))
}

/// The anomaly kinds the checkers find in `run`.
fn found(run: &RunData) -> Vec<Anomaly> {
    let report = check(run, &for_run(run));
    let mut kinds: Vec<Anomaly> = report
        .results
        .iter()
        .flat_map(|r| r.evidence.iter().map(|e| e.anomaly))
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

#[test]
fn the_group_checkers_judge_a_synthetic_run_with_subscribers_valid() {
    let run = run();
    let report = check(&run, &for_run(&run));
    assert_eq!(report.verdict, Verdict::Valid, "{report:#?}");
    let result = |name: &str| {
        report
            .results
            .iter()
            .find(|r| r.checker == name)
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    assert!(result("committed-offsets").counts["group-polls"] > 100);
    assert!(result("committed-offsets").counts["reads"] > 5);
    assert!(result("unseen").counts["checked"] > 1_000);
    assert!(result("send-order").counts["checked"] > 500);
}

/// The index of the first ok op (from the middle of the history on)
/// that `pick` accepts.
fn middle(run: &RunData, pick: impl Fn(&epochal::history::Op) -> bool) -> usize {
    let from = run.history.len() / 2;
    from + run.history[from..]
        .iter()
        .position(|op| op.kind == OpType::Ok && pick(op))
        .expect("the synthetic run has one")
}

#[test]
fn a_record_no_poll_returned_is_unseen() {
    let mut run = run();
    // The last record of t-2, which no subscriber reads (they read t-0
    // and t-1): taken out of every poll that returned it, the final
    // read included, so its poll ends one short of the high watermark.
    let mut target = None;
    for op in &mut run.history {
        if let Body::Poll(poll) = &mut op.body
            && poll.partition.partition == 2
            && let Some(read) = &mut poll.read
            && read.records.last().map(|r| r.offset()) == Some(read.high_watermark - 1)
        {
            target = read.records.pop().map(|r| r.offset());
        }
    }
    assert!(target.is_some());
    assert_eq!(found(&run), vec![Anomaly::Unseen]);
}

#[test]
fn a_send_acknowledged_below_an_earlier_ack_is_nonmonotonic() {
    let mut run = run();
    let at = middle(&run, |op| op.acked_send().is_some());
    let partition = run.history[at].send().unwrap().partition.clone();
    // A later ack of the same partition, its offsets moved to the first's.
    let offsets = run.history[at].acked_send().unwrap().1.offsets.clone();
    let later = at
        + 10
        + run.history[at + 10..]
            .iter()
            .position(|op| {
                op.acked_send()
                    .is_some_and(|(send, _)| send.partition == partition)
            })
            .unwrap();
    if let Body::Send(send) = &mut run.history[later].body {
        send.acked.as_mut().unwrap().offsets = offsets;
    }
    assert!(
        found(&run).contains(&Anomaly::NonmonotonicSend),
        "{:?}",
        found(&run)
    );
}

#[test]
fn a_member_resuming_past_unconsumed_records_is_a_resume_skip() {
    let mut run = run();
    // A committed read answering 40 more than the group committed, and
    // the member's polls from there on moved along with it.
    let at = middle(&run, |op| matches!(op.body, Body::Committed(_)));
    let process = run.history[at].process;
    if let Body::Committed(read) = &mut run.history[at].body {
        *read.offset.as_mut().unwrap() += 40;
    }
    let next_poll = at
        + run.history[at..]
            .iter()
            .position(|op| op.process == process && op.poll().is_some())
            .unwrap();
    if let Body::Poll(poll) = &mut run.history[next_poll].body {
        poll.from_offset += 40;
    }
    assert!(
        found(&run).contains(&Anomaly::ResumeSkip),
        "{:?}",
        found(&run)
    );
}

#[test]
fn a_poll_beginning_where_the_last_ended_again_is_nonmonotonic() {
    let mut run = run();
    // A subscriber's poll whose first record repeats its last poll's
    // last: the two polls overlap.
    let at = middle(&run, |op| {
        op.read()
            .is_some_and(|(poll, read)| poll.group.is_some() && read.records.len() > 1)
    });
    let process = run.history[at].process;
    let last = run.history[at]
        .read()
        .unwrap()
        .1
        .records
        .last()
        .unwrap()
        .clone();
    let next = at
        + 1
        + run.history[at + 1..]
            .iter()
            .position(|op| {
                op.process == process && op.read().is_some_and(|(_, read)| !read.records.is_empty())
            })
            .unwrap();
    if let Body::Poll(poll) = &mut run.history[next].body {
        poll.read.as_mut().unwrap().records.insert(0, last);
    }
    assert!(
        found(&run).contains(&Anomaly::NonmonotonicPoll),
        "{:?}",
        found(&run)
    );
}

#[test]
fn a_committed_read_below_an_acknowledged_commit_regressed() {
    let mut run = run();
    let at = middle(
        &run,
        |op| matches!(&op.body, Body::Committed(c) if c.offset.is_some_and(|o| o > 0)),
    );
    if let Body::Committed(read) = &mut run.history[at].body {
        read.offset = Some(0);
    }
    assert!(
        found(&run).contains(&Anomaly::CommittedOffsetRegressed),
        "{:?}",
        found(&run)
    );
}

#[test]
fn a_member_poll_starting_past_where_its_last_ended_skips() {
    let mut run = run();
    // A subscriber's poll that asks from 5 past its position and
    // returns from there: each poll alone looks whole; the two together
    // skip 5 records.
    let at = middle(&run, |op| {
        op.read()
            .is_some_and(|(poll, read)| poll.group.is_some() && read.records.len() > 8)
    });
    if let Body::Poll(poll) = &mut run.history[at].body {
        poll.from_offset += 5;
        poll.read.as_mut().unwrap().records.drain(..5);
    }
    let kinds = found(&run);
    assert!(kinds.contains(&Anomaly::PollSkip), "{kinds:?}");
    assert!(kinds.contains(&Anomaly::ResumeSkip), "{kinds:?}");
}
