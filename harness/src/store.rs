//! The store: every run in its own directory, written in phases so whatever
//! ends a run, what was recorded before stays on disk (docs/architecture.md,
//! "The data path of one run"):
//!
//! ```text
//! <store>/adhoc/<schedule name>/<UTC timestamp>-<n>/
//!     schedule.toml     the schedule as applied (--set merged in), first
//!     harness.log       what the harness did and saw, line by line
//!     history.jsonl     the history, one op a line as it happens
//!     nodes/            etcd.log, proxy.log, b<i>/broker.log, b<i>/data/
//! <store>/latest -> adhoc/<schedule name>/<timestamp>-<n>
//! ```
//!
//! Run directories are created with `create_dir` (never `create_dir_all` on the
//! last component), so parallel runs of one schedule in one second each get
//! their own `-<n>`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, thiserror::Error)]
#[error("store {}: {source}", path.display())]
pub struct StoreError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

fn error(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError {
        path: path.to_owned(),
        source,
    }
}

/// Writes `value` to `path` as the store keeps JSON: pretty-printed, with
/// one trailing newline. Every JSON file of a run directory is written so.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), StoreError> {
    let text = serde_json::to_string_pretty(value).expect("serializes");
    std::fs::write(path, text + "\n").map_err(error(path))
}

/// Creates a fresh run directory under `store/<group...>/`.
pub fn create_run_dir(store: &Path, group: &[&str]) -> Result<PathBuf, StoreError> {
    let mut parent = store.to_owned();
    for part in group {
        parent.push(sanitize(part));
    }
    std::fs::create_dir_all(&parent).map_err(error(&parent))?;
    let stamp = utc_stamp(SystemTime::now());
    for n in 0.. {
        let dir = parent.join(format!("{stamp}-{n}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(error(&dir)(e)),
        }
    }
    unreachable!("an unbounded range ends only by returning")
}

/// Points `store/latest` at `run_dir`, replacing the link atomically.
pub fn link_latest(store: &Path, run_dir: &Path) -> Result<(), StoreError> {
    let target = run_dir.strip_prefix(store).unwrap_or(run_dir);
    let latest = store.join("latest");
    let temporary = store.join(format!(".latest-{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(target, &temporary).map_err(error(&temporary))?;
    std::fs::rename(&temporary, &latest).map_err(error(&latest))
}

/// A schedule name made safe as one path component.
fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match cleaned.trim_start_matches('.') {
        "" => "unnamed".to_owned(),
        rest => rest.to_owned(),
    }
}

/// `20261130T130501Z`: sorts as it reads.
pub fn utc_stamp(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `harness.log`: one line per thing the harness did or saw, with the time
/// since the run started; each line is written whole and flushed, and echoed
/// to stderr when `echo` is set.
pub struct RunLog {
    file: File,
    started: Instant,
    echo: bool,
}

impl RunLog {
    pub fn create(path: &Path, echo: bool) -> Result<Self, StoreError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(error(path))?;
        Ok(RunLog {
            file,
            started: Instant::now(),
            echo,
        })
    }

    pub fn line(&mut self, message: impl AsRef<str>) {
        let elapsed = self.started.elapsed();
        let line = format!(
            "[{:>4}.{:03}s] {}\n",
            elapsed.as_secs(),
            elapsed.subsec_millis(),
            message.as_ref()
        );
        // A full disk must not end a run whose history is still being kept.
        let _ = self.file.write_all(line.as_bytes());
        if self.echo {
            eprint!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stamps_are_utc_calendar_dates() {
        assert_eq!(utc_stamp(UNIX_EPOCH), "19700101T000000Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_796_043_901);
        assert_eq!(utc_stamp(t), "20261130T130501Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc_stamp(leap), "20000229T000000Z");
    }

    #[test]
    fn run_dirs_are_distinct_and_latest_follows() {
        let store = tempfile::tempdir().unwrap();
        let a = create_run_dir(store.path(), &["adhoc", "my sched"]).unwrap();
        let b = create_run_dir(store.path(), &["adhoc", "my sched"]).unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(store.path().join("adhoc/my_sched")));
        link_latest(store.path(), &a).unwrap();
        link_latest(store.path(), &b).unwrap();
        let latest = std::fs::canonicalize(store.path().join("latest")).unwrap();
        assert_eq!(latest, std::fs::canonicalize(&b).unwrap());
    }
}
