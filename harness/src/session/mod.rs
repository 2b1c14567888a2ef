//! An `epochal up` session: a run whose faults come from a person, one at a
//! time, while their own application uses the cluster. As the run's
//! [`Driver`] (phase 3, like a campaign's nemesis) it opens the control
//! socket in the run directory (control.rs), hands the next SIGINT or
//! SIGTERM to itself instead of the kill path (runtime/reaper.rs), announces
//! where clients connect — every broker's client proxy, so a network fault
//! cuts the application too — and fires each fault `epochal fault` sends as
//! an ordinary step: recorded on the nemesis process, written into
//! `schedule.toml` once it fired. The signal ends phase 3; the final heal,
//! the quiesce, the final read of the replicas and the checkers follow as
//! for any run. It never plays the schedule's own steps. Its [`Tally`] of
//! faults fired and refused lets `epochal up` tell the end of the run in a
//! bounded closing summary (summary.rs, replicas.rs, shown.rs).
//!
//! The application's own requests reach the history too (app.rs, record.rs):
//! while the session runs it samples etcd's view, and once the signal came
//! it reads what the client proxies recorded up to then and merges the
//! application's ops among the run's by their time, before the final heal —
//! so the checkers rule on them like on any client's, and its [`AppTally`]
//! counts them for the summary.

pub mod app;
mod app_groups;
mod app_members;
mod app_op;
mod app_topics;
mod app_txns;
pub mod control;
mod record;
mod replicas;
mod shown;
pub mod summary;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::run::{
    Driver, Fired, Live, RunError, RunStatus, fire, start_background, stop_background,
};
use crate::run_dir::RunDir;
use crate::runtime::{Runtime, reaper};
use crate::schedule::{Schedule, Step};
use app::AppTally;
use control::{Answer, Request, parse_fault};

/// Bound on reading one request once a client connected.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on writing an answer to a client that stopped reading.
const ANSWER_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the session's cluster is reached, announced once it is ready.
#[derive(Debug, Clone)]
pub struct Ready {
    /// Every broker's client proxy, `host:port` comma-separated: what an
    /// application bootstraps from.
    pub bootstrap: String,
    pub run_dir: PathBuf,
    pub control: PathBuf,
}

/// The faults a session fired and those the cluster refused, as it goes:
/// `epochal up` reads it once the run is checked, to split the history's
/// nemesis ops into the session's and the final heal's (summary.rs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Faults fired: the steps of `schedule.toml`, numbered from 1 in
    /// `epochal fault`'s answers.
    pub fired: usize,
    /// Faults the cluster's state refused: in the history with their error,
    /// not counted as faults.
    pub refused: usize,
}

/// Phase 3 of `epochal up`; `announce` is told where the cluster is reached
/// once the session takes faults.
pub struct Session<F> {
    announce: F,
    tally: Arc<Mutex<Tally>>,
    app: Arc<Mutex<AppTally>>,
}

impl<F: FnOnce(&Ready)> Session<F> {
    pub fn new(announce: F) -> Self {
        Session {
            announce,
            tally: Arc::default(),
            app: Arc::default(),
        }
    }

    /// The session's tally, kept up to date as faults fire.
    pub fn tally(&self) -> Arc<Mutex<Tally>> {
        Arc::clone(&self.tally)
    }

    /// What the application did, once the session merged its ops.
    pub fn app_tally(&self) -> Arc<Mutex<AppTally>> {
        Arc::clone(&self.app)
    }
}

/// The tally now (a poisoned lock still holds whole counts).
pub fn tally_of(tally: &Mutex<Tally>) -> Tally {
    *tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<F: FnOnce(&Ready)> Driver for Session<F> {
    async fn play<R: Runtime>(
        self,
        live: &mut Live<R>,
        schedule: &Schedule,
        dir: &RunDir,
    ) -> Result<RunStatus, RunError> {
        let socket = Socket::bind(dir)?;
        let control = |what, source| RunError::Control {
            what,
            path: socket.path.clone(),
            source,
        };
        let mut signal = reaper::defer().map_err(|e| control("awaiting SIGINT for", e))?;
        let background = start_background(live, schedule);
        let sampler = record::Sampler::start(live);
        let ready = Ready {
            bootstrap: live
                .clients
                .addresses
                .values()
                .cloned()
                .collect::<Vec<_>>()
                .join(","),
            run_dir: dir.path().to_owned(),
            control: socket.path.clone(),
        };
        live.log.line(format!(
            "up: bootstrap servers {}; faults through {}",
            ready.bootstrap,
            ready.control.display()
        ));
        (self.announce)(&ready);
        // What the session fired, in order: `schedule.toml` as it goes.
        let mut realised = Schedule {
            steps: Vec::new(),
            ..schedule.clone()
        };
        loop {
            tokio::select! {
                signalled = signal.signalled() => {
                    let signalled = signalled.map_err(|e| control("awaiting SIGINT for", e))?;
                    let Tally { fired, refused } = tally_of(&self.tally);
                    live.log.line(format!(
                        "up: signal {signalled}: session over after {fired} faults \
                         ({refused} refused, not counted); healing and checking"
                    ));
                    break;
                }
                accepted = socket.listener.accept() => {
                    let (stream, _) = accepted.map_err(|e| control("accepting on", e))?;
                    serve(live, (&mut realised, &self.tally), dir, stream).await?;
                }
            }
        }
        // No session to answer from here on: `epochal fault` says so.
        drop(socket);
        if let Some(workers) = background {
            stop_background(live, workers).await?;
        }
        let app = record::merge_app(live, dir, sampler).await;
        *self
            .app
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = app;
        Ok(RunStatus::Completed)
    }
}

/// The listening control socket, removed when dropped (on every way out of
/// the session, a panic's unwinding included).
struct Socket {
    path: PathBuf,
    listener: UnixListener,
}

impl Socket {
    fn bind(dir: &RunDir) -> Result<Socket, RunError> {
        let path = dir.control_socket();
        let listener = UnixListener::bind(&path).map_err(|source| RunError::Control {
            what: "binding the control socket",
            path: path.clone(),
            source,
        })?;
        Ok(Socket { path, listener })
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Serves one connection: reads its request, fires the fault, answers. A
/// connection that sends nothing (a look for a live session) gets nothing.
/// A fault the harness could not fire is answered, then ends the session.
async fn serve<R: Runtime>(
    live: &mut Live<R>,
    fired: (&mut Schedule, &Mutex<Tally>),
    dir: &RunDir,
    stream: UnixStream,
) -> Result<(), RunError> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let read = tokio::time::timeout(
        REQUEST_READ_TIMEOUT,
        BufReader::new(read).read_line(&mut line),
    )
    .await;
    if !matches!(read, Ok(Ok(n)) if n > 0) {
        return Ok(());
    }
    let (answer, ended) = match serde_json::from_str::<Request>(&line) {
        Ok(request) => answer(live, fired, dir, &request).await?,
        Err(e) => (
            Answer::Invalid {
                why: format!("not a request: {e}"),
            },
            None,
        ),
    };
    let mut text = serde_json::to_string(&answer).expect("an answer serializes");
    text.push('\n');
    // The client may have given up waiting: its loss, not the session's.
    let _ = tokio::time::timeout(ANSWER_WRITE_TIMEOUT, write.write_all(text.as_bytes())).await;
    ended.map_or(Ok(()), Err)
}

/// Fires `request` at the cluster: its answer, and the error that ends the
/// session if the harness failed. `realised` takes a fault that fired as its
/// next step, and `tally` counts it (or its refusal).
async fn answer<R: Runtime>(
    live: &mut Live<R>,
    (realised, tally): (&mut Schedule, &Mutex<Tally>),
    dir: &RunDir,
    request: &Request,
) -> Result<(Answer, Option<RunError>), RunError> {
    let fault = match parse_fault(realised, request) {
        Ok(fault) => fault,
        Err(e) => {
            live.log.line(format!("up: {request}: refused: {e}"));
            return Ok((Answer::Invalid { why: e.to_string() }, None));
        }
    };
    let number = realised.steps.len() + 1;
    let name = request.to_string();
    let counted = |update: &dyn Fn(&mut Tally)| {
        update(
            &mut tally
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
    };
    Ok(match fire(live, number, &fault).await {
        Ok(Fired::Done(done)) => {
            realised.steps.push(Step::Fault(fault));
            dir.write_schedule(realised)?;
            counted(&|t| t.fired = number);
            live.log.line(format!("up: fault {number}: {name}"));
            let fired = Answer::Fired {
                fault: name,
                done,
                number,
            };
            (fired, None)
        }
        Ok(Fired::Refused(e)) => {
            counted(&|t| t.refused += 1);
            let refused = Answer::Refused {
                fault: name,
                why: e.to_string(),
            };
            (refused, None)
        }
        Err(e) => (
            Answer::Failed {
                fault: name,
                why: e.to_string(),
            },
            Some(e),
        ),
    })
}
