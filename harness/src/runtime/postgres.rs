//! A private, throwaway PostgreSQL server as a child process: the storage of a
//! system under test that keeps its state in PostgreSQL (tansu). This module
//! finds the server's binaries, initialises a data directory under one the
//! caller gives, builds the server's command line, tells when the server
//! answers, and knows the server's process tree. Spawning the postmaster, and
//! reaping it, are the caller's (a runtime's guarded child); the probe only
//! ever talks to the address it is given.
//!
//! Every child of the postmaster (checkpointer, writers, one backend per
//! connection) calls `setsid`, so a signal to the postmaster's process group
//! reaches the postmaster alone. SIGSTOP to it leaves every open connection
//! served; SIGKILL to it leaves the children to notice its death and exit on
//! their own. So pause, resume and kill go to the tree ([`pause_server`],
//! [`resume_server`], [`kill_server`]).
//!
//! PostgreSQL refuses to run as root, and CI runs as root: then initdb and the
//! server run as the `postgres` account (Debian's package creates it), and the
//! data directory is handed to it ([`Account`]).

use std::net::TcpListener;
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use epochal_faults::signal;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{POLL, Paused, RuntimeError, await_paused, reaper};

/// Where Debian's packages put each major version's binaries:
/// `/usr/lib/postgresql/<major>/bin`.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

/// The role and database the probe (and a system under test) connects as: the
/// superuser initdb creates (`-U postgres`) and its default database.
pub const USER: &str = "postgres";
pub const DATABASE: &str = "postgres";

/// A bound on one probe attempt: a server that accepted but has not answered
/// within it is asked again on a new connection, under the caller's deadline.
const ATTEMPT_TIMEOUT_MAX: Duration = Duration::from_secs(1);

/// A bound on one backend message the probe reads. The startup exchange's
/// messages are tens of bytes; anything this large is not PostgreSQL.
const MESSAGE_SIZE_BYTES_MAX: usize = 64 * 1024;

/// The protocol version of the StartupMessage: 3.0, as (major << 16) | minor.
const PROTOCOL_3_0: i32 = 3 << 16;

/// The server binaries one PostgreSQL installation provides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgBin {
    pub initdb: PathBuf,
    pub postgres: PathBuf,
}

impl PgBin {
    /// The binaries in `dir`, when both are there.
    fn in_dir(dir: &Path) -> Option<Self> {
        let bin = PgBin {
            initdb: dir.join("initdb"),
            postgres: dir.join("postgres"),
        };
        (bin.initdb.is_file() && bin.postgres.is_file()).then_some(bin)
    }
}

/// Finds `initdb` and `postgres`: Debian's directory of the highest major
/// version installed, else `pg_config --bindir`, else the first `PATH` entry
/// holding both.
pub fn find_binaries() -> Result<PgBin, RuntimeError> {
    let path_dirs = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    highest_major_bindir(Path::new(DEBIAN_ROOT))
        .into_iter()
        .chain(pg_config_bindir())
        .chain(path_dirs)
        .find_map(|dir| PgBin::in_dir(&dir))
        .ok_or_else(|| {
            RuntimeError::Missing(vec![
                "PostgreSQL server binaries initdb and postgres \
                 (Debian: apt-get install postgresql)"
                    .into(),
            ])
        })
}

/// `<root>/<major>/bin` for the highest major version under `root`. Majors
/// compare as versions (9.6 < 10 < 15), not as text.
fn highest_major_bindir(root: &Path) -> Option<PathBuf> {
    std::fs::read_dir(root)
        .ok()?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let version = name
                .split('.')
                .map(|part| part.parse::<u32>().ok())
                .collect::<Option<Vec<_>>>()?;
            Some((version, name))
        })
        .max()
        .map(|(_, name)| root.join(name).join("bin"))
}

fn pg_config_bindir() -> Option<PathBuf> {
    let output = Command::new("pg_config").arg("--bindir").output().ok()?;
    if !output.status.success() {
        return None;
    }
    let dir = String::from_utf8(output.stdout).ok()?;
    Some(PathBuf::from(dir.trim()))
}

/// Who initdb and the server run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Account {
    /// The harness's own user, which is not root.
    Current,
    /// Root's stand-in, since PostgreSQL refuses to run as root.
    Other { name: String, uid: u32, gid: u32 },
}

impl Account {
    /// [`Account::Current`] unless this process runs as root; then the
    /// `postgres` account, or an error saying there is none.
    pub fn for_this_process() -> Result<Self, RuntimeError> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(Account::Current);
        }
        let missing = || {
            RuntimeError::Missing(vec![
                "a `postgres` account to run PostgreSQL as: it refuses to run as \
                 root (Debian's postgresql package creates the account)"
                    .into(),
            ])
        };
        let user = nix::unistd::User::from_name(USER)
            .map_err(|errno| RuntimeError::Io {
                what: format!("looking up the `{USER}` account"),
                source: errno.into(),
            })?
            .ok_or_else(missing)?;
        Ok(Account::Other {
            name: user.name,
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        })
    }

    /// Makes `command` run as this account.
    fn apply(&self, command: &mut Command) {
        if let Account::Other { uid, gid, .. } = self {
            // std drops root's supplementary groups when it sets the uid.
            command.uid(*uid).gid(*gid);
        }
    }
}

/// One PostgreSQL server as planned: its binaries, its data directory (which
/// initdb creates), its loopback port, the log initdb's output is appended to
/// (the caller sends the server's stderr there too) and the account it runs
/// as.
#[derive(Debug, Clone)]
pub struct PostgresPlan {
    pub bin: PgBin,
    pub data_dir: PathBuf,
    pub port: u16,
    pub log: PathBuf,
    pub account: Account,
}

impl PostgresPlan {
    /// A plan running as [`Account::for_this_process`].
    pub fn new(
        bin: PgBin,
        data_dir: PathBuf,
        port: u16,
        log: PathBuf,
    ) -> Result<Self, RuntimeError> {
        Ok(PostgresPlan {
            bin,
            data_dir,
            port,
            log,
            account: Account::for_this_process()?,
        })
    }

    /// `127.0.0.1:<port>`, where the server listens (and nowhere else).
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A libpq-style URL for the superuser's default database; no password,
    /// as initdb was told to trust every connection.
    pub fn url(&self) -> String {
        format!("postgres://{USER}@{}/{DATABASE}", self.address())
    }

    /// initdb's command line: trust authentication (the server listens on
    /// loopback only and is thrown away), superuser `postgres`, UTF8 and the C
    /// locale so nothing depends on the host's locales. `--no-sync` only skips
    /// flushing the fresh, empty cluster; the server itself keeps fsync on.
    pub fn initdb_command(&self) -> Command {
        let mut command = Command::new(&self.bin.initdb);
        command
            .arg("-D")
            .arg(&self.data_dir)
            .args([
                "--auth=trust",
                "-U",
                USER,
                "--no-sync",
                "--encoding=UTF8",
                "--locale=C",
            ])
            .current_dir(&self.data_dir);
        self.account.apply(&mut command);
        command
    }

    /// Creates the data directory (mode 0700, owned by the account) and runs
    /// initdb in it, its output appended to the log, killed if it has not
    /// finished within `timeout`. The directory must not exist or be empty.
    pub async fn initdb(&self, timeout: Duration) -> Result<(), RuntimeError> {
        prepare_data_dir(&self.data_dir, &self.account)?;
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(RuntimeError::io("opening the PostgreSQL log"))?;
        let mut command = self.initdb_command();
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(
                log.try_clone()
                    .map_err(RuntimeError::io("opening the PostgreSQL log"))?,
            )
            .stderr(log);
        let child = command
            .spawn()
            .map_err(RuntimeError::io("starting initdb"))?;
        let mut initdb = Initdb(child);
        if !reaper::register(initdb.pid()) {
            return Err(RuntimeError::TooManyChildren);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match initdb.0.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    return Err(RuntimeError::Exited {
                        what: "initdb".into(),
                        status,
                        log: self.log.clone(),
                    });
                }
                Ok(None) => {}
                Err(source) => {
                    return Err(RuntimeError::Io {
                        what: "waiting for initdb".into(),
                        source,
                    });
                }
            }
            if Instant::now() > deadline {
                return Err(RuntimeError::Timeout {
                    what: "initdb".into(),
                    timeout,
                    detail: Some(format!("its log: {}", self.log.display())),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The server's command line, for the caller to spawn in a process group
    /// of its own with stdin, stdout and stderr set (the server logs to
    /// stderr). It listens on TCP at [`address`](Self::address) only: no
    /// Unix socket, since a socket path is limited to 107 bytes (a deep run
    /// directory exceeds it) and the default directory is the system's.
    ///
    /// fsync and synchronous_commit keep their defaults (on): the systems
    /// under test are judged on durability, and a crash must lose only what
    /// PostgreSQL itself would. Several brokers, each with a pool, share the
    /// server, hence 200 connections.
    pub fn server_command(&self) -> Command {
        let mut command = Command::new(&self.bin.postgres);
        command
            .arg("-D")
            .arg(&self.data_dir)
            .arg("-p")
            .arg(self.port.to_string())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=32MB",
                "-c",
                "logging_collector=off",
                "-c",
                "log_destination=stderr",
            ])
            .current_dir(&self.data_dir);
        self.account.apply(&mut command);
        command
    }
}

/// initdb while it runs; dropping it kills its group and reaps it, so no exit
/// path (a timeout, an error, a cancelled future) leaves it behind.
struct Initdb(std::process::Child);

impl Initdb {
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Initdb {
    fn drop(&mut self) {
        // Only while unreaped: a reaped leader's pid may belong to another.
        if let Ok(None) = self.0.try_wait() {
            let _ = signal::kill_group(self.pid());
            let _ = self.0.wait();
        }
        reaper::unregister(self.pid());
    }
}

/// Creates `data_dir` with mode 0700 (PostgreSQL refuses any other) and gives
/// it to the account. For another account, every ancestor it cannot search
/// gets others' search bit (x, not r: names stay unlisted, only known paths
/// can be followed), since a temp dir is typically 0700 and root's.
fn prepare_data_dir(data_dir: &Path, account: &Account) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(data_dir)
        .map_err(RuntimeError::io("creating the PostgreSQL data directory"))?;
    std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700)).map_err(
        RuntimeError::io("setting the PostgreSQL data directory's mode"),
    )?;
    let Account::Other { uid, gid, .. } = account else {
        return Ok(());
    };
    chown(data_dir, Some(*uid), Some(*gid)).map_err(RuntimeError::io(
        "giving the PostgreSQL data directory to its account",
    ))?;
    let absolute = std::path::absolute(data_dir)
        .map_err(RuntimeError::io("resolving the PostgreSQL data directory"))?;
    for ancestor in absolute.ancestors().skip(1) {
        let what = || format!("letting the `{USER}` account search {}", ancestor.display());
        let metadata = std::fs::metadata(ancestor).map_err(|source| RuntimeError::Io {
            what: what(),
            source,
        })?;
        let mode = metadata.permissions().mode();
        if !searchable(mode, metadata_owner(&metadata), *uid, *gid) {
            std::fs::set_permissions(ancestor, std::fs::Permissions::from_mode(mode | 0o001))
                .map_err(|source| RuntimeError::Io {
                    what: what(),
                    source,
                })?;
        }
    }
    Ok(())
}

fn metadata_owner(metadata: &std::fs::Metadata) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    (metadata.uid(), metadata.gid())
}

/// Whether a directory of `mode` owned by `owner` (uid, gid) can be searched
/// by `uid` with primary group `gid` (supplementary groups are dropped).
fn searchable(mode: u32, owner: (u32, u32), uid: u32, gid: u32) -> bool {
    if owner.0 == uid {
        mode & 0o100 != 0
    } else if owner.1 == gid {
        mode & 0o010 != 0
    } else {
        mode & 0o001 != 0
    }
}

/// The live (not zombie) children of `postmaster`, from `/proc`: its
/// auxiliary processes and backends, each leading a session of its own.
pub fn server_children(postmaster: i32) -> Result<Vec<i32>, RuntimeError> {
    let entries = std::fs::read_dir("/proc").map_err(RuntimeError::io("listing /proc"))?;
    let mut children = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // Gone between the listing and the read: not a child any more.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, ppid)) = state_and_ppid(&stat)
            && ppid == postmaster
            && state != 'Z'
        {
            children.push(pid);
        }
    }
    Ok(children)
}

/// The state (field 3) and parent pid (field 4) of a `/proc/<pid>/stat` line,
/// counted after the command name's last ')' (the name may hold either).
fn state_and_ppid(stat: &str) -> Option<(char, i32)> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// `signal` to a child of the postmaster; a child that has exited since it
/// was listed (a backend whose client left) is not an error.
fn signal_child(
    send: fn(i32) -> Result<(), signal::SignalError>,
    pid: i32,
) -> Result<(), RuntimeError> {
    match send(pid) {
        Err(signal::SignalError::Send {
            source: nix::errno::Errno::ESRCH,
            ..
        }) => Ok(()),
        other => Ok(other?),
    }
}

/// Stops the whole server and awaits the kernel reporting each process
/// stopped: the postmaster first, so it forks nothing after its children
/// are listed, then every child. Fails if the postmaster has exited.
pub async fn pause_server(postmaster: i32, timeout: Duration) -> Result<(), RuntimeError> {
    let deadline = Instant::now() + timeout;
    let what = |pid: i32| format!("PostgreSQL process {pid} stopped");
    signal::pause(postmaster)?;
    if await_paused(postmaster, timeout, what(postmaster)).await? == Paused::Ended {
        return Err(RuntimeError::Postgres {
            at: format!("postmaster {postmaster}"),
            detail: "exited instead of stopping".into(),
        });
    }
    let children = server_children(postmaster)?;
    for &child in &children {
        signal_child(signal::pause, child)?;
    }
    for child in children {
        // A child that exited (a backend whose client left) is not running.
        let left = deadline.saturating_duration_since(Instant::now());
        await_paused(child, left, what(child)).await?;
    }
    Ok(())
}

/// Undoes [`pause_server`]: the children first, so none is stopped while
/// the postmaster runs and hands it work.
pub fn resume_server(postmaster: i32) -> Result<(), RuntimeError> {
    for child in server_children(postmaster)? {
        signal_child(signal::resume, child)?;
    }
    Ok(signal::resume(postmaster)?)
}

/// A crash of the whole server: SIGSTOP to the postmaster (so it forks no
/// more), SIGKILL to each child, then to the postmaster's group; then awaits
/// every child gone, under `timeout`. The caller reaps the postmaster, its
/// own child. Children are reparented and reaped by init (or the nearest
/// subreaper): a killed child may linger as a zombie, which holds nothing.
pub async fn kill_server(postmaster: i32, timeout: Duration) -> Result<(), RuntimeError> {
    signal::pause(postmaster)?;
    let deadline = Instant::now() + timeout;
    // Listed only once the postmaster has stopped (or ended), so the list is
    // complete.
    let what = format!("PostgreSQL postmaster {postmaster} stopped before its kill");
    await_paused(postmaster, timeout, what).await?;
    let children = server_children(postmaster)?;
    for &child in &children {
        signal_child(signal::kill_now, child)?;
    }
    signal::kill_group(postmaster)?;
    loop {
        let mut alive = Vec::new();
        for &child in &children {
            if !matches!(signal::proc_state(child)?, Some('Z') | None) {
                alive.push(child);
            }
        }
        if alive.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(RuntimeError::Timeout {
                what: format!("PostgreSQL postmaster {postmaster}'s children gone"),
                timeout,
                detail: Some(format!("still running: {alive:?}")),
            });
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Removes the System V shared memory segment a killed server leaves behind.
/// A server that is shut down removes its own, and one restarted on the same
/// data directory removes its predecessor's; one killed and never restarted
/// leaves it (56 bytes, but one of the kernel's `shmmni` ids, 4096 by
/// default, per kill). Reads the segment from `postmaster.pid` (line 7:
/// `key shmid`) and removes it only if the server in line 1 created it and
/// nothing is attached. Returns whether one was removed.
pub fn release_shared_memory(data_dir: &Path) -> Result<bool, RuntimeError> {
    use nix::libc;
    let pid_file = data_dir.join("postmaster.pid");
    let text = match std::fs::read_to_string(&pid_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) => {
            return Err(RuntimeError::Io {
                what: format!("reading {}", pid_file.display()),
                source,
            });
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    let creator = lines.first().and_then(|l| l.trim().parse::<i32>().ok());
    let shmid = lines
        .get(6)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|id| id.parse::<i32>().ok());
    let (Some(creator), Some(shmid)) = (creator, shmid) else {
        return Ok(false);
    };
    // SAFETY: shmid_ds is plain data; IPC_STAT only writes into it.
    let mut segment: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a shmid_ds for IPC_STAT; no memory is mapped.
    if unsafe { libc::shmctl(shmid, libc::IPC_STAT, &mut segment) } != 0 {
        // Gone already (EINVAL), or not ours to read.
        return Ok(false);
    }
    if segment.shm_cpid != creator || segment.shm_nattch != 0 {
        return Ok(false);
    }
    // SAFETY: IPC_RMID takes no buffer; the segment is unattached.
    if unsafe { libc::shmctl(shmid, libc::IPC_RMID, std::ptr::null_mut()) } != 0 {
        return Err(RuntimeError::Io {
            what: format!("removing PostgreSQL's shared memory segment {shmid}"),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(true)
}

/// A loopback port free at the time of asking. Another process may take it
/// before the server binds it; the server then exits and the caller retries.
pub fn free_port() -> Result<u16, RuntimeError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(RuntimeError::io("picking a free port"))
}

/// Awaits the server at `address` completing a connection's startup as
/// [`USER`] on [`DATABASE`] (AuthenticationOk, then ReadyForQuery), asking
/// again every [`POLL`] until `timeout`. A server still starting answers
/// ErrorResponse 57P03 ("the database system is starting up") or refuses the
/// connection; both are retried. A server that asks for a password, or an
/// answer that is not PostgreSQL's, fails at once: waiting cannot change it.
pub async fn postgres_ready(address: &str, timeout: Duration) -> Result<(), RuntimeError> {
    let deadline = Instant::now() + timeout;
    loop {
        let attempt_timeout = deadline
            .saturating_duration_since(Instant::now())
            .clamp(POLL, ATTEMPT_TIMEOUT_MAX);
        let last = match tokio::time::timeout(attempt_timeout, startup_round_trip(address)).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(Attempt::Wrong(detail))) => {
                return Err(RuntimeError::Postgres {
                    at: format!("at {address}"),
                    detail,
                });
            }
            Ok(Err(Attempt::NotYet(detail))) => detail,
            Err(_) => format!("no answer within {attempt_timeout:?}"),
        };
        if Instant::now() > deadline {
            return Err(RuntimeError::Timeout {
                what: format!("PostgreSQL at {address} ready"),
                timeout,
                detail: Some(last),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Why one probe attempt did not see a ready server.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// Not (yet) serving: refused, closed, or an ErrorResponse. Worth asking
    /// again.
    NotYet(String),
    /// Not a PostgreSQL server we can use: asking again will not help.
    Wrong(String),
}

impl From<std::io::Error> for Attempt {
    fn from(error: std::io::Error) -> Self {
        Attempt::NotYet(error.to_string())
    }
}

/// One connection: StartupMessage, then backend messages until ReadyForQuery
/// or an ErrorResponse; a Terminate before closing in either case.
async fn startup_round_trip(address: &str) -> Result<(), Attempt> {
    let mut stream = TcpStream::connect(address).await?;
    stream.write_all(&startup_message(USER, DATABASE)).await?;
    let (read, mut write) = stream.split();
    let outcome = read_until_ready(&mut BufReader::new(read)).await;
    // Terminate ('X', length 4): the server ends the backend cleanly instead
    // of logging an unexpected EOF. Best effort after an error.
    let _ = write.write_all(&[b'X', 0, 0, 0, 4]).await;
    let _ = write.shutdown().await;
    outcome
}

async fn read_until_ready<R: AsyncReadExt + Unpin>(read: &mut R) -> Result<(), Attempt> {
    let mut authenticated = false;
    loop {
        let kind = read.read_u8().await?;
        let length = read.read_i32().await?;
        let body_bytes = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_sub(4))
            .filter(|&b| b <= MESSAGE_SIZE_BYTES_MAX)
            .ok_or_else(|| {
                Attempt::Wrong(format!("message {:?} of length {length}", kind as char))
            })?;
        let mut body = vec![0; body_bytes];
        read.read_exact(&mut body).await?;
        match kind {
            b'R' => match body
                .get(..4)
                .map(|code| i32::from_be_bytes(code.try_into().expect("4 bytes")))
            {
                Some(0) => authenticated = true,
                code => {
                    return Err(Attempt::Wrong(format!(
                        "asks for authentication (request {code:?}); initdb's trust was not applied"
                    )));
                }
            },
            b'E' => return Err(Attempt::NotYet(error_response_text(&body))),
            b'Z' if authenticated => return Ok(()),
            // ParameterStatus, BackendKeyData, NoticeResponse: read past.
            b'S' | b'K' | b'N' => {}
            other => {
                return Err(Attempt::Wrong(format!(
                    "unexpected message {:?} during startup",
                    other as char
                )));
            }
        }
    }
}

/// The StartupMessage of protocol 3.0: length, version, then NUL-terminated
/// name/value pairs and a final NUL.
fn startup_message(user: &str, database: &str) -> Vec<u8> {
    let mut body = PROTOCOL_3_0.to_be_bytes().to_vec();
    for text in ["user", user, "database", database] {
        body.extend_from_slice(text.as_bytes());
        body.push(0);
    }
    body.push(0);
    let length = i32::try_from(body.len() + 4).expect("a short message");
    let mut message = length.to_be_bytes().to_vec();
    message.extend(body);
    message
}

/// `SQLSTATE: message` from an ErrorResponse's fields (a type byte, then a
/// NUL-terminated string, each; a NUL ends them).
fn error_response_text(body: &[u8]) -> String {
    let (mut code, mut message) = (String::new(), String::new());
    let mut fields = body;
    while let Some((&kind, rest)) = fields.split_first() {
        if kind == 0 {
            break;
        }
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let value = String::from_utf8_lossy(&rest[..end]).into_owned();
        match kind {
            b'C' => code = value,
            b'M' => message = value,
            _ => {}
        }
        fields = rest.get(end + 1..).unwrap_or_default();
    }
    format!("{code}: {message}")
}

mod script;
pub use script::{Row, query, run_script};

#[cfg(test)]
mod tests;
