//! Process groups a harness leaves behind when it is killed outright. A
//! SIGKILL runs no handler and no destructor, so a run's etcd, proxy and
//! brokers outlive it. Each harness process therefore keeps a ledger of the
//! groups it starts, one file of its own under the user's temp directory, and
//! [`reap_dead`] — `epochal gc`, and every process-runtime cluster start —
//! reads the ledgers of harnesses that are gone and kills what is left of
//! their groups.
//!
//! A ledger is named `<harness pid>-<start>` (`<start>`: the process's start
//! time in clock ticks since boot, field 22 of `/proc/<pid>/stat`), so a pid
//! reused since is not taken for the harness. Its lines are `+ <pgid>
//! <start>` when a group is started and `- <pgid>` when it is reaped. A group
//! is killed only while its leader is still the very process recorded (same
//! pid and start time): a pid reused by anything else is never signalled.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use epochal_faults::signal;

/// Where the ledgers are: `$EPOCHAL_LEDGER_DIR`, else
/// `<temp dir>/epochal-<uid>/groups`.
pub fn ledger_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("EPOCHAL_LEDGER_DIR") {
        return PathBuf::from(dir);
    }
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { nix::libc::getuid() };
    std::env::temp_dir()
        .join(format!("epochal-{uid}"))
        .join("groups")
}

/// Whether `pid` is the process that started at `start` (clock ticks since
/// boot) and has not exited: a pid alone may have been reused. A read that
/// fails for any reason but the process being gone answers yes, so gc keeps
/// what it cannot judge — the safe mistake.
fn alive(pid: i32, start: u64) -> bool {
    match signal::proc_stat(pid) {
        Ok(Some(stat)) => stat.start_ticks == start && stat.state != 'Z',
        Ok(None) => false,
        Err(_) => true,
    }
}

/// Whether `pid` is the process that started at `start`, a zombie included:
/// the leader of a group that may still hold live members.
fn same_process(pid: i32, start: u64) -> bool {
    matches!(signal::proc_stat(pid), Ok(Some(stat)) if stat.start_ticks == start)
}

/// This harness process's name in the ledgers: `<pid>-<start>`.
fn own_name() -> Option<String> {
    let pid = std::process::id() as i32;
    let stat = signal::proc_stat(pid).ok()??;
    Some(format!("{pid}-{}", stat.start_ticks))
}

/// Free space /dev/shm must have for etcd's data to go there: etcd 3.4
/// preallocates its 64 MiB write-ahead log and a run's data comes to ~125 MiB;
/// room for several runs at once (a container's default /dev/shm of 64 MiB
/// has none, and etcd would fail to start there).
pub const ETCD_MEMORY_NEEDED: u64 = 1 << 30;

/// Where harnesses keep etcd's data in memory: `/dev/shm/epochal-<uid>-etcd`,
/// one directory per harness named as its ledger is, so a harness killed
/// outright leaves a directory [`reap_dead`] can tell is orphaned. `None` when
/// the machine has no /dev/shm. (Whether it has room for another etcd is
/// [`etcd_memory_dir`]'s question: reaping must still find the root when it
/// is nearly full.)
pub fn etcd_memory_root() -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return None;
    }
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { nix::libc::getuid() };
    Some(shm.join(format!("epochal-{uid}-etcd")))
}

/// A fresh directory for one etcd's data in memory, under this harness's own
/// directory in [`etcd_memory_root`]; removed when dropped. `None` when there
/// is no such memory, it has less than [`ETCD_MEMORY_NEEDED`] free, or it
/// cannot be written (etcd's data then goes to the run directory, on disk).
///
/// Why in memory: etcd fsyncs its log and its database, and on a busy disk a
/// single fsync can stall for seconds (ci/stress.sh saw every lease of a run
/// lapse at once after etcd stalled ~3 s, with no broker at fault). ZooKeeper's
/// administrator's guide gives the same advice for the same reason: its
/// transaction log on a dedicated device, since its sessions expire when the
/// log's syncs stall. etcd is never crashed by a run, so its durability is
/// not under test; its timeline is read through its API at the run's end.
pub fn etcd_memory_dir() -> Option<MemoryDir> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let root = etcd_memory_root()?;
    let stat = nix::sys::statvfs::statvfs(Path::new("/dev/shm")).ok()?;
    if (stat.blocks_available() as u64) * (stat.fragment_size() as u64) < ETCD_MEMORY_NEEDED {
        return None;
    }
    let own = root.join(own_name()?);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = own.join(format!("etcd-{n}"));
    // Another run of this harness may remove `own` (empty) between the two
    // calls, as its own etcd's directory goes: try again then.
    for _ in 0..3 {
        if fs::create_dir_all(&own).is_ok() && fs::create_dir(&dir).is_ok() {
            return Some(MemoryDir(dir));
        }
    }
    None
}

/// An etcd data directory in memory, removed when dropped (after the etcd
/// using it is dead: drop it after the process).
#[derive(Debug)]
pub struct MemoryDir(PathBuf);

impl MemoryDir {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for MemoryDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
        // This harness's directory too, once no other etcd of it uses it.
        if let Some(own) = self.0.parent() {
            let _ = fs::remove_dir(own);
        }
    }
}

/// This harness process's own ledger, opened on first use; `None` when it
/// cannot be written (the run goes on; only a later gc is weaker).
fn own_ledger() -> Option<&'static Mutex<fs::File>> {
    static LEDGER: OnceLock<Option<Mutex<fs::File>>> = OnceLock::new();
    LEDGER
        .get_or_init(|| {
            let dir = ledger_dir();
            fs::create_dir_all(&dir).ok()?;
            let name = own_name()?;
            let file = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(name))
                .ok()?;
            Some(Mutex::new(file))
        })
        .as_ref()
}

fn append(line: String) {
    if let Some(ledger) = own_ledger() {
        let mut file = ledger.lock().unwrap_or_else(|p| p.into_inner());
        // One write per line: a harness killed mid-call leaves whole lines.
        let _ = file.write_all(line.as_bytes());
    }
}

/// Records a process group this harness started (its leader is `pgid`).
pub fn record(pgid: i32) {
    if let Ok(Some(stat)) = signal::proc_stat(pgid) {
        append(format!("+ {pgid} {}\n", stat.start_ticks));
    }
}

/// Records that the group led by `pgid` was reaped.
pub fn forget(pgid: i32) {
    append(format!("- {pgid}\n"));
}

/// What [`reap_dead`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// Groups killed, as (dead harness's pid, group leader).
    pub groups: Vec<(i32, i32)>,
    /// Ledgers of dead harnesses removed.
    pub ledgers: usize,
    /// Dead harnesses' etcd data directories in memory removed.
    pub memory_dirs: usize,
}

/// Kills every group a dead harness recorded and did not reap, then removes
/// its ledger; ledgers of live harnesses are left alone. Waits (bounded, 5 s)
/// for the killed leaders to be gone.
pub fn reap_dead() -> std::io::Result<Reaped> {
    reap_dead_in(&ledger_dir(), etcd_memory_root().as_deref())
}

fn reap_dead_in(dir: &Path, memory: Option<&Path>) -> std::io::Result<Reaped> {
    let mut reaped = Reaped::default();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(reaped),
        Err(e) => return Err(e),
    };
    let mut killed = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let name = entry.file_name();
        let Some((pid, start)) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(p, s)| Some((p.parse::<i32>().ok()?, s.parse::<u64>().ok()?)))
        else {
            continue;
        };
        if alive(pid, start) {
            continue; // that harness is still running
        }
        let text = fs::read_to_string(entry.path()).unwrap_or_default();
        for (pgid, leader_start) in live_groups(&text) {
            if same_process(pgid, leader_start) {
                // SAFETY: kill takes no memory; the group's leader was just
                // checked to be the process the dead harness started.
                unsafe { nix::libc::kill(-pgid, nix::libc::SIGKILL) };
                reaped.groups.push((pid, pgid));
                killed.push((pgid, leader_start));
            }
        }
        // Its etcd data in memory, after the etcd using it was killed above.
        if let Some(memory) = memory {
            let orphaned = memory.join(&name);
            if orphaned.exists() && fs::remove_dir_all(&orphaned).is_ok() {
                reaped.memory_dirs += 1;
            }
        }
        // Another harness starting at the same moment may reap the same
        // ledger: whichever removes it counts it, and the other is not an error.
        match fs::remove_file(entry.path()) {
            Ok(()) => reaped.ledgers += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    // Orphans are reaped by init once dead; wait until they are.
    let deadline = Instant::now() + Duration::from_secs(5);
    while killed.iter().any(|&(pgid, start)| alive(pgid, start)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(reaped)
}

/// The groups a ledger's lines leave recorded and not reaped, with their
/// leaders' start times.
fn live_groups(text: &str) -> Vec<(i32, u64)> {
    let mut groups: BTreeMap<i32, u64> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next().and_then(|p| p.parse().ok())) {
            (Some("+"), Some(pgid)) => {
                if let Some(start) = words.next().and_then(|s| s.parse().ok()) {
                    groups.insert(pgid, start);
                }
            }
            (Some("-"), Some(pgid)) => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    groups.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_keeps_the_groups_started_and_not_reaped() {
        let text = "+ 10 500\n+ 11 501\n- 10\n+ 12 502\ngarbage\n- 99\n";
        assert_eq!(live_groups(text), vec![(11, 501), (12, 502)]);
    }

    #[test]
    fn a_live_harness_ledger_is_left_and_a_dead_ones_removed() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        let own = dir.path().join(own_name().unwrap());
        // A group "led" by this very test process, recorded under a harness
        // start time that is not this process's: that harness is gone, but
        // the leader's start time below does not match either, so nothing is
        // signalled.
        fs::write(&own, "+ 1 1\n").unwrap();
        let dead = dir.path().join(format!("{me}-1"));
        fs::write(&dead, format!("+ {me} 1\n")).unwrap();
        // Each harness's etcd data in memory: the dead one's goes, ours stays.
        let memory = tempfile::tempdir().unwrap();
        let own_memory = memory.path().join(own.file_name().unwrap()).join("etcd-0");
        let dead_memory = memory.path().join(dead.file_name().unwrap()).join("etcd-0");
        for dir in [&own_memory, &dead_memory] {
            fs::create_dir_all(dir).unwrap();
            fs::write(dir.join("db"), "x").unwrap();
        }
        let reaped = reap_dead_in(dir.path(), Some(memory.path())).unwrap();
        assert_eq!(reaped.groups, vec![]);
        assert_eq!(reaped.ledgers, 1);
        assert_eq!(reaped.memory_dirs, 1);
        assert!(own.exists() && !dead.exists());
        assert!(own_memory.exists() && !dead_memory.parent().unwrap().exists());
    }

    #[test]
    fn harnesses_reaping_the_same_dead_ledgers_at_once_both_succeed() {
        // Two campaigns started together each reap the ledgers of harnesses
        // that finished before them: whichever removes a ledger counts it.
        let dir = tempfile::tempdir().unwrap();
        for start in 1..=200 {
            fs::write(
                dir.path().join(format!("2147483646-{start}")),
                "+ 1 1\n- 1\n",
            )
            .unwrap();
        }
        let path = dir.path().to_owned();
        let reapers: Vec<_> = (0..2)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || reap_dead_in(&path, None))
            })
            .collect();
        let removed: usize = reapers
            .into_iter()
            .map(|r| {
                r.join()
                    .unwrap()
                    .expect("no error from a ledger already gone")
                    .ledgers
            })
            .sum();
        assert_eq!(removed, 200);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
