//! Named failpoints (the `fail` crate) that let a scripted scenario stop the
//! broker at an exact point of the control or data path — an interleaving a
//! signal sent from outside cannot hit reliably. They are configured once, at
//! start, from the `EPOCHAL_FAILPOINTS` environment variable; an unset or empty
//! variable leaves every failpoint off, and a name this broker does not define is
//! a startup error, so a typo in a scenario cannot silently test nothing.
//!
//! Beside the `fail` crate's own actions this adds `stop`: the broker raises
//! SIGSTOP on itself, and the scenario resumes it with SIGCONT. Signals, crashes
//! and partitions stay the primary faults; these only pin timing.

use std::fmt;

/// The environment variable read at start: `name=actions[;name=actions…]`.
pub const ENV_VAR: &str = "EPOCHAL_FAILPOINTS";

/// A named point in the broker's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// The controller took an etcd watch event off its queue and has not
    /// handled it yet (every event).
    ControllerBeforeEvent,
    /// The same point, evaluated only for a broker registration that
    /// disappeared (a broker loss), so a scenario can stop the controller on
    /// exactly that event.
    ControllerBeforeBrokerLoss,
    /// The controller's partition-state write to etcd succeeded and the
    /// LeaderAndIsr carrying it has not been queued to the brokers.
    ControllerAfterWrite,
    /// A leader appended a producer's batches and has not answered the produce.
    LeaderAfterAppend,
    /// An acks=all produce is settled (the high watermark passed its batches,
    /// or it failed) and its answer has not been sent: with `stop`, the
    /// followers hold the batches and the producer never hears, so its retry
    /// goes to whichever broker leads next (the idempotent-producer scenario).
    LeaderBeforeAck,
    /// A broker is about to campaign for the controller key (at start, and each
    /// time the key is vacated). `return` makes it sit this one vacancy out:
    /// it waits until someone else holds the key, then campaigns as usual at
    /// the next vacancy — so a scenario can pin which broker succeeds a
    /// controller.
    ControllerBeforeCampaign,
    /// A follower is about to start truncating its log before it fetches.
    /// `return` makes it cut to its high watermark at once, whatever
    /// `--truncation` says: the KIP-101 fix removed on purpose, so a test can
    /// show that the conformance gate fails when a fix is lost.
    FollowerTruncateToHw,
    /// A follower's fetcher for a partition is starting (each LeaderAndIsr
    /// that makes this broker a follower starts one). `return` makes it stop
    /// at once, before it truncates or fetches anything, as a replica fetcher
    /// thread killed by an unexpected error did before KIP-461 (Kafka 2.3,
    /// KAFKA-8346): the replica stays as it is, out of the ISR, until a later
    /// LeaderAndIsr starts another fetcher.
    FollowerFetcherDies,
    /// The broker received SIGTERM or SIGINT and has not begun its clean
    /// shutdown. `return` makes it exit at once (status 0), with nothing
    /// closed, flushed or deregistered: a broker whose stop is over before
    /// whoever signalled it looks again, so a test can hold a runtime's stop
    /// path to that race (issue [stop-race]) on every stop instead of by luck.
    ShutdownExitsAtOnce,
    /// The controller is electing a leader for a partition whose leader is
    /// gone. `return` makes it take the first live replica in assignment
    /// order, in the ISR or not, with unclean election off: a slip in the
    /// election rule (the ISR filter forgotten) that no Kafka release had,
    /// so a test can show that the harness names an election outside the
    /// ISR instead of excusing the writes it loses.
    ControllerElectionIgnoresIsr,
    /// A leader is answering a consumer's fetch (read_uncommitted). `return`
    /// makes it read to its log end instead of its high watermark: a slip in
    /// the read path's bound that serves records no ISR has yet, so a test
    /// can show that the harness names each such answer.
    LeaderReadsPastHighWatermark,
    /// A broker is checking a LeaderAndIsr partition's leader epoch against
    /// the one it holds. `return` makes it apply the state whatever its
    /// epoch: a slip in the replica manager's epoch rule (Kafka's
    /// ReplicaManager.becomeLeaderOrFollower ignores a partition state whose
    /// leader epoch is not above the one it holds) that no release shipped,
    /// so a test can show that the harness names a leader epoch going back
    /// on one broker when an old decision reaches it late.
    LeaderAndIsrSkipsEpochCheck,
    /// A leader is deciding whether an acks=all append is settled. `return`
    /// makes the append itself settle it, whatever the high watermark: a
    /// slip in the produce path's wait (acks=all answered as acks=1) that no
    /// release shipped, so a test can show that the harness names each ack
    /// an ISR member did not hold, with or without a fault that loses it.
    LeaderAcksOnAppend,
    /// A broker is deleting a replica on StopReplica (its topic was
    /// deleted). `return` makes it answer success and keep the log: a slip
    /// that leaves a deleted topic's records on disk for a later topic of
    /// the same name to serve (the stale log KIP-516's topic ids exist to
    /// tell apart), so a test can show that the harness names a record of
    /// one topic life read in another.
    StopReplicaKeepsLog,
    /// The controller is taking a broker's StopReplica answer. `return`
    /// makes it drop the answer: a deletion waits forever for replicas that
    /// have deleted their logs, so a test can show that the harness names a
    /// topic whose deletion never completes after the final heal.
    ControllerDropsStopReplicaAnswer,
    /// A leader is answering a read_committed consumer's fetch that holds
    /// records. `return` makes the answer list no aborted transaction: the
    /// consumer, which drops an aborted transaction's records only by that
    /// list (KIP-98's aborted-transaction index), returns them as committed.
    /// A slip in the read path no release shipped, so a test can show that
    /// the harness names an application's read of an aborted write.
    LeaderOmitsAbortedTransactions,
}

impl Failpoint {
    pub const ALL: [Failpoint; 16] = [
        Failpoint::ControllerBeforeEvent,
        Failpoint::ControllerBeforeBrokerLoss,
        Failpoint::ControllerAfterWrite,
        Failpoint::LeaderAfterAppend,
        Failpoint::LeaderBeforeAck,
        Failpoint::ControllerBeforeCampaign,
        Failpoint::FollowerTruncateToHw,
        Failpoint::FollowerFetcherDies,
        Failpoint::ShutdownExitsAtOnce,
        Failpoint::ControllerElectionIgnoresIsr,
        Failpoint::LeaderReadsPastHighWatermark,
        Failpoint::LeaderAndIsrSkipsEpochCheck,
        Failpoint::LeaderAcksOnAppend,
        Failpoint::StopReplicaKeepsLog,
        Failpoint::ControllerDropsStopReplicaAnswer,
        Failpoint::LeaderOmitsAbortedTransactions,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Failpoint::ControllerBeforeEvent => "controller-before-event",
            Failpoint::ControllerBeforeBrokerLoss => "controller-before-broker-loss",
            Failpoint::ControllerAfterWrite => "controller-after-write",
            Failpoint::LeaderAfterAppend => "leader-after-append",
            Failpoint::LeaderBeforeAck => "leader-before-ack",
            Failpoint::ControllerBeforeCampaign => "controller-before-campaign",
            Failpoint::FollowerTruncateToHw => "follower-truncate-to-hw",
            Failpoint::FollowerFetcherDies => "follower-fetcher-dies",
            Failpoint::ShutdownExitsAtOnce => "shutdown-exits-at-once",
            Failpoint::ControllerElectionIgnoresIsr => "controller-election-ignores-isr",
            Failpoint::LeaderReadsPastHighWatermark => "leader-reads-past-high-watermark",
            Failpoint::LeaderAndIsrSkipsEpochCheck => "leader-and-isr-skips-epoch-check",
            Failpoint::LeaderAcksOnAppend => "leader-acks-on-append",
            Failpoint::StopReplicaKeepsLog => "stop-replica-keeps-log",
            Failpoint::ControllerDropsStopReplicaAnswer => "controller-drops-stop-replica-answer",
            Failpoint::LeaderOmitsAbortedTransactions => "leader-omits-aborted-transactions",
        }
    }

    fn from_name(name: &str) -> Option<Failpoint> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl fmt::Display for Failpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FailpointError {
    #[error("{ENV_VAR}: unknown failpoint `{name}` (known: {known})")]
    UnknownName { name: String, known: String },
    #[error("{ENV_VAR}: `{entry}` is not `name=actions`")]
    Malformed { entry: String },
    #[error("{ENV_VAR}: failpoint `{name}`: bad actions `{actions}`: {reason}")]
    BadActions {
        name: String,
        actions: String,
        reason: String,
    },
}

/// The `stop` task, in the `fail` crate's own terms: a `return` whose argument
/// [`hit`] recognises. Keeps counts and chains (`1*stop`, `off->stop`) working.
const STOP_ARG: &str = "stop";

/// Rewrite our `stop` task into `return(stop)` inside a `fail` action chain
/// (`[p%][cnt*]task[(arg)]` terms joined by `->`).
fn translate(actions: &str) -> String {
    actions
        .split("->")
        .map(|term| {
            let term = term.trim();
            let task_at = term.rfind(['%', '*']).map_or(0, |i| i + 1);
            let (prefix, task) = term.split_at(task_at);
            if task == STOP_ARG {
                format!("{prefix}return({STOP_ARG})")
            } else {
                term.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("->")
}

/// Parse `name=actions;…` into (failpoint, actions in the `fail` crate's syntax).
pub fn parse(spec: &str) -> Result<Vec<(Failpoint, String)>, FailpointError> {
    let mut out = Vec::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, actions) = entry
            .split_once('=')
            .ok_or_else(|| FailpointError::Malformed {
                entry: entry.to_string(),
            })?;
        let name = name.trim();
        let point = Failpoint::from_name(name).ok_or_else(|| FailpointError::UnknownName {
            name: name.to_string(),
            known: Failpoint::ALL.map(Failpoint::name).join(", "),
        })?;
        out.push((point, translate(actions.trim())));
    }
    Ok(out)
}

/// Configure the failpoints from [`ENV_VAR`]; unset configures nothing.
/// Returns what was configured, for the start-up log.
pub fn configure_from_env() -> Result<Vec<(Failpoint, String)>, FailpointError> {
    let Ok(spec) = std::env::var(ENV_VAR) else {
        return Ok(Vec::new());
    };
    let parsed = parse(&spec)?;
    for (point, actions) in &parsed {
        fail::cfg(point.name(), actions).map_err(|reason| FailpointError::BadActions {
            name: point.name().to_string(),
            actions: actions.clone(),
            reason,
        })?;
    }
    Ok(parsed)
}

/// Set by a runtime that runs the broker as PID 1 of a PID namespace (the
/// Docker runtime): a file path through which `stop` asks to be stopped.
pub const STOP_REQUEST_ENV: &str = "EPOCHAL_STOP_REQUEST";

/// `stop` for PID 1 of a PID namespace. The kernel drops a signal that the
/// namespace's init sends itself unless it has a handler, and SIGSTOP can have
/// none, so `raise` would do nothing. Only a process outside (the harness, in
/// the parent namespace) can stop it: this thread creates `request` and waits
/// until the runtime, having seen it, has SIGSTOPped the whole process and
/// removed the file; after SIGCONT the thread finds it gone and goes on.
fn stop_from_outside(request: &std::path::Path) {
    if let Err(e) = std::fs::write(request, b"stop") {
        tracing::error!(error = %e, path = %request.display(), "failpoint: cannot ask to be stopped");
        return;
    }
    while request.exists() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Pass through `point`: nothing unless it is configured; `stop` stops this
/// process until SIGCONT; the `fail` crate's own tasks (sleep, panic, print…)
/// act as that crate defines.
pub fn hit(point: Failpoint) {
    hit_or_return(point);
}

/// As [`hit`], and true when the point's action was a `return` (other than
/// `stop`): the caller skips what the point guards.
pub fn hit_or_return(point: Failpoint) -> bool {
    match fail::eval(point.name(), |arg| arg) {
        Some(Some(arg)) if arg == STOP_ARG => {
            tracing::warn!(failpoint = %point, "failpoint: stopping (SIGSTOP) until SIGCONT");
            match std::env::var_os(STOP_REQUEST_ENV) {
                Some(request) if std::process::id() == 1 => stop_from_outside(request.as_ref()),
                // SAFETY: raise only sends a signal to this process.
                _ => unsafe {
                    libc::raise(libc::SIGSTOP);
                },
            }
            tracing::warn!(failpoint = %point, "failpoint: resumed");
            false
        }
        Some(_) => true,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// broker/README.md's table of failpoints names every one, so a new
    /// failpoint is documented where users look for it.
    #[test]
    fn the_readme_lists_every_failpoint() {
        let readme = include_str!("../README.md");
        let missing: Vec<&str> = Failpoint::ALL
            .iter()
            .map(|f| f.name())
            .filter(|name| !readme.contains(&format!("| `{name}` |")))
            .collect();
        assert!(
            missing.is_empty(),
            "broker/README.md lists no row for {missing:?}"
        );
    }

    #[test]
    fn stop_becomes_a_return_with_counts_and_chains_kept() {
        assert_eq!(translate("stop"), "return(stop)");
        assert_eq!(translate("1*stop"), "1*return(stop)");
        assert_eq!(translate("2*off->1*stop"), "2*off->1*return(stop)");
        assert_eq!(translate("50%stop"), "50%return(stop)");
        assert_eq!(translate("sleep(10)"), "sleep(10)");
    }

    #[test]
    fn entries_parse_and_an_unknown_name_is_named() {
        let parsed = parse("controller-before-event=1*stop; leader-after-append=off;").unwrap();
        assert_eq!(
            parsed,
            vec![
                (Failpoint::ControllerBeforeEvent, "1*return(stop)".into()),
                (Failpoint::LeaderAfterAppend, "off".into()),
            ]
        );
        assert!(parse("").unwrap().is_empty());
        let err = parse("controller-befor-event=stop").unwrap_err();
        assert!(
            matches!(&err, FailpointError::UnknownName { name, .. } if name == "controller-befor-event")
        );
        assert!(err.to_string().contains("controller-befor-event"));
        assert!(matches!(
            parse("stop").unwrap_err(),
            FailpointError::Malformed { .. }
        ));
    }

    #[test]
    fn a_counted_return_fires_once_on_the_chosen_pass() {
        // The registry is process-wide: this test alone arms this point.
        let point = Failpoint::ControllerBeforeCampaign;
        fail::cfg(point.name(), &translate("1*off->1*return")).unwrap();
        let passes: Vec<bool> = (0..4).map(|_| hit_or_return(point)).collect();
        fail::remove(point.name());
        assert_eq!(passes, [false, true, false, false]);
    }
}
