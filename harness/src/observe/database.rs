//! A system's database read after the run, by the harness's own client and
//! never through a broker (`[final_state] database`, system/database.rs),
//! and written as Kafka segments the harness's reader reads back: the
//! replica of a system whose brokers keep their durable state in a database
//! (tansu over SQLite, nisshi over PostgreSQL). A broker that answers from a
//! cache the database no longer holds, or a row that changed after its
//! acknowledgement, shows here and not in the final read over the protocol.
//!
//! The clients, and why: SQLite is read by Debian's `sqlite3` shell
//! (`-json`), on a copy of the database file and its write-ahead log (the
//! brokers were SIGKILLed, and opening the copy replays the log as SQLite
//! recovers it, while the run's own files stay as the brokers left them);
//! linking SQLite instead (rusqlite bundles its C source) would add a C
//! build to every CI build. PostgreSQL is read through the same few
//! protocol messages the runtime already speaks to apply a schema
//! (runtime/postgres/script.rs), so no client crate and no `psql`.
//!
//! It owns the directory it is given and writes nothing anywhere else:
//!
//! ```text
//! <dir>/<topic>-<partition>/<20-digit first offset>.log   one batch per row
//! <dir>/replication-offset-checkpoint                    each partition's last offset + 1
//! <dir>/database.json                                    the summary (DatabaseRead)
//! ```
//!
//! A read that fails writes `database.json` with the error and no segments:
//! it is never fatal to a run, and the checkers that need the database say
//! why they cannot judge. Each row becomes a batch of its own (the database
//! keeps records, not batches): its offset, key and value, the row's
//! attributes (transactional, control, timestamp type), producer id and
//! epoch, and timestamp; no sequence number, partition leader epoch or
//! headers (-1, -1, none). Internal topics (`__` prefix) are left out, as
//! the final read leaves them.

mod rows;

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::BytesMut;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use serde::{Deserialize, Serialize};

use crate::reader::checkpoint::OffsetEntry;
use crate::run_dir::RunDir;
use crate::store::write_json;
use crate::system::{DatabaseSpec, Engine, System};

pub use rows::{DbRecord, Row, RowError};

use super::segments::{
    DirError, INTERNAL_TOPIC_PREFIX, legal_topic_name, prepare_dir, segment_file_name,
    write_high_watermarks,
};

/// The summary's file name in the database's directory.
pub const DATABASE_JSON: &str = "database.json";

/// Where a copy of an SQLite database is read, inside the directory written
/// (removed once read; not a `<topic>-<partition>` name).
const SQLITE_COPY: &str = "sqlite-copy";

/// What a read of the database read, as written to `database.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseRead {
    /// `sqlite` or `postgres`.
    pub engine: String,
    /// The file read (SQLite) or the server's address (PostgreSQL).
    pub source: String,
    /// When the read began, in ms since the epoch.
    pub read_at_unix_ms: u64,
    /// Rows the query returned (internal topics' included).
    pub rows: u64,
    /// Each partition written, by topic then partition.
    pub partitions: Vec<PartitionRows>,
    /// Why nothing was written, when the read failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One partition as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRows {
    pub topic: String,
    pub partition: i32,
    pub records: u64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// Where the database is, as the harness reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseAt {
    Sqlite(PathBuf),
    Postgres(String),
}

/// Why the database was not read, or not written out whole.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    #[error("the database's directory: {0}")]
    Dir(#[from] DirError),
    #[error("the system's database is {engine}, but the run has no {engine} to read")]
    NowhereToRead { engine: &'static str },
    #[error("{0}")]
    Client(String),
    #[error("{0}")]
    Row(#[from] RowError),
    #[error("rows {first} and {second} both hold {partition} offset {offset}")]
    TwoAtOneOffset {
        first: usize,
        second: usize,
        partition: String,
        offset: i64,
    },
    #[error("row {row}: topic {topic:?} is not a name Kafka allows")]
    IllegalTopic { row: usize, topic: String },
    #[error("encoding {partition} offset {offset} as a batch: {detail}")]
    Encode {
        partition: String,
        offset: i64,
        detail: String,
    },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("writing {DATABASE_JSON}: {0}")]
    Summary(#[source] crate::store::StoreError),
}

/// The run's database as `system` describes it, read into the run's
/// `database/`; `postgres` is where the run's PostgreSQL answers, if it
/// runs one. `None` when the system names no database.
pub async fn read_run_database(
    dir: &RunDir,
    system: &System,
    postgres: Option<String>,
    timeout: Duration,
) -> Option<Result<DatabaseRead, DatabaseError>> {
    let spec = system.final_state.database.as_ref()?;
    let at = match spec.engine {
        Engine::Sqlite => spec.path.as_ref().map(|path| {
            let shared = RunDir::node_layout(&dir.nodes()).shared_dir();
            DatabaseAt::Sqlite(PathBuf::from(path.expand(|name| {
                (name == "shared_dir").then(|| shared.display().to_string())
            })))
        }),
        Engine::Postgres => postgres.map(DatabaseAt::Postgres),
    };
    Some(read_database(spec, at.as_ref(), &dir.database(), timeout).await)
}

/// Reads the database at `at` with `spec`'s query into `dir` (new or
/// empty), within `timeout`; `database.json` says what was read, or why
/// nothing was.
pub async fn read_database(
    spec: &DatabaseSpec,
    at: Option<&DatabaseAt>,
    dir: &Path,
    timeout: Duration,
) -> Result<DatabaseRead, DatabaseError> {
    prepare_dir(dir)?;
    let mut summary = DatabaseRead {
        engine: spec.engine.name().to_owned(),
        source: match at {
            Some(DatabaseAt::Sqlite(path)) => path.display().to_string(),
            Some(DatabaseAt::Postgres(address)) => address.clone(),
            None => String::new(),
        },
        read_at_unix_ms: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        rows: 0,
        partitions: Vec::new(),
        error: None,
    };
    let outcome = read_rows(spec, at, dir, timeout).await.and_then(|rows| {
        summary.rows = rows.len() as u64;
        write_partitions(dir, &rows)
    });
    match &outcome {
        Ok(partitions) => summary.partitions.clone_from(partitions),
        Err(e) => summary.error = Some(e.to_string()),
    }
    write_json(&dir.join(DATABASE_JSON), &summary).map_err(DatabaseError::Summary)?;
    outcome.map(|_| summary)
}

async fn read_rows(
    spec: &DatabaseSpec,
    at: Option<&DatabaseAt>,
    dir: &Path,
    timeout: Duration,
) -> Result<Vec<Row>, DatabaseError> {
    match (spec.engine, at) {
        (Engine::Sqlite, Some(DatabaseAt::Sqlite(file))) => {
            read_sqlite(file, &spec.records, &dir.join(SQLITE_COPY), timeout).await
        }
        (Engine::Postgres, Some(DatabaseAt::Postgres(address))) => {
            crate::runtime::postgres::query(address, &spec.records, timeout)
                .await
                .map_err(|e| DatabaseError::Client(e.to_string()))
        }
        (engine, _) => Err(DatabaseError::NowhereToRead {
            engine: engine.name(),
        }),
    }
}

/// The rows `sql` returns from the SQLite database `file`, read on a copy
/// in `copy` (removed afterwards) with `sqlite3 -json`.
async fn read_sqlite(
    file: &Path,
    sql: &str,
    copy: &Path,
    timeout: Duration,
) -> Result<Vec<Row>, DatabaseError> {
    let client = |what: String| DatabaseError::Client(what);
    let shell = crate::system::find_executable(Path::new("sqlite3")).ok_or_else(|| {
        client("no sqlite3 on PATH (Debian's sqlite3 package): the database was not read".into())
    })?;
    if !file.is_file() {
        return Err(client(format!("{}: no such file", file.display())));
    }
    std::fs::create_dir_all(copy).map_err(|source| DatabaseError::Write {
        path: copy.to_owned(),
        source,
    })?;
    let copied = copy.join(file.file_name().unwrap_or_default());
    // The write-ahead log holds every commit not yet checkpointed into the
    // file; the shared-memory index is rebuilt from it on open.
    for suffix in ["", "-wal"] {
        let from = PathBuf::from(format!("{}{suffix}", file.display()));
        let to = PathBuf::from(format!("{}{suffix}", copied.display()));
        if from.is_file() {
            std::fs::copy(&from, &to)
                .map_err(|source| DatabaseError::Write { path: to, source })?;
        }
    }
    let mut command = tokio::process::Command::new(shell);
    command
        .args(["-bail", "-json"])
        .arg(&copied)
        .arg(sql)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(timeout, command.output()).await;
    let _ = std::fs::remove_dir_all(copy);
    let output = output
        .map_err(|_| {
            client(format!(
                "sqlite3 on {} took over {timeout:?}",
                file.display()
            ))
        })?
        .map_err(|e| client(format!("running sqlite3: {e}")))?;
    if !output.status.success() {
        return Err(client(format!(
            "sqlite3 on {} ({}): {}",
            file.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    sqlite_json_rows(&output.stdout).map_err(|e| client(e.to_string()))
}

/// Why `sqlite3 -json`'s output is not rows.
#[derive(Debug, thiserror::Error)]
pub(super) enum SqliteJsonError {
    #[error("sqlite3's JSON output: {0}")]
    Json(#[from] serde_json::Error),
    #[error("row {row}: column `{name}` is {value}")]
    Column {
        row: usize,
        name: String,
        value: serde_json::Value,
    },
}

/// `sqlite3 -json`'s output as rows: an array of objects, or nothing at all
/// for no rows. Numbers become their text, as PostgreSQL's text format
/// gives them.
fn sqlite_json_rows(stdout: &[u8]) -> Result<Vec<Row>, SqliteJsonError> {
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let objects: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_slice(stdout)?;
    objects
        .into_iter()
        .enumerate()
        .map(|(i, object)| {
            object
                .into_iter()
                .map(|(name, value)| {
                    let text = match value {
                        serde_json::Value::Null => None,
                        serde_json::Value::String(s) => Some(s),
                        serde_json::Value::Number(n) => Some(n.to_string()),
                        value => {
                            return Err(SqliteJsonError::Column {
                                row: i + 1,
                                name,
                                value,
                            });
                        }
                    };
                    Ok((name, text))
                })
                .collect()
        })
        .collect()
}

/// Every row as a record, by partition and offset, written as one segment a
/// partition, then the high watermarks; internal topics left out.
fn write_partitions(dir: &Path, rows: &[Row]) -> Result<Vec<PartitionRows>, DatabaseError> {
    let mut partitions: BTreeMap<(String, i32), BTreeMap<i64, (usize, DbRecord)>> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let number = i + 1;
        let record = rows::record(number, row)?;
        if record.topic.starts_with(INTERNAL_TOPIC_PREFIX) {
            continue;
        }
        if !legal_topic_name(&record.topic) {
            return Err(DatabaseError::IllegalTopic {
                row: number,
                topic: record.topic,
            });
        }
        let offsets = partitions
            .entry((record.topic.clone(), record.partition))
            .or_default();
        if let Some((first, _)) = offsets.get(&record.offset) {
            return Err(DatabaseError::TwoAtOneOffset {
                first: *first,
                second: number,
                partition: format!("{}-{}", record.topic, record.partition),
                offset: record.offset,
            });
        }
        offsets.insert(record.offset, (number, record));
    }
    let mut written = Vec::new();
    let mut high_watermarks = Vec::new();
    for ((topic, partition), records) in &partitions {
        let (Some(&first_offset), Some(&last_offset)) =
            (records.keys().next(), records.keys().next_back())
        else {
            continue;
        };
        write_segment(dir, topic, *partition, first_offset, records.values())?;
        written.push(PartitionRows {
            topic: topic.clone(),
            partition: *partition,
            records: records.len() as u64,
            first_offset,
            last_offset,
        });
        high_watermarks.push(OffsetEntry {
            topic: topic.clone(),
            partition: *partition,
            offset: last_offset + 1,
        });
    }
    write_high_watermarks(dir, &high_watermarks)?;
    Ok(written)
}

/// One partition's records, in offset order, as one segment of one batch
/// a record.
fn write_segment<'a>(
    dir: &Path,
    topic: &str,
    partition: i32,
    first_offset: i64,
    records: impl Iterator<Item = &'a (usize, DbRecord)>,
) -> Result<(), DatabaseError> {
    let partition_dir = dir.join(format!("{topic}-{partition}"));
    let path = partition_dir.join(segment_file_name(first_offset));
    let failed = |source| DatabaseError::Write {
        path: path.clone(),
        source,
    };
    std::fs::create_dir(&partition_dir).map_err(failed)?;
    let mut file = BufWriter::new(std::fs::File::create(&path).map_err(failed)?);
    let mut buffer = BytesMut::new();
    for (_, record) in records {
        buffer.clear();
        encode(record, &mut buffer)?;
        file.write_all(&buffer).map_err(failed)?;
    }
    file.flush().map_err(failed)
}

/// `record` as a record batch v2 of its own.
fn encode(record: &DbRecord, out: &mut BytesMut) -> Result<(), DatabaseError> {
    let batch = [Record {
        transactional: record.transactional(),
        control: record.control(),
        // Kafka's "no partition leader epoch": the database keeps none.
        partition_leader_epoch: -1,
        producer_id: record.producer_id,
        producer_epoch: record.producer_epoch,
        timestamp_type: if record.log_append_time() {
            TimestampType::LogAppend
        } else {
            TimestampType::Creation
        },
        offset: record.offset,
        sequence: -1,
        timestamp: record.timestamp,
        key: record.key.clone(),
        value: record.value.clone(),
        headers: IndexMap::new(),
    }];
    RecordBatchEncoder::encode(
        out,
        &batch,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| DatabaseError::Encode {
        partition: format!("{}-{}", record.topic, record.partition),
        offset: record.offset,
        detail: format!("{e:#}"),
    })
}

#[cfg(test)]
mod tests;
