//! `epochal campaign`: a seeded randomized run, as Jepsen's nemesis runs and
//! TigerBeetle's VOPR runs. A scripted schedule proves a bug somebody already
//! understood; a campaign is how the ones nobody has written down are found.
//!
//! Everything random comes from one seed. The seed first fixes the campaign's
//! *plan* ([`Plan::derive`]): which fault kinds are in the mix and how heavily
//! each is weighted, how much load passes between faults, how many nodes may
//! be down at once. Varying these per seed is swarm testing (Groce et al.,
//! "Swarm Testing", ISSTA 2012): a mix that leaves pauses out entirely lets
//! crashes pile up in ways a uniform mix almost never does, so a night of
//! seeds explores more than a night of one mix. Then, as the run goes, the
//! same generator picks each fault from what the cluster is at that moment
//! (pick.rs): a target named by role (`controller`, `leader of t-1`) is
//! resolved when it fires, and what it resolved to is what is written down.
//!
//! A campaign is an ordinary run whose phase 3 its plan drives (play.rs: a
//! [`Plan`] is a run's `Driver`): the same cluster, background load, final
//! heal, checkers and run directory. What it fired is rewritten into the
//! run's `schedule.toml` after every fault — the cluster and load it started
//! from, then steps that await the writes acknowledged (or the time that
//! passed) between faults and the faults with their resolved targets — so
//! `epochal replay RUN_DIR` re-applies it with no randomness left, and
//! `epochal shrink` can cut it down. The schedule also carries a liveness
//! window (`[workload] liveness_ms`): after the final heal every partition
//! must take a write again.
//!
//! The command lines that start campaigns and shrinks are cli/campaign.rs and
//! cli/shrink.rs, which only parse flags and print; this module is the
//! campaign itself, its shrink included (shrink/), below them.

pub mod explore;
pub mod pick;
mod play;
pub mod power;
pub mod sequence;
pub mod shrink;
mod state;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::fault::{Mix, Needs};
use crate::random::SplitMix64;
use crate::schedule::{Acks, Background, Cluster, Schedule, Topic, Workload};
use crate::system::{ServiceKind, System};

/// What a campaign is asked for on the command line.
#[derive(Debug, Clone)]
pub struct CampaignOptions {
    pub seed: u64,
    pub stop: StopAfter,
    pub brokers: u32,
    /// Partitions of the one topic, `t`.
    pub partitions: u32,
    pub producers: u32,
    pub consumers: u32,
    /// Pause between one background worker's requests.
    pub interval_ms: u64,
    pub acks: Acks,
    /// The liveness window after the final heal.
    pub liveness_ms: u64,
    /// Fault kinds the nemesis may pick (the seed weights them).
    pub kinds: Vec<Kind>,
    /// The background consumers commit their positions and read them back
    /// (`[workload.background] commits`, [groups]).
    pub commits: bool,
    /// Consumers that subscribe as one group (`[workload.background]
    /// subscribers`, [groups]), and how often each crashes.
    pub subscribers: u32,
    pub crash_every: u32,
    /// Transactional producers (`[workload.background] transactional`,
    /// [transactions]).
    pub transactional: u32,
    /// One client creating, writing, reading and deleting a topic of its
    /// own under one name (`[workload.background] lives`).
    pub lives: bool,
    /// The subscribers run read-process-write transactions (`[workload]
    /// read_process_write`, [transactions]).
    pub read_process_write: bool,
    /// `[workload] request_timeout_ms` and `transaction_timeout_ms` when
    /// set; the workload's defaults otherwise.
    pub request_timeout_ms: Option<u64>,
    pub transaction_timeout_ms: Option<u64>,
    /// The coverage the run must reach, or be unknown ("vacuous: …").
    pub minimums: Minimums,
}

/// A campaign's coverage minimums, written into its schedule's `[workload]`
/// (`min_*`; checker/coverage.rs): below any of them a campaign that would
/// be valid is unknown, "vacuous: …". 0 declares none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Minimums {
    pub faults: u64,
    pub ops_per_fault: u64,
    pub acked_during_faults: u64,
    pub leader_changes: u64,
}

impl Minimums {
    /// What every healthy campaign of the reference broker reached, with
    /// room (docs/coverage.md, "Campaign defaults", has the figures: 60 s seeds 1..4
    /// and the gate's 20 s seeds 1 and 2): a fault that landed, writes
    /// acknowledged while faults were in force, a leader change. No minimum
    /// per fault: a third of the seeds fire faults back to back on purpose
    /// (KIP-101's and KIP-279's successive failures), and a fault followed
    /// within a few milliseconds by the next may overlap no client op at all.
    pub const CAMPAIGN: Minimums = Minimums {
        faults: 1,
        ops_per_fault: 0,
        acked_during_faults: 5,
        leader_changes: 1,
    };
}

impl CampaignOptions {
    pub fn new(seed: u64, stop: StopAfter) -> Self {
        CampaignOptions {
            seed,
            stop,
            brokers: 3,
            partitions: 3,
            producers: 4,
            consumers: 2,
            interval_ms: 5,
            acks: Acks::All,
            liveness_ms: 30_000,
            kinds: DEFAULT_KINDS.to_vec(),
            commits: false,
            subscribers: 0,
            crash_every: 0,
            transactional: 0,
            lives: false,
            read_process_write: false,
            request_timeout_ms: None,
            transaction_timeout_ms: None,
            minimums: Minimums::CAMPAIGN,
        }
    }
}

/// When the nemesis stops picking faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAfter {
    Duration(Duration),
    Faults(u32),
}

impl std::fmt::Display for StopAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopAfter::Duration(d) => write!(f, "{} s", d.as_secs_f64()),
            StopAfter::Faults(n) => write!(f, "{n} faults"),
        }
    }
}

pub use crate::fault::{Kind, KindError};

/// Every kind. (`truncate-log` joined once the checkers counted a
/// deliberate disk cut as an excuse for the writes it removes, as a power
/// loss: issue [fidelity], point 2.)
pub const DEFAULT_KINDS: &[Kind] = Kind::ALL;

/// Everything the seed decides before the run starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub seed: u64,
    pub stop: StopAfter,
    /// Each allowed kind's weight; 0 leaves it out of this seed's mix.
    pub weights: BTreeMap<Kind, u64>,
    /// The weight of each kind of undo (resume, restart, heal) when it applies.
    pub recover_weight: u64,
    /// Writes acknowledged between two faults: drawn in this range each
    /// time; 0 fires the next fault at once.
    pub gap_acks: (u64, u64),
    /// ... unless this much time passes first (a cluster taking no writes).
    pub gap_max: Duration,
    /// Nodes paused or dead at once, at most (a targeted sequence may
    /// reach two: campaign/sequence.rs).
    pub max_faulted: usize,
    /// The weight of a targeted fault sequence (campaign/sequence.rs) when
    /// the cluster is whole, as the seed drew it.
    pub sequence_weight: u64,
    /// Whether sequences are in the mix at all: on unless a campaign asks
    /// otherwise ([`Plan::without_sequences`], `campaign --no-sequences`).
    /// Off for a while after their first runs found the fixed settings
    /// losing acknowledged writes, a broker bug since fixed
    /// (suites/found/current-sequences-seed-40).
    pub sequences: bool,
    /// Guided or not, and the coverage map it is measured against
    /// (coverage.rs, explore.rs).
    pub guide: explore::pairs::Guide,
}

/// Why `system` cannot take fault `kind` (a campaign on it leaves the kind
/// out), or `None` when it can: what the kind needs (its spec, src/fault/)
/// against what the system offers.
pub fn unsupported(system: &System, kind: Kind) -> Option<&'static str> {
    match kind.spec().needs {
        Needs::ReplicaFiles if !system.sees().replica_files => {
            Some("its brokers keep no replica files for a disk fault to cut")
        }
        Needs::Etcd if !system.services().any(|s| s == ServiceKind::Etcd) => Some("it has no etcd"),
        Needs::Database if !system.services().any(|s| s == ServiceKind::Postgres) => {
            Some("it has no database")
        }
        Needs::Links if !system.has_peers() && system.services.is_empty() => {
            Some("its brokers have no links but their clients' (node-from-clients cuts those)")
        }
        // The cuts between brokers and from etcd (isolate, bridge, ...) have
        // no link to cut on brokers over a database alone: their proxies do
        // not exist, and the cut would fail as a harness error.
        Needs::Links
            if !system.has_peers() && !system.services().any(|s| s == ServiceKind::Etcd) =>
        {
            Some(
                "its brokers dial neither one another nor etcd (node-from-database and \
                  node-from-clients cut the links they have)",
            )
        }
        _ => None,
    }
}

/// Whether a campaign that names no kinds picks `kind` on `system`.
///
/// A kind's spec says (src/fault/, [`Mix`]): adding a kind to the default
/// mix changes every seed's plan, and the campaign figures measured so far
/// (docs/campaigns.md) are of the mix as it is. Cutting the clients from a
/// broker is the one network fault a system whose brokers never dial one
/// another can take, so its campaigns pick it and the reference broker's
/// leave it out; the request faults (`hold-requests` and the rest, issue
/// 38) are in no default mix. `--kinds` names either.
fn in_default_mix(system: &System, kind: Kind) -> bool {
    match kind.spec().mix {
        Mix::Default => true,
        Mix::WithoutPeers => !system.has_peers(),
        Mix::Named => false,
    }
}

/// Why a campaign on a system has no kinds to pick from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindsError {
    #[error("{system} cannot take {kind}: {why}")]
    Unsupported {
        system: String,
        kind: &'static str,
        why: &'static str,
    },
    #[error("no fault kind applies to {system}")]
    NoneApplies { system: String },
}

/// The kinds a campaign on `system` picks from: `kinds` without the ones it
/// cannot take (and, unless the user gave the list, those outside its default
/// mix). A list the user gave (`explicit`) that names one it cannot take is an
/// error saying why, rather than a campaign that quietly does less.
pub fn kinds_for(system: &System, kinds: &[Kind], explicit: bool) -> Result<Vec<Kind>, KindsError> {
    let mut kept = Vec::new();
    for &kind in kinds {
        if !explicit && !in_default_mix(system, kind) {
            continue;
        }
        match unsupported(system, kind) {
            None => kept.push(kind),
            Some(why) if explicit => {
                return Err(KindsError::Unsupported {
                    system: system.name.clone(),
                    kind: kind.name(),
                    why,
                });
            }
            Some(_) => {}
        }
    }
    if kept.is_empty() {
        return Err(KindsError::NoneApplies {
            system: system.name.clone(),
        });
    }
    Ok(kept)
}

impl Plan {
    /// The plan seed `seed` gives for `brokers` nodes and the allowed kinds.
    pub fn derive(seed: u64, stop: StopAfter, brokers: u32, kinds: &[Kind]) -> Plan {
        let mut random = SplitMix64::new(seed);
        let mut weights = BTreeMap::new();
        // Draw for every kind, allowed or not, so that allowing one more
        // kind does not reshuffle the others' weights.
        let draw = |random: &mut SplitMix64, weights: &mut BTreeMap<Kind, u64>, kind: Kind| {
            let left_out = random.chance(1, 4);
            let weight = random.between(1, 5);
            if kinds.contains(&kind) {
                weights.insert(kind, if left_out { 0 } else { weight });
            }
        };
        let at_least_one = |random: &mut SplitMix64, weights: &mut BTreeMap<Kind, u64>| {
            if !weights.is_empty() && weights.values().all(|&w| w == 0) {
                let keys: Vec<Kind> = weights.keys().copied().collect();
                weights.insert(keys[random.index(keys.len())], 3);
            }
        };
        for &kind in Kind::ALL
            .iter()
            .filter(|k| !k.is_requests() && !k.on_database())
        {
            draw(&mut random, &mut weights, kind);
        }
        at_least_one(&mut random, &mut weights);
        // A third of the seeds may fire faults back to back (a gap of 0):
        // the fast successive failures of KIP-101 and KIP-279 happen inside
        // the milliseconds before a restarted follower's first fetch, which
        // no gap of acknowledged writes leaves open.
        let low = if random.chance(1, 3) {
            0
        } else {
            random.between(1, 30)
        };
        let high = low + random.between(0, 120);
        let recover_weight = random.between(2, 8);
        let gap_max = Duration::from_millis(random.between(300, 3_000));
        let max_faulted = random.between(1, u64::from(brokers.saturating_sub(1).max(1))) as usize;
        // The request faults draw last, so every seed's plan without them is
        // the one it was before they existed.
        for &kind in Kind::ALL.iter().filter(|k| k.is_requests()) {
            draw(&mut random, &mut weights, kind);
        }
        at_least_one(&mut random, &mut weights);
        // Sequences draw after everything else, for the same reason.
        let sequence_weight = random.between(2, 6);
        // The database faults after sequences, so a seed of a system
        // without a database (whose kinds never hold them) draws as before.
        for &kind in Kind::ALL.iter().filter(|k| k.on_database()) {
            draw(&mut random, &mut weights, kind);
        }
        at_least_one(&mut random, &mut weights);
        Plan {
            seed,
            stop,
            weights,
            recover_weight,
            gap_acks: (low, high),
            gap_max,
            max_faulted,
            sequence_weight,
            sequences: true,
            guide: explore::pairs::Guide::default(),
        }
    }

    /// This plan without targeted fault sequences (campaign/sequence.rs):
    /// one fault per pick, as campaigns were measured before them.
    pub fn without_sequences(self) -> Plan {
        Plan {
            sequences: false,
            ..self
        }
    }

    /// This plan guided toward state-fault pairs not reached yet, measured
    /// against `prior` (campaign/explore/); with `lookahead`, ties broken by
    /// how rare the states a pick has led to are (explore/ahead.rs).
    pub fn guided(self, prior: explore::pairs::SharedCoverage, lookahead: bool) -> Plan {
        Plan {
            guide: explore::pairs::Guide {
                guided: true,
                lookahead,
                prior,
            },
            ..self
        }
    }

    /// This plan's coverage measured against `prior`, without guidance.
    pub fn measured_against(self, prior: explore::pairs::SharedCoverage) -> Plan {
        Plan {
            guide: explore::pairs::Guide {
                guided: false,
                lookahead: false,
                prior,
            },
            ..self
        }
    }

    /// The generator the run picks faults with: the same seed, a stream
    /// apart from the one [`Plan::derive`] used.
    pub fn picker(&self) -> SplitMix64 {
        SplitMix64::new(self.seed ^ 0x5EED_CA4B_A1C0_FFEE)
    }
}

/// The schedule a campaign starts from: its cluster and load, no steps.
pub fn schedule(options: &CampaignOptions) -> Schedule {
    Schedule {
        cluster: Cluster {
            brokers: options.brokers,
            topics: vec![Topic {
                name: "t".into(),
                partitions: options.partitions,
                replication_factor: options.brokers.min(3),
            }],
            settings: BTreeMap::new(),
            node: BTreeMap::new(),
        },
        workload: Workload {
            acks: options.acks,
            seed: options.seed,
            liveness_ms: Some(options.liveness_ms),
            request_timeout_ms: options
                .request_timeout_ms
                .unwrap_or(Workload::default().request_timeout_ms),
            transaction_timeout_ms: options.transaction_timeout_ms,
            read_process_write: options.read_process_write && options.subscribers > 0,
            background: Some(Background {
                producers: options.producers.max(1),
                consumers: options.consumers,
                interval_ms: options.interval_ms,
                partitions: Vec::new(),
                commits: options.commits,
                subscribers: options.subscribers,
                crash_every: options.crash_every,
                transactional: options.transactional,
                lives: options.lives,
            }),
            // Subscribed consumers are judged at-least-once: the run ends
            // with fresh consumers reading every partition to its end.
            final_read: options.subscribers > 0,
            min_faults: declared(options.minimums.faults),
            min_ops_per_fault: declared(options.minimums.ops_per_fault),
            min_acked_during_faults: declared(options.minimums.acked_during_faults),
            min_leader_changes: declared(options.minimums.leader_changes),
            ..Workload::default()
        },
        steps: Vec::new(),
    }
}

/// A minimum as `[workload]` declares it: 0 is none.
fn declared(minimum: u64) -> Option<u64> {
    (minimum > 0).then_some(minimum)
}

/// The block printed at the start: the seed and everything derived from it,
/// so a person reading a night's log knows what each seed tried.
pub fn describe(plan: &Plan, schedule: &Schedule) -> String {
    let mut out = String::new();
    let cluster = &schedule.cluster;
    let settings: Vec<String> = cluster
        .settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(out, "campaign seed {}", plan.seed);
    let _ = writeln!(
        out,
        "  cluster:  {} brokers; {}; settings: {}",
        cluster.brokers,
        cluster
            .topics
            .iter()
            .map(|t| format!(
                "topic {} of {} partitions, RF {}",
                t.name, t.partitions, t.replication_factor
            ))
            .collect::<Vec<_>>()
            .join(", "),
        if settings.is_empty() {
            "defaults".into()
        } else {
            settings.join(" ")
        }
    );
    if let Some(b) = &schedule.workload.background {
        let _ = writeln!(
            out,
            "  load:     {} producers (acks={}), {} consumers, one request each every {} ms",
            b.producers, schedule.workload.acks, b.consumers, b.interval_ms
        );
        if b.subscribers > 0 {
            let crash = match b.crash_every {
                0 => "never crash".to_owned(),
                n => format!("each crashes every {n} turns"),
            };
            let _ = writeln!(
                out,
                "  group:    {} consumers subscribed as `{}`; {crash}{}",
                b.subscribers,
                Background::GROUP,
                if schedule.workload.read_process_write {
                    "; each turn a read-process-write transaction"
                } else {
                    ""
                }
            );
        }
        if b.lives {
            let _ = writeln!(
                out,
                "  lives:    one client creating, writing, reading and deleting `epochal-lives`"
            );
        }
        if b.transactional > 0 {
            let _ = writeln!(
                out,
                "  txns:     {} transactional producers (sends and read_committed polls, 1 in 4 aborted)",
                b.transactional
            );
        }
    }
    let mix: Vec<String> = plan
        .weights
        .iter()
        .map(|(k, w)| format!("{} {w}", k.name()))
        .collect();
    let _ = writeln!(out, "  mix:      {}", mix.join(", "));
    let _ = writeln!(
        out,
        "  nemesis:  a fault after {}..={} more writes acknowledged (or {} ms); \
         at most {} nodes paused or dead at once; undo weight {}; \
         sequence weight {} (a quarter of the gap when the cluster is whole; 0: off)",
        plan.gap_acks.0,
        plan.gap_acks.1,
        plan.gap_max.as_millis(),
        plan.max_faulted,
        plan.recover_weight,
        if plan.sequences {
            plan.sequence_weight
        } else {
            0
        }
    );
    let _ = writeln!(out, "  stops:    after {}", plan.stop);
    let w = &schedule.workload;
    let minimums: Vec<String> = [
        ("faults", w.min_faults),
        ("ops per fault", w.min_ops_per_fault),
        ("acked during faults", w.min_acked_during_faults),
        ("leader changes", w.min_leader_changes),
    ]
    .iter()
    .filter_map(|(what, n)| Some(format!("{what} {}", (*n)?)))
    .collect();
    if !minimums.is_empty() {
        let _ = writeln!(
            out,
            "  coverage: at least {}, else unknown (vacuous)",
            minimums.join(", ")
        );
    }
    if let Some(ms) = schedule.workload.liveness_ms {
        let _ = writeln!(
            out,
            "  liveness: every partition takes a write within {ms} ms of the final heal"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_plan_and_seeds_vary_the_mix() {
        let stop = StopAfter::Faults(5);
        let plan = |seed| Plan::derive(seed, stop, 3, DEFAULT_KINDS);
        assert_eq!(plan(7), plan(7));
        let mixes: std::collections::BTreeSet<Vec<u64>> = (1..=20)
            .map(|s| plan(s).weights.values().copied().collect())
            .collect();
        assert!(mixes.len() > 10, "20 seeds gave {} mixes", mixes.len());
        for seed in 1..=50 {
            let p = plan(seed);
            assert!(p.weights.values().any(|&w| w > 0), "seed {seed}: empty mix");
            assert!((1..=2).contains(&p.max_faulted), "seed {seed}");
            assert!(p.gap_acks.0 <= p.gap_acks.1);
        }
    }

    #[test]
    fn allowing_a_kind_keeps_the_others_weights() {
        let stop = StopAfter::Faults(5);
        for seed in 1..=30 {
            let without: Vec<Kind> = Kind::ALL
                .iter()
                .copied()
                .filter(|&k| k != Kind::TruncateLog)
                .collect();
            let fewer = Plan::derive(seed, stop, 3, &without);
            let mut all = Plan::derive(seed, stop, 3, Kind::ALL);
            all.weights.remove(&Kind::TruncateLog);
            assert_eq!(fewer.weights, all.weights, "seed {seed}");
        }
    }

    /// The request kinds draw after everything else: a plan without them
    /// is draw for draw the plan of before they existed.
    #[test]
    fn allowing_the_request_kinds_changes_nothing_else() {
        let stop = StopAfter::Faults(5);
        let without: Vec<Kind> = Kind::ALL
            .iter()
            .copied()
            .filter(|k| !k.is_requests())
            .collect();
        for seed in 1..=30 {
            let fewer = Plan::derive(seed, stop, 3, &without);
            let mut all = Plan::derive(seed, stop, 3, Kind::ALL);
            all.weights.retain(|k, _| !k.is_requests());
            assert_eq!(fewer, all, "seed {seed}");
        }
    }

    /// A seed's plan on a system without a database is, draw for draw, the
    /// one it was before the database kinds existed: seed 7's, pinned as
    /// the code before them drew it. nisshi's plan holds the same draws and
    /// its database kinds besides.
    #[test]
    fn the_database_kinds_leave_other_systems_plans_as_they_were() {
        use Kind::*;
        let stop = StopAfter::Faults(5);
        let derive = |system: &System| {
            let kinds = kinds_for(system, DEFAULT_KINDS, false).unwrap();
            Plan::derive(7, stop, 3, &kinds)
        };
        let pinned = |plan: &Plan| {
            let p = plan;
            (
                p.recover_weight,
                p.gap_acks,
                p.gap_max,
                p.max_faulted,
                p.sequence_weight,
            )
        };
        let before = (2, (26, 41), Duration::from_millis(1173), 2, 5);
        let reference = derive(&System::reference());
        assert_eq!(pinned(&reference), before);
        let weights: Vec<(Kind, u64)> = reference.weights.into_iter().collect();
        assert_eq!(
            weights,
            [
                (Pause, 5),
                (Crash, 4),
                (Stop, 1),
                (PowerLoss, 3),
                (TruncateLog, 1),
                (Isolate, 2),
                (MajorityMinority, 5),
                (OneWay, 1),
                (Bridge, 2),
                (NodeFromEtcd, 1)
            ]
        );
        let tansu = derive(&System::named("tansu").unwrap());
        assert_eq!(pinned(&tansu), before);
        let tansu_weights: Vec<(Kind, u64)> = tansu.weights.into_iter().collect();
        let common = [(Pause, 5), (Crash, 4), (Stop, 1), (NodeFromClients, 5)];
        assert_eq!(tansu_weights, common);
        // nisshi's brokers dial only their database: the cuts between
        // brokers and from etcd are not in its mix.
        let nisshi = derive(&System::named("nisshi").unwrap());
        assert_eq!(pinned(&nisshi), before);
        let (database, rest): (Vec<_>, Vec<_>) = nisshi
            .weights
            .into_iter()
            .partition(|(k, _)| k.on_database());
        assert_eq!(rest, common);
        let database: Vec<Kind> = database.into_iter().map(|(k, _)| k).collect();
        assert_eq!(database, [NodeFromDatabase, PauseDatabase, CrashDatabase]);
    }

    #[test]
    fn a_campaign_on_a_system_picks_only_the_faults_it_can_take() {
        let reference = System::reference();
        let without_database: Vec<Kind> = Kind::ALL
            .iter()
            .copied()
            .filter(|k| !k.on_database())
            .collect();
        assert_eq!(
            kinds_for(&reference, &without_database, true).unwrap(),
            without_database
        );
        assert_eq!(
            kinds_for(&reference, &[Kind::PauseDatabase], true)
                .unwrap_err()
                .to_string(),
            "epochal cannot take pause-database: it has no database"
        );
        let tansu = System::named("tansu").unwrap();
        assert_eq!(
            kinds_for(&tansu, DEFAULT_KINDS, false).unwrap(),
            [Kind::Pause, Kind::Crash, Kind::Stop, Kind::NodeFromClients]
        );
        // The reference broker's default mix is the one measured so far.
        assert_eq!(
            kinds_for(&reference, DEFAULT_KINDS, false).unwrap(),
            Kind::ALL
                .iter()
                .copied()
                .filter(|&k| k != Kind::NodeFromClients && !k.is_requests() && !k.on_database())
                .collect::<Vec<_>>()
        );
        let named = kinds_for(&reference, &[Kind::HoldRequests, Kind::DropRequests], true);
        assert_eq!(named.unwrap(), [Kind::HoldRequests, Kind::DropRequests]);
        assert_eq!(
            kinds_for(&tansu, &[Kind::Pause, Kind::Isolate], true)
                .unwrap_err()
                .to_string(),
            "tansu cannot take isolate: its brokers have no links but their clients' \
             (node-from-clients cuts those)"
        );
        assert_eq!(
            kinds_for(&tansu, &[Kind::TruncateLog], false)
                .unwrap_err()
                .to_string(),
            "no fault kind applies to tansu"
        );
    }

    #[test]
    fn the_starting_schedule_parses_back() {
        let options = CampaignOptions::new(1, StopAfter::Faults(3));
        let schedule = schedule(&options);
        let text = schedule.to_toml();
        assert_eq!(Schedule::parse("campaign.toml", &text).unwrap(), schedule);
        // The campaign's coverage minimums are in it, none per fault.
        let w = &schedule.workload;
        assert_eq!(
            (
                w.min_faults,
                w.min_ops_per_fault,
                w.min_acked_during_faults,
                w.min_leader_changes
            ),
            (Some(1), None, Some(5), Some(1))
        );
        assert!(text.contains("min_acked_during_faults = 5"), "{text}");
    }
}
