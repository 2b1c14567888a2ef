//! A link's view of its proxy's toxic chain, and the only way a link writes.
//!
//! A partition must hold the next byte: once the API has installed it (which it
//! does before it answers), no further byte may leave a link on that stream.
//! So every write and every FIN is issued while the link holds the chain's read
//! lock and sees no version newer than the one it last acted on. The API's
//! update takes the write lock, so each write syscall either finished before
//! the update (those bytes were in the kernel before the cut) or sees it and
//! writes nothing. A write blocked on a full destination is woken by a chain
//! change as well as by the socket, and writes nothing once woken that way: the
//! bytes it still holds go back through the toxics like any held chunk.

use std::future::{Future, pending, poll_fn};
use std::io;
use std::pin::{Pin, pin};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use tokio::sync::watch;

use super::chain::Chain;
use super::record::{self, Tap};
use crate::proxy::wire::Stream;

pub(super) struct ChainWatch {
    /// The chain as this link last acted on it: its version is what every
    /// write is checked against, under its read lock.
    seen: watch::Receiver<Chain>,
    /// The same channel, only to be woken by changes: waiting takes a receiver
    /// mutably while a guarded write borrows `seen`. It may lag `seen` (a
    /// wake-up then re-checks `seen`), which costs a loop, never a lost change.
    wake: watch::Receiver<Chain>,
    /// False once the proxy dropped its chain (it is being deleted): no change
    /// can come, and the connection is closed from outside.
    open: bool,
    /// What was written, recorded (`epochal-proxy --record`): requests on
    /// the upstream stream, and on a client link responses on the
    /// downstream one.
    tap: Option<Tap>,
}

impl ChainWatch {
    pub fn new(chain: watch::Receiver<Chain>, tap: Option<Tap>) -> Self {
        ChainWatch {
            wake: chain.clone(),
            seen: chain,
            open: true,
            tap,
        }
    }

    /// The chain now, from here on the one the link acts on.
    pub fn current(&mut self) -> Chain {
        self.seen.borrow_and_update().clone()
    }

    /// Whether any toxic is installed on `stream` (drawn or not: the toxic
    /// path draws toxicity and tracks what applies), marking the chain seen.
    pub fn names(&mut self, stream: Stream) -> bool {
        self.seen
            .borrow_and_update()
            .iter()
            .any(|toxic| toxic.stream == stream)
    }

    /// Resolves once the chain differs from the one last acted on (at once if
    /// it already does); never, once the proxy dropped the chain and every
    /// change was seen.
    pub async fn changed(&mut self) {
        changed(&self.seen, &mut self.wake, &mut self.open).await;
    }

    /// Writes some of `bytes` (`Some(n)`, n > 0), waiting for the destination
    /// if it is full, unless the chain changes first: then nothing was written
    /// (`None`), and the caller looks at the chain before trying again.
    /// `destination`'s `poll_write` must write nothing when it returns
    /// `Pending`, as a TCP stream's halves do.
    pub async fn write<W: AsyncWrite + Unpin>(
        &mut self,
        destination: &mut W,
        bytes: &[u8],
    ) -> io::Result<Option<usize>> {
        let before_ns = self.tap.as_ref().map(|_| record::now_ns());
        let written = self
            .guarded(destination, |destination, cx| {
                destination.poll_write(cx, bytes)
            })
            .await?;
        match written {
            Some(0) => Err(io::ErrorKind::WriteZero.into()),
            written => {
                if let (Some(tap), Some(n), Some(before_ns)) = (&mut self.tap, written, before_ns) {
                    tap.written(&bytes[..n], before_ns);
                }
                Ok(written)
            }
        }
    }

    /// Shuts the destination's write side (a FIN), unless the chain changes
    /// first (`None`: not shut).
    pub async fn shutdown<W: AsyncWrite + Unpin>(
        &mut self,
        destination: &mut W,
    ) -> io::Result<Option<()>> {
        self.guarded(destination, |destination, cx| destination.poll_shutdown(cx))
            .await
    }

    /// Runs `op` on `destination` under the chain's read lock while the chain
    /// is the one last acted on; `None` once it is not.
    async fn guarded<W, T>(
        &mut self,
        destination: &mut W,
        mut op: impl FnMut(Pin<&mut W>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> io::Result<Option<T>>
    where
        W: AsyncWrite + Unpin,
    {
        let seen = &self.seen;
        // Not polled (so not registered with the channel) unless the
        // destination is full: most writes complete at once.
        let mut changed = pin!(changed(seen, &mut self.wake, &mut self.open));
        poll_fn(|cx| {
            {
                let chain = seen.borrow();
                if chain.has_changed() {
                    return Poll::Ready(Ok(None));
                }
                // The syscall runs under the read lock: an update waits for it.
                if let Poll::Ready(done) = op(Pin::new(&mut *destination), cx) {
                    return Poll::Ready(done.map(Some));
                }
            }
            // Blocked on the destination: a chain change must wake this too.
            // `changed` checks `seen` first, so a change made since the lock was
            // released is not missed.
            changed.as_mut().poll(cx).map(|()| Ok(None))
        })
        .await
    }
}

async fn changed(
    seen: &watch::Receiver<Chain>,
    wake: &mut watch::Receiver<Chain>,
    open: &mut bool,
) {
    loop {
        if seen.borrow().has_changed() {
            return;
        }
        if !*open {
            return pending().await;
        }
        // `wake` may lag `seen` and resolve at once; the loop then re-checks.
        if wake.changed().await.is_err() {
            *open = false;
        }
    }
}
