//! `epochal up`: a cluster that stays up for a person's own application, and
//! takes faults from `epochal fault` (cli/fault.rs) until Ctrl-C; then it is
//! healed, read and checked like any run (session/ plays it).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::drive::finish_run_with;
use super::exit::EXIT_USAGE;
use super::run_settings::RunSettings;
use crate::node::NodeId;
use crate::schedule::{Cluster, Schedule, Topic, Workload};
use crate::session::summary::write_closing;
use crate::session::{Ready, Session, tally_of};
use crate::system::{SettingsMode, System};

/// The brokers' etcd lease `up` gives them unless told otherwise: the
/// reference broker's own default (`lease_ttl_s`, 6 s:
/// broker/src/config/settings.rs; tests/cluster_up.rs holds the two equal,
/// and the help's 6 s too). `epochal run` and the suites use 2 s to fail
/// over faster.
pub const UP_LEASE_TTL_S: u32 = 6;

#[derive(Debug, Args)]
#[command(after_help = "\
Prints the bootstrap servers an application must use (each broker's client \
proxy, so `node-from-clients` cuts the application off too), the run \
directory and the brokers' lease, then waits. The lease is the broker's \
default, 6 s, unless --lease (or the schedule's lease_ttl_s) says otherwise: \
a paused, crashed or cut-off broker stays registered, and keeps leading, until \
it lapses. From another terminal:

  epochal fault STORE_OR_RUN pause leader of t-0    -> fault 1: pause leader of t-0 -> b2
  epochal fault STORE_OR_RUN resume b2              (by name: the leader may have moved)

Ctrl-C (SIGINT) or SIGTERM ends the session as a run ends: every fault healed, \
the cluster quiesced, every replica read from disk, the checkers run, \
results.json and report.html written. The exit code is the verdict's (0 valid, \
1 invalid, 2 unknown); 3 a bad schedule or flag, 4 a harness error (a node \
that will not start). A second Ctrl-C during the check kills everything at \
once and exits 130 (143 for SIGTERM), as a Ctrl-C before the cluster is up \
does. The closing summary counts the faults fired (refused ones and the final \
heal's apart), shows the first 10 items of each list and 32 characters of a \
value; results.json keeps everything. Your application's requests and \
responses, recorded by the client proxies, are merged into the history at \
Ctrl-C: its Produce requests as sends, its Fetch requests as polls, judged by \
the checkers and counted in the summary and the coverage.

The broker's settings (--set KEY=VALUE) are listed, with their defaults, by \
`epochal-broker --list-settings` and in broker/README.md. Those a client's own \
test suite meets first: auto_create_topics_enable (true), num_partitions (1) \
and default_replication_factor (1) for the topics a client creates by naming \
them or with CreateTopics' -1 (set default_replication_factor=3 for topics \
that outlive a broker's loss); offsets_topic_replication_factor (3) and \
transaction_state_replication_factor (3): no group or transaction until that \
many brokers are live; group_initial_rebalance_delay_ms (3000: a new group's \
first join waits that long); min_insync_replicas (1); and the lease above. \
docs/up.md has more.")]
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
    /// The brokers' etcd lease in whole seconds (the `lease_ttl_s` setting):
    /// how long a paused, crashed or cut-off broker stays registered, and
    /// keeps its leaderships, before the controller moves them. Default: the
    /// schedule's lease_ttl_s, else the broker's default, 6.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(1..))]
    pub lease: Option<u32>,
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
    let lease = crate::run::apply_sets(&mut schedule, &options.sets)
        .map_err(LeaseError::from)
        .and_then(|()| set_lease(&mut schedule, args.lease, &options.system));
    let lease = match lease {
        Ok(lease) => lease,
        Err(e) => {
            eprintln!("epochal: {e}");
            return EXIT_USAGE;
        }
    };
    // Applied above, into the schedule the run keeps in schedule.toml.
    options.sets.clear();
    let runtime = args.settings.runtime;
    let brokers = schedule.cluster.brokers;
    let system = options.system.name.clone();
    let session = Session::new(move |ready: &Ready| {
        announce(
            ready,
            brokers,
            runtime,
            &lease_line(lease.as_ref(), &system),
        );
    });
    let tally = session.tally();
    let app = session.app_tally();
    let run = async move { crate::run::execute(&options, schedule, &name, &source, session).await };
    let closing = |report: &crate::run::RunReport, out: &mut std::io::Stdout| {
        let app = app
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        write_closing(report, tally_of(&tally), &app, out)
    };
    finish_run_with(run, &mut std::io::stdout(), closing).0
}

/// Each node's lease in seconds.
type Leases = Vec<(NodeId, u32)>;

/// Why the brokers get no lease: a `--set` that does not apply, or a
/// `--lease` for a system that takes no broker settings.
#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error(transparent)]
    Set(#[from] crate::run::RunError),
    #[error("--lease: the {system} system takes no broker settings, so no lease of epochal's")]
    NoSettings { system: String },
}

/// Gives the brokers their lease: `flag`, else the schedule's `lease_ttl_s`
/// (a `--set` included), else [`UP_LEASE_TTL_S`]; written into the schedule,
/// so `schedule.toml` and `epochal replay` keep it. Each node's lease, or
/// `None` for a system that takes no broker settings (and no --lease).
fn set_lease(
    schedule: &mut Schedule,
    flag: Option<u32>,
    system: &System,
) -> Result<Option<Leases>, LeaseError> {
    const KEY: &str = "lease_ttl_s";
    if system.node.settings == SettingsMode::None {
        return match flag {
            Some(_) => Err(LeaseError::NoSettings {
                system: system.name.clone(),
            }),
            None => Ok(None),
        };
    }
    let cluster = &mut schedule.cluster;
    if let Some(seconds) = flag {
        cluster
            .settings
            .insert(KEY.into(), i64::from(seconds).into());
        for node in cluster.node.values_mut() {
            node.settings.remove(KEY);
        }
    }
    cluster
        .settings
        .entry(KEY.to_owned())
        .or_insert_with(|| i64::from(UP_LEASE_TTL_S).into());
    let seconds = |settings: &std::collections::BTreeMap<String, toml::Value>| {
        let value = settings.get(KEY)?.as_integer()?;
        u32::try_from(value).ok()
    };
    let default = seconds(&cluster.settings).unwrap_or(UP_LEASE_TTL_S);
    let leases = NodeId::all(cluster.brokers)
        .map(|id| {
            let own = cluster.node.get(&id.to_string());
            (
                id,
                own.and_then(|n| seconds(&n.settings)).unwrap_or(default),
            )
        })
        .collect();
    Ok(Some(leases))
}

/// `lease: 6 s (...)`: the lease every node has, and any node's own.
fn lease_line(leases: Option<&Leases>, system: &str) -> String {
    let Some(leases) = leases.filter(|l| !l.is_empty()) else {
        return format!("lease: none of epochal's (the {system} system takes no broker settings)");
    };
    let mut counts = std::collections::BTreeMap::<u32, usize>::new();
    for (_, seconds) in leases {
        *counts.entry(*seconds).or_default() += 1;
    }
    let most = counts
        .iter()
        .max_by_key(|(seconds, n)| (**n, std::cmp::Reverse(**seconds)))
        .map_or(UP_LEASE_TTL_S, |(seconds, _)| *seconds);
    let own: Vec<String> = leases
        .iter()
        .filter(|(_, s)| *s != most)
        .map(|(node, s)| format!("{node}: {s} s"))
        .collect();
    let own = if own.is_empty() {
        String::new()
    } else {
        format!(" ({})", own.join(", "))
    };
    let whose = if most == UP_LEASE_TTL_S {
        "the broker's default"
    } else {
        "not the broker's default, 6 s"
    };
    format!(
        "lease: {most} s{own}, {whose} (--lease): a paused, dead or cut-off broker leads \
         until it lapses"
    )
}

/// The lines a person (or a test) reads to point an application at the
/// cluster, flushed at once.
fn announce(ready: &Ready, brokers: u32, runtime: crate::runtime::RuntimeKind, lease: &str) {
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
         {lease}\n\
         faults: epochal fault {run} VERB TARGET   (e.g. pause leader of t-0)\n\
         Ctrl-C ends the session: every fault healed, the run checked",
        ready.bootstrap
    );
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(text: &str) -> Schedule {
        Schedule::parse("s.toml", text).unwrap()
    }

    const CLUSTER: &str = "[cluster]\nbrokers = 3\n";

    #[test]
    fn the_lease_is_the_brokers_default_unless_asked_and_is_stated() {
        let reference = System::reference();
        let mut plain = schedule(CLUSTER);
        let leases = set_lease(&mut plain, None, &reference).unwrap();
        assert_eq!(plain.cluster.settings["lease_ttl_s"].as_integer(), Some(6));
        let line = lease_line(leases.as_ref(), "epochal");
        assert!(
            line.starts_with("lease: 6 s, the broker's default (--lease)"),
            "{line}"
        );

        let mut flagged = schedule(CLUSTER);
        let leases = set_lease(&mut flagged, Some(2), &reference).unwrap();
        assert_eq!(
            flagged.cluster.settings["lease_ttl_s"].as_integer(),
            Some(2)
        );
        let line = lease_line(leases.as_ref(), "epochal");
        assert!(
            line.starts_with("lease: 2 s, not the broker's default, 6 s"),
            "{line}"
        );

        // The schedule's own lease stands, a node's too, unless --lease.
        let own = "[cluster]\nbrokers = 3\n[cluster.settings]\nlease_ttl_s = 4\n\
                   [cluster.node.b2.settings]\nlease_ttl_s = 3\n";
        let mut kept = schedule(own);
        let leases = set_lease(&mut kept, None, &reference).unwrap();
        let line = lease_line(leases.as_ref(), "epochal");
        assert!(
            line.starts_with("lease: 4 s (b2: 3 s), not the broker's"),
            "{line}"
        );
        let mut over = schedule(own);
        let leases = set_lease(&mut over, Some(5), &reference).unwrap();
        assert!(lease_line(leases.as_ref(), "epochal").starts_with("lease: 5 s, "));

        let tansu = System::named("tansu").unwrap();
        let e = set_lease(&mut schedule(CLUSTER), Some(2), &tansu)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tansu system takes no broker settings"), "{e}");
        let none = set_lease(&mut schedule(CLUSTER), None, &tansu).unwrap();
        assert!(lease_line(none.as_ref(), "tansu").starts_with("lease: none of epochal's"));
    }
}
