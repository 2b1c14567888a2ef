//! A system's database as its replica, on a real tansu run's SQLite file
//! (the run is cluster_systems' tansu run, so CI pays for one cluster run,
//! not two): the database checkers apply to it and find it valid; then rows
//! of the finished run's tansu.db are changed with SQL, the database is
//! read again with the harness's own reader function, and `epochal check`
//! names each changed partition and offset: a value overwritten and a row
//! deleted are lost writes, two values swapped are moved offsets, and the
//! final read over the protocol no longer matches the database. A read
//! that fails (the file gone) is stored with its reason, and the database's
//! checkers are unknown with it.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::scenario::{read_results, result_of as result, show};
use epochal::history::read_history;
use epochal::run_dir::RunDir;
use epochal::schedule::Acks;
use serde_json::Value;

/// The database checkers, as results.json names them.
const DATABASE_CHECKERS: [&str; 3] = [
    "database-lost-write",
    "database-offset-changed",
    "database-divergence",
];

/// Each acknowledged acks=all value of `t-0` and its offset, in history order.
fn acked_on_t0(run: &Path) -> Vec<(i64, i64)> {
    read_history(run.join("history.jsonl"))
        .unwrap()
        .iter()
        .filter_map(|op| op.acked_send())
        .filter(|(send, _)| send.partition.to_string() == "t-0" && send.acks == Acks::All)
        .flat_map(|(send, acked)| {
            send.values
                .iter()
                .copied()
                .zip(acked.offsets.clone().unwrap_or_default())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Runs `sql` on the SQLite file `db` with Debian's `sqlite3`.
fn sqlite(db: &Path, sql: &str) {
    let output = std::process::Command::new("sqlite3")
        .arg(db)
        .arg(sql)
        .output()
        .expect("sqlite3 runs (Debian's sqlite3 package)");
    assert!(output.status.success(), "{}", show(&output));
}

/// Asserts that `run` (a finished, valid tansu run) has its database read
/// and checked valid, then that changed rows are reported where they are.
pub(crate) fn database_rows_changed_after_the_run_are_reported(run: &Path) {
    let results = read_results(run);
    for checker in DATABASE_CHECKERS {
        let r = result(&results, checker);
        assert_eq!(r["verdict"], "valid", "{r:#}");
    }
    let count = |checker: &str, name: &str| result(&results, checker)["counts"][name].as_u64();
    assert!(count("database-lost-write", "acknowledged").unwrap() >= 300);
    assert!(count("database-divergence", "database-records").unwrap() >= 300);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("database/database.json")).unwrap())
            .unwrap();
    assert_eq!(summary["engine"], "sqlite", "{summary:#}");
    assert!(summary.get("error").is_none(), "{summary:#}");
    assert!(summary["rows"].as_u64().unwrap() >= 300, "{summary:#}");

    // Four acknowledged values of t-0: one overwritten, one deleted, two
    // swapped, each at the offset its acknowledgement named.
    let acked = acked_on_t0(run);
    assert!(acked.len() >= 20, "{acked:?}");
    let pick = |n: usize| acked[n * acked.len() / 5];
    let [
        (_, changed),
        (_, deleted),
        (swapped_a_value, swapped_a),
        (_, swapped_b),
    ] = [pick(1), pick(2), pick(3), pick(4)];
    let t0 = "(select tp.id from topition tp join topic t on t.id = tp.topic \
              where t.name = 't' and tp.partition = 0)";
    sqlite(
        &run.join("nodes/shared/tansu.db"),
        &format!(
            "update record set v = cast('999999999' as blob) \
               where topition = {t0} and offset_id = {changed}; \
             delete from record where topition = {t0} and offset_id = {deleted}; \
             create temp table swap as select offset_id, v from record \
               where topition = {t0} and offset_id in ({swapped_a}, {swapped_b}); \
             update record set v = (select v from swap where swap.offset_id = \
               case record.offset_id when {swapped_a} then {swapped_b} else {swapped_a} end) \
               where topition = {t0} and offset_id in ({swapped_a}, {swapped_b});"
        ),
    );

    // The database read again by the harness's own reader, then checked.
    let dir = RunDir::open(run);
    std::fs::remove_dir_all(dir.database()).unwrap();
    let system = dir.read_system().unwrap();
    let read = tokio::runtime::Runtime::new().unwrap().block_on(
        epochal::observe::database::read_run_database(&dir, &system, None, Duration::from_secs(60)),
    );
    let read = read.expect("tansu names a database").unwrap();
    assert_eq!(
        read.rows + 1,
        summary["rows"].as_u64().unwrap(),
        "one row deleted: {read:?}"
    );
    let output = common::scenario::epochal()
        .arg("check")
        .arg(run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{}", show(&output));
    for checker in DATABASE_CHECKERS {
        assert!(
            stdout.contains(&format!("invalid  {checker}")),
            "{checker}: {}",
            show(&output)
        );
    }
    // The final log (the final read over the protocol) still holds them all.
    assert!(!stdout.contains("invalid  lost-write"), "{}", show(&output));
    for (offset, holds) in [(changed, "999999999"), (deleted, "nothing")] {
        assert!(
            stdout.contains(&format!("at offset {offset} in t-0 (history index"))
                && stdout.contains(&format!("; it holds {holds} at offset {offset};")),
            "offset {offset}: {}",
            show(&output)
        );
    }
    assert!(
        stdout.contains(&format!(
            "value {swapped_a_value} acked at offset {swapped_a} in t-0"
        )) && stdout.contains(&format!(
            "is at offset [{swapped_b}] in the database (sqlite "
        )),
        "{}",
        show(&output)
    );
    let first = changed.min(deleted).min(swapped_a).min(swapped_b);
    assert!(
        stdout.contains(&format!("t-0 at offset {first}: the database holds")),
        "{}",
        show(&output)
    );
    a_failed_read_makes_the_database_checkers_unknown_with_its_reason(&dir, &system);
}

fn a_failed_read_makes_the_database_checkers_unknown_with_its_reason(
    dir: &RunDir,
    system: &epochal::system::System,
) {
    let db = dir.path().join("nodes/shared/tansu.db");
    let moved = dir.path().join("nodes/shared/tansu.db.moved");
    std::fs::rename(&db, &moved).unwrap();
    std::fs::remove_dir_all(dir.database()).unwrap();
    let read = tokio::runtime::Runtime::new().unwrap().block_on(
        epochal::observe::database::read_run_database(dir, system, None, Duration::from_secs(60)),
    );
    std::fs::rename(&moved, &db).unwrap();
    let error = read.unwrap().unwrap_err().to_string();
    assert!(error.ends_with("tansu.db: no such file"), "{error}");
    let summary = std::fs::read_to_string(dir.database().join("database.json")).unwrap();
    assert!(summary.contains("tansu.db: no such file"), "{summary}");
    let output = common::scenario::epochal()
        .arg("check")
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    for checker in DATABASE_CHECKERS {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(checker))
            .unwrap_or_else(|| panic!("{checker}: {}", show(&output)));
        assert!(
            line.trim_start().starts_with("unknown")
                && line.contains("the database was not read: ")
                && line.contains("tansu.db: no such file"),
            "{line}"
        );
    }
    assert_eq!(output.status.code(), Some(2), "{}", show(&output));
}
