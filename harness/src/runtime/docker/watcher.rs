//! Answers the broker's `stop` failpoint when the broker is PID 1 of its
//! container (broker/src/failpoints.rs has the broker's side).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use epochal_faults::signal;

use crate::runtime::NodeId;

/// Stops a broker that asks for it. A failpoint's `stop` raises SIGSTOP on the
/// broker itself, which PID 1 of a namespace cannot do (the kernel drops it), so
/// there the failpoint writes `stop-request` in its data dir and waits; this
/// thread sees the file, sends SIGSTOP from the host (the parent namespace,
/// which the kernel obeys), awaits state T and removes the file. The schedule's
/// `resume` then continues the broker as usual.
pub(super) struct StopWatcher {
    /// Running brokers: the request file on the host and the PID 1's host pid.
    watched: std::sync::Arc<std::sync::Mutex<BTreeMap<NodeId, (PathBuf, i32)>>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StopWatcher {
    pub(super) fn new() -> Self {
        StopWatcher {
            watched: Default::default(),
            done: Default::default(),
            thread: None,
        }
    }

    /// Starts the thread (for runs with failpoints only: nothing else asks).
    pub(super) fn spawn(&mut self) {
        use std::sync::atomic::Ordering;
        let (watched, done) = (self.watched.clone(), self.done.clone());
        self.thread = Some(std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let requests: Vec<(PathBuf, i32)> = watched
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .values()
                    .filter(|(request, _)| request.exists())
                    .cloned()
                    .collect();
                for (request, pid) in requests {
                    if signal::pause(pid).is_ok() {
                        let deadline = Instant::now() + Duration::from_secs(5);
                        // Until it is stopped, or gone: a broker that exits
                        // meanwhile will never stop, and the wait is over.
                        while matches!(signal::proc_state(pid), Ok(Some(s)) if s != 'T' && s != 'Z')
                            && Instant::now() < deadline
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    let _ = std::fs::remove_file(&request);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }));
    }

    pub(super) fn set(&self, node: NodeId, entry: Option<(PathBuf, i32)>) {
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        match entry {
            Some(entry) => watched.insert(node, entry),
            None => watched.remove(&node),
        };
    }

    /// Ends the thread, before the containers go (their pids may be reused).
    pub(super) fn stop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for StopWatcher {
    fn drop(&mut self) {
        self.stop();
    }
}
