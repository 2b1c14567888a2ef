//! The record of every child process group the harness started, and the Ctrl-C
//! path that kills them. Drop and unwinding kill children through their owners;
//! a SIGINT or SIGTERM to the harness never unwinds, so a signal handler reads this
//! fixed table (no locks, no allocation: only async-signal-safe calls) and sends
//! SIGKILL to each group before the harness exits. PR_SET_PDEATHSIG is not used:
//! it fires when the spawning *thread* exits, and tokio's blocking threads are
//! short-lived.
//!
//! Containers are not our children: a Docker run arms [`arm_docker`], and the
//! handler then runs, before it exits, one prepared `sh -c` that removes every
//! container and network labelled with this harness process's session (fork and
//! execve are async-signal-safe; the command line is built when armed, not in
//! the handler). testcontainers' watchdog is not used: it stops one container at
//! a time, leaves networks, and re-raises the signal.

use std::ffi::CString;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Once, OnceLock};

use nix::libc;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// Slots for live process groups; 0 is a free slot. A cluster of N brokers uses
/// N + 2 (etcd and the proxy), so this bounds a run at a few dozen brokers.
const SLOTS: usize = 128;
static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static INSTALL: Once = Once::new();
/// The write end of the pipe the next SIGINT/SIGTERM is handed to instead of
/// killing; -1 when none is.
static DEFER: AtomicI32 = AtomicI32::new(-1);

/// Records a process group to kill on SIGINT/SIGTERM. Returns false when the table
/// is full, which the caller treats as an error rather than run unguarded.
pub fn register(pgid: i32) -> bool {
    let free = GROUPS.iter().any(|slot| {
        slot.compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    // And on disk, for a harness killed outright (orphans.rs).
    super::orphans::record(pgid);
    free
}

/// Forgets a group once its leader has been reaped (its pgid may be reused).
pub fn unregister(pgid: i32) {
    for slot in &GROUPS {
        let _ = slot.compare_exchange(pgid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
    super::orphans::forget(pgid);
}

/// The prepared Docker cleanup: `/bin/sh`, and a null-terminated argv whose
/// strings live for the whole process.
struct DockerCleanup {
    sh: CString,
    argv: Vec<*const libc::c_char>,
}

// SAFETY: the pointers are into leaked CStrings, never freed nor written.
unsafe impl Send for DockerCleanup {}
unsafe impl Sync for DockerCleanup {}

static DOCKER: OnceLock<DockerCleanup> = OnceLock::new();

/// The shell command that ends a run's containers as the process runtime ends
/// its children on Ctrl-C: SIGKILL to every container with label `key=value`
/// (which freezes its data dir), then each one's output saved where its
/// `epochal.log` label says, then every container and network removed.
pub fn docker_cleanup_script(key: &str, value: &str) -> String {
    let log = super::docker::api::LABEL_LOG;
    format!(
        "f='label={key}={value}'; \
         docker ps -q --filter \"$f\" | xargs -r docker kill >/dev/null 2>&1; \
         for c in $(docker ps -aq --filter \"$f\"); do \
           l=$(docker inspect -f '{{{{index .Config.Labels \"{log}\"}}}}' \"$c\" 2>/dev/null); \
           [ -n \"$l\" ] && docker logs \"$c\" >\"$l\" 2>&1; \
         done; \
         docker ps -aq --filter \"$f\" | xargs -r docker rm -f -v >/dev/null 2>&1; \
         docker network ls -q --filter \"$f\" | xargs -r docker network rm >/dev/null 2>&1"
    )
}

/// Makes SIGINT/SIGTERM also remove this process's Docker containers and
/// networks (those labelled `epochal.session=<session>`). Once per process.
pub fn arm_docker(session: &str) {
    DOCKER.get_or_init(|| {
        let script = docker_cleanup_script(super::docker::api::LABEL_SESSION, session);
        let leak = |s: &str| -> *const libc::c_char { CString::new(s).expect("no NUL").into_raw() };
        DockerCleanup {
            sh: CString::new("/bin/sh").expect("no NUL"),
            argv: vec![leak("sh"), leak("-c"), leak(&script), std::ptr::null()],
        }
    });
}

/// Installs the SIGINT/SIGTERM handler once per process. The handler kills
/// every recorded group, reaps the leaders, and exits 128 + the signal; the
/// run's files need nothing more, because the history and harness.log are
/// written a whole line at a time.
pub fn install() {
    INSTALL.call_once(|| {
        let action = SigAction::new(
            SigHandler::Handler(on_signal),
            SaFlags::empty(),
            SigSet::empty(),
        );
        for signal in [Signal::SIGINT, Signal::SIGTERM] {
            // SAFETY: the handler only calls async-signal-safe functions (kill,
            // _exit) and reads atomics.
            unsafe { sigaction(signal, &action) }.expect("installing the signal handler");
        }
    });
}

/// A SIGINT or SIGTERM handed over by [`defer`]: readable once the signal
/// came. Dropping it kills on a signal again.
pub struct Deferred {
    receiver: tokio::net::unix::pipe::Receiver,
    sender: std::os::fd::OwnedFd,
}

/// Hands the next SIGINT or SIGTERM to the returned [`Deferred`] instead of
/// killing every child: for a session whose normal end is a signal. Installs
/// the handler if it is not yet. Needs a tokio runtime (the pipe's reading end
/// is registered with it).
pub fn defer() -> std::io::Result<Deferred> {
    use std::os::fd::AsRawFd;
    install();
    let (sender, receiver) = tokio::net::unix::pipe::pipe()?;
    let sender = sender.into_nonblocking_fd()?;
    DEFER.store(sender.as_raw_fd(), Ordering::SeqCst);
    Ok(Deferred { receiver, sender })
}

impl Deferred {
    /// Awaits the signal; its number (SIGINT or SIGTERM). From then on a
    /// signal kills again.
    pub async fn signalled(&mut self) -> std::io::Result<i32> {
        let mut byte = [0u8; 1];
        loop {
            self.receiver.readable().await?;
            match self.receiver.try_read(&mut byte) {
                Ok(1) => return Ok(i32::from(byte[0])),
                Ok(_) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // Only ours: the handler may have taken it already.
        let _ = DEFER.compare_exchange(
            self.sender.as_raw_fd(),
            -1,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    // A deferred signal: hand it over, once, and kill nothing.
    let deferred = DEFER.swap(-1, Ordering::SeqCst);
    if deferred >= 0 {
        let byte = signal as u8;
        // SAFETY: write is async-signal-safe; the fd stays open while
        // DEFER holds it (Deferred's drop clears it first).
        unsafe { libc::write(deferred, (&byte as *const u8).cast(), 1) };
        return;
    }
    for slot in &GROUPS {
        let pgid = slot.load(Ordering::SeqCst);
        if pgid > 0 {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    // Reap each group leader (waitpid is async-signal-safe; SIGKILL makes the
    // wait short), so none is left even as a zombie for a parent that never
    // reaps. The exit status says which signal ended the run, as a shell would.
    for slot in &GROUPS {
        let pgid = slot.load(Ordering::SeqCst);
        if pgid > 0 {
            let mut status = 0;
            // SAFETY: waitpid is async-signal-safe; the pid is our own child.
            unsafe { libc::waitpid(pgid, &mut status, 0) };
        }
    }
    if let Some(cleanup) = DOCKER.get() {
        // SAFETY: fork, execve, waitpid and _exit are async-signal-safe; the
        // child only execs (with this process's environment, for PATH and
        // DOCKER_HOST) or exits.
        unsafe {
            let child = libc::fork();
            if child == 0 {
                unsafe extern "C" {
                    static environ: *const *const libc::c_char;
                }
                libc::execve(cleanup.sh.as_ptr(), cleanup.argv.as_ptr(), environ);
                libc::_exit(127);
            } else if child > 0 {
                let mut status = 0;
                libc::waitpid(child, &mut status, 0);
            }
        }
    }
    // SAFETY: _exit is async-signal-safe and skips atexit handlers.
    unsafe { libc::_exit(128 + signal) };
}
