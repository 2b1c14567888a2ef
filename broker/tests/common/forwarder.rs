//! A TCP forwarder the test controls: every connection to `addr` is relayed to
//! the upstream, until [`Forwarder::cut`] stops relaying bytes in both
//! directions. A cut holds bytes rather than closing connections — the peer sees
//! a stalled stream, as behind a real partition — and [`Forwarder::heal`] lets
//! them flow again. New connections are still accepted while cut (as at a real
//! proxy), they just carry nothing.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const POLL: Duration = Duration::from_millis(10);

pub struct Forwarder {
    pub addr: String,
    upstream: Arc<Mutex<String>>,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Forwarder {
    /// A forwarder to `upstream`; an empty upstream refuses connections (by
    /// closing them) until [`Forwarder::set_upstream`].
    pub fn start(upstream: &str) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let upstream = Arc::new(Mutex::new(upstream.to_string()));
        let acceptor = {
            let (cut, stop, upstream) = (cut.clone(), stop.clone(), upstream.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((down, _)) => {
                            let target = upstream.lock().unwrap().clone();
                            let Ok(up) = TcpStream::connect(&target) else {
                                continue;
                            };
                            down.set_nonblocking(false).ok();
                            for (from, to) in [
                                (down.try_clone().unwrap(), up.try_clone().unwrap()),
                                (up, down),
                            ] {
                                let (cut, stop) = (cut.clone(), stop.clone());
                                std::thread::spawn(move || pump(from, to, &cut, &stop));
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
                        Err(_) => std::thread::sleep(POLL),
                    }
                }
            })
        };
        Forwarder {
            addr,
            upstream,
            cut,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// Relay new connections to `upstream` (a restarted node's new address).
    pub fn set_upstream(&self, upstream: &str) {
        *self.upstream.lock().unwrap() = upstream.to_string();
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Relay `from` → `to` while not stopped; while cut, read nothing (bytes wait
/// in the kernel's buffers and TCP pushes back on the sender).
fn pump(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool, stop: &AtomicBool) {
    from.set_read_timeout(Some(Duration::from_millis(100))).ok();
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        if cut.load(Ordering::SeqCst) {
            std::thread::sleep(POLL);
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // A cut that starts mid-read still holds this chunk back.
                while cut.load(Ordering::SeqCst) && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(POLL);
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}
