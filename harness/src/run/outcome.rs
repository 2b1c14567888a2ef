//! What a run gives back: how it ended short of a verdict, and the report
//! with its verdict, directory and the schedule it realised.

use crate::checker::Report;
use crate::run_dir::RunDir;
use crate::schedule::Schedule;

/// How a run ended, short of a verdict (the checkers give that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// Every step ran and the cluster quiesced.
    Completed,
    /// The run could not establish what it set out to: why.
    Unknown(String),
}

#[derive(Debug)]
pub struct RunReport {
    pub dir: RunDir,
    pub status: RunStatus,
    pub schedule: Schedule,
    /// The checkers' verdict, with the run's own end folded in.
    pub report: Report,
}
