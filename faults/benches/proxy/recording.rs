//! Recording on a client link, against the same link unrecorded: two
//! `client-b1` proxies alike but for `--record` in front of one server that
//! answers Kafka-framed requests, measured in alternating rounds (the
//! `proxy` bench's `--recording-only`; docs/benchmarks.md, "Recording on a
//! client link").

use super::*;

/// The recorded link: a client link, named as the harness names the proxy in
/// front of broker 1's client port, so its responses are recorded beside its
/// requests.
pub(super) const RECORDED_LINK: &str = "client-b1";
/// Requests are Produce v7's header (request header v1: api_key, api_version,
/// correlation_id, client_id) and an opaque payload.
pub(super) const PRODUCE_API_KEY: i16 = 0;
pub(super) const PRODUCE_API_VERSION: i16 = 7;
pub(super) const CLIENT_ID: &[u8] = b"epochal-bench";
/// A request's bytes after its size prefix and before its payload.
pub(super) const REQUEST_HEADER_BYTES: usize = 2 + 2 + 4 + 2 + CLIENT_ID.len();
/// Where a request's correlation id starts, size prefix included.
pub(super) const CORRELATION_ID_AT: usize = 8;
/// A throughput request's payload: a Kafka producer's default `batch.size`.
pub(super) const BATCH_BYTES: usize = 16 * 1024;
/// Requests a throughput connection leaves unanswered at most: the Java
/// producer's default `max.in.flight.requests.per.connection`.
pub(super) const IN_FLIGHT: usize = 5;
/// A round trip's request payload.
pub(super) const SMALL_PAYLOAD_BYTES: usize = 64;
/// The largest frame the answering server or a client here reads.
pub(super) const FRAME_BYTES_LIMIT: usize = 1 << 20;
pub(super) const RECORDING_ROUNDS_FULL: usize = 6;
pub(super) const RECORDING_ROUNDS_QUICK: usize = 2;
/// After each recorded arm the next waits until the recording has not grown
/// for this long: the recorder has written what it was handed, so its writes
/// fall in its own arm's turn, not the next's.
pub(super) const RECORDING_SETTLE: Duration = Duration::from_millis(300);
pub(super) const RECORDING_SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The recording's file format (`faults/src/proxy/link/record.rs`): the
/// magic, then records of time (8), connection (8), kind (1), length (4) and
/// the frame after its size prefix (none for a gap, whose length counts the
/// frames dropped).
pub(super) const RECORDING_MAGIC: &[u8] = b"EPFRAMES2\n";
/// The clocks' anchor after the magic (faults/src/proxy/link/record.rs).
pub(super) const RECORDING_ANCHOR_BYTES: usize = 16;
pub(super) const RECORD_HEAD_BYTES: usize = 8 + 8 + 1 + 4;
pub(super) const RECORD_KIND_REQUEST: u8 = 0;
pub(super) const RECORD_KIND_RESPONSE: u8 = 1;
pub(super) const RECORD_KIND_GAP: u8 = 2;

pub(super) const GOAL_RECORDING_RATIO_MIN: f64 = 0.8;
pub(super) const GOAL_RECORDING_ADDED_P50_US_MAX: f64 = 20.0;

/// A server answering Kafka-framed requests as a broker does, in order on
/// each connection: each request with a response of its correlation id and
/// its payload (the bytes after its header).
pub(super) fn kafka_server() -> Result<SocketAddr, String> {
    let (address, accepted) = listen()?;
    thread::spawn(move || {
        for stream in accepted {
            thread::spawn(move || answer_requests(stream));
        }
    });
    Ok(address)
}

pub(super) fn answer_requests(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(ECHO_IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(ECHO_IDLE_TIMEOUT));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(CHUNK_BYTES, stream);
    let (mut frame, mut response) = (Vec::new(), Vec::new());
    while read_frame(&mut reader, &mut frame).is_ok() {
        // api_key, api_version, correlation_id, then client_id's length.
        let Some(client_id) = frame.get(8..10) else {
            break;
        };
        let client_id = i16::from_be_bytes([client_id[0], client_id[1]]).max(0) as usize;
        let Some(payload) = frame.get(10 + client_id..) else {
            break;
        };
        response.clear();
        response.extend_from_slice(&((4 + payload.len()) as u32).to_be_bytes());
        response.extend_from_slice(&frame[4..8]);
        response.extend_from_slice(payload);
        if writer.write_all(&response).is_err() {
            break;
        }
    }
    let _ = writer.shutdown(Shutdown::Write);
}

/// Reads one frame into `frame`, without its 4-byte size prefix.
pub(super) fn read_frame(reader: &mut impl Read, frame: &mut Vec<u8>) -> std::io::Result<()> {
    let mut size = [0; 4];
    reader.read_exact(&mut size)?;
    let size = u32::from_be_bytes(size) as usize;
    if size > FRAME_BYTES_LIMIT {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            format!("a frame of {size} bytes"),
        ));
    }
    frame.resize(size, 0);
    reader.read_exact(frame)
}

/// A whole request, size prefix included: Produce v7's header with
/// correlation id 0, then `payload` bytes of the echo pattern.
pub(super) fn request_frame(payload: usize) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + REQUEST_HEADER_BYTES + payload);
    frame.extend_from_slice(&((REQUEST_HEADER_BYTES + payload) as u32).to_be_bytes());
    frame.extend_from_slice(&PRODUCE_API_KEY.to_be_bytes());
    frame.extend_from_slice(&PRODUCE_API_VERSION.to_be_bytes());
    frame.extend_from_slice(&0i32.to_be_bytes());
    frame.extend_from_slice(&(CLIENT_ID.len() as i16).to_be_bytes());
    frame.extend_from_slice(CLIENT_ID);
    frame.extend((0..payload).map(|i| (i % PATTERN_PERIOD) as u8));
    frame
}

pub(super) fn set_correlation_id(request: &mut [u8], id: i32) {
    request[CORRELATION_ID_AT..CORRELATION_ID_AT + 4].copy_from_slice(&id.to_be_bytes());
}

/// Checks a response (without its size prefix): the answer to request `id`,
/// carrying `payload` bytes.
pub(super) fn check_response(response: &[u8], id: i32, payload: usize) -> Result<(), String> {
    let got = response
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    if got != Some(id) || response.len() != 4 + payload {
        return Err(format!(
            "the answer to request {id} came as {} bytes with correlation id {got:?}",
            response.len()
        ));
    }
    Ok(())
}

/// Sends `requests` requests of [`BATCH_BYTES`] to `address`, at most
/// [`IN_FLIGHT`] unanswered, reading and checking every answer; returns the
/// time from the first write to the last answer.
pub(super) fn kafka_transfer(address: SocketAddr, requests: usize) -> Result<Duration, String> {
    let deadline = Instant::now() + TRANSFER_TIMEOUT;
    let stream = connect(address)?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("cannot set TCP_NODELAY: {e}"))?;
    let mut writer = stream
        .try_clone()
        .map_err(|e| format!("cannot clone a socket: {e}"))?;
    let mut reader = BufReader::with_capacity(CHUNK_BYTES, stream);
    // A slot per unanswered request: the sender takes one before each
    // request and the reader frees one per answer.
    let (slots, answered) = mpsc::sync_channel::<()>(IN_FLIGHT);
    let started = Instant::now();
    let sending = thread::spawn(move || -> std::io::Result<()> {
        let mut request = request_frame(BATCH_BYTES);
        for id in 0..requests {
            if slots.send(()).is_err() {
                // The reader gave up.
                return Ok(());
            }
            set_correlation_id(&mut request, id as i32);
            writer.write_all(&request)?;
        }
        Ok(())
    });
    let mut response = Vec::new();
    for id in 0..requests {
        if Instant::now() > deadline {
            return Err(format!(
                "requests via {address}: {id} of {requests} answered within {TRANSFER_TIMEOUT:?}"
            ));
        }
        read_frame(&mut reader, &mut response)
            .map_err(|e| format!("requests via {address}: reading answer {id}: {e}"))?;
        check_response(&response, id as i32, BATCH_BYTES)
            .map_err(|why| format!("requests via {address}: {why}"))?;
        let _ = answered.recv();
    }
    let took = started.elapsed();
    sending
        .join()
        .map_err(|_| "the request sender panicked".to_owned())?
        .map_err(|e| format!("requests via {address}: write: {e}"))?;
    Ok(took)
}

/// One connection sending small requests one at a time.
pub(super) struct KafkaConnection {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    request: Vec<u8>,
    response: Vec<u8>,
    next_id: i32,
}

impl KafkaConnection {
    fn open(address: SocketAddr) -> Result<KafkaConnection, String> {
        let writer = connect(address)?;
        writer
            .set_nodelay(true)
            .map_err(|e| format!("cannot set TCP_NODELAY: {e}"))?;
        let reader = writer
            .try_clone()
            .map_err(|e| format!("cannot clone a socket: {e}"))?;
        Ok(KafkaConnection {
            writer,
            reader: BufReader::with_capacity(CHUNK_BYTES, reader),
            request: request_frame(SMALL_PAYLOAD_BYTES),
            response: Vec::new(),
            next_id: 0,
        })
    }

    /// One request and its answer, timed from the write to the whole answer.
    fn round_trip(&mut self) -> Result<Duration, String> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        set_correlation_id(&mut self.request, id);
        let started = Instant::now();
        self.writer
            .write_all(&self.request)
            .and_then(|()| read_frame(&mut self.reader, &mut self.response))
            .map_err(|e| format!("request {id}: {e}"))?;
        let took = started.elapsed();
        check_response(&self.response, id, SMALL_PAYLOAD_BYTES)?;
        Ok(took)
    }
}

/// What a recording holds, read back from its file.
#[derive(Default)]
pub(super) struct Recorded {
    requests: u64,
    responses: u64,
    /// Of those, frames of a throughput request or its answer.
    batches: u64,
    /// Frames the recorder dropped, as its gap records count them.
    dropped: u64,
    file_bytes: u64,
}

pub(super) fn read_recording(path: &Path) -> Result<Recorded, String> {
    let fail = |e: std::io::Error| format!("reading the recording {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(fail)?;
    let mut recorded = Recorded {
        file_bytes: file.metadata().map_err(fail)?.len(),
        ..Recorded::default()
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut magic = [0; RECORDING_MAGIC.len()];
    reader.read_exact(&mut magic).map_err(fail)?;
    if magic != RECORDING_MAGIC {
        return Err(format!("{} is not a recording", path.display()));
    }
    let mut anchor = [0; RECORDING_ANCHOR_BYTES];
    reader.read_exact(&mut anchor).map_err(fail)?;
    let mut head = [0; RECORD_HEAD_BYTES];
    loop {
        match reader.read_exact(&mut head) {
            Ok(()) => {}
            // The file ends, or a record cut short ends it.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(fail(e)),
        }
        let len = u32::from_be_bytes([head[17], head[18], head[19], head[20]]);
        match head[16] {
            RECORD_KIND_GAP => {
                recorded.dropped += u64::from(len);
                continue;
            }
            RECORD_KIND_REQUEST => recorded.requests += 1,
            RECORD_KIND_RESPONSE => recorded.responses += 1,
            kind => return Err(format!("{}: a record of kind {kind}", path.display())),
        }
        if len as usize >= BATCH_BYTES {
            recorded.batches += 1;
        }
        reader.seek_relative(i64::from(len)).map_err(fail)?;
    }
    Ok(recorded)
}

/// Waits until the file at `path` has not grown for [`RECORDING_SETTLE`].
pub(super) fn await_recording_settled(path: &Path) -> Result<(), String> {
    let deadline = Instant::now() + RECORDING_SETTLE_TIMEOUT;
    let size = || std::fs::metadata(path).map_or(0, |m| m.len());
    let (mut last, mut since) = (size(), Instant::now());
    loop {
        thread::sleep(RECORDING_SETTLE / 10);
        let now = size();
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= RECORDING_SETTLE {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the recording {} still grew {RECORDING_SETTLE_TIMEOUT:?} on",
                path.display()
            ));
        }
    }
}

/// Every sample of recording on against off, and what the recording held.
pub(super) struct Recording {
    requests_per_transfer: usize,
    on_mb_s: Vec<f64>,
    off_mb_s: Vec<f64>,
    direct_us: Vec<f64>,
    on_us: Vec<f64>,
    off_us: Vec<f64>,
    /// The CPU time each proxy process spent over its throughput turns (the
    /// recorded one's until its recording settled).
    on_cpu_ns: u64,
    off_cpu_ns: u64,
    /// Frames the recorded link carried, requests and responses, and of those
    /// the throughput requests and their answers.
    carried: u64,
    carried_batches: u64,
    recorded: Recorded,
}

/// The two links measured, each a `client-b1` proxy in a process of its own,
/// started alike but for `--record`, in front of one answering server.
pub(super) struct RecordingArms {
    /// Kept so both proxies live while measured; dropped (killed) with this.
    _processes: [ProxyProcess; 2],
    on: SocketAddr,
    off: SocketAddr,
    on_pid: u32,
    off_pid: u32,
    server: SocketAddr,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

pub(super) fn recording_arms(bin: &Path) -> Result<RecordingArms, String> {
    let server = kafka_server()?;
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a recording directory: {e}"))?;
    let log = |arm: &str| {
        std::env::temp_dir().join(format!(
            "epochal-proxy-bench-{}-{arm}.log",
            std::process::id()
        ))
    };
    let on_process = ProxyProcess::start(bin, log("record"), Some(dir.path()))?;
    let off_process = ProxyProcess::start(bin, log("plain"), None)?;
    let on = Api::new(&on_process.api)?.link(RECORDED_LINK, server)?;
    let off = Api::new(&off_process.api)?.link(RECORDED_LINK, server)?;
    Ok(RecordingArms {
        on_pid: on_process.child.id(),
        off_pid: off_process.child.id(),
        _processes: [on_process, off_process],
        on,
        off,
        server,
        file: dir.path().join(format!("{RECORDED_LINK}.frames")),
        _dir: dir,
    })
}

/// Rounds of: a throughput transfer through each arm, then a block of round
/// trips direct and through each arm; the arms' order alternates from round
/// to round, and after each recorded turn the recorder is let finish.
pub(super) fn measure_recording(bin: &Path, sizes: &Sizes) -> Result<Recording, String> {
    let arms = recording_arms(bin)?;
    let requests = (sizes.echo_bytes / BATCH_BYTES).max(1);
    let mut r = Recording {
        requests_per_transfer: requests,
        on_mb_s: Vec::new(),
        off_mb_s: Vec::new(),
        direct_us: Vec::new(),
        on_us: Vec::new(),
        off_us: Vec::new(),
        on_cpu_ns: 0,
        off_cpu_ns: 0,
        carried: 0,
        carried_batches: 0,
        recorded: Recorded::default(),
    };
    // Direct, recording off, recording on.
    let mut paths = [
        KafkaConnection::open(arms.server)?,
        KafkaConnection::open(arms.off)?,
        KafkaConnection::open(arms.on)?,
    ];
    for path in &mut paths {
        for _ in 0..ROUND_TRIPS_WARMUP {
            path.round_trip()?;
        }
    }
    r.carried += 2 * ROUND_TRIPS_WARMUP as u64;
    let per_block = sizes.round_trips.div_ceil(sizes.recording_rounds);
    for round in 0..sizes.recording_rounds {
        let on_first = round % 2 == 0;
        for on in [on_first, !on_first] {
            let (link, pid) = if on {
                (arms.on, arms.on_pid)
            } else {
                (arms.off, arms.off_pid)
            };
            let cpu_before = cpu_ns(pid);
            let mb_s = mb_per_s(requests * BATCH_BYTES, kafka_transfer(link, requests)?);
            if on {
                r.on_mb_s.push(mb_s);
                r.carried += 2 * requests as u64;
                r.carried_batches += 2 * requests as u64;
                await_recording_settled(&arms.file)?;
                r.on_cpu_ns += cpu_ns(pid).saturating_sub(cpu_before);
            } else {
                r.off_mb_s.push(mb_s);
                r.off_cpu_ns += cpu_ns(pid).saturating_sub(cpu_before);
            }
        }
        for path in [
            0,
            if on_first { 2 } else { 1 },
            if on_first { 1 } else { 2 },
        ] {
            let samples = match path {
                0 => &mut r.direct_us,
                1 => &mut r.off_us,
                _ => &mut r.on_us,
            };
            for _ in 0..per_block {
                samples.push(paths[path].round_trip()?.as_secs_f64() * 1e6);
            }
            if path == 2 {
                r.carried += 2 * per_block as u64;
                await_recording_settled(&arms.file)?;
            }
        }
    }
    drop(paths);
    await_recording_settled(&arms.file)?;
    r.recorded = read_recording(&arms.file)?;
    check_recorded(&r)?;
    Ok(r)
}

/// The time a process's threads have run on a CPU, summed from
/// `/proc/<pid>/task/*/schedstat` (0 where there is no such file).
pub(super) fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The recorded arm must have recorded: requests and responses, the
/// throughput transfers' among them. Frames the recorder dropped (it drops
/// rather than stall the link) are reported, not failed.
pub(super) fn check_recorded(r: &Recording) -> Result<(), String> {
    let got = &r.recorded;
    if got.requests == 0 || got.responses == 0 || got.batches == 0 {
        return Err(format!(
            "RECORDING ON RECORDED NOTHING WORTH MEASURING: the recording holds {} requests, {} \
             responses ({} of them throughput frames) of the {} frames the link carried; the \
             recorded arm measured an unrecorded link",
            got.requests, got.responses, got.batches, r.carried
        ));
    }
    Ok(())
}

/// The figures of recording on against off, drawn from the samples.
pub(super) struct RecordingSummary {
    on_mb_s: f64,
    off_mb_s: f64,
    ratio: f64,
    direct_p50: f64,
    direct_p99: f64,
    on_p50: f64,
    on_p99: f64,
    off_p50: f64,
    off_p99: f64,
}

impl RecordingSummary {
    pub(super) fn of(r: &mut Recording) -> RecordingSummary {
        let on_mb_s = Throughput::best(&r.on_mb_s);
        let off_mb_s = Throughput::best(&r.off_mb_s);
        RecordingSummary {
            on_mb_s,
            off_mb_s,
            ratio: on_mb_s / off_mb_s,
            direct_p50: percentile(&mut r.direct_us, 0.50),
            direct_p99: percentile(&mut r.direct_us, 0.99),
            on_p50: percentile(&mut r.on_us, 0.50),
            on_p99: percentile(&mut r.on_us, 0.99),
            off_p50: percentile(&mut r.off_us, 0.50),
            off_p99: percentile(&mut r.off_us, 0.99),
        }
    }

    fn added_p50(&self) -> f64 {
        self.on_p50 - self.off_p50
    }
}

pub(super) fn signed_us(v: f64) -> String {
    format!("{v:+.1} µs")
}

pub(super) fn print_recording(s: &RecordingSummary, r: &Recording) {
    let got = &r.recorded;
    let ratios: Vec<String> = r
        .on_mb_s
        .iter()
        .zip(&r.off_mb_s)
        .map(|(on, off)| format!("{:.2}", on / off))
        .collect();
    let requests = (r.requests_per_transfer * r.on_mb_s.len()) as f64;
    println!();
    println!(
        "recording on a client link: the recording holds {} requests and {} responses ({} of \
         them throughput frames, of {} carried), {} frames dropped by the recorder, of the {} \
         frames the link carried ({:.0} MiB written); throughput on/off by round: {}; the \
         proxy's CPU per throughput request and answer: on {}, off {}; RTT p50 over direct: on \
         {}, off {} (direct p50 {}, p99 {})",
        got.requests,
        got.responses,
        got.batches,
        r.carried_batches,
        got.dropped,
        r.carried,
        got.file_bytes as f64 / f64::from(1 << 20),
        ratios.join(", "),
        us(r.on_cpu_ns as f64 / 1e3 / requests),
        us(r.off_cpu_ns as f64 / 1e3 / requests),
        signed_us(s.on_p50 - s.direct_p50),
        signed_us(s.off_p50 - s.direct_p50),
        us(s.direct_p50),
        us(s.direct_p99),
    );
}

/// The two goals of recording on a client link.
pub(super) fn recording_figures(s: &RecordingSummary) -> [report::Figure; 2] {
    [
        (
            format!(
                "recording on a client link: throughput on/off ({} KiB requests, {IN_FLIGHT} in \
                 flight)",
                BATCH_BYTES >> 10
            ),
            format!("{:.2}× ({:.0} MB/s recorded)", s.ratio, s.on_mb_s),
            format!("{:.0} MB/s unrecorded", s.off_mb_s),
            format!("≥ {GOAL_RECORDING_RATIO_MIN}×"),
            Some(s.ratio >= GOAL_RECORDING_RATIO_MIN),
        ),
        (
            format!(
                "recording on a client link: RTT p50 on − off, {SMALL_PAYLOAD_BYTES}-byte requests"
            ),
            format!(
                "{} (p50 {}, p99 {} recorded)",
                signed_us(s.added_p50()),
                us(s.on_p50),
                us(s.on_p99)
            ),
            format!("p50 {}, p99 {} unrecorded", us(s.off_p50), us(s.off_p99)),
            format!("≤ +{GOAL_RECORDING_ADDED_P50_US_MAX} µs"),
            Some(s.added_p50() <= GOAL_RECORDING_ADDED_P50_US_MAX),
        ),
    ]
}

pub(super) fn recording_json(s: &RecordingSummary, r: &Recording) -> Value {
    json!({
        "link": RECORDED_LINK,
        "rounds": r.on_mb_s.len(),
        "requests_per_transfer": r.requests_per_transfer,
        "batch_bytes": BATCH_BYTES, "in_flight": IN_FLIGHT,
        "on_mb_s": r.on_mb_s, "off_mb_s": r.off_mb_s,
        "on_best_mb_s": s.on_mb_s, "off_best_mb_s": s.off_mb_s, "ratio": s.ratio,
        "round_trips": r.on_us.len(), "warmup": ROUND_TRIPS_WARMUP,
        "small_payload_bytes": SMALL_PAYLOAD_BYTES,
        "direct_p50_us": s.direct_p50, "direct_p99_us": s.direct_p99,
        "on_p50_us": s.on_p50, "on_p99_us": s.on_p99,
        "off_p50_us": s.off_p50, "off_p99_us": s.off_p99,
        "on_minus_off_p50_us": s.added_p50(), "on_minus_off_p99_us": s.on_p99 - s.off_p99,
        "on_cpu_ms": r.on_cpu_ns as f64 / 1e6, "off_cpu_ms": r.off_cpu_ns as f64 / 1e6,
        "frames_carried": r.carried, "batch_frames_carried": r.carried_batches,
        "recorded_requests": r.recorded.requests, "recorded_responses": r.recorded.responses,
        "recorded_batch_frames": r.recorded.batches, "dropped_frames": r.recorded.dropped,
        "recording_bytes": r.recorded.file_bytes,
    })
}

/// `--recording-only`: recording on against off alone.
pub(super) fn run_recording_only(bin: &Path, sizes: &Sizes) -> Result<(), String> {
    println!(
        "proxy bench, recording only: {} rounds; {} MiB of {} KiB requests each way a round, \
         {IN_FLIGHT} in flight; {} round trips of {SMALL_PAYLOAD_BYTES}-byte requests each way \
         ({ROUND_TRIPS_WARMUP} warmup); {}",
        sizes.recording_rounds,
        sizes.echo_bytes >> 20,
        BATCH_BYTES >> 10,
        sizes.round_trips,
        bin.display()
    );
    let mut recording = measure_recording(bin, sizes)?;
    let summary = RecordingSummary::of(&mut recording);
    print_recording(&summary, &recording);
    print_figures(&recording_figures(&summary));
    Ok(())
}
