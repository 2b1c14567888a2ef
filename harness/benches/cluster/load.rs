//! What the cluster figures drive: kcat producing a file of records, SIGSTOP
//! taking effect as `/proc` shows it, and `epochal run` of a schedule with
//! nothing but background load, counted from its history afterwards.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use epochal::history::{OpType, read_history};
use epochal_faults::signal;

use super::child::ChildGuard;

/// Bound on one state change the kernel makes after a signal (SIGSTOP to
/// state T, SIGCONT out of it): far above anything measured, so a hang shows.
const SIGNAL_EFFECT_MAX: Duration = Duration::from_secs(2);
/// Bound on a whole `epochal run` past its load: setup, final heal,
/// quiesce, collection and the checkers.
const RUN_OVERHEAD_MAX: Duration = Duration::from_secs(240);
/// How long `epochal` may take to kill its children on SIGINT.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

/// Writes `count` records of `size_bytes` each, one a line, as kcat `-P` reads them.
pub fn write_records(path: &Path, count: usize, size_bytes: usize) -> Result<(), String> {
    let err = |e: std::io::Error| format!("writing {}: {e}", path.display());
    let mut out = BufWriter::new(File::create(path).map_err(err)?);
    for i in 0..count {
        let line = format!("{i:0size_bytes$}");
        out.write_all(line.as_bytes()).map_err(err)?;
        out.write_all(b"\n").map_err(err)?;
    }
    out.flush().map_err(err)
}

/// `kcat -P` of every line of `input` into `topic`, bootstrapped at `broker`
/// (a client proxy: what it advertises is its brokers' client proxies), with
/// `acks` and librdkafka's other defaults; the seconds it took, spawn to exit.
pub fn kcat_produce(
    broker: &str,
    topic: &str,
    input: &Path,
    acks: &str,
    log: &Path,
    timeout: Duration,
) -> Result<f64, String> {
    let stdin = File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let stderr = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut command = Command::new("kcat");
    command
        .args(["-P", "-q", "-b", broker, "-t", topic])
        .args(["-X", &format!("acks={acks}")])
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(stderr);
    let started = Instant::now();
    let mut kcat = ChildGuard::spawn(command, "kcat (Debian: apt-get install kcat)")?;
    let status = kcat.wait_within(timeout)?;
    let elapsed_s = started.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("kcat -P {status}; its stderr: {}", log.display()));
    }
    Ok(elapsed_s)
}

/// `samples` SIGSTOPs to `pid` through the harness's own signal path
/// (`epochal_faults::signal`, which the pause fault uses), each timed from the
/// send until `/proc/<pid>/stat` reads `T`, polled without pause; SIGCONT
/// after each, awaited out of `T`. Milliseconds.
pub fn pause_samples(pid: i32, samples: usize) -> Result<Vec<f64>, String> {
    let mut taken = Vec::with_capacity(samples);
    for _ in 0..samples {
        let sent = Instant::now();
        signal::pause(pid).map_err(|e| e.to_string())?;
        await_state(pid, sent, true)?;
        taken.push(sent.elapsed().as_secs_f64() * 1e3);
        let resumed = Instant::now();
        signal::resume(pid).map_err(|e| e.to_string())?;
        await_state(pid, resumed, false)?;
        // A spacing, not a wait for a state: let the process run between
        // stops, as it does between a schedule's faults.
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(taken)
}

/// Spins until `pid` is (or is no longer) stopped, within [`SIGNAL_EFFECT_MAX`]
/// of `since`.
pub fn await_state(pid: i32, since: Instant, stopped: bool) -> Result<(), String> {
    while signal::is_stopped(pid).map_err(|e| e.to_string())? != stopped {
        if since.elapsed() > SIGNAL_EFFECT_MAX {
            let want = if stopped { "stopped" } else { "continued" };
            return Err(format!("pid {pid} not {want} within {SIGNAL_EFFECT_MAX:?}"));
        }
        std::hint::spin_loop();
    }
    Ok(())
}

/// An idle process to pause, as the baseline: what signal delivery and the
/// `/proc` poll cost on their own, with no broker threads to stop.
pub fn idle_process() -> Result<ChildGuard, String> {
    let mut command = Command::new("sleep");
    command.arg("600").stdout(Stdio::null());
    ChildGuard::spawn(command, "sleep")
}

/// The background workload's numbers, from one run's history.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Background {
    pub producers: u32,
    pub exit_code: Option<i32>,
    pub sends_ok: u64,
    pub sends_failed: u64,
    pub sends_info: u64,
    pub values_acked: u64,
    /// First send invoked to last send acknowledged.
    pub window_s: f64,
    pub sends_ok_per_s: f64,
    /// `epochal run` from spawn to exit.
    pub wall_s: f64,
}

/// The schedule: background producers and nothing else, then a step that
/// only keeps time, so the load runs `load_ms` from the cluster ready.
fn schedule(producers: u32, partitions: u32, load_ms: u64) -> String {
    format!(
        "# Written by harness/benches/cluster.rs: background load only.\n\
         [cluster]\nbrokers = 3\n\n\
         [[cluster.topic]]\nname = \"t\"\npartitions = {partitions}\nreplication_factor = 3\n\n\
         [workload]\nacks = \"all\"\n\n\
         [workload.background]\nproducers = {producers}\nconsumers = 0\ninterval_ms = 1\n\n\
         [[step]]\nawait = \"{load_ms} ms pass\"\n"
    )
}

/// `epochal run SCHEDULE --store DIR --quiet` of [`schedule`], bounded; then
/// its history read back: ok sends over the time sends were in flight.
pub fn background_run(
    epochal: &Path,
    bin_dir: &Path,
    dir: &Path,
    producers: u32,
    partitions: u32,
    load_ms: u64,
) -> Result<Background, String> {
    let schedule_path = dir.join(format!("background-{producers}.toml"));
    std::fs::write(&schedule_path, schedule(producers, partitions, load_ms))
        .map_err(|e| format!("writing the schedule: {e}"))?;
    let store = dir.join("store");
    let out = File::create(dir.join("epochal-run.out")).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut command = Command::new(epochal);
    command
        .arg("run")
        .arg(&schedule_path)
        .arg("--store")
        .arg(&store)
        .arg("--quiet")
        .env("EPOCHAL_BIN_DIR", bin_dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let started = Instant::now();
    let mut run = ChildGuard::spawn(command, "epochal run")?;
    let timeout = Duration::from_millis(load_ms) + RUN_OVERHEAD_MAX;
    let status = match run.wait_or_interrupt(timeout, INTERRUPT_GRACE) {
        Ok(status) => status,
        Err(why) => return Err(format!("{why}; its output: {}", dir.display())),
    };
    let wall_s = started.elapsed().as_secs_f64();
    let run_dir: PathBuf = std::fs::canonicalize(store.join("latest"))
        .map_err(|e| format!("no run stored ({e}); `epochal run` {status}"))?;
    let history = read_history(run_dir.join("history.jsonl")).map_err(|e| e.to_string())?;
    let mut counts = [0u64; 3];
    let (mut values_acked, mut first_ns, mut last_ns) = (0u64, u64::MAX, 0u64);
    for op in history.iter().filter(|op| op.f() == "send") {
        match op.kind {
            OpType::Invoke => first_ns = first_ns.min(op.time_ns),
            OpType::Ok => {
                counts[0] += 1;
                values_acked += op.send().map_or(0, |s| s.values.len() as u64);
                last_ns = last_ns.max(op.time_ns);
            }
            OpType::Fail => counts[1] += 1,
            OpType::Info => counts[2] += 1,
        }
    }
    let window_s = last_ns.saturating_sub(first_ns) as f64 / 1e9;
    Ok(Background {
        producers,
        exit_code: status.code(),
        sends_ok: counts[0],
        sends_failed: counts[1],
        sends_info: counts[2],
        values_acked,
        window_s,
        sends_ok_per_s: if window_s > 0.0 {
            counts[0] as f64 / window_s
        } else {
            0.0
        },
        wall_s,
    })
}
