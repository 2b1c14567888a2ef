//! Phase 5: keep the evidence. etcd's revision history of the cluster's
//! decisions goes to `timeline.json` while etcd still runs; then every broker
//! is SIGKILLed, which freezes each data directory exactly as the cluster left
//! it (no shutdown hook rewrites a checkpoint after the harness looked); last,
//! `run.json` records how the run ended.

use crate::run_dir::{RunDir, RunEnd};
use crate::runtime::Runtime;
use crate::store::RunLog;

use super::live::Live;
use super::{RunError, RunStatus};

/// The timeline, then the frozen nodes. A timeline that cannot be read is
/// logged, not fatal: the checkers that need it say unknown.
pub(super) async fn collect<R: Runtime>(live: &mut Live<R>, dir: &RunDir) -> Result<(), RunError> {
    match crate::observe::timeline::read_timeline(live.runtime.etcd_endpoint()).await {
        Ok(timeline) => {
            if let Err(e) = dir.write_timeline(&timeline) {
                live.log.line(e.to_string());
            }
        }
        Err(e) => live.log.line(format!("etcd timeline not read: {e}")),
    }
    live.scripted.clear();
    for n in live.nodes() {
        if live.runtime.is_running(n) {
            live.runtime.kill_node(n).await?;
        }
    }
    Ok(())
}

/// Logs how the run ended and writes `run.json`.
pub(super) fn write_end(
    log: &mut RunLog,
    dir: &RunDir,
    status: &RunStatus,
) -> Result<(), RunError> {
    let end = match status {
        RunStatus::Completed => {
            log.line("completed");
            RunEnd {
                completed: true,
                unknown: None,
            }
        }
        RunStatus::Unknown(why) => {
            log.line(format!("unknown: {why}"));
            RunEnd {
                completed: false,
                unknown: Some(why.clone()),
            }
        }
    };
    Ok(dir.write_end(&end)?)
}
