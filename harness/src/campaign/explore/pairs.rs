//! What a campaign has exercised, in terms that know no bug: each fault it
//! fires is paired with the abstract state of every partition at that
//! moment, as the harness observes it (etcd's view and the nemesis's own
//! record of what is paused, dead or cut), and with the role the fault's
//! node plays for that partition. A pair is one (state, fault) combination;
//! coverage is the set reached.
//!
//! Guidance (`campaign --guided`) uses it to choose: the nemesis draws a few
//! candidate picks from the seed's mix as it always does, and fires the one
//! that reaches the most pairs not yet covered — in this run, or in the
//! coverage map a nightly's earlier seeds saved (`--coverage FILE`). Nothing
//! in it names a bug: the state is made of what any Kafka-style cluster
//! shows (who leads, in what condition; how large the ISR is; whether a
//! replica out of it is running and catching up; whether an ISR member came
//! back inside its lease; whether the controller is whole).
//!
//! Guidance is the coverage-guided half of what the fuzzing literature
//! calls greybox search (AFL's edge coverage, where the "edges" here are
//! state-fault pairs); the swarm mix (mod.rs) stays its prior.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::campaign::state::State;
use crate::history::Verb;
use crate::node::NodeId;
use crate::observe::ClusterView;
use crate::schedule::{Fault, PartitionRef, Payload, Target};

/// How long after a restart inside its lease an ISR member counts as
/// bounced: past it, the controller has long seen the registration put again.
pub const BOUNCE_WINDOW: Duration = Duration::from_secs(10);

/// A campaign's own coverage, in its run directory.
pub const COVERAGE_FILE: &str = "coverage.json";

/// How many candidates a guided pick draws from the mix.
pub const CANDIDATES: usize = 4;

/// One node as the nemesis and etcd see it.
fn node_is(state: &State, node: NodeId) -> &'static str {
    if state.down.contains(&node) {
        "down"
    } else if state.paused.contains(&node) {
        "paused"
    } else {
        match (
            state.etcd_cut.contains(&node),
            state.peer_cut.contains(&node),
        ) {
            (true, true) => "isolated",
            (true, false) => "etcd-cut",
            (false, true) => "peer-cut",
            (false, false) => "up",
        }
    }
}

/// What the harness observed of the cluster before a pick: the nemesis's
/// state, etcd's view, and which nodes came back inside their lease lately.
pub struct Observed<'a> {
    pub state: &'a State,
    pub view: &'a ClusterView,
    pub bounced: &'a BTreeSet<NodeId>,
}

impl Observed<'_> {
    /// Each partition's abstract state, as one line:
    /// `leader=up isr=shrunk out=catching-up bounced=no controller=up`.
    pub fn shapes(&self) -> Vec<(PartitionRef, NodeShape, String)> {
        let controller = match self.view.controller {
            None => "none",
            Some(c) if node_is(self.state, c) == "up" => "up",
            Some(_) => "faulted",
        };
        let mut shapes = Vec::new();
        for p in &self.state.partitions {
            let Some(view) = self.view.partition(p) else {
                continue;
            };
            let leader = view.leader.map_or("none", |l| node_is(self.state, l));
            let isr = match view.isr.len() {
                n if n >= view.replicas.len() => "full",
                1 => "sole",
                0 => "empty",
                _ => "shrunk",
            };
            let outside: Vec<NodeId> = view
                .replicas
                .iter()
                .copied()
                .filter(|r| !view.isr.contains(r))
                .collect();
            let out = if outside.is_empty() {
                "none"
            } else if outside.iter().any(|&r| node_is(self.state, r) == "up") {
                "catching-up"
            } else {
                "faulted"
            };
            let bounced = view.isr.iter().any(|m| self.bounced.contains(m));
            let shape = format!(
                "leader={leader} isr={isr} out={out} bounced={} controller={controller}",
                if bounced { "yes" } else { "no" }
            );
            shapes.push((
                p.clone(),
                NodeShape {
                    leader: view.leader,
                    isr: view.isr.clone(),
                    controller: self.view.controller,
                },
                shape,
            ));
        }
        shapes
    }

    /// The pairs a fault reaches: one per partition, the partition's shape
    /// with the fault's verb and its node's role there.
    pub fn pairs(&self, fault: &Fault) -> Vec<String> {
        self.pairs_at(fault)
            .into_iter()
            .map(|(_, pair)| pair)
            .collect()
    }

    /// [`Observed::pairs`], each with its partition.
    pub fn pairs_at(&self, fault: &Fault) -> Vec<(PartitionRef, String)> {
        let verb = Verb::of(fault).name();
        let nodes = touched(fault);
        self.shapes()
            .into_iter()
            .map(|(p, roles, shape)| {
                let role = match nodes.as_slice() {
                    [] => "-".to_string(),
                    nodes => {
                        let mut named: Vec<&str> = nodes.iter().map(|&n| roles.role(n)).collect();
                        named.sort_unstable();
                        named.dedup();
                        named.join("+")
                    }
                };
                (p, format!("{verb} {role} | {shape}"))
            })
            .collect()
    }
}

/// Who leads and who is in sync, to name a node's role.
pub struct NodeShape {
    leader: Option<NodeId>,
    isr: Vec<NodeId>,
    controller: Option<NodeId>,
}

impl NodeShape {
    fn role(&self, node: NodeId) -> &'static str {
        let controller = self.controller == Some(node);
        match (
            self.leader == Some(node),
            self.isr.contains(&node),
            controller,
        ) {
            (true, _, true) => "leader-controller",
            (true, _, false) => "leader",
            (false, true, true) => "in-sync-controller",
            (false, true, false) => "in-sync",
            (false, false, true) => "out-of-sync-controller",
            (false, false, false) => "out-of-sync",
        }
    }
}

/// The nodes a fault acts on (none for a heal).
fn touched(fault: &Fault) -> Vec<NodeId> {
    let of = |target: &Target| match target {
        Target::Node(n) => vec![*n],
        Target::Nodes(ns) => ns.clone(),
        _ => Vec::new(),
    };
    match fault.payload() {
        Payload::OneWay(one_way) => of(&one_way.from),
        Payload::TruncateLog(truncate) => of(&truncate.node),
        Payload::Requests(r) => of(&r.to),
        Payload::DelayedRequests(r) => of(&r.to),
        _ => fault.target().map(of).unwrap_or_default(),
    }
}

/// A pair's record: how often it was reached, and (in a run's own map) how
/// long after the campaign began it was first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reached {
    pub count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_ms: Option<u64>,
}

/// The pairs reached: a run's (`coverage.json` in its directory) or a map
/// saved across runs (`--coverage FILE`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    pub pairs: BTreeMap<String, Reached>,
    /// How often each partition shape was seen before a pick (ahead.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shapes: BTreeMap<String, u64>,
    /// Per pair, the shapes its partition was seen in at the next pick, and
    /// how often (ahead.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next: BTreeMap<String, BTreeMap<String, u64>>,
}

/// Why a coverage map could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CoverageError {
    #[error("coverage map {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("coverage map {path}: not a coverage map: {source}")]
    Malformed {
        path: String,
        source: serde_json::Error,
    },
}

impl Coverage {
    /// The map at `path`, or an empty one when there is no file yet.
    pub fn load(path: &Path) -> Result<Coverage, CoverageError> {
        let shown = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|source| CoverageError::Malformed {
                path: shown,
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Coverage::default()),
            Err(source) => Err(CoverageError::Io {
                path: shown,
                source,
            }),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a map of strings serializes")
    }

    /// Writes the map (through a temporary file, so a reader never sees
    /// half of one).
    pub fn save(&self, path: &Path) -> Result<(), CoverageError> {
        let shown = path.display().to_string();
        let text = self.to_json();
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, text)
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|source| CoverageError::Io {
                path: shown,
                source,
            })
    }

    /// Records `pairs` reached `at` after the campaign began.
    pub fn record(&mut self, pairs: &[String], at: Duration) {
        for pair in pairs {
            let reached = self.pairs.entry(pair.clone()).or_default();
            reached.count += 1;
            reached.first_ms.get_or_insert(at.as_millis() as u64);
        }
    }

    /// Adds another map's counts (first times are kept only from `self`).
    pub fn merge(&mut self, other: &Coverage) {
        for (pair, reached) in &other.pairs {
            self.pairs.entry(pair.clone()).or_default().count += reached.count;
        }
        for (shape, seen) in &other.shapes {
            *self.shapes.entry(shape.clone()).or_default() += seen;
        }
        for (pair, after) in &other.next {
            let mine = self.next.entry(pair.clone()).or_default();
            for (shape, seen) in after {
                *mine.entry(shape.clone()).or_default() += seen;
            }
        }
    }

    /// How many of `pairs` neither this map nor `prior` holds.
    pub fn novelty(&self, prior: &Coverage, pairs: &[String]) -> usize {
        pairs
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|p| !self.pairs.contains_key(*p) && !prior.pairs.contains_key(*p))
            .count()
    }

    /// Pairs first reached by each whole minute of the campaign (the last
    /// entry is the total), for the pairs-per-minute comparison.
    pub fn by_minute(&self) -> Vec<usize> {
        let firsts: Vec<u64> = self.pairs.values().filter_map(|r| r.first_ms).collect();
        let Some(&last) = firsts.iter().max() else {
            return Vec::new();
        };
        (1..=last / 60_000 + 1)
            .map(|minute| firsts.iter().filter(|&&ms| ms < minute * 60_000).count())
            .collect()
    }
}

/// A coverage map shared by the campaigns of one `epochal power` or
/// `campaign --seeds` (each merges its own into it when it ends), saved to
/// `--coverage FILE` by the command.
#[derive(Debug, Clone, Default)]
pub struct SharedCoverage(pub Arc<Mutex<Coverage>>);

impl SharedCoverage {
    pub fn new(coverage: Coverage) -> Self {
        SharedCoverage(Arc::new(Mutex::new(coverage)))
    }

    pub fn snapshot(&self) -> Coverage {
        self.0
            .lock()
            .expect("never poisoned: no panic holds it")
            .clone()
    }
}

impl PartialEq for SharedCoverage {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.snapshot() == other.snapshot()
    }
}

/// How a plan explores: guided or not, and the prior it is measured against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Guide {
    pub guided: bool,
    /// Ties in novelty broken by how rare the shapes a pick has led to are
    /// (ahead.rs; `--lookahead`).
    pub lookahead: bool,
    pub prior: SharedCoverage,
}

/// A node restarted while etcd still held its registration (inside its
/// lease), and when.
#[derive(Debug, Default)]
pub struct Bounces {
    at: BTreeMap<NodeId, Instant>,
}

impl Bounces {
    /// Notes a fault that started `node` again while `registered` held it.
    pub fn fired(&mut self, fault: &Fault, registered: &BTreeSet<NodeId>) {
        if let Fault::Restart(Target::Node(n)) | Fault::Start(Target::Node(n)) = fault
            && registered.contains(n)
        {
            self.at.insert(*n, Instant::now());
        }
    }

    /// The nodes bounced within [`BOUNCE_WINDOW`].
    pub fn recent(&self) -> BTreeSet<NodeId> {
        self.at
            .iter()
            .filter(|(_, at)| at.elapsed() < BOUNCE_WINDOW)
            .map(|(n, _)| *n)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::etcd::PartitionView;
    use crate::schedule::PartitionRef;

    fn b(n: u32) -> NodeId {
        NodeId::new(n)
    }

    fn cluster(leader: u32, isr: &[u32]) -> (State, ClusterView) {
        let p = PartitionRef::new("t", 0);
        let state = State {
            nodes: NodeId::all(3).collect(),
            partitions: vec![p.clone()],
            ..State::default()
        };
        let mut view = ClusterView {
            controller: Some(b(3)),
            ..ClusterView::default()
        };
        view.partitions.insert(
            p,
            PartitionView {
                replicas: vec![b(1), b(2), b(3)],
                leader: Some(b(leader)),
                isr: isr.iter().map(|&n| b(n)).collect(),
                leader_epoch: 4,
                controller_epoch: 1,
            },
        );
        (state, view)
    }

    #[test]
    fn a_pair_names_the_verb_the_role_and_the_partitions_state() {
        let (mut state, view) = cluster(1, &[1, 2]);
        state.etcd_cut.insert(b(1));
        let bounced = BTreeSet::new();
        let observed = Observed {
            state: &state,
            view: &view,
            bounced: &bounced,
        };
        assert_eq!(
            observed.pairs(&Fault::PowerLoss(Target::Node(b(3)))),
            vec![
                "power-loss out-of-sync-controller | leader=etcd-cut isr=shrunk out=catching-up \
                 bounced=no controller=up"
            ]
        );
        state.down.insert(b(3));
        let observed = Observed {
            state: &state,
            view: &view,
            bounced: &bounced,
        };
        assert_eq!(
            observed.pairs(&Fault::Heal),
            vec!["heal - | leader=etcd-cut isr=shrunk out=faulted bounced=no controller=faulted"]
        );
    }

    #[test]
    fn a_member_restarted_inside_its_lease_counts_as_bounced() {
        let (state, view) = cluster(1, &[1, 2, 3]);
        let mut bounces = Bounces::default();
        let registered: BTreeSet<NodeId> = [b(1), b(2)].into();
        bounces.fired(&Fault::Restart(Target::Node(b(3))), &registered);
        assert!(bounces.recent().is_empty(), "b3 was not registered");
        bounces.fired(&Fault::Restart(Target::Node(b(2))), &registered);
        let bounced = bounces.recent();
        let observed = Observed {
            state: &state,
            view: &view,
            bounced: &bounced,
        };
        assert!(
            observed.pairs(&Fault::Pause(Target::Node(b(1))))[0]
                .starts_with("pause leader | leader=up isr=full out=none bounced=yes")
        );
    }

    #[test]
    fn novelty_counts_pairs_neither_the_run_nor_the_prior_holds() {
        let mut run = Coverage::default();
        let mut prior = Coverage::default();
        run.record(&["a".into()], Duration::from_secs(1));
        prior.record(&["b".into()], Duration::ZERO);
        let pairs = ["a".into(), "b".into(), "c".into(), "c".into()];
        assert_eq!(run.novelty(&prior, &pairs), 1);
        run.record(&["c".into()], Duration::from_secs(61));
        assert_eq!(run.by_minute(), vec![1, 2]);
    }

    #[test]
    fn a_map_saves_loads_and_merges() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("coverage.json");
        assert_eq!(Coverage::load(&path).unwrap(), Coverage::default());
        let mut map = Coverage::default();
        map.record(&["x".into()], Duration::ZERO);
        map.save(&path).unwrap();
        let mut loaded = Coverage::load(&path).unwrap();
        assert_eq!(loaded, map);
        loaded.merge(&map);
        assert_eq!(loaded.pairs["x"].count, 2);
        std::fs::write(&path, "{").unwrap();
        let err = Coverage::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("coverage.json") && err.contains("not a coverage map"),
            "{err}"
        );
    }
}
