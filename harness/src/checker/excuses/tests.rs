use super::*;
use crate::observe::timeline::Timeline;

pub(super) fn state(revision: i64, leader: i32, epoch: i32, isr: &[i32]) -> PartitionStateChange {
    PartitionStateChange::of_t0(revision, leader, epoch, isr)
}

#[test]
fn an_unclean_election_is_a_leader_outside_the_previous_isr_of_that_partition() {
    let mut other = state(3, 3, 1, &[3]);
    other.topic = "u".into();
    let timeline = Timeline {
        partition_states: vec![
            state(1, 1, 0, &[1, 2, 3]),
            other,
            state(4, 1, 0, &[1]),
            // No leader is not an election.
            state(5, -1, 0, &[1]),
            // b2 was not in [1]: unclean.
            state(6, 2, 1, &[2]),
            // b2 was in [2]: clean.
            state(7, 2, 2, &[2, 3]),
        ],
        controllers: vec![],
        registrations: Vec::new(),
    };
    let run = RunData {
        timeline: Some(timeline),
        ..RunData::default()
    };
    let excuses = Excuses::of(&run);
    let unclean: Vec<(NodeId, i64)> = excuses.unclean[&PartitionRef::new("t", 0)]
        .iter()
        .map(|(leader, s)| (*leader, s.revision))
        .collect();
    assert_eq!(unclean, vec![(NodeId::new(2), 6)]);
    assert!(!excuses.unclean.contains_key(&PartitionRef::new("u", 0)));
}

/// A disk fault (`verb`) of `node` at etcd revision `at`, cutting t-0
/// back to offset `end_after`.
pub(in crate::checker) fn disk_fault(
    verb: Verb,
    node: u32,
    index: u64,
    at: i64,
    end_after: i64,
) -> Op {
    use crate::history::{Aim, Body, FaultOp, NodeCut, ReplicaCut};
    use crate::schedule::Target;
    let node = NodeId::new(node);
    let replica = ReplicaCut {
        replica: "t-0".into(),
        log_end_offset_before: 4,
        log_end_offset_after: end_after,
        bytes_removed: 300,
        segments_deleted: Vec::new(),
    };
    let (cuts, cut) = if verb == Verb::PowerLoss {
        (Some(vec![replica]), None)
    } else {
        (None, Some(replica))
    };
    Op {
        index,
        time_ns: index,
        process: Process::Nemesis,
        kind: OpType::Info,
        body: Body::Fault(Box::new(FaultOp {
            verb,
            aim: Aim::Target {
                target: Target::Node(node),
                id: None,
                on_heal: None,
            },
            done: Some(Done {
                nodes: vec![node],
                healed: None,
                blocked: None,
                cut: Some(vec![NodeCut { node, cuts, cut }]),
                etcd_revision: Some(at),
                started_time_ms: None,
                exited: None,
                registered_after_stop: None,
            }),
        })),
        error: None,
    }
}

pub(super) fn acked_at_2_under(isr: &[u32]) -> AckedValue<'_> {
    AckedValue {
        index: 1,
        invoked: 0,
        partition: std::borrow::Cow::Owned(PartitionRef::new("t", 0)),
        value: 7,
        acks: Acks::All,
        offset: Some(2),
        isr: Some(isr),
        leader_epoch: Some(0),
    }
}

pub(super) fn judge(
    states: &[PartitionStateChange],
    faults: Vec<Op>,
    acked: &AckedValue,
) -> Judgement {
    let run = RunData {
        timeline: Some(Timeline {
            partition_states: states.to_vec(),
            controllers: vec![],
            registrations: Vec::new(),
        }),
        history: faults,
        ..RunData::default()
    };
    Excuses::of(&run).judge(acked)
}

#[test]
fn a_power_loss_of_the_isrs_only_member_excuses_what_only_it_held() {
    let states = [
        state(1, 1, 0, &[1, 2, 3]),
        state(4, 1, 0, &[1, 2]),
        state(6, 1, 0, &[1]),
    ];
    let acked = acked_at_2_under(&[1, 2, 3]);
    let at = |revision| {
        judge(
            &states,
            vec![disk_fault(Verb::PowerLoss, 1, 5, revision, 0)],
            &acked,
        )
    };
    // At revision 7 etcd named b1 the ISR's only member: excused.
    assert!(
        matches!(at(7), Judgement::Excused(ref why)
            if why.contains("power loss of b1 (history index 5), then etcd named the ISR [b1]")),
        "{:?}",
        at(7)
    );
    // At revision 5 b2 was still in the ISR (and held the value); at 6
    // etcd dropped it, leaving b1, which had lost it: excused from then.
    assert!(
        matches!(at(5), Judgement::Excused(ref why)
            if why.contains("then etcd named the ISR [b1] (etcd revision 6)")),
        "{:?}",
        at(5)
    );
    // Had the ISR kept b2 (it never shrank to [1]), nothing would excuse it.
    let kept = [state(1, 1, 0, &[1, 2, 3]), state(4, 1, 0, &[1, 2])];
    assert_eq!(
        judge(&kept, vec![disk_fault(Verb::PowerLoss, 1, 5, 5, 0)], &acked),
        Judgement::NotExcused
    );
}

#[test]
fn a_truncated_log_excuses_like_a_power_loss_and_only_below_its_cut() {
    let states = [state(1, 1, 0, &[1, 2]), state(4, 1, 0, &[1])];
    let acked = acked_at_2_under(&[1, 2]);
    // b1, the only ISR member, cut back to offset 2: the value at 2 is gone.
    let cut_to = |end| {
        judge(
            &states,
            vec![disk_fault(Verb::TruncateLog, 1, 5, 6, end)],
            &acked,
        )
    };
    assert!(
        matches!(cut_to(2), Judgement::Excused(ref why)
            if why.starts_with("truncate-log of b1 (history index 5), then etcd named the ISR [b1]")),
        "{:?}",
        cut_to(2)
    );
    // A cut that kept offset 2 excuses nothing.
    assert_eq!(cut_to(3), Judgement::NotExcused);
}

#[test]
fn a_later_isr_of_several_members_excuses_only_when_each_lost_the_value() {
    // Acked under [1, 2, 3]; b3 then left the ISR, holding the value.
    let states = [state(1, 1, 0, &[1, 2, 3]), state(4, 1, 0, &[1, 2])];
    let acked = acked_at_2_under(&[1, 2, 3]);
    let b1_lost = disk_fault(Verb::PowerLoss, 1, 5, 5, 0);
    // b1 lost it, b2 (still in the ISR) had not: not yet.
    assert_eq!(
        judge(&states, vec![b1_lost.clone()], &acked),
        Judgement::NotExcused
    );
    // Then b2's log was cut too, with etcd still naming [1, 2].
    let both = judge(
        &states,
        vec![b1_lost.clone(), disk_fault(Verb::TruncateLog, 2, 8, 6, 1)],
        &acked,
    );
    assert!(
        matches!(both, Judgement::Excused(ref why)
            if why == "power loss of b1 (history index 5), truncate-log of b2 (history index 8), \
                then etcd named the ISR [b1, b2] (etcd revision 6)"),
        "{both:?}"
    );
    // Every member of the ISR at the ack lost it: worded as before.
    let all = judge(
        &[state(1, 1, 0, &[1, 2])],
        vec![
            disk_fault(Verb::PowerLoss, 1, 5, 5, 0),
            disk_fault(Verb::PowerLoss, 2, 6, 5, 0),
        ],
        &acked_at_2_under(&[1, 2]),
    );
    assert_eq!(
        all,
        Judgement::Excused("power loss of every ISR member (history indices {5, 6})".into())
    );
}

/// A restart of `node` at history `index`, etcd revision `at` read after.
fn restart(node: u32, index: u64, at: i64) -> Op {
    use crate::history::{Aim, Body, FaultOp};
    use crate::schedule::Target;
    let node = NodeId::new(node);
    Op {
        index,
        time_ns: index,
        process: Process::Nemesis,
        kind: OpType::Info,
        body: Body::Fault(Box::new(FaultOp {
            verb: Verb::Restart,
            aim: Aim::Target {
                target: Target::Node(node),
                id: None,
                on_heal: None,
            },
            done: Some(Done {
                nodes: vec![node],
                etcd_revision: Some(at),
                ..Done::default()
            }),
        })),
        error: None,
    }
}

#[test]
fn a_replica_back_from_its_disk_fault_no_longer_counts_as_without_the_value() {
    // Acked under [1, 2]; b1 loses power (revision 5), b2 still in the ISR.
    // Later (revision 8) etcd names [1] alone.
    let states = [state(1, 1, 0, &[1, 2]), state(8, 1, 1, &[1])];
    let acked = acked_at_2_under(&[1, 2]);
    let lost = disk_fault(Verb::PowerLoss, 1, 5, 5, 0);
    // b1 never came back: the ISR [1] held the value nowhere. Excused.
    assert!(matches!(
        judge(&states, vec![lost.clone()], &acked),
        Judgement::Excused(_)
    ));
    // b1 restarted at revision 6, before etcd named it alone: from then it
    // could have fetched the value back from b2, and a broker that keeps
    // a bounced replica in the ISR without it is KIP-380's bug. Not excused.
    assert_eq!(
        judge(&states, vec![lost, restart(1, 6, 6)], &acked),
        Judgement::NotExcused
    );
}

#[test]
fn a_restarted_replica_is_back_only_once_it_applied_a_decision_for_the_partition() {
    use crate::reader::state_change::StateChange;
    let states = [
        state(1, 1, 0, &[1, 2]),
        state(7, 2, 1, &[1, 2]),
        state(8, 2, 2, &[1]),
    ];
    let acked = acked_at_2_under(&[1, 2]);
    let lost = disk_fault(Verb::PowerLoss, 1, 5, 5, 0);
    let mut back = restart(1, 6, 6);
    if let crate::history::Body::Fault(f) = &mut back.body {
        f.done.as_mut().unwrap().started_time_ms = Some(1000);
    }
    let applied = |time_ms, leader_epoch| StateChange {
        time_ms,
        request: "LeaderAndIsr".into(),
        controller_id: 1,
        controller_epoch: 1,
        topic: "t".into(),
        partition: 0,
        leader: 2,
        leader_epoch,
        isr: vec![1, 2],
        outcome: "applied".into(),
        reason: None,
    };
    let judge_with = |changes: Vec<StateChange>| {
        let run = RunData {
            timeline: Some(Timeline {
                partition_states: states.to_vec(),
                controllers: vec![],
                registrations: Vec::new(),
            }),
            history: vec![lost.clone(), back.clone()],
            state_changes: [(NodeId::new(1), changes)].into_iter().collect(),
            ..RunData::default()
        };
        Excuses::of(&run).judge(&acked)
    };
    // Restarted, and following b2 in epoch 1 (revision 7) before etcd
    // named it alone: it could hold the value again. Not excused.
    assert_eq!(
        judge_with(vec![applied(500, 0), applied(1500, 1)]),
        Judgement::NotExcused
    );
    // Restarted but never told to follow (only a decision from before its
    // restart): still without the value when the ISR was [1]. Excused.
    assert!(matches!(
        judge_with(vec![applied(500, 0)]),
        Judgement::Excused(_)
    ));
}

#[test]
fn a_member_back_before_the_last_member_lost_the_value_leaves_the_isr_a_copy() {
    // Acked under [1, 2]; etcd keeps naming [1, 2]. b1 loses power
    // (revision 5) and restarts (revision 6, back from there: it may fetch
    // the value again from b2); only then does b2 lose power (revision 7).
    let states = [state(1, 1, 0, &[1, 2])];
    let acked = acked_at_2_under(&[1, 2]);
    let b1_lost = disk_fault(Verb::PowerLoss, 1, 5, 5, 0);
    let b2_lost = disk_fault(Verb::PowerLoss, 2, 7, 7, 0);
    // Each member lost it once, but never both at once: not excused.
    assert_eq!(
        judge(
            &states,
            vec![b1_lost.clone(), restart(1, 6, 6), b2_lost.clone()],
            &acked
        ),
        Judgement::NotExcused
    );
    // With b1 still out when b2 lost it: every member, excused as before.
    assert_eq!(
        judge(&states, vec![b1_lost, b2_lost, restart(1, 8, 8)], &acked),
        Judgement::Excused("power loss of every ISR member (history indices {5, 7})".into())
    );
}
