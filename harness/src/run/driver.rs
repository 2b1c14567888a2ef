//! What plays phase 3 on a ready cluster, between setup and the final heal:
//! the schedule's own steps ([`Steps`], steps.rs), or a campaign's nemesis,
//! which picks each fault as it goes and writes down what it fired
//! (campaign/play.rs). run/ knows only this trait, so a campaign builds on a
//! run and a run never names a campaign.

use std::future::Future;

use super::error::RunError;
use super::live::Live;
use super::outcome::RunStatus;
use super::steps;
use crate::run_dir::RunDir;
use crate::runtime::Runtime;
use crate::schedule::Schedule;

/// Phase 3's player. Used through generics, never `dyn` (its method is
/// generic over the runtime); futures are not promised `Send`, as a run
/// lives on one task.
pub trait Driver {
    /// Drives the ready cluster in `live` through `schedule`'s phase 3,
    /// writing into `dir` what a replay needs (a campaign's realised
    /// schedule); an unknown status ends phase 3 early.
    fn play<R: Runtime>(
        self,
        live: &mut Live<R>,
        schedule: &Schedule,
        dir: &RunDir,
    ) -> impl Future<Output = Result<RunStatus, RunError>>;
}

/// The schedule's own steps, in order, beside `[workload.background]`'s
/// workers.
pub struct Steps;

impl Driver for Steps {
    async fn play<R: Runtime>(
        self,
        live: &mut Live<R>,
        schedule: &Schedule,
        _dir: &RunDir,
    ) -> Result<RunStatus, RunError> {
        steps::play(live, schedule).await
    }
}
