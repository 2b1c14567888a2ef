//! Why a checker could not check a run at all: its result is then unknown
//! ("could not check: …"), never valid. Below every checker and the index
//! they share, so both can say it.

use super::final_log::NoFinalLog;

/// Why a checker could not check a run at all; its result is then unknown
/// ("could not check: …"), never valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// A send's ok names a different number of offsets than it sent values,
    /// so no value can be matched to its offset.
    #[error("history index {index}: send ok has a different number of offsets and values")]
    MismatchedSend { index: u64 },
    #[error(transparent)]
    NoFinalLog(#[from] NoFinalLog),
}
