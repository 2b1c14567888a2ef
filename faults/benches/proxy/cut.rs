//! The cut measurement of the proxy bench (`../proxy.rs`, which says what is
//! measured and why): a paced stream through one link, cut and healed over and
//! over with the harness's `partition` toxic, each arrival stamped by a receiver
//! that also checks that nothing held is lost or reordered.

use super::*;

/// The cut stream as the receiver sees it.
#[derive(Default)]
struct FlowState {
    /// Messages received in order (the next sequence number due).
    received: u64,
    last_arrival: Option<Instant>,
    record_transit: bool,
    transit_us: Vec<f64>,
    error: Option<String>,
}

/// A paced stream of messages, client to server through the proxy.
struct Flow {
    state: Mutex<FlowState>,
    arrived: Condvar,
    /// Messages the writer has handed to its socket.
    sent: AtomicU64,
    stop: AtomicBool,
    base: Instant,
}

impl Flow {
    fn lock(&self) -> MutexGuard<'_, FlowState> {
        self.state.lock().expect("flow state poisoned")
    }

    fn fail(&self, why: String) {
        self.lock().error.get_or_insert(why);
        self.arrived.notify_all();
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::Acquire)
    }

    fn write(&self, mut stream: TcpStream) {
        let mut seq = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let mut message = [0u8; MESSAGE_BYTES];
            message[..8].copy_from_slice(&seq.to_le_bytes());
            let sent_ns = self.base.elapsed().as_nanos() as u64;
            message[8..16].copy_from_slice(&sent_ns.to_le_bytes());
            if let Err(e) = stream.write_all(&message) {
                self.fail(format!("the cut stream's writer: {e}"));
                return;
            }
            seq += 1;
            self.sent.store(seq, Ordering::Release);
            thread::sleep(MESSAGE_INTERVAL);
        }
    }

    /// Stamps every read with its arrival time and checks that messages come
    /// whole and in order: a cut and its heal must lose nothing.
    fn read(&self, mut stream: TcpStream) {
        let _ = stream.set_read_timeout(Some(RECEIVER_POLL));
        let mut buffer = vec![0; CHUNK_BYTES];
        let mut pending = Vec::new();
        loop {
            let n = match stream.read(&mut buffer) {
                Ok(0) => {
                    if !self.stop.load(Ordering::Relaxed) {
                        self.fail("the cut stream closed".to_owned());
                    }
                    return;
                }
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.fail(format!("the cut stream's reader: {e}"));
                    return;
                }
            };
            let now = Instant::now();
            pending.extend_from_slice(&buffer[..n]);
            let whole = pending.len() / MESSAGE_BYTES * MESSAGE_BYTES;
            let mut state = self.lock();
            for message in pending[..whole].chunks_exact(MESSAGE_BYTES) {
                let seq = u64::from_le_bytes(message[..8].try_into().expect("8 bytes"));
                if seq != state.received {
                    let why = format!(
                        "message {seq} arrived where {} was due: bytes lost or reordered",
                        state.received
                    );
                    state.error.get_or_insert(why);
                }
                state.received = seq + 1;
                if state.record_transit {
                    let sent_ns = u64::from_le_bytes(message[8..16].try_into().expect("8 bytes"));
                    let sent = self.base + Duration::from_nanos(sent_ns);
                    let transit = now.saturating_duration_since(sent);
                    state.transit_us.push(transit.as_secs_f64() * 1e6);
                }
            }
            state.last_arrival = Some(now);
            drop(state);
            pending.drain(..whole);
            self.arrived.notify_all();
        }
    }

    /// Waits until `messages` have arrived, within `timeout`.
    fn wait_received(&self, messages: u64, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            if let Some(why) = &state.error {
                return Err(why.clone());
            }
            if state.received >= messages {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "the cut stream: {} of {messages} messages arrived within {timeout:?}",
                    state.received
                ));
            }
            state = self
                .arrived
                .wait_timeout(state, deadline - now)
                .expect("poisoned")
                .0;
        }
    }

    /// Waits for [`CUT_SETTLE`] without a byte arriving after `since`; returns
    /// the last arrival after `since` (`None`: nothing arrived), or `Err(())`
    /// if bytes still arrived [`CUT_TIMEOUT`] after `since`.
    fn wait_quiet(&self, since: Instant) -> Result<Result<Option<Instant>, ()>, String> {
        let deadline = since + CUT_TIMEOUT;
        let mut state = self.lock();
        loop {
            if let Some(why) = &state.error {
                return Err(why.clone());
            }
            let last = state.last_arrival.filter(|at| *at > since);
            let quiet_until = last.unwrap_or(since) + CUT_SETTLE;
            let now = Instant::now();
            if now >= quiet_until {
                return Ok(Ok(last));
            }
            if now >= deadline {
                return Ok(Err(()));
            }
            let wake = quiet_until.min(deadline) - now;
            state = self.arrived.wait_timeout(state, wake).expect("poisoned").0;
        }
    }
}

pub(crate) struct Cuts {
    /// From the cut's API call returning to the last byte that arrived after
    /// it; 0 when none did. A cut still passing bytes at [`CUT_TIMEOUT`]
    /// counts as that bound.
    pub(crate) effect_ms: Vec<f64>,
    pub(crate) timed_out: usize,
    /// How long the cut's API call took.
    pub(crate) call_ms: Vec<f64>,
    /// Sent to received while the stream flowed, before any cut.
    pub(crate) transit_us: Vec<f64>,
    pub(crate) messages: u64,
}

/// Streams messages through a fresh link and cuts its upstream `cuts` times.
pub(crate) fn measure_cuts(api: &Api, cuts: usize) -> Result<Cuts, String> {
    const LINK: &str = "bench-cut";
    let (sink, accepted) = listen()?;
    let link = api.link(LINK, sink)?;
    let client = connect(link)?;
    client
        .set_nodelay(true)
        .map_err(|e| format!("cannot set TCP_NODELAY: {e}"))?;
    let server = accepted
        .recv_timeout(IO_TIMEOUT)
        .map_err(|_| format!("the proxy did not dial {sink} within {IO_TIMEOUT:?}"))?;
    let flow = Arc::new(Flow {
        state: Mutex::new(FlowState::default()),
        arrived: Condvar::new(),
        sent: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        base: Instant::now(),
    });
    let writer = thread::spawn({
        let flow = Arc::clone(&flow);
        move || flow.write(client)
    });
    let reader = thread::spawn({
        let flow = Arc::clone(&flow);
        move || flow.read(server)
    });
    let measured = cut_repeatedly(api, LINK, &flow, cuts);
    flow.stop.store(true, Ordering::Relaxed);
    // Both end within a message interval or a receiver poll.
    let _ = writer.join();
    let _ = reader.join();
    let mut cut = measured?;
    cut.transit_us = std::mem::take(&mut flow.lock().transit_us);
    cut.messages = flow.lock().received;
    Ok(cut)
}

fn cut_repeatedly(api: &Api, link: &str, flow: &Flow, cuts: usize) -> Result<Cuts, String> {
    flow.lock().record_transit = true;
    flow.wait_received(flow.sent() + TRANSIT_MESSAGES, FLOW_TIMEOUT)?;
    flow.lock().record_transit = false;
    let mut measured = Cuts {
        effect_ms: Vec::new(),
        timed_out: 0,
        call_ms: Vec::new(),
        transit_us: Vec::new(),
        messages: 0,
    };
    for _ in 0..cuts {
        // Flowing: all the last heal released has arrived, and more after it.
        flow.wait_received(flow.sent() + FLOWING_MESSAGES, FLOW_TIMEOUT)?;
        let called = Instant::now();
        api.call(
            "cutting the link",
            api.client.partition(link, Stream::Upstream, OnHeal::Resume),
        )?;
        let returned = Instant::now();
        measured
            .call_ms
            .push((returned - called).as_secs_f64() * 1e3);
        match flow.wait_quiet(returned)? {
            Ok(last) => {
                let effect = last.map_or(Duration::ZERO, |at| at - returned);
                measured.effect_ms.push(effect.as_secs_f64() * 1e3);
            }
            Err(()) => {
                measured.effect_ms.push(CUT_TIMEOUT.as_secs_f64() * 1e3);
                measured.timed_out += 1;
            }
        }
        // A quiet stream proves a cut only if the writer kept offering bytes.
        let (sent, received) = (flow.sent(), flow.lock().received);
        if sent <= received {
            return Err(format!(
                "the cut stream's writer stalled: {sent} messages sent, {received} received"
            ));
        }
        api.call("healing the link", api.client.heal(link, Stream::Upstream))?;
    }
    // Nothing held was lost: every message sent so far arrives, in order.
    flow.wait_received(flow.sent(), FLOW_TIMEOUT)?;
    Ok(measured)
}
