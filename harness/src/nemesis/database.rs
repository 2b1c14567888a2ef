//! The database faults (fault/database.rs) fired through the runtime, which
//! owns the database's processes (runtime/process.rs, runtime/postgres.rs).
//! Each act needs the database in one state and refuses it in another, as a
//! process fault refuses a node that is not running: a schedule that pauses
//! a database already paused, or restarts one that runs, assumed something
//! the cluster did not hold.

use crate::fault::{DatabaseAct, Verb};
use crate::runtime::{DatabaseState, Runtime, RuntimeError};

/// Why a database act did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    /// The database is not in the state the act starts from: the
    /// schedule's assumption failed (the run ends unknown).
    #[error(transparent)]
    Refused(#[from] NotInState),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

#[derive(Debug, thiserror::Error)]
#[error("cannot {verb}: the database is {}", state_name(*state))]
pub struct NotInState {
    pub verb: Verb,
    pub state: DatabaseState,
}

fn state_name(state: DatabaseState) -> &'static str {
    match state {
        DatabaseState::Running => "running",
        DatabaseState::Paused => "paused",
        DatabaseState::Down => "down (crashed and not restarted)",
    }
}

/// Does `act` to the system's database, refusing a database in a state the
/// act cannot start from: a pause needs it running, a resume paused, a
/// crash running or paused (SIGKILL ends a stopped process too), a restart
/// down.
pub async fn act<R: Runtime>(
    runtime: &mut R,
    act: DatabaseAct,
    verb: Verb,
) -> Result<(), DatabaseError> {
    let state = runtime.database()?.ok_or(RuntimeError::NoDatabase)?;
    let fits = match act {
        DatabaseAct::Pause => state == DatabaseState::Running,
        DatabaseAct::Resume => state == DatabaseState::Paused,
        DatabaseAct::Kill => state != DatabaseState::Down,
        DatabaseAct::Start => state == DatabaseState::Down,
    };
    if !fits {
        return Err(NotInState { verb, state }.into());
    }
    match act {
        DatabaseAct::Pause => runtime.pause_database().await?,
        DatabaseAct::Resume => runtime.resume_database().await?,
        DatabaseAct::Kill => runtime.kill_database().await?,
        DatabaseAct::Start => runtime.start_database().await?,
    }
    Ok(())
}

/// The undo that brings the database back from `state`, for the final
/// heal: none when it runs.
pub fn undo(state: DatabaseState) -> Option<crate::schedule::Fault> {
    use crate::schedule::Fault;
    match state {
        DatabaseState::Running => None,
        DatabaseState::Paused => Some(Fault::ResumeDatabase),
        DatabaseState::Down => Some(Fault::RestartDatabase),
    }
}
