//! The history: Jepsen's model of what every client and the nemesis did, one JSON
//! object a line (`index, time_ns, process, type, f, value, error`). Each operation
//! is an `invoke` followed by one completion — `ok`, `fail` (it definitely did not
//! happen) or `info` (it may or may not have happened) — and the history is the
//! run's primary artifact, so it is streamed to disk as it happens and validated
//! whenever it is read back, before any checker trusts it.
//!
//! Shape rules (Jepsen's `jepsen.history` and the Knossos preconditions): indices
//! strictly increase; a process has at most one operation in flight; a completion
//! needs that process's invoke, with the same `f`; a client process whose
//! operation ended `info` has crashed and never invokes again (Jepsen gives the
//! worker a fresh process number instead). The nemesis runs on its own process,
//! `"nemesis"`, and is never retired by `info`: its faults are recorded `info`
//! because their effect on the cluster is not an ok/fail answer.

pub mod clock;
mod fault_op;
mod group_op;
pub mod kafka_errors;
pub mod life_op;
pub mod op;
mod op_type;
mod process;
mod record_value;
mod stable_op;
mod txn_op;

pub use crate::fault::Verb;

pub use op_type::OpType;
pub use process::{Process, ProcessNameError};

pub use op::{
    Acked, Aim, AppSent, Body, BodyError, ClientCrash, Commit, Committed, Done, ExitedAtStart,
    FaultOp, Idempotence, Intent, Isolation, LifeOp, LifeStep, MicroOp, NodeCut, Op, Poll,
    PolledRecord, Read, Rebalance, RecordValue, ReplicaCut, Send, StableOffsets, Txn, TxnPoll,
    TxnProducer, TxnSend, kept_form, padded, value_text,
};

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

/// Why an op cannot follow the ones before it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("index {index} does not follow {previous}")]
    IndexNotIncreasing { index: u64, previous: u64 },
    #[error("process {process} invokes {f} while its invoke at index {pending} is in flight")]
    DoubleInvoke {
        process: Process,
        f: String,
        pending: u64,
    },
    #[error("process {process} completes {f} without an invoke in flight")]
    CompletionWithoutInvoke { process: Process, f: String },
    #[error("process {process} completes {f} but its invoke at index {pending} was {invoked}")]
    CompletionMismatch {
        process: Process,
        f: String,
        invoked: String,
        pending: u64,
    },
    #[error("process {process} crashed (info at index {crashed_at}) and invokes again")]
    CrashedProcessInvokes { process: Process, crashed_at: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a history op: {source}")]
    Parse {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}:{line}: {source}")]
    Shape {
        path: PathBuf,
        line: usize,
        #[source]
        source: ShapeError,
    },
}

impl HistoryError {
    /// The 1-based line the error is on, when it is about one line.
    pub fn line(&self) -> Option<usize> {
        match self {
            HistoryError::Io { .. } => None,
            HistoryError::Parse { line, .. } | HistoryError::Shape { line, .. } => Some(*line),
        }
    }
}

/// Checks ops one at a time, so the writer refuses a bad op before it reaches
/// disk and the reader can name the first bad line.
#[derive(Debug, Default)]
pub struct Validator {
    last_index: Option<u64>,
    /// Per process: the in-flight invoke's index and f.
    pending: HashMap<Process, (u64, String)>,
    /// Client processes that ended an op with `info`, and where.
    crashed: HashMap<Process, u64>,
}

impl Validator {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn check(&mut self, op: &Op) -> Result<(), ShapeError> {
        if let Some(previous) = self.last_index
            && op.index <= previous
        {
            return Err(ShapeError::IndexNotIncreasing {
                index: op.index,
                previous,
            });
        }
        match op.kind {
            OpType::Invoke => {
                if let Some(&crashed_at) = self.crashed.get(&op.process) {
                    return Err(ShapeError::CrashedProcessInvokes {
                        process: op.process,
                        crashed_at,
                    });
                }
                if let Some((pending, _)) = self.pending.get(&op.process) {
                    return Err(ShapeError::DoubleInvoke {
                        process: op.process,
                        f: op.f().to_owned(),
                        pending: *pending,
                    });
                }
                self.pending
                    .insert(op.process, (op.index, op.f().to_owned()));
            }
            OpType::Ok | OpType::Fail | OpType::Info => {
                let Some((pending, invoked)) = self.pending.get(&op.process) else {
                    return Err(ShapeError::CompletionWithoutInvoke {
                        process: op.process,
                        f: op.f().to_owned(),
                    });
                };
                if invoked != op.f() {
                    return Err(ShapeError::CompletionMismatch {
                        process: op.process,
                        f: op.f().to_owned(),
                        invoked: invoked.clone(),
                        pending: *pending,
                    });
                }
                self.pending.remove(&op.process);
                if op.kind == OpType::Info && op.process != Process::Nemesis {
                    self.crashed.insert(op.process, op.index);
                }
            }
        }
        self.last_index = Some(op.index);
        Ok(())
    }

    /// Processes with an invoke still in flight (at the end of a history these
    /// are the ops a crash of the harness itself left open: Jepsen reads them as
    /// `info`).
    pub fn in_flight(&self) -> impl Iterator<Item = (Process, u64)> + '_ {
        self.pending.iter().map(|(p, (i, _))| (*p, *i))
    }
}

/// Appends ops to a run's history file, one flushed line each, so whatever
/// happens to the harness the history up to the last op is on disk.
pub struct HistoryWriter {
    path: PathBuf,
    file: File,
    started: Instant,
    /// The wall clock and the monotonic clock when `started` was read: what
    /// places brokers' wall-clock logs and the proxy's monotonic recordings
    /// on the history's clock (clock.rs).
    opened: clock::ClockPair,
    next_index: u64,
    validator: Validator,
}

/// What the writer returns when an op cannot be recorded.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing op for {path}: {source}")]
    Shape {
        path: PathBuf,
        #[source]
        source: ShapeError,
    },
}

impl HistoryWriter {
    /// Creates the history file; an existing one is an error, because a run's
    /// history is written once and never mixed with another run's.
    pub fn create(path: impl Into<PathBuf>) -> Result<Self, WriteError> {
        let path = path.into();
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| WriteError::Io {
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            path,
            file,
            opened: clock::ClockPair::now(),
            started: Instant::now(),
            next_index: 0,
            validator: Validator::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When the history's clock (each op's `time_ns`) read zero, on the wall
    /// clock in ms since the Unix epoch.
    pub fn opened_unix_ms(&self) -> u64 {
        self.opened.unix_ns / 1_000_000
    }

    /// Both clocks when the history's clock read zero.
    pub fn opened(&self) -> clock::ClockPair {
        self.opened
    }

    /// Records an op now, assigning its index and time; returns it as written.
    pub fn append(
        &mut self,
        process: Process,
        kind: OpType,
        body: Body,
        error: Option<String>,
    ) -> Result<Op, WriteError> {
        let op = Op {
            index: self.next_index,
            time_ns: u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX),
            process,
            kind,
            body,
            error,
        };
        self.validator
            .check(&op)
            .map_err(|source| WriteError::Shape {
                path: self.path.clone(),
                source,
            })?;
        let mut line = serde_json::to_vec(&op).expect("an op always serializes");
        line.push(b'\n');
        // One write and a flush per op: a line is never split across writes we
        // control, and nothing waits in a userspace buffer if the harness dies.
        self.file
            .write_all(&line)
            .and_then(|()| self.file.flush())
            .map_err(|source| WriteError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.next_index += 1;
        Ok(op)
    }

    pub fn invoke(&mut self, process: Process, body: Body) -> Result<Op, WriteError> {
        self.append(process, OpType::Invoke, body, None)
    }

    /// Puts `lines` — whole history lines as JSON objects, each with its own
    /// `time_ns` on this history's clock and no `index` of its own — among
    /// the ops written so far by time (an op written so far goes first on a
    /// tie), numbers every op anew in that order and rewrites the file. For
    /// ops learnt after they happened (an application's, from the proxies'
    /// recordings). The merged history is checked whole first: if any op
    /// would break its shape, nothing changes. Returns the ops written.
    pub fn merge(&mut self, mut lines: Vec<Value>) -> Result<u64, WriteError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| WriteError::Io { path, source }
        };
        let written = std::fs::read_to_string(&self.path).map_err(io(&self.path))?;
        let mut old = Vec::new();
        for line in written.lines() {
            old.push(serde_json::from_str::<Value>(line).map_err(|e| io(&self.path)(e.into()))?);
        }
        let time = |line: &Value| line["time_ns"].as_u64().unwrap_or(0);
        lines.sort_by_key(time);
        let mut merged = Vec::with_capacity(old.len() + lines.len());
        let mut new = lines.into_iter().peekable();
        for line in old {
            while new.peek().is_some_and(|n| time(n) < time(&line)) {
                merged.extend(new.next());
            }
            merged.push(line);
        }
        merged.extend(new);
        let mut validator = Validator::new();
        let mut text = Vec::new();
        for (index, line) in merged.iter_mut().enumerate() {
            line["index"] = Value::from(index as u64);
            let op: Op = serde_json::from_value(line.clone())
                .map_err(|e| io(&self.path)(std::io::Error::other(e)))?;
            validator.check(&op).map_err(|source| WriteError::Shape {
                path: self.path.clone(),
                source,
            })?;
            serde_json::to_writer(&mut text, line).expect("a JSON value always serializes");
            text.push(b'\n');
        }
        let merging = self.path.with_extension("jsonl.merging");
        std::fs::write(&merging, &text).map_err(io(&merging))?;
        std::fs::rename(&merging, &self.path).map_err(io(&self.path))?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io(&self.path))?;
        self.next_index = merged.len() as u64;
        self.validator = validator;
        Ok(self.next_index)
    }
}

/// One history written by several tasks (the scripted steps and the
/// background workers): each op is stamped and written under one lock, so the
/// file's order is the order ops happened in.
#[derive(Clone)]
pub struct SharedHistory(std::sync::Arc<std::sync::Mutex<HistoryWriter>>);

impl SharedHistory {
    pub fn new(writer: HistoryWriter) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(writer)))
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, HistoryWriter> {
        // A writer poisoned by a panicking task still holds whole lines only.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn append(
        &self,
        process: Process,
        kind: OpType,
        body: Body,
        error: Option<String>,
    ) -> Result<Op, WriteError> {
        self.writer().append(process, kind, body, error)
    }

    pub fn invoke(&self, process: Process, body: Body) -> Result<Op, WriteError> {
        self.writer().invoke(process, body)
    }

    /// [`HistoryWriter::merge`], under the lock: no op is written meanwhile.
    pub fn merge(&self, lines: Vec<Value>) -> Result<u64, WriteError> {
        self.writer().merge(lines)
    }

    /// When the history's clock read zero, on the wall clock (ms since the
    /// Unix epoch).
    pub fn opened_unix_ms(&self) -> u64 {
        self.writer().opened_unix_ms()
    }

    /// Both clocks when the history's clock read zero.
    pub fn opened(&self) -> clock::ClockPair {
        self.writer().opened()
    }

    /// The history's clock now (ns since it was opened: each op's
    /// `time_ns`), for a moment inside an op, such as a transaction's EndTxn.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.writer().started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Reads a history file and validates it, naming the first bad line.
pub fn read_history(path: impl AsRef<Path>) -> Result<Vec<Op>, HistoryError> {
    let path = path.as_ref();
    let io = |source| HistoryError::Io {
        path: path.to_owned(),
        source,
    };
    let reader = BufReader::new(File::open(path).map_err(io)?);
    let mut validator = Validator::new();
    let mut ops = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(io)?;
        let number = i + 1;
        // A harness killed mid-line leaves no partial line (one write per op), so
        // a blank or torn line is corruption and is reported, not skipped.
        let op: Op = serde_json::from_str(&line).map_err(|source| HistoryError::Parse {
            path: path.to_owned(),
            line: number,
            source,
        })?;
        validator.check(&op).map_err(|source| HistoryError::Shape {
            path: path.to_owned(),
            line: number,
            source,
        })?;
        ops.push(op);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A body of `f` with the least value its invoke can have.
    fn body(f: &str) -> Body {
        let value = match f {
            "send" => json!({"partition": "t-0", "values": [1], "acks": "all"}),
            "poll" => json!({"partition": "t-0", "from_offset": 0}),
            _ => json!({"target": "b1"}),
        };
        Body::from_value(f, OpType::Invoke, value).unwrap()
    }

    fn op(index: u64, process: Process, kind: OpType, f: &str) -> Op {
        Op {
            index,
            time_ns: index,
            process,
            kind,
            body: body(f),
            error: None,
        }
    }

    #[test]
    fn process_is_a_number_or_nemesis_on_disk() {
        let line = serde_json::to_string(&op(0, Process::Nemesis, OpType::Info, "crash")).unwrap();
        assert!(line.contains("\"process\":\"nemesis\""), "{line}");
        let line =
            serde_json::to_string(&op(0, Process::Client(3), OpType::Invoke, "send")).unwrap();
        assert!(line.contains("\"process\":3"), "{line}");
        assert!(line.contains("\"type\":\"invoke\""), "{line}");
        let bad = r#"{"index":0,"time_ns":0,"process":"bob","type":"invoke","f":"send"}"#;
        assert!(serde_json::from_str::<Op>(bad).is_err());
    }

    #[test]
    fn validator_rejects_a_completion_with_another_f() {
        let mut v = Validator::new();
        v.check(&op(0, Process::Client(0), OpType::Invoke, "send"))
            .unwrap();
        let err = v
            .check(&op(1, Process::Client(0), OpType::Ok, "poll"))
            .unwrap_err();
        assert!(
            matches!(err, ShapeError::CompletionMismatch { .. }),
            "{err}"
        );
    }

    #[test]
    fn nemesis_info_does_not_retire_the_nemesis() {
        let mut v = Validator::new();
        for (i, kind) in [OpType::Invoke, OpType::Info, OpType::Invoke, OpType::Info]
            .into_iter()
            .enumerate()
        {
            v.check(&op(i as u64, Process::Nemesis, kind, "pause"))
                .unwrap();
        }
    }

    #[test]
    fn writer_refuses_a_double_invoke_and_writes_nothing_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let mut w = HistoryWriter::create(&path).unwrap();
        w.invoke(Process::Client(0), body("send")).unwrap();
        let err = w.invoke(Process::Client(0), body("send")).unwrap_err();
        assert!(matches!(
            err,
            WriteError::Shape {
                source: ShapeError::DoubleInvoke { pending: 0, .. },
                ..
            }
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
    }
}
