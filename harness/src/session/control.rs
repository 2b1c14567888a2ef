//! The control channel of an `epochal up` session: a Unix socket the session
//! owns in its run directory (`control.sock`, [`RunDir::control_socket`]),
//! there only while it runs. One connection carries one fault: a JSON line
//! [`Request`] in (the verb and the target as a schedule writes them), a JSON
//! line [`Answer`] out. The fault is parsed as one more step of the session's
//! schedule ([`parse_fault`]), so `epochal fault` takes exactly a schedule's
//! verbs and targets and is checked against the cluster as a schedule is.
//!
//! The client's side ([`ask`], [`find_session`]) is plain blocking I/O with a
//! bound on every read: it runs in its own short-lived process.

use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::history::{Done, Verb};
use crate::run_dir::RunDir;
use crate::schedule::{Fault, Invalid, Schedule, ScheduleError, Step};

/// One fault asked for: the verb, and the target as a schedule writes it
/// (none for `heal` of every cut).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub verb: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl Request {
    /// The request from the command line's words: the verb, then the target's
    /// words joined by spaces (`leader of t-0`), or none. An unknown verb, or
    /// a verb other than `heal` with no target, is refused here, before any
    /// session is looked for.
    pub fn from_words(verb: &str, target: &[String]) -> Result<Request, RequestError> {
        if Verb::from_name(verb).is_none() {
            return Err(RequestError::UnknownVerb(verb.to_owned()));
        }
        let target = target.join(" ");
        let target = (!target.trim().is_empty()).then_some(target);
        if target.is_none() && verb != Verb::Heal.name() {
            return Err(RequestError::NoTarget(verb.to_owned()));
        }
        Ok(Request {
            verb: verb.to_owned(),
            target,
        })
    }

    /// The step a schedule would hold for it: `fault = { "pause" = "b2" }`;
    /// a target written as an inline table (`{ from = "b2", to = "b1" }`) is
    /// kept as a table, and `heal` alone is the word `"heal"`.
    fn step_toml(&self) -> String {
        let verb = toml::Value::String(self.verb.clone());
        match &self.target {
            None => format!("fault = {verb}"),
            Some(t) if t.trim_start().starts_with('{') => format!("fault = {{ {verb} = {t} }}"),
            Some(t) => format!(
                "fault = {{ {verb} = {} }}",
                toml::Value::String(t.trim().to_owned())
            ),
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Some(target) => write!(f, "{} {}", self.verb, target.trim()),
            None => f.write_str(&self.verb),
        }
    }
}

/// A request refused before it is sent.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("unknown fault verb {0:?} (a schedule's verbs: {verbs})", verbs = verb_names())]
    UnknownVerb(String),
    #[error("{0} needs a target, as in a schedule: b2, controller, \"leader of t-0\", ...")]
    NoTarget(String),
}

fn verb_names() -> String {
    let names: Vec<&str> = Verb::ALL.iter().map(|v| v.name()).collect();
    names.join(", ")
}

/// Parses `request` as one more fault step of `schedule` (the session's
/// schedule with the faults it fired so far), so its target is checked
/// against the cluster and a `heal` of a named cut against the cuts made.
pub fn parse_fault(schedule: &Schedule, request: &Request) -> Result<Fault, BadFault> {
    let text = format!(
        "{}\n[[step]]\n{}\n",
        schedule.to_toml(),
        request.step_toml()
    );
    let parsed = Schedule::parse("epochal fault", &text).map_err(BadFault)?;
    match parsed.steps.last() {
        Some(Step::Fault(fault)) => Ok(fault.clone()),
        _ => unreachable!("the last step parsed is the fault step appended"),
    }
}

/// A request that is no fault of this cluster: the schedule parser's error,
/// shown without the file and line it would name for a file.
#[derive(Debug, thiserror::Error)]
#[error("{}", shown(.0))]
pub struct BadFault(pub ScheduleError);

fn shown(e: &ScheduleError) -> String {
    match e {
        ScheduleError::Syntax {
            key: Some(key),
            message,
            ..
        } if key != "fault" => format!("`{key}`: {message}"),
        ScheduleError::Syntax { message, .. } => message.clone(),
        ScheduleError::Invalid {
            what: Invalid::BadStep { why, .. },
            ..
        } => why.clone(),
        ScheduleError::Invalid { what, .. } => what.to_string(),
        ScheduleError::Io { .. } => e.to_string(),
    }
}

/// The session's answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "kebab-case")]
pub enum Answer {
    /// It fired: the session's fault `number` (1 for its first: the one
    /// count session/summary.rs defines), what its target resolved to and
    /// what it did, as the history's nemesis op records it.
    Fired {
        fault: String,
        done: Done,
        #[serde(default)]
        number: usize,
    },
    /// The cluster's state refused it now (its target names nobody, the
    /// node is not running, the cut is not in force); recorded in the
    /// history as a fault that failed, not counted as one, and the session
    /// goes on.
    Refused { fault: String, why: String },
    /// Not a fault of this cluster (an unknown node or topic, a malformed
    /// target); nothing was fired.
    Invalid { why: String },
    /// The harness could not fire it (the runtime failed): the session ends
    /// as a run does on a harness error.
    Failed { fault: String, why: String },
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Fired {
                fault,
                done,
                number,
            } => {
                let nodes: Vec<String> = done.nodes.iter().map(ToString::to_string).collect();
                let nodes = if nodes.is_empty() {
                    "done".to_owned()
                } else {
                    nodes.join(",")
                };
                write!(f, "fault {number}: {fault} -> {nodes}")?;
                if let Some(blocked) = &done.blocked {
                    write!(f, " (cut: {})", blocked.join(" "))?;
                }
                if let Some(healed) = &done.healed {
                    write!(f, " (flowing again: {})", healed.join(" "))?;
                }
                for exited in done.exited.iter().flatten() {
                    write!(
                        f,
                        " ({} exited as it started: {})",
                        exited.node, exited.error
                    )?;
                }
                Ok(())
            }
            Answer::Refused { fault, why } => {
                write!(f, "{fault}: refused, not counted as a fault: {why}")
            }
            Answer::Invalid { why } => write!(f, "not a fault of this cluster: {why}"),
            Answer::Failed { fault, why } => write!(f, "{fault}: harness error: {why}"),
        }
    }
}

/// Why no answer came.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("{} is not a directory (a run directory of `epochal up`, or its store)", .0.display())]
    NotADirectory(PathBuf),
    #[error(
        "no live `epochal up` session in {}{}",
        store.display(),
        if stale.is_empty() { String::new() } else {
            format!(" (stale control sockets, their session killed: {})",
                stale.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))
        }
    )]
    NoSession { store: PathBuf, stale: Vec<PathBuf> },
    #[error(
        "{} live `epochal up` sessions in {}; name one's run directory: {}",
        runs.len(),
        store.display(),
        runs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    Several { store: PathBuf, runs: Vec<PathBuf> },
    #[error("{}: {source}", socket.display())]
    Io {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: no answer within {timeout:?} (the session may still fire the fault; see its harness.log)", socket.display())]
    Timeout { socket: PathBuf, timeout: Duration },
    #[error("{}: the session closed the connection without an answer", socket.display())]
    NoAnswer { socket: PathBuf },
    #[error("{}: an answer that is not one: {source}", socket.display())]
    BadAnswer {
        socket: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// How deep under a store a session's run directory may be
/// (`adhoc/<name>/<time>-<n>`, or a gate's `suite/scenario/setting/<time>-<n>`).
const STORE_DEPTH: usize = 5;

/// The run directory of the live session `store_or_run` names: itself, when
/// it holds a control socket, else the one live session under it (a store).
/// A socket no process listens on (its `up` was killed outright) is stale.
pub fn find_session(store_or_run: &Path) -> Result<PathBuf, AskError> {
    if !store_or_run.is_dir() {
        return Err(AskError::NotADirectory(store_or_run.to_owned()));
    }
    let mut sockets = Vec::new();
    collect_sockets(store_or_run, STORE_DEPTH, &mut sockets);
    let (live, stale): (Vec<PathBuf>, Vec<PathBuf>) = sockets
        .into_iter()
        .partition(|socket| UnixStream::connect(socket).is_ok());
    let mut runs: Vec<PathBuf> = live
        .iter()
        .filter_map(|s| s.parent().map(Path::to_owned))
        .collect();
    match runs.len() {
        0 => Err(AskError::NoSession {
            store: store_or_run.to_owned(),
            stale,
        }),
        1 => Ok(runs.remove(0)),
        _ => Err(AskError::Several {
            store: store_or_run.to_owned(),
            runs,
        }),
    }
}

/// Control sockets at `dir` and below, `depth` levels at most, not following
/// links (`latest`) nor entering a run's node files.
fn collect_sockets(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let socket = RunDir::open(dir).control_socket();
    if std::fs::symlink_metadata(&socket).is_ok() {
        out.push(socket);
        return;
    }
    let nodes = RunDir::open(dir).nodes();
    if depth == 0 || dir == nodes {
        return;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && entry.path() != nodes {
            collect_sockets(&entry.path(), depth - 1, out);
        }
    }
}

/// Sends `request` to the session in `run` and waits, at most `timeout`,
/// for its answer.
pub fn ask(run: &Path, request: &Request, timeout: Duration) -> Result<Answer, AskError> {
    let socket = RunDir::open(run).control_socket();
    let io = |source| AskError::Io {
        socket: socket.clone(),
        source,
    };
    let mut stream = UnixStream::connect(&socket).map_err(io)?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut line = serde_json::to_string(request).expect("a request serializes");
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(io)?;
    let mut answer = String::new();
    match BufReader::new(stream).read_line(&mut answer) {
        Ok(0) => Err(AskError::NoAnswer { socket }),
        Ok(_) => {
            serde_json::from_str(&answer).map_err(|source| AskError::BadAnswer { socket, source })
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(AskError::Timeout { socket, timeout })
        }
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "[cluster]\nbrokers = 3\n\n[[cluster.topic]]\nname = \"t\"\npartitions = 1\nreplication_factor = 3\n";

    fn request(verb: &str, target: &str) -> Request {
        let words: Vec<String> = target.split(' ').map(str::to_owned).collect();
        Request::from_words(verb, &words).unwrap()
    }

    #[test]
    fn a_fault_reads_as_a_schedule_step_and_is_checked_against_the_cluster() {
        let schedule = Schedule::parse("s.toml", CLUSTER).unwrap();
        let pause = parse_fault(&schedule, &request("pause", "leader of t-0")).unwrap();
        let t0 = crate::schedule::PartitionRef::new("t", 0);
        assert_eq!(pause, Fault::Pause(crate::schedule::Target::LeaderOf(t0)));
        let one_way = request("one-way", r#"{ from = "b2", to = "b1" }"#);
        parse_fault(&schedule, &one_way).unwrap();
        let heal = Request::from_words("heal", &[]).unwrap();
        assert_eq!(parse_fault(&schedule, &heal).unwrap(), Fault::Heal);
        // Kafka's internal topics and the coordinators they hold.
        for target in [
            "leader of __transaction_state-1",
            "leader of __consumer_offsets-0",
            "coordinator of group orders",
            "coordinator of transactional id tx-1",
        ] {
            parse_fault(&schedule, &request("pause", target)).unwrap();
        }
        let e = parse_fault(
            &schedule,
            &request("pause", "leader of __transaction_state-3"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown partition __transaction_state-3"), "{e}");
        let e = parse_fault(&schedule, &request("crash", "b7"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown node b7"), "{e}");
        let e = parse_fault(&schedule, &request("pause", "leader of u-0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown topic u"), "{e}");
        let e = parse_fault(&schedule, &request("heal", "cut-1"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cut-1"), "{e}");
    }

    #[test]
    fn an_unknown_verb_or_a_missing_target_is_refused_before_sending() {
        let e = Request::from_words("frobnicate", &["b1".into()]).unwrap_err();
        assert!(
            e.to_string().contains("unknown fault verb \"frobnicate\""),
            "{e}"
        );
        assert!(e.to_string().contains("pause"), "{e}");
        let e = Request::from_words("pause", &[]).unwrap_err();
        assert!(e.to_string().contains("pause needs a target"), "{e}");
    }
}
