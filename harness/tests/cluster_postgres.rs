//! A real PostgreSQL server as runtime/postgres.rs plans it: initdb into a
//! fresh directory, the server spawned in a process group of its own, ready by
//! the probe, serving a query to an independent client (psql); paused and
//! resumed as a tree; killed as a tree, gone with every child and its port
//! free, then restarted on its data; and its shared memory released.
//! Needs the PostgreSQL server package (Debian: postgresql), psql beside it,
//! and under root the `postgres` account.

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use epochal::runtime::RuntimeError;
use epochal::runtime::postgres::{
    Account, PostgresPlan, find_binaries, free_port, kill_server, pause_server, postgres_ready,
    release_shared_memory, resume_server, server_children,
};
use epochal_faults::signal;

const INITDB_TIMEOUT: Duration = Duration::from_secs(60);
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const GONE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's process group: dropping it kills the group and reaps the
/// leader, so a failed assertion leaves nothing running (the postmaster's
/// children, in sessions of their own, exit when they see it die).
struct Group(Child);

impl Group {
    fn pgid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = signal::kill_group(self.pgid());
            let _ = self.0.wait();
        }
    }
}

/// Live (not zombie) processes whose process group is `pgid`, from `/proc`.
fn live_members(pgid: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command name's last ')': state, ppid, pgrp.
        let after = &stat[stat.rfind(')').unwrap() + 1..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields[2].parse::<i32>() == Ok(pgid) && fields[0] != "Z" {
            members.push(pid);
        }
    }
    members
}

/// The real uid of `pid`, from `/proc/<pid>/status`.
fn uid_of(pid: i32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Spawns the planned server in a process group of its own, its output
/// appended to the plan's log.
fn spawn(plan: &PostgresPlan) -> Group {
    let file = File::options().append(true).open(&plan.log).unwrap();
    let mut command = plan.server_command();
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file);
    Group(command.spawn().unwrap())
}

/// `SELECT 1 + 1` through psql, an independent client beside the server
/// binaries; its stdout, or its failure.
fn psql_select(plan: &PostgresPlan) -> Result<String, String> {
    let psql = plan.bin.postgres.with_file_name("psql");
    let output = Command::new(&psql)
        .args(["-h", "127.0.0.1", "-p", &plan.port.to_string()])
        .args(["-U", "postgres", "-d", "postgres", "-XtAc", "SELECT 1 + 1"])
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", psql.display()));
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(format!("{output:?}"))
    }
}

/// Kills the server's tree, reaps the postmaster, and awaits its port free.
async fn kill_and_reap(plan: &PostgresPlan, server: &mut Group, children: &[i32]) {
    kill_server(server.pgid(), GONE_TIMEOUT).await.unwrap();
    assert!(!server.0.wait().unwrap().success());
    for &child in children {
        let state = signal::proc_state(child).unwrap();
        assert!(
            matches!(state, None | Some('Z')),
            "child {child}: {state:?}"
        );
    }
    let deadline = Instant::now() + GONE_TIMEOUT;
    while TcpListener::bind(plan.address()).is_err() {
        assert!(Instant::now() < deadline, "port {} not free", plan.port);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(std::net::TcpStream::connect(plan.address()).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_starts_serves_pauses_and_is_reaped() {
    let run = tempfile::tempdir().unwrap();
    let plan = PostgresPlan::new(
        find_binaries().unwrap(),
        run.path().join("postgres"),
        free_port().unwrap(),
        run.path().join("postgres.log"),
    )
    .unwrap();
    let log = || std::fs::read_to_string(&plan.log).unwrap_or_default();

    plan.initdb(INITDB_TIMEOUT).await.unwrap();
    assert!(plan.data_dir.join("PG_VERSION").is_file(), "{}", log());
    let data = std::fs::metadata(&plan.data_dir).unwrap();
    assert_eq!(data.mode() & 0o777, 0o700);
    let want_uid = match &plan.account {
        Account::Current => nix::unistd::geteuid().as_raw(),
        Account::Other { uid, .. } => *uid,
    };
    assert_eq!(data.uid(), want_uid);

    let mut server = spawn(&plan);
    let postmaster = server.pgid();
    if let Err(e) = postgres_ready(&plan.address(), READY_TIMEOUT).await {
        panic!("{e}\n{}", log());
    }
    assert_eq!(
        uid_of(postmaster),
        want_uid,
        "the server runs as its account"
    );
    assert_eq!(psql_select(&plan).unwrap(), "2");

    // The postmaster's helpers lead sessions of their own: not in its group.
    let children = server_children(postmaster).unwrap();
    assert!(!children.is_empty());
    assert_eq!(live_members(postmaster), vec![postmaster]);

    // Paused, the whole tree is stopped and nothing answers; resumed, it does.
    pause_server(postmaster, GONE_TIMEOUT).await.unwrap();
    for pid in server_children(postmaster).unwrap() {
        assert_eq!(signal::proc_state(pid).unwrap(), Some('T'), "child {pid}");
    }
    let error = postgres_ready(&plan.address(), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(error, RuntimeError::Timeout { .. }), "{error}");
    resume_server(postmaster).unwrap();
    postgres_ready(&plan.address(), READY_TIMEOUT)
        .await
        .unwrap();

    // Killed, every process of the tree is gone and the port is free; started
    // again on the same data directory it serves (crash recovery).
    let children = server_children(postmaster).unwrap();
    kill_and_reap(&plan, &mut server, &children).await;
    let mut server = spawn(&plan);
    if let Err(e) = postgres_ready(&plan.address(), READY_TIMEOUT).await {
        panic!("{e}\n{}", log());
    }
    assert_eq!(psql_select(&plan).unwrap(), "2");
    let children = server_children(server.pgid()).unwrap();
    kill_and_reap(&plan, &mut server, &children).await;

    // The killed server's shared memory segment, released once.
    assert!(release_shared_memory(&plan.data_dir).unwrap());
    assert!(!release_shared_memory(&plan.data_dir).unwrap());
}

/// nisshi's `records` query (systems/nisshi.toml) on its own schema, read by
/// the harness's client (the schema's exchange, runtime/postgres/script.rs)
/// and written as segments the reader reads back: a real server, rows as
/// nisshi's COPY writes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_rows_in_nisshis_schema_are_read_as_segments() {
    use epochal::observe::database::{DatabaseAt, read_database};
    use epochal::runtime::postgres::run_script;
    use epochal::system::{ServiceKind, System};

    let run = tempfile::tempdir().unwrap();
    let plan = PostgresPlan::new(
        find_binaries().unwrap(),
        run.path().join("postgres"),
        free_port().unwrap(),
        run.path().join("postgres.log"),
    )
    .unwrap();
    plan.initdb(INITDB_TIMEOUT).await.unwrap();
    let mut server = spawn(&plan);
    let log = || std::fs::read_to_string(&plan.log).unwrap_or_default();
    if let Err(e) = postgres_ready(&plan.address(), READY_TIMEOUT).await {
        panic!("{e}\n{}", log());
    }
    let nisshi = System::named("nisshi").unwrap();
    let schema = nisshi.schema(ServiceKind::Postgres).unwrap();
    run_script(&plan.address(), schema, READY_TIMEOUT)
        .await
        .unwrap();
    run_script(
        &plan.address(),
        "insert into cluster (name) values ('epochal'); \
         insert into topic (cluster, name, uuid, partitions, replication_factor) \
           values (1, 't', gen_random_uuid(), 2, 1); \
         insert into topition (topic, partition) values (1, 0), (1, 1); \
         insert into record (topition, offset_id, attributes, producer_id, producer_epoch, \
           timestamp, k, v) values \
           (1, 0, 0, null, null, to_timestamp(1700000000.123), null, '\\x31'), \
           (1, 1, 0, null, null, now(), 'k', null), \
           (2, 0, 16, 7, 1, now(), null, '\\x32');",
        READY_TIMEOUT,
    )
    .await
    .unwrap();

    let dir = run.path().join("database");
    let spec = nisshi.final_state.database.as_ref().unwrap();
    let at = DatabaseAt::Postgres(plan.address());
    let read = read_database(spec, Some(&at), &dir, READY_TIMEOUT).await;
    let children = server_children(server.pgid()).unwrap();
    kill_and_reap(&plan, &mut server, &children).await;
    let read = read.unwrap_or_else(|e| panic!("{e}\n{}", log()));
    assert_eq!((read.engine.as_str(), read.rows), ("postgres", 3));
    let data = epochal::reader::read_data_dir(&dir).unwrap();
    let t0 = data.replica("t", 0).unwrap();
    let records: Vec<_> = t0.records().map(|(_, r)| r.clone()).collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].value.as_ref().unwrap().to_string(), "1");
    assert_eq!(records[0].timestamp, 1_700_000_000_123);
    assert_eq!(records[1].key.as_ref().unwrap().to_string(), "k");
    assert!(records[1].value.is_none());
    let (batch, record) = data.replica("t", 1).unwrap().records().next().unwrap();
    assert_eq!(
        (record.offset, batch.producer_id, batch.producer_epoch),
        (0, 7, 1)
    );
    assert!(batch.is_transactional());
    assert!(release_shared_memory(&plan.data_dir).unwrap());
}
