//! `epochal fault`: one fault, from another terminal, to the cluster a live
//! `epochal up` session runs (cli/up.rs), through the control socket in its
//! run directory (session/control.rs).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::exit::{EXIT_HARNESS_ERROR, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID};
use crate::fault::Verb;
use crate::session::control::{Answer, Request, ask, find_session};

#[derive(Debug, Args)]
#[command(after_help = "\
Examples (targets resolve when the fault fires, as in a schedule):

  epochal fault store pause leader of t-0        -> fault 1: pause leader of t-0 -> b2
  epochal fault store resume b2                  -> fault 2: resume b2 -> b2
  epochal fault store crash controller
  epochal fault store restart b2
  epochal fault store isolate b3
  epochal fault store one-way '{ from = \"b2\", to = \"b1\" }'
  epochal fault store pause coordinator of group orders
  epochal fault store pause coordinator of transactional id orders-tx-1
  epochal fault store heal

Each fault that fires is numbered: the session's count, which the closing \
summary, the history and schedule.toml share. A group's coordinator is the \
leader of its partition of __consumer_offsets, a transactional id's of its \
partition of __transaction_state (Kafka's partitionFor: abs(Java hashCode) % \
partitions); those topics exist once a client first asked for a coordinator.

Exit codes: 0 fired; 2 the cluster's state refused it now (its target \
resolves to no node, the node is not running, the internal topic does not \
exist yet), recorded in the history and not counted as a fault; 3 \
not a fault of this cluster (an unknown verb, node or topic); 4 no live \
session, no answer in time, or the harness could not fire it (the session \
then ends as a run does on a harness error).")]
pub struct FaultArgs {
    /// The run directory of a live `epochal up`, or a store with exactly one
    /// live session in it.
    pub store_or_run: PathBuf,
    // Its help names every verb, from the fault registry (src/fault/).
    #[arg(help = verb_help())]
    pub verb: String,
    /// The target as a schedule writes it, words joined by spaces: `b2`,
    /// `controller`, `leader of t-0`, `a follower of t-0`, `random
    /// minority`, `b1,b3`, `coordinator of group G`, `coordinator of
    /// transactional id T`; or an inline TOML table (one-way, truncate-log, a
    /// named cut, the request faults' `{ from, to, api }`). `heal` alone
    /// takes none.
    pub target: Vec<String>,
    /// How long to wait for the session's answer (a restart waits for the
    /// broker to serve).
    #[arg(long, default_value_t = 120)]
    pub answer_timeout_s: u64,
}

/// The verb's help: a schedule's fault verbs, every one.
fn verb_help() -> String {
    let names: Vec<&str> = Verb::ALL.iter().map(|v| v.name()).collect();
    format!(
        "A schedule's fault verb: {} (docs/schedules.md, Faults)",
        names.join(", ")
    )
}

/// `epochal fault`: prints the fault's number and what it resolved to, or
/// why it did not fire; the exit code as `after_help` says.
pub fn fault(args: &FaultArgs, out: &mut impl Write) -> u8 {
    let request = match Request::from_words(&args.verb, &args.target) {
        Ok(request) => request,
        Err(e) => {
            eprintln!("epochal: fault: {e}");
            return EXIT_USAGE;
        }
    };
    let run = match find_session(&args.store_or_run) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("epochal: fault: {e}");
            return EXIT_HARNESS_ERROR;
        }
    };
    let timeout = Duration::from_secs(args.answer_timeout_s);
    match ask(&run, &request, timeout) {
        Ok(answer @ Answer::Fired { .. }) => {
            let _ = writeln!(out, "{answer}");
            EXIT_VALID
        }
        Ok(answer) => {
            eprintln!("epochal: fault: {answer}");
            match answer {
                Answer::Refused { .. } => EXIT_UNKNOWN,
                Answer::Invalid { .. } => EXIT_USAGE,
                Answer::Fired { .. } | Answer::Failed { .. } => EXIT_HARNESS_ERROR,
            }
        }
        Err(e) => {
            eprintln!("epochal: fault: {e}");
            EXIT_HARNESS_ERROR
        }
    }
}
