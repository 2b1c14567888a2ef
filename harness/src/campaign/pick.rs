//! The campaign nemesis's choices, apart from the cluster: given what the
//! cluster is now ([`State`]: who is paused, who is dead, whether a cut is in
//! force), [`choose`] picks a fault or an undo by the plan's weights, naming
//! its target by role; [`realise`] turns that into a fault on named nodes,
//! given how the roles resolve now. Pure functions of the generator and their
//! inputs, so they are tested here without a cluster.
//!
//! The rules keep a campaign meaningful rather than merely destructive: at
//! most the plan's `max_faulted` nodes are paused or dead at once and never
//! every node of several (a one-node cluster's node may be); one network cut
//! or request fault at a time (the nemesis heals all cuts and request faults
//! at once); an undo only for what is undone-able now, and a restart only
//! of a node whose link to etcd is not cut (a broker cannot start cut off
//! from etcd). On a system with a database, one database fault at a time:
//! it is paused or crashed only while it runs, and no broker restarts
//! until it is resumed or restarted.

use std::collections::BTreeSet;

use super::sequence::{self, Sequence};
pub use super::state::State;
use super::{Kind, Plan};
use crate::fault::Draw;
use crate::node::NodeId;
use crate::random::SplitMix64;
use crate::runtime::DatabaseState;

use crate::schedule::{Fault, Target};

/// What to do next, targets named by role where the fault takes one.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    Fault(Kind, Target),
    /// A targeted sequence (sequence.rs), played move by move by play.rs.
    Sequence(Sequence),
    /// A kind drawn as two nodes (one-way: no byte from the first reaches
    /// the second).
    TwoNodes(Kind, Target, Target),
    Resume(NodeId),
    Restart(NodeId),
    Heal,
    /// A fault on the system's database, or its undo (it names no node).
    Database(Fault),
}

/// Picks the next fault or undo; `None` when nothing applies (no kind in the
/// mix fits the cluster now and nothing is broken).
pub fn choose(random: &mut SplitMix64, plan: &Plan, state: &State) -> Option<Choice> {
    #[derive(Clone)]
    enum Option_ {
        Kind(Kind),
        Resume,
        Restart,
        Heal,
        Sequence,
        Database(Fault),
    }
    let up = state.up();
    let mut options: Vec<(Option_, u64)> = Vec::new();
    for (&kind, &weight) in &plan.weights {
        let fits = match kind.spec().draw {
            _ if weight == 0 => false,
            // A cluster without a database (as the runtime runs it) never
            // takes a database fault, whatever the plan weighs.
            _ if kind.on_database() && state.database.is_none() => false,
            Draw::Never => false,
            // Never every node of several; a single-node system's node
            // (systems' max_brokers = 1) is the only one it can fault.
            Draw::NodeUp(_) => {
                state.faulted() < plan.max_faulted && (up.len() > 1 || state.nodes.len() == 1)
            }
            Draw::NodeDown(_) => !state.down.is_empty() && !state.partitions.is_empty(),
            Draw::Minority(_) => !state.cut && state.nodes.len() >= 3,
            Draw::TwoNodes(_) => !state.cut && state.nodes.len() >= 2,
            Draw::AnyNode(_) => !state.cut,
            Draw::Database(_) => state.database == Some(DatabaseState::Running),
        };
        if fits {
            options.push((Option_::Kind(kind), weight));
        }
    }
    if !state.paused.is_empty() {
        options.push((Option_::Resume, plan.recover_weight));
    }
    // A broker cannot start while cut off from etcd (nor could Kafka's
    // without ZooKeeper: it gives up after zookeeper.connection.timeout.ms),
    // so a dead node comes back only while its own link to etcd flows; a
    // cut elsewhere (between other brokers, or this one from its peers or
    // clients) does not keep it down, as a Kafka broker starts through a
    // partition that leaves it ZooKeeper.
    let restartable = state.restartable();
    if !restartable.is_empty() {
        options.push((Option_::Restart, plan.recover_weight));
    }
    if state.cut {
        options.push((Option_::Heal, plan.recover_weight));
    }
    // Only a system with a database ever has it out, so other systems'
    // seeds draw as they did before these undos existed.
    if let Some(undo) = state.database.and_then(crate::nemesis::database::undo) {
        options.push((Option_::Database(undo), plan.recover_weight));
    }
    // A sequence makes the cluster whole first (sequence::make_whole),
    // so it applies whatever is out now.
    if plan.sequences && !state.partitions.is_empty() && state.nodes.len() >= 3 {
        options.push((Option_::Sequence, plan.sequence_weight));
    }
    let total: u64 = options.iter().map(|(_, w)| w).sum();
    if total == 0 {
        return None;
    }
    let mut ticket = random.next_u64() % total;
    let picked = options
        .iter()
        .find(|(_, w)| {
            if ticket < *w {
                true
            } else {
                ticket -= w;
                false
            }
        })
        .map(|(o, _)| o.clone())?;
    let pick_of = |random: &mut SplitMix64, set: &BTreeSet<NodeId>| {
        let nodes: Vec<NodeId> = set.iter().copied().collect();
        nodes[random.index(nodes.len())]
    };
    Some(match picked {
        Option_::Resume => Choice::Resume(pick_of(random, &state.paused)),
        Option_::Restart => Choice::Restart(pick_of(random, &restartable)),
        Option_::Heal => Choice::Heal,
        Option_::Database(undo) => Choice::Database(undo),
        Option_::Sequence => Choice::Sequence(sequence::draw(random, plan, &state.partitions)?),
        Option_::Kind(kind) => match kind.spec().draw {
            Draw::Minority(_) => Choice::Fault(kind, Target::RandomMinority),
            Draw::TwoNodes(_) => {
                let from = role(random, state, &state.nodes);
                Choice::TwoNodes(
                    kind,
                    from,
                    Target::Node(state.nodes[random.index(state.nodes.len())]),
                )
            }
            Draw::NodeDown(_) => Choice::Fault(kind, Target::Node(pick_of(random, &state.down))),
            Draw::NodeUp(_) => Choice::Fault(kind, role(random, state, &up)),
            Draw::AnyNode(_) | Draw::Never => {
                Choice::Fault(kind, role(random, state, &state.nodes))
            }
            Draw::Database(make) => Choice::Database(make()),
        },
    })
}

/// A target by role — the controller, a partition's leader, one of its
/// followers — or a node named outright from `pool`.
fn role(random: &mut SplitMix64, state: &State, pool: &[NodeId]) -> Target {
    let partition = (!state.partitions.is_empty())
        .then(|| state.partitions[random.index(state.partitions.len())].clone());
    match (random.next_u64() % 4, partition) {
        (0, _) => Target::Controller,
        (1, Some(p)) => Target::LeaderOf(p),
        (2, Some(p)) => Target::AFollowerOf(p),
        _ => Target::Node(pool[random.index(pool.len())]),
    }
}

/// The choice as a fault on named nodes. `resolve` says what a role names
/// now (`None`: nothing, e.g. no leader). A process fault lands only on a
/// node that is up; when the role names none, a node that is up is named
/// instead, so the pick is never wasted. `None` when even that is impossible.
pub fn realise(
    random: &mut SplitMix64,
    choice: &Choice,
    state: &State,
    mut resolve: impl FnMut(&Target) -> Option<Vec<NodeId>>,
) -> Option<Fault> {
    let up = state.up();
    let mut named = |target: &Target, eligible: &[NodeId]| -> Option<NodeId> {
        let resolved = resolve(target).unwrap_or_default();
        resolved
            .into_iter()
            .find(|n| eligible.contains(n))
            .or_else(|| (!eligible.is_empty()).then(|| eligible[random.index(eligible.len())]))
    };
    Some(match choice {
        Choice::Resume(n) => Fault::Resume(Target::Node(*n)),
        Choice::Restart(n) => Fault::Restart(Target::Node(*n)),
        Choice::Heal => Fault::Heal,
        Choice::Database(fault) => fault.clone(),
        // Played move by move (play.rs), not one fault.
        Choice::Sequence(_) => return None,
        Choice::TwoNodes(kind, from, to) => {
            let Draw::TwoNodes(make) = kind.spec().draw else {
                unreachable!("{} is not drawn as two nodes", kind.name())
            };
            let from = named(from, &state.nodes)?;
            let others: Vec<NodeId> = state.nodes.iter().copied().filter(|&n| n != from).collect();
            let to = named(to, &others)?;
            make(Target::Node(from), Target::Node(to))
        }
        Choice::Fault(kind, target) => match kind.spec().draw {
            Draw::Minority(make) => {
                let minority = resolve(target).filter(|m| !m.is_empty())?;
                make(match minority.as_slice() {
                    [one] => Target::Node(*one),
                    _ => Target::Nodes(minority),
                })
            }
            Draw::NodeDown(make) => {
                let node = named(target, &state.down.iter().copied().collect::<Vec<_>>())?;
                let partition = state.partitions[random.index(state.partitions.len())].clone();
                make(random, Target::Node(node), partition)
            }
            Draw::NodeUp(make) => make(Target::Node(named(target, &up)?)),
            Draw::AnyNode(make) => {
                let node = Target::Node(named(target, &state.nodes)?);
                make(random, node)
            }
            Draw::TwoNodes(_) | Draw::Database(_) | Draw::Never => {
                unreachable!("{} is drawn otherwise", kind.name())
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::StopAfter;
    use crate::schedule::PartitionRef;

    fn state() -> State {
        State {
            nodes: NodeId::all(3).collect(),
            partitions: vec![PartitionRef::new("t", 0), PartitionRef::new("t", 1)],
            ..State::default()
        }
    }

    fn plan(seed: u64) -> Plan {
        Plan::derive(seed, StopAfter::Faults(100), 3, Kind::ALL)
    }

    /// Applies a fault to the model the way the nemesis applies it to a cluster.
    fn apply(state: &mut State, fault: &Fault) {
        let node = |t: &Target| match t {
            Target::Node(n) => *n,
            other => panic!("unresolved target {other}"),
        };
        match fault {
            Fault::Pause(t) => {
                state.paused.insert(node(t));
            }
            Fault::Resume(t) => {
                state.paused.remove(&node(t));
            }
            Fault::Crash(t) | Fault::Stop(t) | Fault::PowerLoss(t) => {
                state.down.insert(node(t));
            }
            Fault::Restart(t) | Fault::Start(t) => {
                state.down.remove(&node(t));
            }
            Fault::Heal => {
                state.cut = false;
                state.etcd_cut.clear();
                state.database_cut.clear();
            }
            Fault::TruncateLog(t) => assert!(state.down.contains(&node(&t.node))),
            Fault::PauseDatabase => state.database = Some(DatabaseState::Paused),
            Fault::CrashDatabase => state.database = Some(DatabaseState::Down),
            Fault::ResumeDatabase | Fault::RestartDatabase => {
                state.database = Some(DatabaseState::Running);
            }
            Fault::NodeFromDatabase(c) => {
                state.cut = true;
                state.database_cut.insert(node(&c.target));
            }
            // The cuts that leave their nodes without etcd, as the
            // nemesis's partitions do (nemesis/partition.rs).
            Fault::NodeFromEtcd(c) | Fault::Isolate(c) | Fault::MajorityMinority(c) => {
                state.cut = true;
                state.etcd_cut.insert(node(&c.target));
            }
            _ => state.cut = true,
        }
    }

    /// Roles resolve to the lowest node that is up, or to nothing.
    fn resolver(state: &State) -> impl FnMut(&Target) -> Option<Vec<NodeId>> + '_ {
        move |t| match t {
            Target::Node(n) => Some(vec![*n]),
            Target::RandomMinority => Some(vec![state.nodes[0]]),
            _ => state.up().first().map(|n| vec![*n]),
        }
    }

    #[test]
    fn the_nemesis_never_breaks_more_than_the_plan_allows_and_only_undoes_what_is_broken() {
        // Restarts while a cut elsewhere is in force: the rule allows them,
        // and the seeds below draw some.
        let mut restarted_in_cut = 0;
        for seed in 1..=40 {
            let plan = plan(seed);
            let mut random = plan.picker();
            let mut state = state();
            for _ in 0..200 {
                let Some(choice) = choose(&mut random, &plan, &state) else {
                    continue;
                };
                if matches!(choice, Choice::Sequence(_)) {
                    continue;
                }
                let fault = realise(&mut random, &choice, &state.clone(), resolver(&state))
                    .unwrap_or_else(|| panic!("seed {seed}: {choice:?} named nobody"));
                match &fault {
                    Fault::Resume(Target::Node(n)) => assert!(state.paused.contains(n)),
                    Fault::Restart(Target::Node(n)) => {
                        assert!(
                            state.down.contains(n) && !state.etcd_cut.contains(n),
                            "seed {seed}: {fault:?}"
                        );
                        restarted_in_cut += usize::from(state.cut);
                    }
                    Fault::Heal => assert!(state.cut),
                    Fault::Pause(Target::Node(n))
                    | Fault::Crash(Target::Node(n))
                    | Fault::Stop(Target::Node(n))
                    | Fault::PowerLoss(Target::Node(n)) => {
                        assert!(
                            state.up().contains(n),
                            "seed {seed}: {fault:?} on a node not up"
                        )
                    }
                    Fault::TruncateLog(_) => {}
                    _ => assert!(!state.cut, "seed {seed}: a second cut {fault:?}"),
                }
                apply(&mut state, &fault);
                assert!(
                    state.down.len() + state.paused.len() <= plan.max_faulted,
                    "seed {seed}: {state:?}"
                );
                assert!(!state.up().is_empty(), "seed {seed}: every node out");
            }
        }
        assert!(restarted_in_cut > 0, "no restart during a cut in 40 seeds");
    }

    /// A dead node comes back during a cut that leaves its own link to etcd
    /// alone, and never while its link to etcd is cut.
    #[test]
    fn a_restart_waits_only_for_the_nodes_own_link_to_etcd() {
        let plan = plan(1);
        let mut random = plan.picker();
        let mut state = state();
        state.down.insert(NodeId::new(2));
        state.cut = true;
        state.etcd_cut.insert(NodeId::new(3));
        let restarts = (0..200)
            .filter_map(|_| choose(&mut random, &plan, &state))
            .filter(|c| matches!(c, Choice::Restart(_)))
            .inspect(|c| assert_eq!(*c, Choice::Restart(NodeId::new(2))))
            .count();
        assert!(
            restarts > 0,
            "b2 was never restarted while b3 was cut from etcd"
        );
        state.etcd_cut.insert(NodeId::new(2));
        for _ in 0..200 {
            let choice = choose(&mut random, &plan, &state);
            assert!(
                !matches!(choice, Some(Choice::Restart(_))),
                "b2 restarted while cut from etcd: {choice:?}"
            );
        }
    }

    /// On a cluster with a database, a campaign pauses or crashes it only
    /// while it runs, undoes only what is out, and restarts no broker while
    /// the database is out or the broker is cut from it; each database
    /// fault and undo is drawn within a few seeds.
    #[test]
    fn the_database_is_faulted_only_while_it_runs_and_holds_back_restarts() {
        let mut drawn = std::collections::BTreeMap::<&str, usize>::new();
        for seed in 1..=40 {
            let plan = plan(seed);
            let mut random = plan.picker();
            let mut state = State {
                database: Some(DatabaseState::Running),
                ..state()
            };
            for _ in 0..200 {
                let Some(choice) = choose(&mut random, &plan, &state) else {
                    continue;
                };
                if matches!(choice, Choice::Sequence(_)) {
                    continue;
                }
                let Some(fault) = realise(&mut random, &choice, &state.clone(), resolver(&state))
                else {
                    continue;
                };
                let running = state.database == Some(DatabaseState::Running);
                match &fault {
                    Fault::PauseDatabase | Fault::CrashDatabase => assert!(running, "{seed}"),
                    Fault::ResumeDatabase => {
                        assert_eq!(state.database, Some(DatabaseState::Paused), "{seed}");
                    }
                    Fault::RestartDatabase => {
                        assert_eq!(state.database, Some(DatabaseState::Down), "{seed}");
                    }
                    Fault::Restart(Target::Node(n)) => assert!(
                        running && !state.database_cut.contains(n),
                        "seed {seed}: {fault:?} with {state:?}"
                    ),
                    _ => {}
                }
                *drawn
                    .entry(crate::fault::Verb::of(&fault).name())
                    .or_default() += 1;
                apply(&mut state, &fault);
            }
        }
        for verb in [
            "node-from-database",
            "pause-database",
            "resume-database",
            "crash-database",
            "restart-database",
        ] {
            assert!(
                drawn.get(verb).is_some_and(|&n| n > 0),
                "{verb} never drawn: {drawn:?}"
            );
        }
        // Without a database as the runtime runs it, none is ever drawn.
        let plan = plan(1);
        let mut random = plan.picker();
        for _ in 0..500 {
            let choice = choose(&mut random, &plan, &state());
            let on_database = match &choice {
                Some(Choice::Database(_)) => true,
                Some(Choice::Fault(kind, _)) => kind.on_database(),
                _ => false,
            };
            assert!(!on_database, "{choice:?} drawn without a database");
        }
    }

    #[test]
    fn the_same_seed_and_cluster_give_the_same_faults() {
        let run = |seed| {
            let plan = plan(seed);
            let mut random = plan.picker();
            let mut state = state();
            let mut faults = Vec::new();
            for _ in 0..50 {
                if let Some(choice) = choose(&mut random, &plan, &state)
                    && let Some(fault) =
                        realise(&mut random, &choice, &state.clone(), resolver(&state))
                {
                    apply(&mut state, &fault);
                    faults.push(fault);
                }
            }
            faults
        };
        assert_eq!(run(11), run(11));
        assert_ne!(run(11), run(12));
    }

    #[test]
    fn a_minority_of_several_is_written_as_their_names() {
        let plan = plan(1);
        let mut random = plan.picker();
        let state = State {
            nodes: NodeId::all(5).collect(),
            ..state()
        };
        let choice = Choice::Fault(Kind::MajorityMinority, Target::RandomMinority);
        let fault = realise(&mut random, &choice, &state, |_| {
            Some(vec![NodeId::new(2), NodeId::new(4)])
        })
        .unwrap();
        assert_eq!(
            fault,
            Fault::MajorityMinority(Target::Nodes(vec![NodeId::new(2), NodeId::new(4)]).into())
        );
        let text = toml::to_string(&crate::schedule::Step::Fault(fault.clone())).unwrap();
        assert!(text.contains("b2,b4"), "{text}");
    }
}
