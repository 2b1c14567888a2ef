//! The `epochal` command line: the binary's edge, the top layer of the
//! harness. One file per subcommand, its arguments and its body (`campaign`
//! and `shrink` included); the exit codes (exit.rs); what several share: the
//! run flags (run_settings.rs) and driving async work to an exit code
//! (drive.rs). Nothing below cli/ imports it.
//!
//! Exit codes, one table for the whole binary. 1 and 2 follow Jepsen (invalid,
//! unknown) so scripts written for it read ours the same way; clap's own exit
//! code for a usage error (2) is therefore remapped to 3.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | valid; for `inspect`: the directory was read (findings, if any, are printed, not an error); for `serve`: stopped by SIGINT (Ctrl-C) or SIGTERM, its usual end; for `fault`: the fault fired |
//! | 1 | invalid: a checker found an anomaly |
//! | 2 | unknown: the run could not decide (an await timed out, a checker could not run); for `fault`: the cluster's state refused the fault now (its target resolves to no node) |
//! | 3 | usage error: bad arguments or a malformed schedule |
//! | 4 | harness error: e.g. a data directory that does not exist, a node that will not start; for `fault`: no live `up` session, or no answer in time |
//! | 130 | interrupted by SIGINT (143: SIGTERM); every child is killed and reaped first (not `serve`: it has no children and a signal is how it stops, so 0; not `up` once its cluster is up: the first SIGINT or SIGTERM is how its session ends, and the run is then healed and checked, so the verdict's code; a second one during that kills as here) |

mod anomalies;
mod campaign;
mod check;
mod drive;
mod exit;
mod fault;
mod gate;
mod gc;
mod inspect;
mod merge;
mod power;
mod replay;
mod run;
mod run_settings;
mod serve;
mod shrink;
mod up;

use clap::{Parser, Subcommand};

pub use anomalies::anomalies;
pub use campaign::{CampaignArgs, campaign};
pub use check::{CheckArgs, check};
pub use exit::{EXIT_HARNESS_ERROR, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID, exit_code};
pub use fault::{FaultArgs, fault};
pub use gate::{GateArgs, gate};
pub use gc::{GcArgs, gc};
pub use inspect::{InspectArgs, InspectError, inspect};
pub use merge::{MergeArgs, merge};
pub use power::{PowerArgs, power};
pub use replay::{ReplayArgs, replay};
pub use run::{RunArgs, run};
pub use run_settings::RunSettings;
pub use serve::{ServeArgs, serve};
pub use shrink::{ShrinkArgs, shrink};
pub use up::{UpArgs, up};

#[derive(Debug, Parser)]
#[command(
    name = "epochal",
    version,
    about = "Fault-injection conformance harness for Kafka-style replicated logs"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a broker data directory's replica state, like Kafka's DumpLogSegments.
    Inspect(InspectArgs),
    /// Run a schedule against a real cluster, keep everything in the store, check it.
    Run(RunArgs),
    /// Re-check a stored run offline (no cluster): the same verdict `run` gave.
    Check(CheckArgs),
    /// Start a cluster for your own application and keep it up, taking faults from `epochal fault`, until Ctrl-C; then check it like a run.
    Up(UpArgs),
    /// Fire one fault (pause, crash, isolate, ...: a schedule's verbs) at the cluster of a live `epochal up`.
    Fault(FaultArgs),
    /// Run again the schedule a stored run applied (its `schedule.toml`), or a schedule file.
    Replay(ReplayArgs),
    /// Run every scenario of the suites under every setting; pass only if each meets its expectation.
    Gate(GateArgs),
    /// A seeded randomized run: faults picked by the seed under background load, then every checker.
    Campaign(CampaignArgs),
    /// Cut a failing run's faults down (ddmin) to a schedule that still fails the same way: `shrunk.toml`.
    Shrink(ShrinkArgs),
    /// The power table: N seeds of campaigns on each era setting (known bugs) and on the fixed settings; detection rates, time to detect, false alarms.
    Power(PowerArgs),
    /// Remove what killed harnesses left: process groups, Docker containers and networks, and stale epochal images.
    Gc(GcArgs),
    /// Merge the JUnit reports of a sharded gate (`--shard I/N` on N runners) into one.
    Merge(MergeArgs),
    /// Serve the store read-only on 127.0.0.1: its index of runs, each run's report and files.
    Serve(ServeArgs),
    /// Print every anomaly kind a checker can name: its checker, whether it makes a run invalid, what it means.
    Anomalies,
}
