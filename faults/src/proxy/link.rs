//! One direction of one proxied connection: the bytes from a source socket to a
//! destination socket, and the toxics on that stream.
//!
//! While no toxic names its stream, a link copies directly, read then write on
//! one future (see [`direct`]). Once one does, a reader fills a bounded channel
//! with chunks stamped with their read time and a sender takes them in order,
//! applies the toxics that apply to this connection and writes them out; the
//! link stays on that path. Toxics change while a link runs: the sender re-reads
//! the proxy's toxic chain before every wait and every write, and every write
//! on either path is guarded by the chain (see [`chain_watch`]), so a partition
//! added by the API holds the very next byte, even one whose write was waiting
//! on a full destination when it came. A link never reorders, and drops bytes
//! only where a toxic says so (`timeout`, `limit_data`, a reset, a dropped
//! request, a duplicate's answer).
//!
//! Both paths follow the stream's Kafka framing ([`frames`]). While a
//! `kafka_requests` toxic names the stream, or a duplicate's answer is
//! awaited, the toxic path cuts its chunks at frame starts and judges each
//! frame before its first byte goes out; otherwise it passes whole chunks as
//! before, giving the rest of a chunk back to be cut the moment that changes.

mod chain;
mod chain_watch;
mod direct;
mod duplicates;
mod frames;
pub(crate) mod record;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep, sleep_until};

use self::chain::Item;
pub(crate) use self::chain::{Chain, ChainToxic, LinkEnd};
use self::chain_watch::ChainWatch;
use self::direct::Direct;
pub(crate) use self::duplicates::Duplicates;
use self::frames::{Frames, Head, Segment};
use super::toxics::{Bandwidth, KafkaRequests, Latency, OnHeal, RequestAction, Slicer, ToxicKind};
use super::wire::Stream;
use super::{HELD_CHUNKS_MAX, READ_CHUNK_BYTES};

/// The largest request a `duplicate` copies; a bigger one passes once.
const DUPLICATE_BYTES_MAX: u32 = 16 * 1024 * 1024;

/// Runs the link until the source's end has been passed on (`Ok`) or the link
/// decides the whole connection must end (`Err`). `duplicates` is shared with
/// the connection's other link; `tap` records what the link writes.
pub(crate) async fn run<R, W>(
    stream: Stream,
    mut source: R,
    mut destination: W,
    chain: watch::Receiver<Chain>,
    duplicates: Arc<Duplicates>,
    tap: Option<record::Tap>,
) -> Result<(), LinkEnd>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut watch = ChainWatch::new(chain, tap);
    let mut frames = Frames::default();
    let copied = direct::copy(
        stream,
        &mut source,
        &mut destination,
        &mut watch,
        &mut frames,
        &duplicates,
    )
    .await?;
    let first = match copied {
        Direct::Finished => return Ok(()),
        Direct::Toxic(first) => first,
    };
    let (tx, rx) = mpsc::channel(HELD_CHUNKS_MAX);
    let source_done = matches!(first, Some(Item::End | Item::Failed(_)));
    // The direct copy reads more at once than the reader: its chunk goes in as
    // chunks of at most READ_CHUNK_BYTES (stamped with its read time), so what a
    // partition holds stays within HELD_CHUNKS_MAX of them.
    for item in first.into_iter().flat_map(split_chunk) {
        // The channel is new and holds more than a direct read's pieces.
        let _ = tx.try_send(item);
    }
    let sender = Sender {
        stream,
        destination,
        watch,
        draws: HashMap::new(),
        applied: HashMap::new(),
        limit_sent: HashMap::new(),
        bandwidth_free_at: Instant::now(),
        frames,
        carry: BytesMut::new(),
        fate: Fate::Pass,
        duplicates,
        lost_logged: false,
    };
    if source_done {
        drop(tx);
        return sender.run(rx).await;
    }
    let ((), ()) = tokio::try_join!(read(source, tx), sender.run(rx))?;
    Ok(())
}

// A direct read's pieces must fit the channel the toxic path starts with.
const _: () = assert!(direct::DIRECT_READ_BYTES.div_ceil(READ_CHUNK_BYTES) <= HELD_CHUNKS_MAX);

/// `item` as items whose data is at most [`READ_CHUNK_BYTES`] each.
fn split_chunk(item: Item) -> Vec<Item> {
    match item {
        Item::Data { mut bytes, read_at } => {
            let mut items = Vec::with_capacity(bytes.len().div_ceil(READ_CHUNK_BYTES));
            while !bytes.is_empty() {
                let piece = bytes.split_to(bytes.len().min(READ_CHUNK_BYTES));
                items.push(Item::Data {
                    bytes: piece,
                    read_at,
                });
            }
            items
        }
        other => vec![other],
    }
}

async fn read<R: AsyncRead + Unpin>(mut source: R, tx: mpsc::Sender<Item>) -> Result<(), LinkEnd> {
    let mut buffer = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        if buffer.capacity() < READ_CHUNK_BYTES / 4 {
            buffer.reserve(READ_CHUNK_BYTES);
        }
        let item = match source.read_buf(&mut buffer).await {
            Ok(0) => Item::End,
            Ok(_) => Item::Data {
                bytes: buffer.split().freeze(),
                read_at: Instant::now(),
            },
            Err(error) => Item::Failed(format!("read failed: {error}")),
        };
        let last = !matches!(item, Item::Data { .. });
        // A closed channel means the sender already ended the connection.
        if tx.send(item).await.is_err() || last {
            return Ok(());
        }
    }
}

/// The toxics that apply to this link right now, folded into what they demand.
#[derive(Default)]
struct Active {
    /// A partition: nothing may be written or taken from the reader.
    hold: bool,
    /// A `timeout`: bytes are read and dropped.
    drop: bool,
    /// When a `timeout` closes the connection.
    close_at: Option<Instant>,
    reset_peer: Option<Duration>,
    /// `(toxic id, byte limit)` per `limit_data`.
    limits: Vec<(u64, u64)>,
    /// `((toxic id, revision), attributes)` per `latency`; delays add up, as they
    /// would through Toxiproxy's chain.
    latencies: Vec<((u64, u64), Latency)>,
    slicer: Option<Slicer>,
    bandwidth: Option<Bandwidth>,
    slow_close: Option<Duration>,
    /// `kafka_requests` toxics, in the order they were added.
    requests: Vec<KafkaRequests>,
}

impl Active {
    /// The request toxic that acts on the frame starting with `head`: the
    /// first added for its API.
    fn request(&self, head: Option<Head>) -> Option<&KafkaRequests> {
        let head = head?;
        self.requests.iter().find(|r| r.matches(head.api_key()))
    }

    /// Whether the frame starting with `head` is held now: by a partition,
    /// or by a `hold` of its API.
    fn holds(&self, head: Option<Head>) -> bool {
        self.hold
            || self
                .request(head)
                .is_some_and(|r| r.action == RequestAction::Hold)
    }
}

/// What happens to the rest of the frame being passed on.
enum Fate {
    Pass,
    /// Removed: a dropped request, or the answer to a duplicate.
    Drop,
    /// A request to send twice, gathered whole first: its bytes so far, its
    /// head and its first byte's read time.
    Duplicate {
        frame: BytesMut,
        head: Head,
        read_at: Instant,
    },
}

/// How [`Sender::forward`] left its bytes.
enum Forwarded {
    /// Written, or dropped by a toxic (`timeout`).
    Done,
    /// A `drop` of its API removed the frame this starts.
    Dropped,
    /// Nothing more was written: the rest must be cut into frames first (a
    /// request toxic or a duplicate's answer appeared while it waited).
    Rest(Bytes),
}

/// A toxic that applied to this link at some point, remembered so its removal
/// can be acted on (a reset on heal, Toxiproxy's close when a timeout goes).
struct Applied {
    since: Instant,
    kind: ToxicKind,
}

struct Sender<W> {
    stream: Stream,
    destination: W,
    watch: ChainWatch,
    /// Whether each `(toxic id, revision)` applies to this connection: drawn once
    /// against its toxicity, so a toxic affects a connection wholly or not at all.
    draws: HashMap<(u64, u64), bool>,
    applied: HashMap<u64, Applied>,
    /// Bytes passed under each `limit_data`, kept across its updates.
    limit_sent: HashMap<u64, u64>,
    bandwidth_free_at: Instant,
    frames: Frames,
    /// A frame's first bytes, short of a head, kept back until it completes.
    carry: BytesMut,
    fate: Fate,
    duplicates: Arc<Duplicates>,
    lost_logged: bool,
}

impl<W: AsyncWrite + Unpin> Sender<W> {
    async fn run(mut self, mut rx: mpsc::Receiver<Item>) -> Result<(), LinkEnd> {
        loop {
            let active = self.refresh()?;
            if active.hold {
                // Leave the chunks in the channel: once it is full the reader stops
                // and TCP flow control holds the sender (see `toxics::partition`).
                self.wait(None, active.close_at).await;
                continue;
            }
            let item = tokio::select! {
                () = self.watch.changed() => continue,
                () = sleep_until_some(active.close_at) => continue,
                item = rx.recv() => item,
            };
            match item {
                Some(Item::Data { bytes, read_at }) => self.take(bytes, read_at).await?,
                Some(Item::Failed(why)) => {
                    self.gate(None).await?;
                    return Err(LinkEnd::Reset(why));
                }
                Some(Item::End) | None => {
                    self.flush_unframed().await?;
                    return self.finish().await;
                }
            }
        }
    }

    /// Whether this link must judge frames now: a request toxic names its
    /// stream, a duplicate's answer is awaited, or a frame is under way
    /// whose start was judged.
    fn framing(&mut self) -> bool {
        if self.frames.is_lost() {
            if !self.lost_logged && self.wants_frames() {
                self.lost_logged = true;
                tracing::warn!(stream = %self.stream, "not Kafka's framing: request toxics leave this connection alone");
            }
            return false;
        }
        !self.carry.is_empty() || !matches!(self.fate, Fate::Pass) || self.wants_frames()
    }

    fn wants_frames(&mut self) -> bool {
        let stream = self.stream;
        let named = self.watch.current().iter().any(|toxic| {
            toxic.stream == stream && matches!(toxic.kind, ToxicKind::KafkaRequests(_))
        });
        named || (stream == Stream::Downstream && self.duplicates.expected())
    }

    /// Passes a chunk on: whole while no frame needs judging, else frame by
    /// frame.
    async fn take(&mut self, bytes: Bytes, read_at: Instant) -> Result<(), LinkEnd> {
        let rest = if self.framing() {
            bytes
        } else {
            let all = bytes.clone();
            match self.forward(bytes, read_at, None, true).await? {
                Forwarded::Done | Forwarded::Dropped => {
                    self.frames.pass(&all);
                    return Ok(());
                }
                Forwarded::Rest(rest) => {
                    self.frames.pass(&all[..all.len() - rest.len()]);
                    rest
                }
            }
        };
        for segment in self.frames.cut(&mut self.carry, rest) {
            self.segment(segment, read_at).await?;
        }
        Ok(())
    }

    /// One segment of a frame: a frame's start decides its fate, which the
    /// rest of the frame follows.
    async fn segment(&mut self, segment: Segment, read_at: Instant) -> Result<(), LinkEnd> {
        let Segment { bytes, head, last } = segment;
        if let Some(head) = head {
            self.fate = self.fate_of(head, read_at)?;
        }
        match &mut self.fate {
            Fate::Drop => {}
            Fate::Pass => {
                if let Forwarded::Dropped = self.forward(bytes, read_at, head, false).await? {
                    self.fate = Fate::Drop;
                }
            }
            Fate::Duplicate { frame, .. } => {
                frame.put(bytes);
                if last {
                    let Fate::Duplicate {
                        frame,
                        head,
                        read_at,
                    } = std::mem::replace(&mut self.fate, Fate::Pass)
                    else {
                        unreachable!("matched above")
                    };
                    self.send_twice(frame.freeze(), head, read_at).await?;
                }
            }
        }
        if last {
            self.fate = Fate::Pass;
        }
        Ok(())
    }

    /// What becomes of the frame starting with `head`: a duplicate's answer
    /// is removed, a request a `duplicate` names is gathered to be sent
    /// twice; everything else is passed on, where `hold`, `delay` and `drop`
    /// act on its first bytes.
    fn fate_of(&mut self, head: Head, read_at: Instant) -> Result<Fate, LinkEnd> {
        Ok(match self.stream {
            Stream::Downstream => {
                if self.duplicates.expected()
                    && self.duplicates.take(head.response_correlation_id())
                {
                    Fate::Drop
                } else {
                    Fate::Pass
                }
            }
            Stream::Upstream => {
                let duplicate = self
                    .refresh()?
                    .request(Some(head))
                    .is_some_and(|r| r.action == RequestAction::Duplicate);
                if duplicate && head.size() <= DUPLICATE_BYTES_MAX {
                    Fate::Duplicate {
                        frame: BytesMut::new(),
                        head,
                        read_at,
                    }
                } else {
                    Fate::Pass
                }
            }
        })
    }

    /// Sends a whole request, then its copy under a correlation id of the
    /// proxy's, whose answer the downstream link removes.
    async fn send_twice(
        &mut self,
        frame: Bytes,
        head: Head,
        read_at: Instant,
    ) -> Result<(), LinkEnd> {
        match self
            .forward(frame.clone(), read_at, Some(head), false)
            .await?
        {
            Forwarded::Done => {}
            // Removed by a `drop`, or (not asked for here) given back.
            Forwarded::Dropped | Forwarded::Rest(_) => return Ok(()),
        }
        // size (4), api_key (2), api_version (2), then correlation_id (4).
        const CORRELATION_ID_AT: usize = 8;
        if frame.len() < CORRELATION_ID_AT + 4 {
            return Ok(());
        }
        let mut copy = BytesMut::from(&frame[..]);
        let id = self.duplicates.mint();
        tracing::info!(
            stream = %self.stream,
            api_key = head.api_key(),
            duplicate_correlation_id = id,
            "kafka_requests: request duplicated"
        );
        copy[CORRELATION_ID_AT..CORRELATION_ID_AT + 4].copy_from_slice(&id.to_be_bytes());
        self.forward(copy.freeze(), read_at, None, false).await?;
        Ok(())
    }

    /// At the stream's end, what is held back unjudged (a head cut short, a
    /// duplicate's request cut short) goes out as it came.
    async fn flush_unframed(&mut self) -> Result<(), LinkEnd> {
        let mut rest = std::mem::take(&mut self.carry);
        if let Fate::Duplicate { frame, .. } = std::mem::replace(&mut self.fate, Fate::Pass) {
            let mut whole = frame;
            whole.put(rest);
            rest = whole;
        }
        if !rest.is_empty() {
            self.frames.lose();
            self.forward(rest.freeze(), Instant::now(), None, false)
                .await?;
        }
        Ok(())
    }

    /// Reads the chain, draws toxicity for toxics new to this connection, acts on
    /// toxics that were removed, and folds what applies into [`Active`].
    fn refresh(&mut self) -> Result<Active, LinkEnd> {
        let chain = self.watch.current();
        let now = Instant::now();

        let removed: Vec<u64> = self
            .applied
            .keys()
            .filter(|id| !chain.iter().any(|toxic| toxic.id == **id))
            .copied()
            .collect();
        for id in removed {
            self.limit_sent.remove(&id);
            let Some(applied) = self.applied.remove(&id) else {
                continue;
            };
            match applied.kind {
                ToxicKind::Partition(partition) if partition.on_heal == OnHeal::Reset => {
                    return Err(LinkEnd::Reset(
                        "partition removed with on_heal reset".to_owned(),
                    ));
                }
                // Toxiproxy closes a timeout's connections when it goes: the bytes it
                // swallowed are lost, so the stream could not continue intact.
                ToxicKind::Timeout(_) => {
                    return Err(LinkEnd::Close("timeout toxic removed".to_owned()));
                }
                _ => {}
            }
        }

        let mut active = Active::default();
        for toxic in chain.iter().filter(|toxic| toxic.stream == self.stream) {
            let applies = *self
                .draws
                .entry((toxic.id, toxic.revision))
                .or_insert_with(|| toxic.toxicity >= 1.0 || fastrand::f32() < toxic.toxicity);
            if !applies {
                continue;
            }
            let applied = self.applied.entry(toxic.id).or_insert_with(|| Applied {
                since: now,
                kind: toxic.kind.clone(),
            });
            applied.kind = toxic.kind.clone();
            let since = applied.since;
            match &toxic.kind {
                ToxicKind::Partition(_) => active.hold = true,
                ToxicKind::Timeout(timeout) => {
                    active.drop = true;
                    if let Some(after) = timeout.closes_after() {
                        let at = since + after;
                        active.close_at = Some(active.close_at.map_or(at, |other| other.min(at)));
                    }
                }
                ToxicKind::ResetPeer(reset) => {
                    let delay = reset.delay();
                    active.reset_peer = Some(active.reset_peer.map_or(delay, |d| d.min(delay)));
                }
                ToxicKind::LimitData(limit) => active.limits.push((toxic.id, limit.bytes)),
                ToxicKind::Latency(latency) => active
                    .latencies
                    .push(((toxic.id, toxic.revision), latency.clone())),
                ToxicKind::Slicer(slicer) => {
                    active.slicer.get_or_insert_with(|| slicer.clone());
                }
                ToxicKind::Bandwidth(bandwidth) if bandwidth.rate > 0 => {
                    let slower = active
                        .bandwidth
                        .as_ref()
                        .is_none_or(|current| bandwidth.rate < current.rate);
                    if slower {
                        active.bandwidth = Some(bandwidth.clone());
                    }
                }
                ToxicKind::Bandwidth(_) => {}
                ToxicKind::SlowClose(slow) => {
                    let delay = slow.delay();
                    active.slow_close = Some(active.slow_close.map_or(delay, |d| d.max(delay)));
                }
                ToxicKind::KafkaRequests(requests) => active.requests.push(requests.clone()),
            }
        }
        if active.close_at.is_some_and(|at| now >= at) {
            return Err(LinkEnd::Close("timeout toxic expired".to_owned()));
        }
        Ok(active)
    }

    /// Sleeps until the chain changes, `until`, or `close_at`, whichever is first.
    async fn wait(&mut self, until: Option<Instant>, close_at: Option<Instant>) {
        let deadline = match (until, close_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tokio::select! {
            () = self.watch.changed() => {}
            () = sleep_until_some(deadline) => {}
        }
    }

    /// Returns once nothing holds this link — no partition, and no `hold` of
    /// the API of the frame starting with `head` — with the toxics then in
    /// force.
    async fn gate(&mut self, head: Option<Head>) -> Result<Active, LinkEnd> {
        let mut logged = false;
        loop {
            let active = self.refresh()?;
            if !active.holds(head) {
                if logged {
                    tracing::info!(stream = %self.stream, "kafka_requests: held request released");
                }
                return Ok(active);
            }
            if let Some(head) = head.filter(|_| !active.hold && !logged) {
                logged = true;
                tracing::info!(stream = %self.stream, api_key = head.api_key(), "kafka_requests: request held");
            }
            self.wait(None, active.close_at).await;
        }
    }

    /// Passes one chunk through the toxics and out. If the chain changes while
    /// a write waits, nothing more is written: what is left of the chunk starts
    /// over, as a chunk read at `read_at` that was held (a partition holds it,
    /// latency still counts from its read, a timeout drops it).
    ///
    /// `head`: the chunk starts that frame, whose request toxic (`hold`,
    /// `delay`, `drop`) acts until its first byte is written. `whole`: the
    /// chunk was not cut into frames, so if frames must be judged when it
    /// starts over, it is given back instead ([`Forwarded::Rest`]).
    async fn forward(
        &mut self,
        mut bytes: Bytes,
        read_at: Instant,
        mut head: Option<Head>,
        whole: bool,
    ) -> Result<Forwarded, LinkEnd> {
        // Once a limit truncated this chunk the connection closes after it, even
        // if the limit goes while the rest waits: the cut-off bytes are gone.
        let mut limit_reached = false;
        // A latency's delay is drawn once per chunk, not again at each restart.
        let mut delays: Vec<((u64, u64), Duration)> = Vec::new();
        'chunk: loop {
            if whole && self.wants_frames() && !self.frames.is_lost() {
                return Ok(Forwarded::Rest(bytes));
            }
            let active = self.refresh()?;
            if active.drop {
                return Ok(Forwarded::Done);
            }
            if active
                .request(head)
                .is_some_and(|r| r.action == RequestAction::Drop)
            {
                if let Some(head) = head {
                    tracing::info!(stream = %self.stream, api_key = head.api_key(), "kafka_requests: request dropped");
                }
                return Ok(Forwarded::Dropped);
            }
            if let Some(delay) = active.reset_peer {
                sleep(delay).await;
                return Err(LinkEnd::Reset("reset_peer".to_owned()));
            }
            for (id, limit) in &active.limits {
                let sent = self.limit_sent.get(id).copied().unwrap_or(0);
                let left = limit.saturating_sub(sent) as usize;
                if bytes.len() >= left {
                    bytes.truncate(left);
                    limit_reached = true;
                }
            }

            // Latency counts from the read, so a chunk held by a partition for
            // longer than the latency goes out as soon as the partition heals.
            loop {
                let active = self.refresh()?;
                let mut total = Duration::ZERO;
                for (key, latency) in &active.latencies {
                    let delay = match delays.iter().find(|(k, _)| k == key) {
                        Some((_, delay)) => *delay,
                        None => {
                            let delay = latency.sample_delay();
                            delays.push((*key, delay));
                            delay
                        }
                    };
                    total += delay;
                }
                if let Some(request) = active.request(head)
                    && request.action == RequestAction::Delay
                {
                    total += request.delay();
                }
                let release = read_at + total;
                if Instant::now() >= release {
                    break;
                }
                self.wait(Some(release), active.close_at).await;
            }

            let active = self.refresh()?;
            let (pieces, gap) = match &active.slicer {
                Some(slicer) => (slicer.cut(bytes.len()), slicer.gap()),
                None => (vec![bytes.len()], Duration::ZERO),
            };
            let limit_ids: Vec<u64> = active.limits.iter().map(|(id, _)| *id).collect();
            for (index, mut piece) in pieces.into_iter().enumerate() {
                if index > 0 && !gap.is_zero() {
                    sleep(gap).await;
                }
                while piece > 0 {
                    if self.refresh()?.bandwidth.is_some() {
                        sleep_until(self.bandwidth_free_at).await;
                    }
                    let active = self.gate(head).await?;
                    if active.drop {
                        // A timeout arrived while this chunk was on its way.
                        return Ok(Forwarded::Done);
                    }
                    let part = match &active.bandwidth {
                        Some(bandwidth) => piece.min(bandwidth.piece_bytes_max()),
                        None => piece,
                    };
                    let Some(written) = self.write(&bytes[..part]).await? else {
                        continue 'chunk;
                    };
                    bytes.advance(written);
                    piece -= written;
                    // The frame is under way: its request toxic has acted.
                    head = None;
                    if let Some(bandwidth) = &active.bandwidth {
                        self.bandwidth_free_at = self.bandwidth_free_at.max(Instant::now())
                            + bandwidth.transmit_time(written);
                    }
                    for id in &limit_ids {
                        *self.limit_sent.entry(*id).or_insert(0) += written as u64;
                    }
                }
            }
            break;
        }
        if limit_reached {
            return Err(LinkEnd::Close("limit_data reached".to_owned()));
        }
        Ok(Forwarded::Done)
    }

    /// The source closed: pass the close on once no partition holds it and any
    /// `slow_close` delay has passed.
    async fn finish(&mut self) -> Result<(), LinkEnd> {
        // Fixed at the first look, so waking for a chain change does not restart it.
        let mut slow_close_at: Option<Instant> = None;
        loop {
            // Gated on every pass: a partition that comes during a slow close
            // holds the close too.
            let active = self.gate(None).await?;
            if let Some(delay) = active.reset_peer {
                sleep(delay).await;
                return Err(LinkEnd::Reset("reset_peer".to_owned()));
            }
            if let Some(delay) = active.slow_close {
                let at = *slow_close_at.get_or_insert_with(|| Instant::now() + delay);
                if Instant::now() < at {
                    self.wait(Some(at), active.close_at).await;
                    continue;
                }
            }
            match self.watch.shutdown(&mut self.destination).await {
                // The peer may already be gone; the connection ends either way.
                Ok(Some(())) | Err(_) => return Ok(()),
                // The chain changed first: look at it again.
                Ok(None) => {}
            }
        }
    }

    /// Writes some of `bytes`, or nothing (`None`) if the chain changed first.
    async fn write(&mut self, bytes: &[u8]) -> Result<Option<usize>, LinkEnd> {
        self.watch
            .write(&mut self.destination, bytes)
            .await
            .map_err(|error| LinkEnd::Reset(format!("write failed: {error}")))
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
