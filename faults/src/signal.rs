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

/// What `/proc/<pid>/stat` says of a process that exists (a zombie included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// The state letter: `R`, `S`, `D`, `T` stopped, `t` traced, `Z` zombie, ...
    pub state: char,
    /// When the process started, in clock ticks since boot (field 22): with
    /// the pid, it names one process even after the pid is reused.
    pub start_ticks: u64,
}

/// Whether an error from reading `/proc/<pid>/...` means the process is gone,
/// which is an answer and not a failure. The kernel says it two ways (both
/// seen on Linux 6.18): opening the file of a reaped pid fails with ENOENT,
/// and reading a file opened while the task still existed fails with ESRCH
/// once it has exited and been reaped (procfs finds no task behind the inode).
/// A Docker container's PID 1 is reaped by its shim within moments of exiting,
/// so a read right after a signal that ends it can meet either (issue
/// [stop-race]: ESRCH failed a Docker gate run).
pub fn vanished(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::NotFound
        || error.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32)
}

/// `/proc/<pid>/stat` parsed; `None` when no such process exists any more.
pub fn proc_stat(pid: i32) -> Result<Option<ProcStat>, SignalError> {
    match std::fs::File::open(format!("/proc/{pid}/stat")) {
        Ok(file) => stat_from(pid, file),
        Err(e) if vanished(&e) => Ok(None),
        Err(source) => Err(SignalError::Read { pid, source }),
    }
}

/// Reads and parses an open `/proc/<pid>/stat`. Split from [`proc_stat`] so a
/// test can hold the file open across the process's exit, as a racing reader
/// does.
fn stat_from(pid: i32, mut file: std::fs::File) -> Result<Option<ProcStat>, SignalError> {
    use std::io::Read;
    let mut stat = String::new();
    match file.read_to_string(&mut stat) {
        Ok(_) => {}
        Err(e) if vanished(&e) => return Ok(None),
        Err(source) => return Err(SignalError::Read { pid, source }),
    }
    parse_stat(&stat)
        .map(Some)
        .ok_or(SignalError::Malformed { pid, stat })
}

/// The state (field 3) and start time (field 22) of a `/proc/<pid>/stat`
/// line. The command name (field 2) is in parentheses and may itself hold
/// spaces or parentheses, so the fields are counted after the LAST ')'.
fn parse_stat(stat: &str) -> Option<ProcStat> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start_ticks = fields.nth(18)?.parse().ok()?;
    Some(ProcStat { state, start_ticks })
}

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `D`, `T` stopped, `t` traced,
/// `Z` zombie, ...); `None` when no such process exists any more.
pub fn proc_state(pid: i32) -> Result<Option<char>, SignalError> {
    Ok(proc_stat(pid)?.map(|stat| stat.state))
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
    fn esrch_and_enoent_mean_gone_other_errors_do_not() {
        use std::io::{Error, ErrorKind};
        let esrch = Error::from_raw_os_error(nix::errno::Errno::ESRCH as i32);
        assert!(vanished(&esrch), "ESRCH is a process that went away");
        assert!(vanished(&Error::from(ErrorKind::NotFound)));
        let eacces = Error::from_raw_os_error(nix::errno::Errno::EACCES as i32);
        assert!(
            !vanished(&eacces),
            "a denied read is a failure, not an exit"
        );
    }

    #[test]
    fn a_stat_file_read_after_its_process_was_reaped_reads_as_gone() {
        // The race of issue [stop-race], made certain: the file is opened while
        // the process lives and read after it was killed and reaped. The
        // kernel answers that read with ESRCH; before, that was an error.
        let mut child = sleeper();
        let pid = child.id() as i32;
        let open = std::fs::File::open(format!("/proc/{pid}/stat")).unwrap();
        let mut raw = std::fs::File::open(format!("/proc/{pid}/stat")).unwrap();
        kill_now(pid).unwrap();
        child.wait().unwrap();
        let mut text = String::new();
        let error = std::io::Read::read_to_string(&mut raw, &mut text).unwrap_err();
        assert_eq!(
            error.raw_os_error(),
            Some(nix::errno::Errno::ESRCH as i32),
            "what the kernel says: {error}"
        );
        assert_eq!(stat_from(pid, open).unwrap(), None);
    }

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let line = "42 (a) b) (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(
            parse_stat(line),
            Some(ProcStat {
                state: 'S',
                start_ticks: 987654
            })
        );
        assert_eq!(parse_stat("42 (x) T 1"), None, "too short: no start time");
        let own = proc_stat(std::process::id() as i32).unwrap().unwrap();
        assert!(own.state == 'R' || own.state == 'S', "{own:?}");
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
