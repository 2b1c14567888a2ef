//! Phase 5: keep the evidence. Every broker is SIGKILLed, which freezes each
//! data directory exactly as the cluster left it (no shutdown hook rewrites a
//! checkpoint after the harness looked); then, etcd still running, its
//! revision history of the cluster's decisions goes to `timeline.json`; last,
//! `run.json` records how the run ended.
//!
//! The brokers die before the timeline is read, not after: the cluster goes on
//! deciding until its last broker is dead, and a decision a broker applied
//! while the others were being killed must be in the timeline the checkers
//! hold it against. (Read first, a Docker run whose kills took ten seconds
//! under load let the lease of the first broker killed lapse, a new controller
//! elect a leader, and a live follower apply it, which etcd's timeline then
//! "never recorded": a false `uncommitted-decision-applied`.) The runtime
//! kills them all at once (`Runtime::freeze`), so the window is one kill long
//! and no lease can lapse in it.

use crate::run_dir::{RunDir, RunEnd, Stuck};
use crate::runtime::Runtime;
use crate::store::RunLog;

use super::live::Live;
use super::{RunError, RunStatus};

/// The frozen nodes, then the timeline. A timeline that cannot be read is
/// logged, not fatal: the checkers that need it say unknown. A broker that
/// cannot be killed is the harness's error, reported after the timeline is
/// kept.
pub(super) async fn collect<R: Runtime>(live: &mut Live<R>, dir: &RunDir) -> Result<(), RunError> {
    live.scripted.clear();
    let frozen = live.runtime.freeze().await;
    if let Err(e) = &frozen {
        live.log.line(format!("brokers not all killed: {e}"));
    }
    match crate::observe::timeline::read_timeline(live.runtime.etcd_endpoint()).await {
        Ok(timeline) => {
            if let Err(e) = crate::store::write_json(&dir.timeline(), &timeline) {
                live.log.line(e.to_string());
            }
        }
        Err(e) => live.log.line(format!("etcd timeline not read: {e}")),
    }
    Ok(frozen?)
}

/// Logs how the run ended and writes `run.json`.
pub(super) fn write_end(
    log: &mut RunLog,
    dir: &RunDir,
    status: &RunStatus,
    stuck: Vec<Stuck>,
) -> Result<(), RunError> {
    let end = match status {
        RunStatus::Completed => {
            log.line("completed");
            RunEnd {
                completed: true,
                unknown: None,
                stuck,
            }
        }
        RunStatus::Unknown(why) => {
            log.line(format!("unknown: {why}"));
            RunEnd {
                completed: false,
                unknown: Some(why.clone()),
                stuck,
            }
        }
    };
    Ok(dir.write_end(&end)?)
}
