//! `epochal campaign`'s command line: one seed, or a range of seeds run one
//! after another (`--seeds 1..20`), optionally only one shard's slice of them
//! (`--shard 2/4`, for a CI matrix), each printed as its plan, its run's
//! summary and, unless valid, the command that replays it; a table of every
//! seed's verdict at the end.

use crate::checker::Anomaly;
use std::io::Write;
use std::time::Duration;

use clap::Args;

use super::{CampaignOptions, Kind, KindError, Plan, StopAfter};
use crate::cli::{
    EXIT_HARNESS_ERROR, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID, RunSettings,
    RuntimeKind, finish_run,
};
use crate::gate::Shard;
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
    #[arg(long, default_value_t = 3)]
    pub brokers: u32,
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
    /// After the final heal, every partition must take a write within this.
    #[arg(long, default_value_t = 30_000)]
    pub liveness_ms: u64,
    /// Fault kinds the seed may pick from, comma-separated (default: all but
    /// truncate-log).
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    pub kinds: Vec<Kind>,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// A duration that is not a number with `ms`, `s`, `m` or no unit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a duration like 120s, 2m or 1500ms")]
pub struct DurationError {
    /// As given, trimmed.
    pub text: String,
}

/// `120s`, `2m`, `1500ms`, or bare seconds.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    let bad = || DurationError { text: s.to_owned() };
    let (number, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| (&s[..i], &s[i..]));
    let n: u64 = number.parse().map_err(|_| bad())?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(bad()),
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
    if args.brokers == 0 || args.partitions == 0 || args.producers == 0 {
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
    let mut outcomes = Vec::new();
    for seed in seeds {
        let outcome = one_seed(args, seed, out);
        if outcome.code == EXIT_USAGE {
            return EXIT_USAGE;
        }
        outcomes.push(outcome);
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

fn one_seed(args: &CampaignArgs, seed: u64, out: &mut impl Write) -> Outcome {
    let stop = match (args.duration, args.faults) {
        (Some(d), _) => StopAfter::Duration(d),
        (None, Some(n)) => StopAfter::Faults(n),
        (None, None) => StopAfter::Duration(Duration::from_secs(60)),
    };
    let mut options = CampaignOptions::new(seed, stop);
    options.brokers = args.brokers;
    options.partitions = args.partitions;
    options.producers = args.producers;
    options.consumers = args.consumers;
    options.interval_ms = args.interval_ms;
    options.acks = args.acks;
    options.liveness_ms = args.liveness_ms;
    if !args.kinds.is_empty() {
        options.kinds = args.kinds.clone();
    }
    let failed = |code| Outcome {
        seed,
        code,
        anomalies: Vec::new(),
        dir: None,
    };
    let mut schedule = super::schedule(&options);
    if let Err(e) = crate::run::apply_sets(&mut schedule, &args.settings.sets) {
        eprintln!("epochal: {e}");
        return failed(EXIT_USAGE);
    }
    let plan = Plan::derive(seed, stop, args.brokers, &options.kinds);
    let _ = write!(out, "{}", super::describe(&plan, &schedule));
    let _ = out.flush();
    let name = format!("seed-{seed}");
    let mut run_options = args.settings.options(std::path::Path::new(&name));
    run_options.group = Some(vec!["campaign".into(), name.clone()]);
    // The settings are in the schedule already.
    run_options.sets.clear();
    let source = format!("campaign seed {seed}");
    let run = crate::run::execute(
        &run_options,
        schedule,
        &name,
        &source,
        crate::run::Driver::Campaign(plan),
    );
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

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    /// A failing run directory (a campaign's: its `schedule.toml` holds the
    /// faults it fired).
    pub run_dir: std::path::PathBuf,
    /// The anomaly kind a candidate must reproduce; default the first the
    /// run's results name.
    #[arg(long)]
    pub anomaly: Option<Anomaly>,
    /// Runs of each candidate before it counts as passing.
    #[arg(long, default_value_t = 3)]
    pub tries: u32,
    /// Runs of the final schedule, to say how often it reproduces.
    #[arg(long, default_value_t = 5)]
    pub confirm: u32,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// `epochal shrink`: ddmin over a failing run's faults (shrink.rs), then over
/// its load; writes `shrunk.toml` into the run directory. Exit 0 when a
/// schedule was written, 3 when the run is not a failing campaign run, 4 on a
/// harness error.
pub fn shrink(args: &ShrinkArgs, out: &mut impl Write) -> u8 {
    use super::shrink::{candidate, ddmin, header, units};
    use crate::checker::Verdict;
    let dir = crate::run_dir::RunDir::open(&args.run_dir);
    let mut schedule = match crate::schedule::Schedule::load(dir.schedule()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("epochal: {e}");
            return EXIT_USAGE;
        }
    };
    if let Err(e) = crate::run::apply_sets(&mut schedule, &args.settings.sets) {
        eprintln!("epochal: {e}");
        return EXIT_USAGE;
    }
    let anomaly = match args.anomaly.or_else(|| first_anomaly(&dir)) {
        Some(a) => a,
        None => {
            eprintln!(
                "epochal: {} is not invalid (no anomaly in its results.json): nothing to shrink",
                args.run_dir.display()
            );
            return EXIT_USAGE;
        }
    };
    let units = match units(&schedule) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("epochal: {}: {e}", dir.schedule().display());
            return EXIT_USAGE;
        }
    };
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        eprintln!("epochal: starting the async runtime");
        return EXIT_HARNESS_ERROR;
    };
    let name = format!(
        "{}-shrink",
        args.run_dir
            .canonicalize()
            .ok()
            .and_then(|d| d
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "run".into())
    );
    let mut options = args.settings.options(std::path::Path::new(&name));
    options.group = Some(vec!["shrink".into(), name.clone()]);
    options.echo = false;
    let faults = |s: &crate::schedule::Schedule| s.steps.iter().flat_map(|st| st.faults()).count();
    let _ = writeln!(
        out,
        "shrinking {} ({} faults in {} units) for `{anomaly}`, {} tries a candidate",
        args.run_dir.display(),
        faults(&schedule),
        units.len(),
        args.tries
    );
    let mut runs = 0u32;
    let mut harness_error = None;
    // One run of a candidate: whether it showed the anomaly.
    // A candidate that cannot run (a missing binary, a port in use) tells
    // nothing: after the first, no more are run and the shrink fails, rather
    // than counting them as passes and "keeping" every fault.
    let mut reproduces = |candidate: &crate::schedule::Schedule, runs: &mut u32| -> bool {
        if harness_error.is_some() {
            return false;
        }
        *runs += 1;
        let run = crate::run::execute(
            &options,
            candidate.clone(),
            &name,
            "a shrink candidate",
            crate::run::Driver::Steps,
        );
        match runtime.block_on(run) {
            Ok(report) => {
                report.report.verdict == Verdict::Invalid
                    && report
                        .report
                        .results
                        .iter()
                        .flat_map(|r| &r.evidence)
                        .any(|e| e.anomaly == anomaly)
            }
            Err(e) => {
                harness_error.get_or_insert(e.to_string());
                false
            }
        }
    };
    let mut fails = |candidate: &crate::schedule::Schedule, what: &str, out: &mut dyn Write| {
        for attempt in 1..=args.tries {
            if reproduces(candidate, &mut runs) {
                let _ = writeln!(out, "  {what}: fails (try {attempt})");
                return true;
            }
        }
        let _ = writeln!(out, "  {what}: passes {} times", args.tries);
        false
    };
    let all: Vec<usize> = (0..units.len()).collect();
    // ddmin takes the whole as failing: check it does here, now.
    let whole = candidate(&schedule, &units, &all);
    if !fails(&whole, &format!("all {} units", units.len()), out) {
        if let Some(e) = harness_error {
            eprintln!("epochal: shrink: a candidate run failed to run: {e}");
            return EXIT_HARNESS_ERROR;
        }
        let _ = writeln!(
            out,
            "the run's schedule did not show `{anomaly}` in {} tries: nothing to shrink \
             (try more --tries)",
            args.tries
        );
        return EXIT_UNKNOWN;
    }
    let kept = ddmin(all, |kept| {
        let c = candidate(&schedule, &units, kept);
        fails(
            &c,
            &format!("{} of {} units {kept:?}", kept.len(), units.len()),
            out,
        )
    });
    let mut shrunk = candidate(&schedule, &units, &kept);
    // Then the load: fewer consumers, producers, partitions, while it fails.
    for (what, lighten) in LIGHTER_LOADS {
        if let Some(lighter) = lighten(&shrunk)
            && fails(&lighter, what, out)
        {
            shrunk = lighter;
        }
    }
    let mut confirmed = 0;
    for _ in 0..args.confirm {
        if reproduces(&shrunk, &mut runs) {
            confirmed += 1;
        }
    }
    if let Some(e) = harness_error {
        eprintln!("epochal: shrink: a candidate run failed to run, so the shrink stopped: {e}");
        return EXIT_HARNESS_ERROR;
    }
    let text = header(
        &args.run_dir,
        anomaly.name(),
        &args.settings.sets,
        faults(&schedule),
        faults(&shrunk),
        (confirmed, args.confirm),
        runs,
    ) + &shrunk.to_toml();
    let path = args.run_dir.join("shrunk.toml");
    if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("epochal: {}: {e}", path.display());
        return EXIT_HARNESS_ERROR;
    }
    let _ = writeln!(
        out,
        "shrunk to {} faults; reproduced {confirmed}/{} times; written to {}",
        faults(&shrunk),
        args.confirm,
        path.display()
    );
    EXIT_VALID
}

/// The first anomaly an invalid run's results name.
fn first_anomaly(dir: &crate::run_dir::RunDir) -> Option<Anomaly> {
    let text = std::fs::read_to_string(dir.results()).ok()?;
    let report: crate::checker::Report = serde_json::from_str(&text).ok()?;
    if report.verdict != crate::checker::Verdict::Invalid {
        return None;
    }
    report
        .results
        .iter()
        .filter(|r| r.verdict == crate::checker::Verdict::Invalid)
        .flat_map(|r| &r.evidence)
        .map(|e| e.anomaly)
        .next()
}

/// Lighter loads to try, in order, each applied to the schedule as shrunk so
/// far (so what one step kept, the next keeps too): no background consumers,
/// one background producer, one partition per topic (only when no step names
/// a partition above 0). `None` where the step has nothing to lighten.
type Lighten = fn(&crate::schedule::Schedule) -> Option<crate::schedule::Schedule>;

const LIGHTER_LOADS: [(&str, Lighten); 3] = [
    ("no background consumers", |schedule| {
        let mut s = schedule.clone();
        let b = s.workload.background.as_mut()?;
        (b.consumers > 0).then(|| b.consumers = 0)?;
        Some(s)
    }),
    ("one background producer", |schedule| {
        let mut s = schedule.clone();
        let b = s.workload.background.as_mut()?;
        (b.producers > 1).then(|| b.producers = 1)?;
        Some(s)
    }),
    ("one partition per topic", |schedule| {
        let text = schedule.to_toml();
        let names_partition = |p: u32| {
            schedule
                .cluster
                .topics
                .iter()
                .any(|t| text.contains(&format!("\"{}-{p}", t.name)))
        };
        if !schedule.cluster.topics.iter().any(|t| t.partitions > 1) || (1..64).any(names_partition)
        {
            return None;
        }
        let mut s = schedule.clone();
        for t in &mut s.cluster.topics {
            t.partitions = 1;
        }
        Some(s)
    }),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// clap prints these after `error: invalid value ... for '--flag'`.
    #[test]
    fn a_bad_flag_value_says_what_was_expected() {
        assert_eq!(parse_duration(" 90s ").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_duration(" 5h ").unwrap_err().to_string(),
            r#""5h" is not a duration like 120s, 2m or 1500ms"#
        );
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
