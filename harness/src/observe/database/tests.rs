//! The database read on real SQLite files (made by Debian's `sqlite3`, as
//! the read itself uses), written as segments and read back by the reader.

use super::*;

use crate::reader::read_data_dir;
use crate::system::Template;

/// A database file in `dir` made by the `sqlite3` shell from `script`.
fn sqlite_file(dir: &Path, script: &str) -> PathBuf {
    let file = dir.join("db.sqlite");
    let status = std::process::Command::new("sqlite3")
        .arg(&file)
        .arg(script)
        .status()
        .expect("sqlite3 runs (Debian's sqlite3 package)");
    assert!(status.success());
    file
}

fn spec(records: &str) -> DatabaseSpec {
    DatabaseSpec {
        engine: Engine::Sqlite,
        path: Some(Template::parse("{shared_dir}/db.sqlite").unwrap()),
        records: records.to_owned(),
    }
}

const RECORDS: &str = "select topic, partition, \"offset\", \
     case when k is null then null else hex(k) end as \"key\", \
     case when v is null then null else hex(v) end as value, attributes, \
     producer_id, producer_epoch, ts as timestamp from r order by 1, 2, 3";

const TABLE: &str = "create table r (topic text, partition int, \"offset\" int, k blob, \
     v blob, attributes int, producer_id int, producer_epoch int, ts int);";

async fn read(file: &Path, records: &str, dir: &Path) -> Result<DatabaseRead, DatabaseError> {
    read_database(
        &spec(records),
        Some(&DatabaseAt::Sqlite(file.to_owned())),
        dir,
        Duration::from_secs(30),
    )
    .await
}

#[tokio::test]
async fn rows_become_segments_the_reader_reads_back() {
    let root = tempfile::tempdir().unwrap();
    let file = sqlite_file(
        root.path(),
        &format!(
            "{TABLE} insert into r values \
             ('t', 0, 0, null, x'31', 0, null, null, 1700000000000), \
             ('t', 0, 1, x'6b', null, 0, null, null, 1700000000001), \
             ('t', 1, 4, null, x'32', 16, 9, 2, 1700000000002), \
             ('__consumer_offsets', 0, 0, null, x'00', 0, null, null, 0);"
        ),
    );
    let dir = root.path().join("database");
    let summary = read(&file, RECORDS, &dir).await.unwrap();
    assert_eq!(summary.rows, 4);
    assert_eq!(summary.error, None);
    assert_eq!(
        summary
            .partitions
            .iter()
            .map(|p| (p.partition, p.records, p.first_offset, p.last_offset))
            .collect::<Vec<_>>(),
        [(0, 2, 0, 1), (1, 1, 4, 4)]
    );
    assert!(!dir.join(SQLITE_COPY).exists(), "the copy is removed");
    let data = read_data_dir(&dir).unwrap();
    assert_eq!(data.replicas.len(), 2, "the internal topic is left out");
    let t0 = data.replica("t", 0).unwrap();
    assert!(t0.findings.is_empty(), "{:?}", t0.findings);
    let records: Vec<_> = t0.records().map(|(_, r)| r.clone()).collect();
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(records[0].value.as_ref().unwrap().to_string(), "1");
    assert!(records[1].value.is_none());
    let t1 = data.replica("t", 1).unwrap();
    let (batch, record) = t1.records().next().unwrap();
    assert_eq!((record.offset, batch.producer_id), (4, 9));
    assert!(batch.is_transactional());
    assert_eq!(t1.log_end_offset, 5);
    assert_eq!(
        data.high_watermarks
            .unwrap()
            .iter()
            .map(|e| (e.partition, e.offset))
            .collect::<Vec<_>>(),
        [(0, 2), (1, 5)]
    );
    let written: DatabaseRead =
        serde_json::from_str(&std::fs::read_to_string(dir.join(DATABASE_JSON)).unwrap()).unwrap();
    assert_eq!(written, summary);
}

#[tokio::test]
async fn a_failed_read_is_recorded_with_its_reason_and_writes_no_segment() {
    let root = tempfile::tempdir().unwrap();
    let file = sqlite_file(
        root.path(),
        &format!(
            "{TABLE} insert into r values ('t', 0, 0, null, x'31', 0, null, null, 0), \
             ('t', 0, 0, null, x'32', 0, null, null, 0), \
             ('t', 0, 1, null, 'zz', 0, null, null, 0);"
        ),
    );
    let error = |dir: &str| {
        let summary: DatabaseRead = serde_json::from_str(
            &std::fs::read_to_string(root.path().join(dir).join(DATABASE_JSON)).unwrap(),
        )
        .unwrap();
        assert!(
            !root.path().join(dir).join("t-0").exists(),
            "{dir}: no segment"
        );
        summary.error.unwrap()
    };
    let twice = read(&file, RECORDS, &root.path().join("a"))
        .await
        .unwrap_err();
    assert_eq!(twice.to_string(), "rows 1 and 2 both hold t-0 offset 0");
    assert_eq!(error("a"), twice.to_string());

    // A value that is not hex text.
    let raw = RECORDS.replace(
        "case when v is null then null else hex(v) end as value",
        "'zz' as value",
    );
    let bad = read(&file, &raw, &root.path().join("b")).await.unwrap_err();
    assert!(
        bad.to_string()
            .starts_with("row 1 (t-0 offset 0): column `value`"),
        "{bad}"
    );

    let sql = read(&file, "select nope from r", &root.path().join("c"))
        .await
        .unwrap_err();
    assert!(sql.to_string().contains("no such column: nope"), "{sql}");
    assert!(error("c").contains("no such column: nope"));

    let missing = read(
        &root.path().join("none.db"),
        RECORDS,
        &root.path().join("d"),
    )
    .await
    .unwrap_err();
    assert!(missing.to_string().contains("no such file"), "{missing}");

    let nowhere = read_database(
        &spec(RECORDS),
        None,
        &root.path().join("e"),
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    assert_eq!(
        nowhere.to_string(),
        "the system's database is sqlite, but the run has no sqlite to read"
    );
}

#[tokio::test]
async fn an_empty_table_is_read_as_no_partitions() {
    let root = tempfile::tempdir().unwrap();
    let file = sqlite_file(root.path(), TABLE);
    let dir = root.path().join("database");
    let summary = read(&file, RECORDS, &dir).await.unwrap();
    assert_eq!((summary.rows, summary.partitions.len()), (0, 0));
    assert!(read_data_dir(&dir).unwrap().replicas.is_empty());
}

#[test]
fn sqlite_json_numbers_and_nulls_become_text() {
    let rows = sqlite_json_rows(br#"[{"offset":1,"value":"00FF","key":null}]"#).unwrap();
    assert_eq!(rows[0]["offset"].as_deref(), Some("1"));
    assert_eq!(rows[0]["key"], None);
    assert!(sqlite_json_rows(b"\n").unwrap().is_empty());
    assert!(
        sqlite_json_rows(br#"[{"a":[1]}]"#)
            .unwrap_err()
            .to_string()
            .contains("row 1: column `a`")
    );
}
