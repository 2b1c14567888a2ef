//! How the application's ops reach the history at the session's end: etcd's
//! view sampled while the session runs (what each acknowledged write's ISR
//! was just after its ack), then the client links' recordings read up to
//! the signal and merged into the history (app.rs).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::app::{AppTally, SAMPLE_EVERY_MS, Samples, app_lines};
use crate::history::SharedHistory;
use crate::reader::app_frames::read_app_frames;
use crate::run::Live;
use crate::run_dir::RunDir;
use crate::runtime::Runtime;
use crate::workload::view::SharedView;

/// How often the session looks at etcd for the application's acks.
const SAMPLE_EVERY: Duration = Duration::from_millis(SAMPLE_EVERY_MS);
/// Bound on waiting for the proxies' recorders to write out what they hold.
const SETTLE_WITHIN: Duration = Duration::from_secs(2);
/// A recording unchanged this long is taken as written out.
const SETTLED_AFTER: Duration = Duration::from_millis(200);

/// etcd's view, sampled on a task of its own until stopped.
pub struct Sampler {
    samples: Arc<Mutex<Samples>>,
    task: tokio::task::JoinHandle<()>,
    view: SharedView,
    history: SharedHistory,
}

impl Sampler {
    pub fn start<R: Runtime>(live: &Live<R>) -> Sampler {
        let samples = Arc::new(Mutex::new(Samples::new()));
        let view = live.clients.view.clone();
        let history = live.history.clone();
        let task = tokio::spawn({
            let (samples, view, history) = (Arc::clone(&samples), view.clone(), history.clone());
            async move {
                loop {
                    sample(&view, &history, &samples).await;
                    tokio::time::sleep(SAMPLE_EVERY).await;
                }
            }
        });
        Sampler {
            samples,
            task,
            view,
            history,
        }
    }

    /// Stops sampling after one last look, begun now; the samples.
    async fn stop(self) -> Samples {
        self.task.abort();
        sample(&self.view, &self.history, &self.samples).await;
        let samples = self
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        samples.clone()
    }
}

/// A session that ends otherwise (the harness failed) stops sampling too.
impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One look at etcd, stamped with when it began (history clock).
async fn sample(view: &SharedView, history: &SharedHistory, samples: &Mutex<Samples>) {
    let begun = history.now_ns();
    if let Some(seen) = view.fresh().await {
        samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((begun, seen));
    }
}

/// Reads the client links' recordings up to now and merges the
/// application's ops into the history; what it merged. Nothing here ends
/// the run: a recording that cannot be read, or ops the history refuses,
/// are logged and the application's ops left out.
pub async fn merge_app<R: Runtime>(live: &mut Live<R>, dir: &RunDir, sampler: Sampler) -> AppTally {
    let until_ns = live.history.now_ns();
    let opened_ms = live.history.opened_unix_ms();
    let samples = sampler.stop().await;
    let frames_dir = RunDir::node_layout(&dir.nodes()).proxy_frames();
    settle(&frames_dir).await;
    let until_wall = opened_ms.saturating_mul(1_000_000).saturating_add(until_ns);
    let frames = match read_app_frames(&frames_dir, until_wall, Some(live.history.opened())) {
        Ok(frames) => frames,
        Err(e) => {
            live.log
                .line(format!("up: the application's requests not read: {e}"));
            return AppTally::default();
        }
    };
    let processes = &live.clients.processes;
    let (lines, tally) = app_lines(&frames, opened_ms, until_ns, &samples, &mut || {
        processes.next()
    });
    let ops = lines.len();
    match live.history.merge(lines) {
        Ok(total) => {
            live.log.line(format!(
                "up: the application's requests: {ops} ops merged into the history \
                 ({total} ops now), {} frames not decoded, {} dropped by the recorders",
                tally.undecodable, tally.dropped
            ));
            tally
        }
        Err(e) => {
            live.log.line(format!(
                "up: the application's {ops} ops not merged into the history: {e}"
            ));
            AppTally::default()
        }
    }
}

/// Waits (bounded) until no client link's recording grew for a moment: a
/// proxy's recorder writes out what it holds once idle.
async fn settle(dir: &Path) {
    let sizes = || -> u64 {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("client-"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    };
    let deadline = Instant::now() + SETTLE_WITHIN;
    let mut last = sizes();
    while Instant::now() < deadline {
        tokio::time::sleep(SETTLED_AFTER).await;
        let now = sizes();
        if now == last {
            return;
        }
        last = now;
    }
}
