//! The sequences on a model cluster: shapes drawn, roles hit in order.

use super::*;
use crate::campaign::StopAfter;

fn plan(seed: u64) -> Plan {
    Plan::derive(seed, StopAfter::Faults(100), 3, super::super::DEFAULT_KINDS)
}

fn state() -> State {
    State {
        nodes: NodeId::all(3).collect(),
        partitions: vec![PartitionRef::new("t", 0), PartitionRef::new("t", 1)],
        ..State::default()
    }
}

fn b(n: u32) -> NodeId {
    NodeId::new(n)
}

/// Plays a sequence on a model cluster: b1 leads with ISR [1, 2, 3];
/// hits apply, awaits count as seen.
fn play(seed: u64) -> (Sequence, Vec<Fault>, State) {
    let plan = plan(seed);
    let mut random = plan.picker();
    let mut state = state();
    let sequence = draw(&mut random, &plan, &state.partitions).expect("a shape");
    let roles = Roles {
        leader: Some(b(1)),
        isr: vec![b(1), b(2), b(3)],
        replicas: vec![b(1), b(2), b(3)],
        controller: Some(b(3)),
    };
    let mut slots = Vec::new();
    let mut fired = Vec::new();
    for &step in &sequence.moves {
        let fault = match step {
            Move::Hit(kind, role) => {
                match hit(&mut random, &plan, &state, kind, role, &roles, &slots) {
                    Some((node, fault)) => {
                        slots.push(node);
                        fault
                    }
                    None => break,
                }
            }
            Move::Stall => match stall(&mut random, &state, &roles, &slots) {
                Some((node, fault)) => {
                    slots.push(node);
                    fault
                }
                None => break,
            },
            Move::Again(kind, slot) => match again(&plan, &state, kind, slot, &slots) {
                Some(fault) => fault,
                None => break,
            },
            Move::Until(watch, _) => {
                assert!(condition(watch, &sequence.partition, &slots).is_some());
                continue;
            }
            Move::Wait(_) | Move::Settle(..) => continue,
            undo_move => undo(&state, undo_move, &slots).expect("an undo of a slot"),
        };
        match &fault {
            Fault::HoldRequests(Requests {
                from: Sender::Broker(Target::Node(from)),
                to: Target::Node(to),
                api,
            }) => {
                assert_eq!(*to, b(1), "seed {seed}: a stall holds the leader's fetches");
                assert!(*from != b(1) && api.0 == ApiKey::Fetch, "seed {seed}");
                state.cut = true;
            }
            Fault::Pause(Target::Node(n)) => {
                state.paused.insert(*n);
            }
            Fault::Resume(Target::Node(n)) => {
                state.paused.remove(n);
            }
            Fault::Restart(Target::Node(n)) => {
                state.down.remove(n);
            }
            Fault::Crash(Target::Node(n)) | Fault::PowerLoss(Target::Node(n)) => {
                state.down.insert(*n);
            }
            other => panic!("seed {seed}: {other:?}"),
        }
        assert!(
            state.down.len() + state.paused.len() <= 2 && !state.up().is_empty(),
            "seed {seed}: {state:?}"
        );
        fired.push(fault);
    }
    (sequence, fired, state)
}

/// The first seed whose sequence has this shape.
fn seed_drawing(shape: Shape) -> u64 {
    (1..=200).find(|&s| play(s).0.shape == shape).unwrap()
}

#[test]
fn a_seed_draws_the_same_sequence_and_seeds_draw_every_shape() {
    let mut shapes = std::collections::BTreeSet::new();
    for seed in 1..=40 {
        let (sequence, fired, _) = play(seed);
        assert_eq!(play(seed).1, fired, "seed {seed}");
        shapes.insert(sequence.shape);
    }
    assert_eq!(shapes.len(), Shape::ALL.len(), "{shapes:?}");
}

#[test]
fn each_shape_hits_its_roles_in_order_and_never_takes_every_node() {
    for seed in 1..=40 {
        let (sequence, fired, _) = play(seed);
        let expected: Vec<&str> = match sequence.shape {
            // The follower first, restarted at once, then the leader b1.
            Shape::BounceThenKillLeader => vec!["follower", "restart", "b1"],
            // b1 paused, then a follower bounced.
            Shape::BounceAtTakeover => vec!["b1", "follower", "restart"],
            // A follower cut from b1, another bounced, the cut one
            // paused, then b1; the cut one resumed once the bounced one
            // leads.
            Shape::FailoverToBounced => {
                vec!["cut", "follower", "restart", "follower", "b1", "resume"]
            }
            Shape::EmptyReplicaLeads => {
                vec!["b1", "follower", "restart", "follower", "resume", "resume"]
            }
            // A node other than the controller b3 (b1 or b2) bounced,
            // then b3 paused and, once another controller is seen,
            // resumed.
            Shape::StaleController => {
                let first = match fired.first() {
                    Some(Fault::Crash(Target::Node(n)) | Fault::PowerLoss(Target::Node(n)))
                        if *n == b(1) =>
                    {
                        "b1"
                    }
                    _ => "follower",
                };
                vec![first, "restart", "follower", "resume"]
            }
        };
        let seen: Vec<&str> = fired
            .iter()
            .map(|f| match f {
                Fault::HoldRequests(_) => "cut",
                Fault::Restart(_) => "restart",
                Fault::Resume(_) => "resume",
                Fault::Pause(Target::Node(n))
                | Fault::Crash(Target::Node(n))
                | Fault::PowerLoss(Target::Node(n)) => {
                    if *n == b(1) {
                        "b1"
                    } else {
                        "follower"
                    }
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(seen, expected, "seed {seed}: {sequence:?}");
    }
}

#[test]
fn the_empty_replica_shape_leaves_the_bounced_replica_the_only_one_up() {
    let seed = seed_drawing(Shape::EmptyReplicaLeads);
    let plan = plan(seed);
    let mut random = plan.picker();
    let mut state = state();
    let roles = Roles {
        leader: Some(b(1)),
        isr: vec![b(1), b(2), b(3)],
        replicas: vec![b(1), b(2), b(3)],
        controller: Some(b(3)),
    };
    let (x, _) = hit(
        &mut random,
        &plan,
        &state,
        Kind::Pause,
        Role::Leader,
        &roles,
        &[],
    )
    .unwrap();
    state.paused.insert(x);
    let (y, _) = hit(
        &mut random,
        &plan,
        &state,
        Kind::PowerLoss,
        Role::Follower,
        &roles,
        &[x],
    )
    .unwrap();
    let (z, _) = hit(
        &mut random,
        &plan,
        &state,
        Kind::Pause,
        Role::Follower,
        &roles,
        &[x, y],
    )
    .unwrap();
    assert_eq!(x, b(1));
    assert!(y != z && y != x && z != x);
    state.paused.insert(z);
    assert_eq!(state.up(), vec![y]);
    // A third process fault would take out every node.
    assert!(
        hit(
            &mut random,
            &plan,
            &state,
            Kind::Crash,
            Role::Leader,
            &roles,
            &[]
        )
        .is_none()
    );
}

#[test]
fn the_failover_shape_leaves_the_bounced_replica_the_only_one_up() {
    let seed = seed_drawing(Shape::FailoverToBounced);
    let (_, fired, _) = play(seed);
    let node = |f: &Fault| match f {
        Fault::HoldRequests(Requests {
            from: Sender::Broker(Target::Node(n)),
            ..
        })
        | Fault::Crash(Target::Node(n))
        | Fault::Pause(Target::Node(n))
        | Fault::Restart(Target::Node(n))
        | Fault::Resume(Target::Node(n)) => *n,
        other => panic!("{other:?}"),
    };
    let (cut, bounced, paused) = (node(&fired[0]), node(&fired[1]), node(&fired[3]));
    // The cut follower is the one paused before the leader, and the
    // bounced one is neither it nor the leader.
    assert_eq!(cut, paused, "{fired:?}");
    assert!(bounced != cut && bounced != b(1), "{fired:?}");
    assert!(
        matches!(fired[4], Fault::Pause(Target::Node(n)) | Fault::Crash(Target::Node(n)) if n == b(1))
    );
    assert_eq!(fired[5], Fault::Resume(Target::Node(cut)));
}

#[test]
fn the_stale_controller_shape_bounces_another_node_then_holds_the_controller() {
    let seed = seed_drawing(Shape::StaleController);
    let (sequence, fired, state) = play(seed);
    let bounced = match fired[0] {
        Fault::Crash(Target::Node(n)) | Fault::PowerLoss(Target::Node(n)) => n,
        ref other => panic!("{other:?}"),
    };
    // The model's controller is b3.
    assert_ne!(bounced, b(3), "{fired:?}");
    assert_eq!(fired[1], Fault::Restart(Target::Node(bounced)));
    assert_eq!(fired[2], Fault::Pause(Target::Node(b(3))));
    assert_eq!(
        condition(
            Watch::ControllerMoved(1),
            &sequence.partition,
            &[bounced, b(3)]
        ),
        Some(Condition::ControllerIs {
            node: b(3),
            is: false
        })
    );
    assert_eq!(fired[3], Fault::Resume(Target::Node(b(3))));
    assert!(state.paused.is_empty() && state.down.is_empty());
    // Without a controller (a system whose controller the harness cannot
    // see) there is nobody to hold, and no node it has decisions for.
    let plan = plan(seed);
    let roles = Roles::default();
    for role in [Role::Controller, Role::NotController] {
        assert!(
            hit(
                &mut plan.picker(),
                &plan,
                &state,
                Kind::Crash,
                role,
                &roles,
                &[]
            )
            .is_none()
        );
    }
}

#[test]
fn a_sequence_starts_by_healing_then_resuming_then_restarting() {
    let mut state = state();
    assert!(make_whole(&state).is_empty());
    state.cut = true;
    state.paused.insert(b(3));
    state.down.insert(b(1));
    assert_eq!(
        make_whole(&state),
        [
            Fault::Heal,
            Fault::Resume(Target::Node(b(3))),
            Fault::Restart(Target::Node(b(1)))
        ]
    );
}

#[test]
fn a_sequence_moves_to_a_partition_with_a_larger_isr() {
    let ps: Vec<PartitionRef> = (0..3).map(|i| PartitionRef::new("t", i)).collect();
    assert_eq!(partition_for(&ps[0], &ps, &[3, 3, 1]), ps[0]);
    assert_eq!(partition_for(&ps[0], &ps, &[1, 2, 3]), ps[2]);
    assert_eq!(partition_for(&ps[2], &ps, &[3, 1, 1]), ps[0]);
    assert_eq!(partition_for(&ps[1], &ps, &[2, 1, 2]), ps[2]);
}

#[test]
fn shapes_need_their_kinds() {
    let mut plan = plan(3);
    plan.weights.retain(|k, _| *k == Kind::Crash);
    let mut random = plan.picker();
    for _ in 0..20 {
        let s = draw(&mut random, &plan, &[PartitionRef::new("t", 0)]).unwrap();
        assert_eq!(s.shape, Shape::BounceThenKillLeader);
        assert!(matches!(s.moves[0], Move::Hit(Kind::Crash, Role::Follower)));
    }
    plan.weights.clear();
    plan.weights.insert(Kind::Isolate, 3);
    assert!(draw(&mut random, &plan, &[PartitionRef::new("t", 0)]).is_none());
}
