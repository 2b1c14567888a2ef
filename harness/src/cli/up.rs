//! `epochal up`: a cluster that stays up for a person's own application, and
//! takes faults from `epochal fault` (cli/fault.rs) until Ctrl-C; then it is
//! healed, read and checked like any run (session/ plays it).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::drive::finish_run;
use super::exit::EXIT_USAGE;
use super::run_settings::RunSettings;
use crate::schedule::{Cluster, Schedule, Topic, Workload};
use crate::session::{Ready, Session};

#[derive(Debug, Args)]
#[command(after_help = "\
Prints the bootstrap servers an application must use (each broker's client \
proxy, so `node-from-clients` cuts the application off too) and the run \
directory, then waits. From another terminal:

  epochal fault STORE_OR_RUN pause leader of t-0    -> pause leader of t-0 -> b2
  epochal fault STORE_OR_RUN resume b2              (by name: the leader may have moved)

Ctrl-C (SIGINT) or SIGTERM ends the session as a run ends: every fault healed, \
the cluster quiesced, every replica read from disk, the checkers run, \
results.json and report.html written. The exit code is the verdict's (0 valid, \
1 invalid, 2 unknown); 3 a bad schedule or flag, 4 a harness error (a node \
that will not start). A second Ctrl-C during the check kills everything at \
once and exits 130 (143 for SIGTERM), as a Ctrl-C before the cluster is up \
does. docs/up.md has more.")]
pub struct UpArgs {
    /// A schedule whose `[cluster]` and `[workload]` to start (its steps are
    /// not played: faults come from `epochal fault`). Without one, the
    /// cluster is made from --brokers and --topic.
    pub schedule: Option<PathBuf>,
    /// Without a schedule: how many brokers.
    #[arg(long, default_value_t = 3, conflicts_with = "schedule")]
    pub brokers: u32,
    /// Without a schedule: a topic to create, `NAME[:PARTITIONS[:REPLICATION_FACTOR]]`
    /// (repeatable; partitions default to 1, the replication factor to the
    /// brokers, at most 3; without any --topic, topic `t` so).
    #[arg(long = "topic", value_name = "TOPIC", conflicts_with = "schedule")]
    pub topics: Vec<String>,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// Why the flags make no cluster.
#[derive(Debug, thiserror::Error)]
pub enum UpFlagError {
    #[error("--topic {0}: expected NAME[:PARTITIONS[:REPLICATION_FACTOR]]")]
    BadTopic(String),
    #[error(transparent)]
    Schedule(#[from] crate::schedule::ScheduleError),
}

impl UpArgs {
    /// The schedule to start: the file's, or one made of the flags and
    /// checked as a file would be. Its steps are dropped.
    fn schedule(&self) -> Result<(Schedule, String), UpFlagError> {
        if let Some(file) = &self.schedule {
            let schedule = Schedule::load(file)?;
            let name = file
                .file_stem()
                .map_or("up".into(), |s| s.to_string_lossy().into_owned());
            return Ok((schedule, name));
        }
        let default = ["t".to_owned()];
        let specs = if self.topics.is_empty() {
            &default[..]
        } else {
            &self.topics[..]
        };
        let replication_factor = self.brokers.min(3);
        let topics = specs
            .iter()
            .map(|spec| {
                topic(spec, replication_factor).ok_or_else(|| UpFlagError::BadTopic(spec.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let schedule = Schedule {
            cluster: Cluster {
                brokers: self.brokers,
                topics,
                settings: Default::default(),
                node: Default::default(),
            },
            workload: Workload::default(),
            steps: Vec::new(),
        };
        // Checked as a file is: a replication factor above the brokers, a
        // topic twice, a name Kafka refuses.
        let schedule = Schedule::parse("--brokers/--topic", &schedule.to_toml())?;
        Ok((schedule, "up".into()))
    }
}

/// `NAME[:PARTITIONS[:REPLICATION_FACTOR]]`, the factor `replication_factor`
/// when not given.
fn topic(spec: &str, replication_factor: u32) -> Option<Topic> {
    let mut parts = spec.split(':');
    let name = parts.next().filter(|n| !n.is_empty())?.to_owned();
    let partitions = parts.next().map_or(Some(1), |p| p.parse().ok())?;
    let replication_factor = parts
        .next()
        .map_or(Some(replication_factor), |r| r.parse().ok())?;
    parts.next().is_none().then_some(Topic {
        name,
        partitions,
        replication_factor,
    })
}

/// `epochal up`: the exit code follows the table in cli/mod.rs (the
/// verdict's, once Ctrl-C ended the session).
pub fn up(args: &UpArgs) -> u8 {
    let (mut schedule, name) = match args.schedule() {
        Ok(made) => made,
        Err(e) => {
            eprintln!("epochal: {e}");
            return EXIT_USAGE;
        }
    };
    let source = args
        .schedule
        .as_ref()
        .map_or("--brokers/--topic".to_owned(), |f| f.display().to_string());
    if !schedule.steps.is_empty() {
        eprintln!(
            "epochal: up plays none of {source}'s {} steps: faults come from `epochal fault`",
            schedule.steps.len()
        );
        schedule.steps.clear();
    }
    let mut options = args.settings.options(std::path::Path::new(&source));
    options.name = Some(name.clone());
    let runtime = args.settings.runtime;
    let brokers = schedule.cluster.brokers;
    let session = Session::new(move |ready: &Ready| announce(ready, brokers, runtime));
    let run = async move {
        crate::run::apply_sets(&mut schedule, &options.sets)?;
        crate::run::execute(&options, schedule, &name, &source, session).await
    };
    finish_run(run, &mut std::io::stdout()).0
}

/// The lines a person (or a test) reads to point an application at the
/// cluster, flushed at once.
fn announce(ready: &Ready, brokers: u32, runtime: crate::runtime::RuntimeKind) {
    use clap::ValueEnum;
    let runtime = runtime
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_owned());
    let mut out = std::io::stdout();
    let run = ready.run_dir.display();
    let _ = writeln!(
        out,
        "epochal up: {brokers} brokers on the {runtime} runtime\n\
         bootstrap servers: {}\n\
         run directory: {run}\n\
         faults: epochal fault {run} VERB TARGET   (e.g. pause leader of t-0)\n\
         Ctrl-C ends the session: every fault healed, the run checked",
        ready.bootstrap
    );
    let _ = out.flush();
}
