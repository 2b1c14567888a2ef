//! `epochal campaign`'s command line: one seed, or a range of seeds run one
//! after another (`--seeds 1..20`), optionally only one shard's slice of them
//! (`--shard 2/4`, for a CI matrix), each printed as its plan, its run's
//! summary and, unless valid, the command that replays it; a table of every
//! seed's verdict at the end.

use std::io::Write;
use std::time::Duration;

use clap::Args;

use super::drive::finish_run;
use super::exit::{EXIT_HARNESS_ERROR, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID};
use super::run_settings::RunSettings;
use crate::campaign::explore::pairs::{Coverage, SharedCoverage};
use crate::campaign::{CampaignOptions, Kind, KindError, Plan, StopAfter};
use crate::checker::Anomaly;
use crate::duration::parse_duration;
use crate::gate::Shard;
use crate::runtime::RuntimeKind;
use crate::schedule::Acks;

#[derive(Debug, Args)]
pub struct CampaignArgs {
    /// The seed every random choice comes from: the mix of faults and its
    /// weights, the gaps between faults, each fault and its target.
    #[arg(long, required_unless_present = "seeds", conflicts_with = "seeds")]
    pub seed: Option<u64>,
    /// A range of seeds, `1..20` (inclusive), run one after another.
    #[arg(long, value_parser = parse_seeds)]
    pub seeds: Option<(u64, u64)>,
    /// Run only the I-th of N slices of the seeds (`2/4`): seed k of the
    /// range belongs to slice k mod N + 1, as the gate's cases do.
    #[arg(long, default_value = "1/1")]
    pub shard: Shard,
    /// Stop picking faults after this long (`120s`, `2m`, `1500ms`); default 60s.
    #[arg(long, value_parser = parse_duration, conflicts_with = "faults")]
    pub duration: Option<Duration>,
    /// Stop picking faults after this many have fired.
    #[arg(long)]
    pub faults: Option<u32>,
    /// Default 3, or fewer when the system's file says it runs fewer
    /// (`max_brokers`).
    #[arg(long)]
    pub brokers: Option<u32>,
    /// Partitions of the campaign's topic `t`.
    #[arg(long, default_value_t = 3)]
    pub partitions: u32,
    #[arg(long, default_value_t = 4)]
    pub producers: u32,
    #[arg(long, default_value_t = 2)]
    pub consumers: u32,
    /// Pause between one background worker's requests.
    #[arg(long, default_value_t = 5)]
    pub interval_ms: u64,
    /// The producers' acks: all, 1 or 0.
    #[arg(long, default_value = "all", value_parser = parse_acks)]
    pub acks: Acks,
    /// The background consumers commit their positions as groups and read
    /// them back ([groups]; checker committed-offsets).
    #[arg(long)]
    pub commits: bool,
    /// Consumers subscribed as one group beside the others ([groups]):
    /// each commits after every poll that moved it, rejoins on every
    /// rebalance, and the run ends with a final read of every partition.
    #[arg(long, default_value_t = 0)]
    pub subscribers: u32,
    /// Each subscriber crashes (drops its connections without leaving the
    /// group, and starts over as a new member) once every this many of its
    /// turns; 0: never.
    #[arg(long, default_value_t = 0)]
    pub crash_every: u32,
    /// Transactional producers beside the others ([transactions]): each
    /// runs `txn` ops of sends and read_committed polls, most committed,
    /// some aborted.
    #[arg(long, default_value_t = 0)]
    pub transactional: u32,
    /// A client beside the others that creates a topic of its own, writes
    /// to it, reads it and deletes it, again and again under one name
    /// (workload/lives.rs; checker topic-lives, and the liveness window
    /// deletes and re-creates it once more after the final heal).
    #[arg(long)]
    pub lives: bool,
    /// The subscribers (`--subscribers`) run read-process-write
    /// transactions ([transactions], KIP-447): a read_committed poll, fresh
    /// values sent elsewhere and the position sent to the transaction, most
    /// committed, some aborted (`[workload] read_process_write`).
    #[arg(long, requires = "subscribers")]
    pub read_process_write: bool,
    /// Leave the targeted fault sequences by role out of the mix
    /// (campaign/sequence.rs: a bounce then the leader killed, a bounce at a
    /// takeover, failover to a bounced replica, an empty replica leading):
    /// one fault per pick, as campaigns ran before them.
    #[arg(long)]
    pub no_sequences: bool,
    /// Guide the nemesis toward state-fault pairs not reached yet
    /// (campaign/explore/): each pick draws a few candidates from the
    /// seed's mix and fires the one reaching the most new pairs.
    #[arg(long)]
    pub guided: bool,
    /// With `--guided`: between candidates reaching as many new pairs, fire
    /// the one whose pairs have led to the states seen least
    /// (campaign/explore/ahead.rs).
    #[arg(long, requires = "guided")]
    pub lookahead: bool,
    /// A coverage map: read first (its pairs count as reached), and written
    /// back with every seed's pairs added when the campaign ends. Each run
    /// also writes its own pairs to `coverage.json` in its directory.
    #[arg(long, value_name = "FILE")]
    pub coverage: Option<std::path::PathBuf>,
    /// Bound on one client request (`[workload] request_timeout_ms`,
    /// default 10000): shorter makes a held or delayed request time out,
    /// and its transaction abort, within one gap between faults.
    #[arg(long)]
    pub request_timeout_ms: Option<u64>,
    /// The transactional producers' transaction timeout (`[workload]
    /// transaction_timeout_ms`, default 10000).
    #[arg(long)]
    pub transaction_timeout_ms: Option<u64>,
    /// After the final heal, every partition must take a write within this.
    #[arg(long, default_value_t = 30_000)]
    pub liveness_ms: u64,
    /// Coverage minimums (docs/schedules.md, "Coverage minimums"): below
    /// one a campaign that would be valid is unknown, "vacuous: …". Each
    /// defaults to the campaign's (docs/coverage.md, "Campaign defaults"); 0 holds
    /// none.
    #[arg(long)]
    pub min_faults: Option<u64>,
    #[arg(long)]
    pub min_ops_per_fault: Option<u64>,
    #[arg(long)]
    pub min_acked_during_faults: Option<u64>,
    #[arg(long)]
    pub min_leader_changes: Option<u64>,
    /// Fault kinds the seed may pick from, comma-separated (default: all but
    /// truncate-log).
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    pub kinds: Vec<Kind>,
    #[command(flatten)]
    pub settings: RunSettings,
}

impl CampaignArgs {
    /// `--brokers`, else 3 or the system's `max_brokers` if fewer.
    pub fn brokers(&self) -> u32 {
        let most = self.settings.system.node.max_brokers.unwrap_or(u32::MAX);
        self.brokers.unwrap_or(3.min(most))
    }
}

/// A `--seeds` that is not `LOW..HIGH` with LOW <= HIGH.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a seed range like 1..20")]
pub struct SeedRangeError {
    pub text: String,
}

/// `1..20`, both ends included.
fn parse_seeds(s: &str) -> Result<(u64, u64), SeedRangeError> {
    let bad = || SeedRangeError { text: s.to_owned() };
    let (low, high) = s.split_once("..").ok_or_else(bad)?;
    let (low, high): (u64, u64) = (
        low.trim().parse().map_err(|_| bad())?,
        high.trim().parse().map_err(|_| bad())?,
    );
    if low > high {
        return Err(bad());
    }
    Ok((low, high))
}

/// An `--acks` that is none of the schedule's `acks` values.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{text:?} is not acks (all, 1, 0)")]
pub struct AcksError {
    pub text: String,
    #[source]
    pub source: toml::de::Error,
}

fn parse_acks(s: &str) -> Result<Acks, AcksError> {
    toml::Value::String(s.to_owned())
        .try_into()
        .map_err(|source| AcksError {
            text: s.to_owned(),
            source,
        })
}

fn parse_kind(s: &str) -> Result<Kind, KindError> {
    s.parse()
}

/// One seed's outcome, for the closing table.
struct Outcome {
    seed: u64,
    code: u8,
    anomalies: Vec<Anomaly>,
    dir: Option<std::path::PathBuf>,
}

/// `epochal campaign`. Exit codes as for `run`, merged over the seeds: a
/// harness error or usage error first, then invalid over unknown over valid.
pub fn campaign(args: &CampaignArgs, out: &mut impl Write) -> u8 {
    if args.brokers() == 0 || args.partitions == 0 || args.producers == 0 {
        eprintln!("epochal: a campaign needs at least one broker, partition and producer");
        return EXIT_USAGE;
    }
    let seeds: Vec<u64> = match (args.seed, args.seeds) {
        (Some(seed), _) => vec![seed],
        (None, Some((low, high))) => (low..=high).collect(),
        (None, None) => unreachable!("clap requires --seed or --seeds"),
    };
    let seeds: Vec<u64> = seeds
        .into_iter()
        .enumerate()
        .filter(|(k, _)| args.shard.holds(*k))
        .map(|(_, seed)| seed)
        .collect();
    let prior = match args.coverage.as_deref().map(Coverage::load).transpose() {
        Ok(map) => SharedCoverage::new(map.unwrap_or_default()),
        Err(e) => {
            eprintln!("epochal: {e}");
            return EXIT_USAGE;
        }
    };
    let mut outcomes = Vec::new();
    for seed in seeds {
        let outcome = one_seed(args, seed, &prior, out);
        if outcome.code == EXIT_USAGE {
            return EXIT_USAGE;
        }
        outcomes.push(outcome);
    }
    if let Some(path) = &args.coverage {
        let map = prior.snapshot();
        if let Err(e) = map.save(path) {
            eprintln!("epochal: {e}");
            return EXIT_HARNESS_ERROR;
        }
        let _ = writeln!(
            out,
            "coverage: {} state-fault pairs in {}",
            map.pairs.len(),
            path.display()
        );
    }
    if outcomes.len() > 1 {
        let _ = writeln!(out, "\ncampaign seeds:");
        for o in &outcomes {
            let verdict = match o.code {
                EXIT_VALID => "valid",
                EXIT_INVALID => "invalid",
                EXIT_UNKNOWN => "unknown",
                _ => "error",
            };
            let _ = writeln!(
                out,
                "  seed {:<6} {:<8} {:<40} {}",
                o.seed,
                verdict,
                o.anomalies
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(","),
                o.dir
                    .as_ref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            );
        }
    }
    let codes: Vec<u8> = outcomes.iter().map(|o| o.code).collect();
    [EXIT_HARNESS_ERROR, EXIT_INVALID, EXIT_UNKNOWN]
        .into_iter()
        .find(|c| codes.contains(c))
        .unwrap_or(EXIT_VALID)
}

fn one_seed(
    args: &CampaignArgs,
    seed: u64,
    prior: &SharedCoverage,
    out: &mut impl Write,
) -> Outcome {
    let stop = match (args.duration, args.faults) {
        (Some(d), _) => StopAfter::Duration(d),
        (None, Some(n)) => StopAfter::Faults(n),
        (None, None) => StopAfter::Duration(Duration::from_secs(60)),
    };
    let mut options = CampaignOptions::new(seed, stop);
    options.brokers = args.brokers();
    options.partitions = args.partitions;
    options.producers = args.producers;
    options.consumers = args.consumers;
    options.interval_ms = args.interval_ms;
    options.commits = args.commits;
    options.subscribers = args.subscribers;
    options.crash_every = args.crash_every;
    options.transactional = args.transactional;
    options.lives = args.lives;
    options.read_process_write = args.read_process_write;
    options.request_timeout_ms = args.request_timeout_ms;
    options.transaction_timeout_ms = args.transaction_timeout_ms;
    options.acks = args.acks;
    options.liveness_ms = args.liveness_ms;
    let m = &mut options.minimums;
    m.faults = args.min_faults.unwrap_or(m.faults);
    m.ops_per_fault = args.min_ops_per_fault.unwrap_or(m.ops_per_fault);
    m.acked_during_faults = args
        .min_acked_during_faults
        .unwrap_or(m.acked_during_faults);
    m.leader_changes = args.min_leader_changes.unwrap_or(m.leader_changes);
    if !args.kinds.is_empty() {
        options.kinds = args.kinds.clone();
    }
    let failed = |code| Outcome {
        seed,
        code,
        anomalies: Vec::new(),
        dir: None,
    };
    let system = &args.settings.system;
    options.kinds = match crate::campaign::kinds_for(system, &options.kinds, !args.kinds.is_empty())
    {
        Ok(kinds) => kinds,
        Err(why) => {
            eprintln!("epochal: {why}");
            return failed(EXIT_USAGE);
        }
    };
    let mut schedule = crate::campaign::schedule(&options);
    if system.is_reference() && options.subscribers > 0 {
        // No wait for more members before a new group's first round (Kafka's
        // own config/server.properties sets 0 "for development and testing"
        // over the 3 s default of KIP-134): under a fault a second, a group
        // whose coordinator moves every few seconds never finished a round
        // in 3 of 10 seeds with the default. `--set` overrides it.
        schedule.cluster.settings.insert(
            "group_initial_rebalance_delay_ms".into(),
            toml::Value::Integer(0),
        );
    }
    if let Err(e) = crate::run::apply_sets(&mut schedule, &args.settings.sets) {
        eprintln!("epochal: {e}");
        return failed(EXIT_USAGE);
    }
    let plan = Plan::derive(seed, stop, args.brokers(), &options.kinds);
    let plan = if args.no_sequences {
        plan.without_sequences()
    } else {
        plan
    };
    let plan = if args.guided {
        plan.guided(prior.clone(), args.lookahead)
    } else {
        plan.measured_against(prior.clone())
    };
    let _ = write!(out, "{}", crate::campaign::describe(&plan, &schedule));
    let _ = out.flush();
    let name = format!("seed-{seed}");
    let mut run_options = args.settings.options(std::path::Path::new(&name));
    run_options.group = Some(vec!["campaign".into(), name.clone()]);
    // The settings are in the schedule already.
    run_options.sets.clear();
    let source = format!("campaign seed {seed}");
    // The plan drives phase 3 (campaign/play.rs).
    let run = crate::run::execute(&run_options, schedule, &name, &source, plan);
    let (code, report) = finish_run(run, out);
    let Some(report) = report else {
        return failed(code);
    };
    if code != EXIT_VALID {
        let runtime = match args.settings.runtime {
            RuntimeKind::Process => "",
            RuntimeKind::Docker => " --runtime docker",
        };
        let _ = writeln!(
            out,
            "replay: epochal replay {}{runtime}",
            report.dir.path().display()
        );
    }
    let mut anomalies: Vec<Anomaly> = report
        .report
        .results
        .iter()
        .flat_map(|r| r.evidence.iter().map(|e| e.anomaly))
        .collect();
    anomalies.sort_by_key(|a| a.name());
    anomalies.dedup();
    Outcome {
        seed,
        code,
        anomalies,
        dir: Some(report.dir.path().to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap prints these after `error: invalid value ... for '--flag'`.
    #[test]
    fn a_bad_flag_value_says_what_was_expected() {
        assert_eq!(parse_seeds("3..7").unwrap(), (3, 7));
        assert_eq!(
            parse_seeds("7..3").unwrap_err(),
            SeedRangeError {
                text: "7..3".into()
            }
        );
        assert_eq!(
            parse_seeds("x").unwrap_err().to_string(),
            r#""x" is not a seed range like 1..20"#
        );
        let acks = parse_acks("2").unwrap_err();
        assert_eq!(acks.to_string(), r#""2" is not acks (all, 1, 0)"#);
        assert!(std::error::Error::source(&acks).is_some());
        assert_eq!(parse_kind("pause").unwrap(), Kind::Pause);
        let kind = parse_kind("paws").unwrap_err();
        assert_eq!(kind.name, "paws");
        assert!(
            kind.to_string()
                .starts_with(r#""paws" is not a fault kind (pause, crash, "#),
            "{kind}"
        );
    }
}
