//! Recording what a proxy forwards: with `epochal-proxy --record DIR`, every
//! Kafka request a proxy writes to its upstream is appended to
//! `DIR/<proxy name>.frames`, stamped with the wall-clock time taken just
//! before the write that completed it (so no broker can have seen the whole
//! request before that moment). On a client link (a proxy whose name starts
//! with `client-`: the harness names the proxy in front of broker i's client
//! port `client-b<i>`) every response the proxy writes back to the client is
//! recorded too, in the same file and under the same connection id, stamped
//! the same way (no client can have read the whole response before then). The
//! harness reads the files after the run: a follower's Fetch requests say
//! what it held and when, which no broker log says
//! (`harness/src/reader/frames.rs`), and a client link's requests and
//! responses are an application's history (`harness/src/app/`). Responses
//! carry no API key: a reader pairs each with its connection's request of the
//! same correlation id, which the broker answers in order.
//!
//! Off the forwarding path: a link hands each whole frame (a `Bytes` it
//! already owns, or one copy of it) to a bounded channel and goes on; one
//! thread per proxy writes them out. When the writer falls behind and the
//! channel is full, the frame — request or response — is dropped, never
//! waited for, and counted; the writer puts a gap record (how many frames
//! were dropped) before the next frame it writes, so a reader knows the file
//! is not whole there: a response may then have no request, or a request no
//! response. A link never stalls for its recorder, and while frames keep
//! coming it does not wake it for each: the writer, once it has written all
//! it was handed, lets frames gather for `GATHER` (250 µs) before it looks
//! again, and waits to be woken only when a look finds none. It gives the
//! buffers of the frames it wrote back to the links, which copy later frames
//! into them.
//!
//! File format, big-endian: the magic `EPFRAMES2\n`, the clocks' anchor
//! (`unix_ns: u64` and `monotonic_ns: u64`, the wall clock and the system's
//! monotonic clock read together when the file was made), then records of
//! `time_ns: u64` (the monotonic clock, `CLOCK_MONOTONIC`), `connection: u64`
//! (the recording's id for the connection, from 1, unique in the file),
//! `kind: u8` (0 a request; 1 a response; 2 a gap), `len: u32`, and `len`
//! bytes of the frame after its size prefix (for a gap: `len` is the number
//! of frames dropped and no bytes follow). A record cut short by the proxy's
//! end is the file's end.
//!
//! Times are the monotonic clock's, not the wall clock's, because the
//! harness holds them against its history, whose clock is the monotonic one
//! (`Instant`): every process on the machine, containers included, reads the
//! same `CLOCK_MONOTONIC`, while the wall clock can be stepped. On this
//! project's VMs it was: a run's wall clock moved 7.5 s ahead of the
//! monotonic clock in 15 s, and a follower's fetches stamped with it came
//! out 7.5 s late against the history, so `isr-acks` named acknowledgements
//! the follower's fetches had in fact preceded. The harness maps these times
//! onto its history through the pair of clocks it read when the history
//! opened (`clock.json`); the file's anchor places them when it has none.
//! `EPFRAMES1\n` files (wall-clock times, no anchor) are still read.

use std::collections::HashMap;
use std::fs::File;
use std::io::{IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};

use super::frames::FRAME_BYTES_MAX;

pub const MAGIC: &[u8] = b"EPFRAMES2\n";
/// The anchor after the magic: two u64 clock readings.
pub const ANCHOR_BYTES: usize = 16;
pub const KIND_REQUEST: u8 = 0;
pub const KIND_RESPONSE: u8 = 1;
pub const KIND_GAP: u8 = 2;

/// The proxies whose responses are recorded too: the clients' links.
const CLIENT_PROXY_PREFIX: &str = "client-";

/// Frames one proxy's writer may be behind by before frames are dropped.
const QUEUE_FRAMES: usize = 16 * 1024;

/// How long the writer lets frames gather once it has written all it was
/// handed; a frame reaches the file at most this much later. A writer that
/// waits on the channel must be woken by the link handing it the next frame
/// (a futex call on the forwarding path, then a thread switch). One that
/// waited after every frame was switched to 43,000-58,000 times for the
/// 89,560 frames of the proxy bench's recorded link, where gathering takes
/// 6,400-8,700, and recording added a median 21-23 µs to the link's round
/// trip p50 instead of 13 µs (`faults/benches/proxy.rs`; docs/benchmarks.md,
/// "Recording on a client link").
const GATHER: Duration = Duration::from_micros(250);

/// The most frames one write hands the file, as one `writev` (each frame
/// is two slices, its record's head and its bytes; Linux takes at most 1,024
/// slices a call). Frames go from their own buffers straight to the file:
/// through a `BufWriter` each frame was copied once more, into the writer's
/// buffer, before the write copied it to the page cache. Earlier, with the
/// default 8 KiB buffer, each 16 KiB frame (a producer's default batch) went
/// out as two writes, 9.3 µs of CPU a frame on the bench's machine against
/// 3.5 µs through a 256 KiB buffer (docs/benchmarks.md, "Recording on a
/// client link").
const BATCH_FRAMES: usize = 480;

/// A frame at least this long is copied into a buffer the writer gave back,
/// when one is at hand. Frames that wait out a `GATHER`, each copied into a
/// new allocation, had the forwarding path fault in fresh pages (in the
/// bench, gathering for 1 ms: 2.6% of its time, against 0.4% without) and
/// cost the recorded link throughput.
const SPARE_BYTES_MIN: usize = 4 * 1024;
/// The most one proxy's writer keeps to give back; past it the oldest go.
const SPARES_BYTES_MAX: usize = 1024 * 1024;

/// Where recordings go, when the proxy was started with `--record`.
static DIR: OnceLock<PathBuf> = OnceLock::new();
/// One writer per proxy name, made at its first connection.
static WRITERS: OnceLock<Mutex<HashMap<String, Writer>>> = OnceLock::new();

/// Turns recording on for every proxy of this process; the directory is
/// made if missing.
pub fn enable(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let _ = DIR.set(dir.to_owned());
    Ok(())
}

/// One frame for the writer: `(time_ns, connection, kind, bytes)`.
type Frame = (u64, u64, u8, Bytes);

#[derive(Clone)]
struct Writer {
    queue: SyncSender<Frame>,
    dropped: Arc<AtomicU64>,
    /// The connections recorded so far: each gets the next number.
    connections: Arc<AtomicU64>,
    /// Emptied buffers of frames written out, newest last.
    spares: Arc<Mutex<Vec<BytesMut>>>,
}

impl Writer {
    /// An empty buffer for a frame of `size` bytes: a spare when one is at
    /// hand (the lock is never waited for), else a new one.
    fn buffer(&self, size: usize) -> BytesMut {
        if size >= SPARE_BYTES_MIN
            && let Ok(mut spares) = self.spares.try_lock()
            && let Some(at) = spares.iter().rposition(|spare| spare.capacity() >= size)
        {
            return spares.swap_remove(at);
        }
        BytesMut::with_capacity(size)
    }
}

/// Keeps the buffer of `frame`, written out, for a link to copy a frame into
/// again, unless it is small or still shared.
fn give_back(spares: &Mutex<Vec<BytesMut>>, frame: Bytes) {
    if frame.len() < SPARE_BYTES_MIN || frame.len() > SPARES_BYTES_MAX {
        return;
    }
    let Ok(mut buffer) = frame.try_into_mut() else {
        return;
    };
    buffer.clear();
    let mut spares = spares.lock().expect("spares poisoned");
    let mut kept: usize = spares.iter().map(BytesMut::capacity).sum();
    while kept + buffer.capacity() > SPARES_BYTES_MAX && !spares.is_empty() {
        kept -= spares.remove(0).capacity();
    }
    if kept + buffer.capacity() <= SPARES_BYTES_MAX {
        spares.push(buffer);
    }
}

fn writer(proxy: &str) -> Option<Writer> {
    let dir = DIR.get()?;
    let mut writers = WRITERS
        .get_or_init(Default::default)
        .lock()
        .expect("recorders poisoned");
    if let Some(writer) = writers.get(proxy) {
        return Some(writer.clone());
    }
    let path = dir.join(format!("{proxy}.frames"));
    // The magic and the anchor go out before the writer starts, so a file
    // that exists is a recording.
    let header = header();
    let file = match File::create(&path).and_then(|mut file| file.write_all(&header).map(|()| file))
    {
        Ok(file) => file,
        Err(error) => {
            tracing::error!(%error, path = %path.display(), "cannot record: the proxy forwards unrecorded");
            return None;
        }
    };
    let (queue, frames) = sync_channel(QUEUE_FRAMES);
    let dropped = Arc::new(AtomicU64::new(0));
    let spares = Arc::new(Mutex::new(Vec::new()));
    let writer = Writer {
        queue,
        dropped: Arc::clone(&dropped),
        connections: Arc::new(AtomicU64::new(0)),
        spares: Arc::clone(&spares),
    };
    std::thread::Builder::new()
        .name(format!("record-{proxy}"))
        .spawn(move || write_all(file, &path, &frames, &dropped, &spares))
        .ok()?;
    writers.insert(proxy.to_owned(), writer.clone());
    Some(writer)
}

fn write_all(
    mut file: File,
    path: &Path,
    frames: &Receiver<Frame>,
    dropped: &AtomicU64,
    spares: &Mutex<Vec<BytesMut>>,
) {
    let mut batch = Vec::with_capacity(BATCH_FRAMES);
    let result = (|| -> std::io::Result<()> {
        while let Ok(first) = frames.recv() {
            let mut next = Some(first);
            while next.is_some() {
                while let Some(frame) = next {
                    batch.push(frame);
                    if batch.len() == BATCH_FRAMES {
                        write_batch(&mut file, &mut batch, dropped, spares)?;
                    }
                    next = frames.try_recv().ok();
                }
                // All handed over is written: it reaches the file, so a
                // proxy killed outright loses at most what it was writing
                // and what it was handed in the last GATHER.
                write_batch(&mut file, &mut batch, dropped, spares)?;
                std::thread::sleep(GATHER);
                next = frames.try_recv().ok();
            }
        }
        Ok(())
    })();
    if let Err(error) = result {
        tracing::error!(%error, path = %path.display(), "recording stopped");
    }
}

/// The 21 bytes before a record's frame: time, connection, kind, length.
type Head = [u8; 21];

fn head(time_ns: u64, connection: u64, kind: u8, len: u32) -> Head {
    let mut head = [0; 21];
    head[..8].copy_from_slice(&time_ns.to_be_bytes());
    head[8..16].copy_from_slice(&connection.to_be_bytes());
    head[16] = kind;
    head[17..].copy_from_slice(&len.to_be_bytes());
    head
}

/// Writes the frames of `batch` (emptying it), the first after a gap record
/// if frames were dropped since the last, in as few `writev` calls as the
/// file takes, and gives their buffers back.
fn write_batch(
    out: &mut impl Write,
    batch: &mut Vec<Frame>,
    dropped: &AtomicU64,
    spares: &Mutex<Vec<BytesMut>>,
) -> std::io::Result<()> {
    let Some(&(time_ns, connection, ..)) = batch.first() else {
        return Ok(());
    };
    let gap = dropped.swap(0, Ordering::Relaxed);
    let gap = (gap > 0).then(|| {
        let frames = u32::try_from(gap).unwrap_or(u32::MAX);
        head(time_ns, connection, KIND_GAP, frames)
    });
    let heads: Vec<Head> = batch
        .iter()
        .map(|(time_ns, connection, kind, frame)| {
            head(*time_ns, *connection, *kind, frame.len() as u32)
        })
        .collect();
    let mut slices: Vec<IoSlice> = Vec::with_capacity(2 * batch.len() + 1);
    slices.extend(gap.as_ref().map(|gap| IoSlice::new(gap)));
    for (head, (.., frame)) in heads.iter().zip(batch.iter()) {
        slices.push(IoSlice::new(head));
        slices.push(IoSlice::new(frame));
    }
    write_all_vectored(out, &mut slices)?;
    for (.., frame) in batch.drain(..) {
        give_back(spares, frame);
    }
    Ok(())
}

/// `Write::write_all_vectored`, which is not stable yet. Every batch's
/// first slice is a record's head, never empty, and `advance_slices` drops
/// the empty slices (a frame of no bytes) as it passes them.
fn write_all_vectored(out: &mut impl Write, mut slices: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// One stream's recorder: it follows the Kafka framing of the bytes
/// written and hands each whole frame to its proxy's writer.
pub(crate) struct Tap {
    writer: Writer,
    connection: u64,
    /// [`KIND_REQUEST`] on the upstream stream, [`KIND_RESPONSE`] on a
    /// client link's downstream one.
    kind: u8,
    /// The size prefix as it arrives.
    head: [u8; 4],
    have: usize,
    /// The frame being gathered, and how many bytes it still lacks.
    body: BytesMut,
    left: usize,
    /// The stream did not look like Kafka's: nothing more is recorded.
    lost: bool,
}

impl Tap {
    /// The taps of one new connection of `proxy`, when recording is on:
    /// its requests, and on a client link its responses, both under one
    /// connection id of the recording's own. (The proxy numbers its
    /// connections anew each time it is enabled; the recording's ids stay
    /// unique in its file, so a reader never pairs a response with another
    /// connection's request.)
    pub(crate) fn pair(proxy: &str) -> (Option<Tap>, Option<Tap>) {
        let Some(writer) = writer(proxy) else {
            return (None, None);
        };
        let connection = writer.connections.fetch_add(1, Ordering::Relaxed) + 1;
        let responses = proxy
            .starts_with(CLIENT_PROXY_PREFIX)
            .then(|| Tap::of(writer.clone(), connection, KIND_RESPONSE));
        (Some(Tap::of(writer, connection, KIND_REQUEST)), responses)
    }

    fn of(writer: Writer, connection: u64, kind: u8) -> Tap {
        Tap {
            writer,
            connection,
            kind,
            head: [0; 4],
            have: 0,
            body: BytesMut::new(),
            left: 0,
            lost: false,
        }
    }

    /// Follows `bytes`, just written to the upstream by a write that began
    /// at `before_ns`.
    pub(crate) fn written(&mut self, mut bytes: &[u8], before_ns: u64) {
        while !bytes.is_empty() && !self.lost {
            if self.left == 0 {
                let n = (4 - self.have).min(bytes.len());
                self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have < 4 {
                    return;
                }
                self.have = 0;
                let size = i32::from_be_bytes(self.head);
                // Shorter than a header's fixed part (a request's api key,
                // version and correlation id; a response's correlation id),
                // or larger than any Kafka frame: not Kafka (etcd's HTTP/2,
                // say).
                let least = if self.kind == KIND_RESPONSE { 4 } else { 8 };
                if size < least || size as u32 > FRAME_BYTES_MAX {
                    self.lost = true;
                    return;
                }
                self.left = size as usize;
                self.body = self.writer.buffer(self.left);
                continue;
            }
            let n = self.left.min(bytes.len());
            self.body.extend_from_slice(&bytes[..n]);
            self.left -= n;
            bytes = &bytes[n..];
            if self.left == 0 {
                let frame = std::mem::take(&mut self.body).freeze();
                match self
                    .writer
                    .queue
                    .try_send((before_ns, self.connection, self.kind, frame))
                {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        self.writer.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    // The writer stopped (its file failed): nothing to do.
                    Err(TrySendError::Disconnected(_)) => self.lost = true,
                }
            }
        }
    }
}

/// The file's head: the magic, then the wall clock and the monotonic clock
/// read together.
fn header() -> Vec<u8> {
    let monotonic = now_ns();
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut out = Vec::with_capacity(MAGIC.len() + ANCHOR_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&unix.to_be_bytes());
    out.extend_from_slice(&monotonic.to_be_bytes());
    out
}

/// The monotonic clock (`CLOCK_MONOTONIC`) in nanoseconds, now: the clock
/// every record is stamped with.
pub(crate) fn now_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        (t.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec() as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    fn records(path: &Path) -> Vec<(u8, u32, Vec<u8>)> {
        let data = std::fs::read(path).unwrap();
        assert!(data.starts_with(MAGIC));
        let mut at = MAGIC.len() + ANCHOR_BYTES;
        let mut out = Vec::new();
        while at + 21 <= data.len() {
            let kind = data[at + 16];
            let len = u32::from_be_bytes(data[at + 17..at + 21].try_into().unwrap());
            at += 21;
            let bytes = if kind == KIND_GAP {
                Vec::new()
            } else {
                data[at..at + len as usize].to_vec()
            };
            at += bytes.len();
            out.push((kind, len, bytes));
        }
        out
    }

    /// The one recording directory of this test process (recording is
    /// turned on once per process).
    fn recording_dir() -> &'static Path {
        static DIR_KEPT: OnceLock<tempfile::TempDir> = OnceLock::new();
        let dir = DIR_KEPT.get_or_init(|| tempfile::tempdir().unwrap()).path();
        enable(dir).unwrap();
        dir
    }

    /// The records of `path` once it holds `count`, within a deadline.
    fn await_records(path: &Path, count: usize) -> Vec<(u8, u32, Vec<u8>)> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let got = if path.exists() {
                records(path)
            } else {
                Vec::new()
            };
            if got.len() >= count {
                return got;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "not {count} records: {got:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn a_client_link_records_responses_beside_requests_and_other_links_do_not() {
        let dir = recording_dir();
        assert!(Tap::pair("b1-b2").1.is_none());
        let (requests, responses) = Tap::pair("client-b3");
        let (mut requests, mut responses) = (requests.unwrap(), responses.unwrap());
        let request = frame(b"\x00\x00\x00\x09\x00\x00\x00\x05body");
        // A response is its correlation id and a body, which may be empty.
        let response = frame(b"\x00\x00\x00\x05");
        requests.written(&request, 10);
        responses.written(&response[..2], 20);
        responses.written(&response[2..], 21);
        let got = await_records(&dir.join("client-b3.frames"), 2);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], (KIND_REQUEST, 12, request[4..].to_vec()));
        assert_eq!(got[1], (KIND_RESPONSE, 4, response[4..].to_vec()));
    }

    /// Takes at most 7 bytes a call, of the first slice only (`Write`'s
    /// own `write_vectored`), so every record is written in pieces.
    struct Trickle(Vec<u8>);

    impl Write for Trickle {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let n = bytes.len().min(7);
            self.0.extend_from_slice(&bytes[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_batch_written_in_pieces_is_its_records_whole_after_a_gap_record() {
        let dropped = AtomicU64::new(3);
        let spares = Mutex::new(Vec::new());
        let mut batch: Vec<Frame> = vec![
            (5, 1, KIND_REQUEST, Bytes::from_static(b"first frame")),
            (6, 2, KIND_RESPONSE, Bytes::new()),
            (7, 1, KIND_REQUEST, Bytes::from(vec![9; SPARE_BYTES_MIN])),
        ];
        let mut out = Trickle(Vec::new());
        write_batch(&mut out, &mut batch, &dropped, &spares).unwrap();
        assert!(batch.is_empty());
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
        let mut expected = head(5, 1, KIND_GAP, 3).to_vec();
        expected.extend_from_slice(&head(5, 1, KIND_REQUEST, 11));
        expected.extend_from_slice(b"first frame");
        expected.extend_from_slice(&head(6, 2, KIND_RESPONSE, 0));
        expected.extend_from_slice(&head(7, 1, KIND_REQUEST, SPARE_BYTES_MIN as u32));
        expected.extend_from_slice(&vec![9; SPARE_BYTES_MIN]);
        assert_eq!(out.0, expected);
        // The large frame's buffer, no longer shared, is kept for a link.
        assert_eq!(spares.lock().unwrap().len(), 1);
        // An empty batch writes nothing.
        write_batch(&mut out, &mut batch, &dropped, &spares).unwrap();
        assert_eq!(out.0.len(), expected.len());
    }

    #[test]
    fn a_written_frames_buffer_takes_a_later_frame_unless_it_is_small_or_shared() {
        let (queue, _frames) = sync_channel(1);
        let writer = Writer {
            queue,
            dropped: Arc::default(),
            connections: Arc::default(),
            spares: Arc::default(),
        };
        let frame = |size: usize| {
            let mut buffer = writer.buffer(size);
            buffer.extend_from_slice(&vec![7; size]);
            buffer.freeze()
        };
        let written = frame(SPARE_BYTES_MIN);
        let at = written.as_ptr();
        give_back(&writer.spares, written);
        let again = writer.buffer(SPARE_BYTES_MIN - 1);
        assert_ne!(again.as_ptr(), at, "a small frame takes a new buffer");
        let again = writer.buffer(SPARE_BYTES_MIN);
        assert_eq!(again.as_ptr(), at);
        assert!(again.is_empty());

        let small = frame(SPARE_BYTES_MIN - 1);
        give_back(&writer.spares, small);
        let shared = frame(SPARE_BYTES_MIN);
        give_back(&writer.spares, shared.clone());
        assert!(writer.spares.lock().unwrap().is_empty());

        // Past the bound the oldest go.
        let written: Vec<Bytes> = (0..SPARES_BYTES_MAX / SPARE_BYTES_MIN + 2)
            .map(|_| frame(SPARE_BYTES_MIN))
            .collect();
        let newest = written.last().unwrap().as_ptr();
        for frame in written {
            give_back(&writer.spares, frame);
        }
        let spares = writer.spares.lock().unwrap();
        let kept: usize = spares.iter().map(BytesMut::capacity).sum();
        assert!(kept <= SPARES_BYTES_MAX, "{kept}");
        assert!(kept > SPARES_BYTES_MAX / 2, "{kept}");
        assert_eq!(spares.last().unwrap().as_ptr(), newest);
    }

    #[test]
    fn a_tap_records_whole_requests_split_anyhow_and_stops_on_a_stream_that_is_not_kafka() {
        let dir = recording_dir();
        let mut tap = Tap::pair("b1-b2").0.unwrap();
        let first = frame(b"\x00\x01\x00\x0cabcdefgh");
        let second = frame(b"\x00\x00\x00\x03zzzz");
        let mut stream = first.clone();
        stream.extend_from_slice(&second);
        // Written one byte, then three, then the rest: frames are whole.
        tap.written(&stream[..1], 1);
        tap.written(&stream[1..4], 2);
        tap.written(&stream[4..], 3);
        // Then bytes no Kafka frame starts with.
        tap.written(b"PRI * HTTP/2.0", 4);
        tap.written(&frame(b"\x00\x01\x00\x0cafter-lost"), 5);
        drop(tap);
        let got = await_records(&dir.join("b1-b2.frames"), 2);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].2, first[4..].to_vec());
        assert_eq!(got[1].2, second[4..].to_vec());
    }
}
