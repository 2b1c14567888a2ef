//! The nemesis's pick with coverage (pairs.rs) in view: every single
//! fault a campaign fires is recorded with the pairs it reached, and a
//! guided campaign (`--guided`) draws [`CANDIDATES`] picks, alternately
//! from the seed's mix and from the same kinds weighed alike ([`flat`]),
//! and fires the one reaching the most pairs that neither this run nor the
//! prior (earlier seeds' map) holds; the first drawn (the seed's) wins
//! ties, so with nothing new in reach a guided pick is the unguided one. Targeted
//! sequences (sequence.rs) are taken as drawn and not recorded pair by pair.

pub mod ahead;
pub mod pairs;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::Plan;
use super::pick::{self, Choice, State};
use super::sequence::Sequence;
use crate::node::NodeId;
use crate::observe::ClusterView;
use crate::random::SplitMix64;
use crate::schedule::{Fault, PartitionRef, Target};
use pairs::{Bounces, CANDIDATES, Coverage, Observed, SharedCoverage};

/// What the pick came to.
pub(super) enum Picked {
    Sequence(Sequence),
    /// A single fault or undo; `fault` is `None` when its role names nobody
    /// now. `pairs` are what it reaches.
    Fault {
        choice: Choice,
        fault: Option<Fault>,
        pairs: Vec<String>,
    },
}

/// The seed's mix with every kind it allows weighed alike: where every
/// other candidate of a guided pick comes from, so a kind the seed weighs
/// lightly or leaves out is still fired when it reaches something new (the
/// seed's own mix still gives the first candidate, which wins ties).
fn flat(plan: &Plan) -> Plan {
    let mut flat = plan.clone();
    for weight in flat.weights.values_mut() {
        *weight = 3;
    }
    flat
}

/// One run's exploration: its own coverage and the bounces it caused.
pub(super) struct Explorer {
    guided: bool,
    /// Ties in novelty broken by rarity ahead (ahead.rs).
    lookahead: bool,
    prior: SharedCoverage,
    run: Coverage,
    bounces: Bounces,
    started: Instant,
    /// The pairs, by partition, of the single fault last picked, and of the
    /// last one fired (whose outcome the next pick notes).
    picked: Vec<(PartitionRef, String)>,
    fired: Vec<(PartitionRef, String)>,
}

impl Explorer {
    pub fn new(plan: &Plan, started: Instant) -> Self {
        Explorer {
            guided: plan.guide.guided,
            lookahead: plan.guide.lookahead,
            prior: plan.guide.prior.clone(),
            run: Coverage::default(),
            bounces: Bounces::default(),
            started,
            picked: Vec::new(),
            fired: Vec::new(),
        }
    }

    /// The next pick, as pick::choose and pick::realise make it, guided
    /// toward pairs not reached yet when the plan says so.
    pub fn pick(
        &mut self,
        random: &mut SplitMix64,
        plan: &Plan,
        state: &State,
        view: &ClusterView,
        mut resolve: impl FnMut(&Target) -> Option<Vec<NodeId>>,
    ) -> Option<Picked> {
        let bounced = self.bounces.recent();
        let observed = Observed {
            state,
            view,
            bounced: &bounced,
        };
        self.note(&observed);
        let choice = pick::choose(random, plan, state)?;
        if let Choice::Sequence(sequence) = choice {
            return Some(Picked::Sequence(sequence));
        }
        let fault = pick::realise(random, &choice, state, &mut resolve);
        let pairs = fault
            .as_ref()
            .map(|f| observed.pairs_at(f))
            .unwrap_or_default();
        let mut best = (choice, fault, pairs);
        if self.guided {
            let prior = self
                .prior
                .0
                .lock()
                .expect("never poisoned: no panic holds it");
            let score = |pairs: &[(PartitionRef, String)]| {
                let names: Vec<String> = pairs.iter().map(|(_, pair)| pair.clone()).collect();
                let ahead = if self.lookahead {
                    ahead::ahead(&self.run, &prior, pairs)
                } else {
                    0.0
                };
                (self.run.novelty(&prior, &names), ahead)
            };
            let mut most = score(&best.2);
            let flat = flat(plan);
            for k in 1..CANDIDATES {
                let mix = if k % 2 == 1 { &flat } else { plan };
                let Some(choice) = pick::choose(random, mix, state) else {
                    break;
                };
                if matches!(choice, Choice::Sequence(_)) {
                    continue;
                }
                let Some(fault) = pick::realise(random, &choice, state, &mut resolve) else {
                    continue;
                };
                let pairs = observed.pairs_at(&fault);
                let this = score(&pairs);
                // Novelty first; rarity ahead only between equals. The
                // first drawn keeps a tie.
                if this.0 > most.0 || (this.0 == most.0 && this.1 > most.1 + 1e-9) {
                    most = this;
                    best = (choice, Some(fault), pairs);
                }
            }
        }
        let (choice, fault, pairs) = best;
        self.picked = pairs.clone();
        Some(Picked::Fault {
            choice,
            fault,
            pairs: pairs.into_iter().map(|(_, pair)| pair).collect(),
        })
    }

    /// Before a pick: the shapes every partition is in now, and what the
    /// fault fired last led to.
    fn note(&mut self, observed: &Observed) {
        let shapes: BTreeMap<PartitionRef, String> = observed
            .shapes()
            .into_iter()
            .map(|(p, _, shape)| (p, shape))
            .collect();
        let fired = std::mem::take(&mut self.fired);
        self.run.followed(&fired, &shapes);
        self.run.saw(&shapes);
        self.picked.clear();
    }

    /// A fault fired: its pairs reached, and a restart of a node etcd still
    /// held registered (`registered`, from the view before it) noted.
    pub fn fired(&mut self, fault: &Fault, pairs: &[String], registered: &BTreeSet<NodeId>) {
        self.run.record(pairs, self.started.elapsed());
        self.bounces.fired(fault, registered);
        self.fired = std::mem::take(&mut self.picked);
    }

    /// A sequence's faults fired: only its restarts are noted.
    pub fn sequence_fired(&mut self, faults: &[Fault], registered: &BTreeSet<NodeId>) {
        self.fired.clear();
        for fault in faults {
            self.bounces.fired(fault, registered);
        }
    }

    /// The run's coverage, merged into the shared prior; with how many of
    /// its pairs the prior lacked before.
    pub fn finish(self) -> (Coverage, usize) {
        let mut prior = self.prior.0.lock().expect("never poisoned");
        let new = self
            .run
            .pairs
            .keys()
            .filter(|p| !prior.pairs.contains_key(*p))
            .count();
        prior.merge(&self.run);
        (self.run, new)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::campaign::{Kind, StopAfter};
    use crate::observe::etcd::PartitionView;
    use crate::schedule::PartitionRef;

    fn cluster() -> (State, ClusterView) {
        let p = PartitionRef::new("t", 0);
        let state = State {
            nodes: NodeId::all(3).collect(),
            partitions: vec![p.clone()],
            ..State::default()
        };
        let mut view = ClusterView {
            controller: Some(NodeId::new(1)),
            brokers: NodeId::all(3).collect(),
            ..ClusterView::default()
        };
        view.partitions.insert(
            p,
            PartitionView {
                replicas: NodeId::all(3).collect(),
                leader: Some(NodeId::new(2)),
                isr: NodeId::all(3).collect(),
                leader_epoch: 0,
                controller_epoch: 1,
            },
        );
        (state, view)
    }

    fn pairs_of(picked: Option<Picked>) -> Vec<String> {
        match picked {
            Some(Picked::Fault { pairs, .. }) => pairs,
            _ => panic!("a single fault was expected"),
        }
    }

    /// Unguided, a pick is the mix's draw exactly (pick::choose, then
    /// pick::realise), so every seed's campaign draws what it drew before
    /// coverage was kept. Guided, the first candidate's pairs already
    /// reached send the pick to another candidate's new pairs.
    #[test]
    fn guidance_leaves_the_unguided_draw_alone_and_moves_a_known_pick() {
        let (state, view) = cluster();
        let resolve = |t: &Target| match t {
            Target::Node(n) => Some(vec![*n]),
            Target::Controller => Some(vec![NodeId::new(1)]),
            _ => Some(vec![NodeId::new(2)]),
        };
        let mut moved = 0;
        for seed in 1..=20 {
            let plan = Plan::derive(seed, StopAfter::Faults(10), 3, Kind::ALL).without_sequences();
            let mut random = plan.picker();
            let choice = pick::choose(&mut random, &plan, &state).unwrap();
            let expected = pick::realise(&mut random, &choice, &state, resolve);
            let mut random = plan.picker();
            let mut explorer = Explorer::new(&plan, Instant::now());
            match explorer.pick(&mut random, &plan, &state, &view, resolve) {
                Some(Picked::Fault { fault, .. }) => assert_eq!(fault, expected, "seed {seed}"),
                _ => panic!("seed {seed}: a single fault was expected"),
            }

            let mut random = plan.picker();
            let first = pairs_of(explorer.pick(&mut random, &plan, &state, &view, resolve));
            let mut known = Coverage::default();
            known.record(&first, Duration::ZERO);
            let guided = plan
                .clone()
                .guided(SharedCoverage::new(known.clone()), false);
            let mut random = guided.picker();
            let mut explorer = Explorer::new(&guided, Instant::now());
            let picked = pairs_of(explorer.pick(&mut random, &guided, &state, &view, resolve));
            if picked != first {
                assert!(
                    Coverage::default().novelty(&known, &picked) > 0,
                    "seed {seed}: moved to nothing new"
                );
                moved += 1;
            }
        }
        assert!(moved >= 10, "guidance moved only {moved} of 20 known picks");
    }

    /// With every pair in reach already known, look-ahead fires the pair
    /// that once led to a seldom seen state more often than guidance by
    /// novelty alone, which then keeps the seed's own draw.
    #[test]
    fn lookahead_prefers_the_pair_that_led_somewhere_rare() {
        let (state, view) = cluster();
        let resolve = |t: &Target| match t {
            Target::Node(n) => Some(vec![*n]),
            _ => Some(vec![NodeId::new(2)]),
        };
        let plan = |seed| Plan::derive(seed, StopAfter::Faults(10), 3, Kind::ALL);
        // Every pair a first pick reaches here, over many seeds, known.
        let mut known = Coverage::default();
        for seed in 1..=200 {
            let plan = plan(seed).without_sequences();
            let mut random = plan.picker();
            for _ in 0..4 {
                let mut explorer = Explorer::new(&plan, Instant::now());
                let picked = pairs_of(explorer.pick(&mut random, &plan, &state, &view, resolve));
                known.record(&picked, Duration::ZERO);
            }
        }
        let rare = known
            .pairs
            .keys()
            .find(|p| p.starts_with("pause "))
            .cloned();
        let rare = rare.expect("a pause is in reach");
        let p = PartitionRef::new("t", 0);
        let shape = |s: &str| BTreeMap::from([(p.clone(), s.to_owned())]);
        for _ in 0..50 {
            known.saw(&shape("common"));
        }
        known.saw(&shape("rare"));
        for pair in known.pairs.keys().cloned().collect::<Vec<_>>() {
            let to = if pair == rare { "rare" } else { "common" };
            known.followed(&[(p.clone(), pair)], &shape(to));
        }
        let fired = |lookahead| {
            (1..=40)
                .filter(|&seed| {
                    let plan = plan(seed)
                        .without_sequences()
                        .guided(SharedCoverage::new(known.clone()), lookahead);
                    let mut random = plan.picker();
                    let mut explorer = Explorer::new(&plan, Instant::now());
                    pairs_of(explorer.pick(&mut random, &plan, &state, &view, resolve))
                        .contains(&rare)
                })
                .count()
        };
        let (with, without) = (fired(true), fired(false));
        assert!(
            with > without,
            "{rare}: {with} with look-ahead, {without} without"
        );
    }
}
