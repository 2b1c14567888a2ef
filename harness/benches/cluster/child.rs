//! A child process the bench starts itself (etcd alone, kcat, `epochal run`,
//! a `sleep` to pause): it leads its own process group and is killed and
//! reaped when the guard drops, on every exit path, panics included.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use epochal_faults::signal;

/// How often a wait for a child's exit looks again; every wait has a deadline.
const EXIT_POLL: Duration = Duration::from_millis(5);

pub struct ChildGuard {
    child: Child,
    what: String,
}

impl ChildGuard {
    pub fn spawn(mut command: Command, what: &str) -> Result<Self, String> {
        use std::os::unix::process::CommandExt;
        // Its own group, so the kill reaches whatever it forked too.
        command.process_group(0);
        let child = command
            .spawn()
            .map_err(|e| format!("starting {what}: {e}"))?;
        Ok(ChildGuard {
            child,
            what: what.to_owned(),
        })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// `Err` if it has exited.
    pub fn running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!("{} exited early ({status})", self.what)),
            _ => Ok(()),
        }
    }

    /// Awaits its exit within `timeout`; past it, the child is killed and the
    /// error says so.
    pub fn wait_within(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        match self.exit_within(timeout)? {
            Some(status) => Ok(status),
            None => {
                self.kill();
                Err(format!("{} not done within {timeout:?}", self.what))
            }
        }
    }

    /// Its exit status if it exits within `timeout`; `None` leaves it running.
    pub fn exit_within(&mut self, timeout: Duration) -> Result<Option<ExitStatus>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(Some(status)),
                Ok(None) => {}
                Err(e) => return Err(format!("waiting for {}: {e}", self.what)),
            }
            if Instant::now() > deadline {
                return Ok(None);
            }
            std::thread::sleep(EXIT_POLL);
        }
    }

    /// Awaits its exit within `timeout`; past it, it gets SIGINT, as from a
    /// terminal's Ctrl-C, and `grace` to end, and then SIGKILL. For `epochal`:
    /// on SIGINT it kills its own children, which lead groups of their own,
    /// out of reach of a kill of its group.
    pub fn wait_or_interrupt(
        &mut self,
        timeout: Duration,
        grace: Duration,
    ) -> Result<ExitStatus, String> {
        if let Some(status) = self.exit_within(timeout)? {
            return Ok(status);
        }
        let _ = signal::interrupt(self.pid());
        let ended = self.exit_within(grace);
        self.kill();
        Err(format!(
            "{} not done within {timeout:?}; interrupted ({})",
            self.what,
            match ended {
                Ok(Some(status)) => status.to_string(),
                _ => "and killed".to_owned(),
            }
        ))
    }

    /// SIGKILL to the group, then reap. A leader already reaped is not
    /// signalled: its pid may belong to another process by now.
    pub fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = signal::kill_group(self.pid());
            let _ = self.child.wait();
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
