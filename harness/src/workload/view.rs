//! etcd's view of the cluster, read once for many clients. Every ack records
//! the ISR and leader epoch etcd showed *after* it (the lost-write rule holds
//! those replicas to account), and every send routes to the leader etcd names
//! then. Read per op, that is two range reads of the whole `/epochal` prefix
//! per send, and the reads, not the broker, bounded the workload's rate
//! (issue 22: ~410 acknowledged sends/s from six producers).
//!
//! [`SharedView::fresh`] keeps the guarantee and shares the read: it returns
//! a view whose read *began after the call did* — so it shows every state
//! etcd had committed when the caller asked, exactly as a read of its own
//! would — but one read serves every caller that was waiting when it began.
//! A read in flight when a caller arrives began too early for it, so the
//! caller waits for the next one, which it starts if nobody has. With N
//! clients the reads per second stay about one per read latency, whatever N.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::observe::{ClusterView, ViewSource};

/// One view, shared: `None` when etcd could not say (the read failed or
/// timed out), as a client's own read would have.
pub type View = Option<Arc<ClusterView>>;

/// Reads etcd's view for every client of a run; cheap to clone.
#[derive(Clone)]
pub struct SharedView {
    inner: Arc<Inner>,
}

struct Inner {
    source: ViewSource,
    /// Bound on one read.
    timeout: Duration,
    /// Reads begun so far, and whether one is in flight.
    reads: Mutex<Reads>,
    /// The latest read that finished: (its sequence number, what it saw,
    /// when it finished).
    latest: watch::Sender<(u64, View, Option<Instant>)>,
}

#[derive(Default)]
struct Reads {
    begun: u64,
    in_flight: bool,
}

impl SharedView {
    /// Views from `source` (an etcd client, or the brokers' Metadata).
    pub fn new(source: impl Into<ViewSource>, timeout: Duration) -> SharedView {
        let (latest, _) = watch::channel((0, None, None));
        SharedView {
            inner: Arc::new(Inner {
                source: source.into(),
                timeout,
                reads: Mutex::new(Reads::default()),
                latest,
            }),
        }
    }

    /// A view read entirely after this call began.
    pub async fn fresh(&self) -> View {
        let mut latest = self.inner.latest.subscribe();
        // The first read that begins from now on is early enough; one in
        // flight began before this call.
        let wanted = {
            let mut reads = self.lock();
            let wanted = reads.begun + 1;
            if !reads.in_flight {
                self.begin(&mut reads);
            }
            wanted
        };
        loop {
            let (seen, view, _) = latest.borrow_and_update().clone();
            if seen >= wanted {
                return view;
            }
            // The read this caller needs may not have begun yet: the one in
            // flight (too early) must finish first, then someone begins it.
            {
                let mut reads = self.lock();
                if !reads.in_flight {
                    self.begin(&mut reads);
                }
            }
            if latest.changed().await.is_err() {
                return None;
            }
        }
    }

    /// The latest view if its read finished within `max_age`, else a fresh
    /// one: for routing a request, where a view a few milliseconds old does
    /// (a send to a deposed leader fails as definitely as it would have a
    /// moment later). Never for what the history records beside an ack.
    pub async fn recent(&self, max_age: Duration) -> View {
        let (_, view, finished) = self.inner.latest.borrow().clone();
        if view.is_some() && finished.is_some_and(|at| at.elapsed() <= max_age) {
            return view;
        }
        self.fresh().await
    }

    /// How many reads of etcd have begun: fewer than the calls, under load.
    pub fn reads(&self) -> u64 {
        self.lock().begun
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reads> {
        self.inner
            .reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Begins read number `begun + 1` on a task of its own, so a caller
    /// that stops waiting (a worker told to stop) never strands the others.
    fn begin(&self, reads: &mut Reads) {
        reads.begun += 1;
        reads.in_flight = true;
        let number = reads.begun;
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let view = tokio::time::timeout(inner.timeout, inner.source.read())
                .await
                .ok()
                .and_then(Result::ok)
                .map(Arc::new);
            let mut reads = inner
                .reads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            reads.in_flight = false;
            inner
                .latest
                .send_replace((number, view, Some(Instant::now())));
        });
    }
}
