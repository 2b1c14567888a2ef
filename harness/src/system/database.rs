//! How a system that keeps its durable state in a database says where that
//! state is and how to read it (`[final_state] database`): the engine, where
//! the database is, and the SQL that lists its records. The harness reads it
//! with its own client after the run (observe/database.rs) and checks it as
//! this system's replica; this module only says what a well-formed entry is.
//!
//! The `records` query returns one row per record, with these columns (by
//! name; any order; more columns are ignored):
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `topic` | text | the record's topic |
//! | `partition` | integer | its partition |
//! | `offset` | integer | its offset in the partition |
//! | `key` | hex text or null | its key's bytes, hex-encoded (null: no key) |
//! | `value` | hex text or null | its value's bytes, hex-encoded (null: a null value) |
//! | `attributes` | integer or null, optional | its batch's attributes (Kafka's bits: 3 log-append time, 4 transactional, 5 control; compression is ignored, the rows hold records uncompressed) |
//! | `producer_id` | integer or null, optional | -1 when null |
//! | `producer_epoch` | integer or null, optional | -1 when null |
//! | `timestamp` | integer or null, optional | milliseconds since the epoch; -1 when null |
//!
//! Bytes are hex-encoded because neither client the harness reads with
//! (SQLite's `-json` output, PostgreSQL's text format) returns a blob as
//! bytes: `hex(x)` in SQLite (which gives `''` for NULL: write
//! `case when x is null then null else hex(x) end`), `encode(x, 'hex')` in
//! PostgreSQL.

use serde::Deserialize;

use super::template::Template;

/// The placeholders a database's `path` may use.
pub const PATH_NAMES: &[&str] = &["shared_dir"];

/// `[final_state] database`: where a system's durable state is and how to
/// list its records (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSpec {
    pub engine: Engine,
    /// SQLite only: the database file, e.g. `{shared_dir}/tansu.db`.
    #[serde(default)]
    pub path: Option<Template>,
    /// The query listing every record, one row each (the module doc's columns).
    pub records: String,
}

/// The database engines the harness can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// One SQLite (or libSQL) file, read once the brokers are killed.
    Sqlite,
    /// The run's PostgreSQL service, read while it still runs.
    Postgres,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }
}

impl DatabaseSpec {
    /// What a well-formed entry must also be, given whether the system runs
    /// a PostgreSQL service: the key to point at, and what is wrong.
    pub(super) fn check(&self, has_postgres: bool) -> Result<(), (Option<&'static str>, String)> {
        if self.records.trim().is_empty() {
            return Err((
                Some("records"),
                "final_state.database.records is empty: it must list every record".into(),
            ));
        }
        match (self.engine, &self.path) {
            (Engine::Sqlite, None) => Err((
                Some("database"),
                "final_state.database: engine \"sqlite\" needs path (the database file, e.g. \
                 \"{shared_dir}/name.db\")"
                    .into(),
            )),
            (Engine::Sqlite, Some(path)) => {
                match path.placeholders().find(|name| !PATH_NAMES.contains(name)) {
                    Some(name) => Err((
                        Some("database"),
                        format!(
                            "final_state.database.path `{path}`: unknown placeholder {{{name}}} \
                         (known here: {})",
                            PATH_NAMES.join(", ")
                        ),
                    )),
                    None => Ok(()),
                }
            }
            (Engine::Postgres, Some(_)) => Err((
                Some("database"),
                "final_state.database: engine \"postgres\" takes no path (it reads the run's \
                 PostgreSQL service)"
                    .into(),
            )),
            (Engine::Postgres, None) if !has_postgres => Err((
                Some("database"),
                "final_state.database: engine \"postgres\" needs a postgres service \
                 ([[service]] kind = \"postgres\")"
                    .into(),
            )),
            (Engine::Postgres, None) => Ok(()),
        }
    }
}
