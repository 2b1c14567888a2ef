//! The record of every child process group the harness started, and the Ctrl-C
//! path that kills them. Drop and unwinding kill children through their owners;
//! a SIGINT or SIGTERM to the harness never unwinds, so a signal handler reads this
//! fixed table (no locks, no allocation: only async-signal-safe calls) and sends
//! SIGKILL to each group before the harness exits. PR_SET_PDEATHSIG is not used:
//! it fires when the spawning *thread* exits, and tokio's blocking threads are
//! short-lived.

use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::libc;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// Slots for live process groups; 0 is a free slot. A cluster of N brokers uses
/// N + 2 (etcd and the proxy), so this bounds a run at a few dozen brokers.
const SLOTS: usize = 128;
static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static INSTALL: Once = Once::new();

/// Records a process group to kill on SIGINT/SIGTERM. Returns false when the table
/// is full, which the caller treats as an error rather than run unguarded.
pub fn register(pgid: i32) -> bool {
    GROUPS.iter().any(|slot| {
        slot.compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })
}

/// Forgets a group once its leader has been reaped (its pgid may be reused).
pub fn unregister(pgid: i32) {
    for slot in &GROUPS {
        let _ = slot.compare_exchange(pgid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
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

extern "C" fn on_signal(signal: libc::c_int) {
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
    // SAFETY: _exit is async-signal-safe and skips atexit handlers.
    unsafe { libc::_exit(128 + signal) };
}
