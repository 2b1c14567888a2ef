//! Process faults by signal: pause and resume (SIGSTOP/SIGCONT), crash (SIGKILL)
//! and a graceful stop (SIGTERM), plus a reading of the kernel's own view of a
//! process (`/proc/<pid>/stat`'s state letter). It owns no processes: callers say
//! which pid; whether a signal took effect is judged from `/proc`, never assumed.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Why a signal could not be sent or a process state read.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("sending {signal} to pid {pid}: {source}")]
    Send {
        pid: i32,
        signal: Signal,
        source: nix::Error,
    },
    #[error("reading /proc/{pid}/stat: {source}")]
    Read { pid: i32, source: std::io::Error },
    #[error("/proc/{pid}/stat has no state field: {stat:?}")]
    Malformed { pid: i32, stat: String },
}

fn send(pid: i32, signal: Signal) -> Result<(), SignalError> {
    kill(Pid::from_raw(pid), signal).map_err(|source| SignalError::Send {
        pid,
        signal,
        source,
    })
}

/// SIGSTOP: the process stops where it is, sockets open, until [`resume`].
pub fn pause(pid: i32) -> Result<(), SignalError> {
    send(pid, Signal::SIGSTOP)
}

/// SIGCONT: undo [`pause`].
pub fn resume(pid: i32) -> Result<(), SignalError> {
    send(pid, Signal::SIGCONT)
}

/// SIGKILL: a crash; nothing the process had not written survives in its memory.
pub fn kill_now(pid: i32) -> Result<(), SignalError> {
    send(pid, Signal::SIGKILL)
}

/// SIGTERM: ask the process to shut down cleanly.
pub fn terminate(pid: i32) -> Result<(), SignalError> {
    send(pid, Signal::SIGTERM)
}

/// SIGINT: what a terminal's Ctrl-C sends.
pub fn interrupt(pid: i32) -> Result<(), SignalError> {
    send(pid, Signal::SIGINT)
}

/// The same signals, addressed to a whole process group (`kill(-pgid, sig)`), so a
/// child that forked helpers is stopped with them.
pub fn kill_group(pgid: i32) -> Result<(), SignalError> {
    send(-pgid, Signal::SIGKILL)
}

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `D`, `T` stopped, `t` traced,
/// `Z` zombie, ...); `None` when no such process exists any more.
pub fn proc_state(pid: i32) -> Result<Option<char>, SignalError> {
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SignalError::Read { pid, source }),
    };
    // The command name (field 2) is in parentheses and may itself hold spaces or
    // parentheses, so the state is the first field after the LAST ')'.
    stat.rfind(')')
        .and_then(|close| stat[close + 1..].trim_start().chars().next())
        .map(Some)
        .ok_or(SignalError::Malformed { pid, stat })
}

/// True when the kernel reports the process stopped by a signal (state `T`).
pub fn is_stopped(pid: i32) -> Result<bool, SignalError> {
    Ok(proc_state(pid)? == Some('T'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// Polls `/proc` until `want` holds, failing after a deadline (no bare sleeps).
    fn await_state(pid: i32, want: impl Fn(Option<char>) -> bool) -> Option<char> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let state = proc_state(pid).unwrap();
            if want(state) {
                return state;
            }
            assert!(
                Instant::now() < deadline,
                "pid {pid} still in state {state:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn sleeper() -> std::process::Child {
        Command::new("sleep")
            .arg("30")
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    }

    #[test]
    fn pause_shows_t_in_proc_and_resume_clears_it() {
        let mut child = sleeper();
        let pid = child.id() as i32;
        pause(pid).unwrap();
        await_state(pid, |s| s == Some('T'));
        assert!(is_stopped(pid).unwrap());
        resume(pid).unwrap();
        await_state(pid, |s| s != Some('T'));
        assert!(!is_stopped(pid).unwrap());
        kill_now(pid).unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn kill_now_and_terminate_end_the_process() {
        let mut killed = sleeper();
        kill_now(killed.id() as i32).unwrap();
        let status = killed.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(Signal::SIGKILL as i32));

        let mut terminated = sleeper();
        let pid = terminated.id() as i32;
        terminate(pid).unwrap();
        assert_eq!(
            terminated.wait().unwrap().signal(),
            Some(Signal::SIGTERM as i32)
        );
        // Reaped: the kernel no longer knows the pid.
        assert_eq!(proc_state(pid).unwrap(), None);
    }

    #[test]
    fn a_missing_pid_reads_as_none_and_signalling_it_names_it() {
        // Pid max is at most 2^22 on Linux, so this pid cannot exist.
        let pid = (1 << 22) + 7;
        assert_eq!(proc_state(pid).unwrap(), None);
        let err = pause(pid).unwrap_err();
        assert!(err.to_string().contains(&pid.to_string()), "{err}");
    }
}
