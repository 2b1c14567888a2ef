//! Why a run could not be made or finished: the schedule or the command line
//! is wrong (a usage error: nothing was started), or the harness could not do
//! its part (the run directory says how far it got).

use crate::history::WriteError;
use crate::nemesis::NemesisError;
use crate::runtime::RuntimeError;
use crate::schedule::ScheduleError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The schedule or the command line is wrong; nothing was started.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("--set {arg}: {why}")]
    BadSet { arg: String, why: String },
    /// The harness could not do its part (a broker that will not start, a
    /// store that cannot be written); the run directory says how far it got.
    #[error("{0}")]
    Harness(String),
}

impl RunError {
    pub fn is_usage(&self) -> bool {
        matches!(self, RunError::Schedule(_) | RunError::BadSet { .. })
    }
}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> Self {
        RunError::Harness(e.to_string())
    }
}

impl From<WriteError> for RunError {
    fn from(e: WriteError) -> Self {
        RunError::Harness(format!("history: {e}"))
    }
}

impl From<RuntimeError> for RunError {
    fn from(e: RuntimeError) -> Self {
        RunError::Harness(e.to_string())
    }
}

impl From<NemesisError> for RunError {
    fn from(e: NemesisError) -> Self {
        RunError::Harness(e.to_string())
    }
}
