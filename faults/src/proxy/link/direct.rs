//! The copy a link makes while no toxic names its stream: read, write, on one
//! future, with no channel between.
//!
//! Handing each chunk from a reader to a sender through a channel, as the
//! toxic path does, costs a wake-up per chunk. Measured with the proxy bench,
//! alternating runs on a busy 2-core machine, best of four: that path echoed
//! 344 MB/s and added 67 µs to a 1-byte round trip, this one 593 MB/s and
//! 38 µs (direct loopback: 918 MB/s, 25 µs).
//!
//! A chunk goes from the read straight to a guarded write (see
//! [`ChainWatch`]), so a toxic added at any moment is seen before the next
//! byte goes out, including while a write waits on a full destination. The
//! moment a toxic names the stream, the link hands what it holds (the unwritten
//! rest of a chunk with its read time, a close, a failure) to the toxic path,
//! which treats it as the first thing it read; the link stays on that path.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::Poll;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::chain::{Item, LinkEnd};
use super::chain_watch::ChainWatch;
use super::duplicates::Duplicates;
use super::frames::Frames;
use crate::proxy::wire::Stream;

/// The most the direct copy reads at once. Loopback segments carry up to
/// 64 KiB, and a full receive queue holds many: a bigger read empties it in
/// fewer syscalls. The proxy's CPU time for 64 MiB echoed both ways (release,
/// busy 2-core machine, medians): 64 KiB 110 ms, 128 KiB 100 ms, 256 KiB
/// 90 ms, 512 KiB 70 ms, 1 MiB 70 ms (the toxic path: 180 ms). The price is
/// 512 KiB per direction of each connection while it copies directly.
pub(super) const DIRECT_READ_BYTES: usize = 512 * 1024;

/// How a direct copy ended.
pub(super) enum Direct {
    /// The source's end (a FIN) was passed on: the link is done.
    Finished,
    /// A toxic names this stream: the toxic path takes over, starting with this
    /// item (read, not yet written), if any.
    Toxic(Option<Item>),
}

/// Copies `source` to `destination` for as long as no toxic names `stream`,
/// doing what the toxic path does when none applies: each chunk written as
/// read, a close passed on as a FIN, a failed read as a reset. `frames`
/// follows what is written. A downstream link leaves for the toxic path, with
/// the chunk just read, once the upstream sent a duplicate whose answer it
/// must remove.
pub(super) async fn copy<R, W>(
    stream: Stream,
    source: &mut R,
    destination: &mut W,
    watch: &mut ChainWatch,
    frames: &mut Frames,
    duplicates: &Duplicates,
) -> Result<Direct, LinkEnd>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buffer = vec![0u8; DIRECT_READ_BYTES];
    loop {
        if watch.names(stream) {
            return Ok(Direct::Toxic(None));
        }
        let read = match read_unless_changed(source, &mut buffer, watch).await {
            Some(read) => read,
            // A change while idle: a toxic that holds or times out a stream acts
            // on idle connections too, so the toxic path must see it now.
            None => continue,
        };
        let read_at = Instant::now();
        match read {
            Ok(0) => loop {
                match watch.shutdown(destination).await {
                    // The peer may already be gone; the connection ends either way.
                    Ok(Some(())) | Err(_) => return Ok(Direct::Finished),
                    Ok(None) if watch.names(stream) => return Ok(Direct::Toxic(Some(Item::End))),
                    Ok(None) => {}
                }
            },
            Ok(len) => {
                // The answer to a duplicate comes after the duplicate was
                // sent, and so after it was registered: checked after the read.
                if stream == Stream::Downstream && duplicates.expected() {
                    return Ok(Direct::Toxic(Some(Item::Data {
                        bytes: Bytes::copy_from_slice(&buffer[..len]),
                        read_at,
                    })));
                }
                let mut written = 0;
                while written < len {
                    match watch.write(destination, &buffer[written..len]).await {
                        Ok(Some(n)) => {
                            frames.pass(&buffer[written..written + n]);
                            written += n;
                        }
                        Ok(None) if watch.names(stream) => {
                            return Ok(Direct::Toxic(Some(Item::Data {
                                bytes: Bytes::copy_from_slice(&buffer[written..len]),
                                read_at,
                            })));
                        }
                        // A change to another stream's toxics: keep writing.
                        Ok(None) => {}
                        Err(error) => return Err(LinkEnd::Reset(format!("write failed: {error}"))),
                    }
                }
            }
            Err(error) => {
                let why = format!("read failed: {error}");
                // A reset is passed on in order, so it may not cross a cut either.
                if watch.names(stream) {
                    return Ok(Direct::Toxic(Some(Item::Failed(why))));
                }
                return Err(LinkEnd::Reset(why));
            }
        }
    }
}

/// Reads into `buffer`, or returns `None` if the chain changes first (nothing
/// read: a TCP read is cancel-safe). The read is tried before the chain is
/// waited on, so a busy stream does not register with the chain per chunk.
async fn read_unless_changed<R: AsyncRead + Unpin>(
    source: &mut R,
    buffer: &mut [u8],
    watch: &mut ChainWatch,
) -> Option<std::io::Result<usize>> {
    let mut changed = pin!(watch.changed());
    poll_fn(|cx| {
        let mut read = ReadBuf::new(buffer);
        if let Poll::Ready(done) = Pin::new(&mut *source).poll_read(cx, &mut read) {
            return Poll::Ready(Some(done.map(|()| read.filled().len())));
        }
        changed.as_mut().poll(cx).map(|()| None)
    })
    .await
}
