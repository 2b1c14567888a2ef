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

use super::{ServiceKind, Template};

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
    /// What a well-formed entry must also be, given the system's services:
    /// the key to point at, and what is wrong.
    pub(super) fn check(
        &self,
        services: &[ServiceKind],
    ) -> Result<(), (Option<&'static str>, String)> {
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
            (Engine::Postgres, None) if !services.contains(&ServiceKind::Postgres) => Err((
                Some("database"),
                "final_state.database: engine \"postgres\" needs a postgres service \
                 ([[service]] kind = \"postgres\")"
                    .into(),
            )),
            (Engine::Postgres, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::system::System;

    /// tansu's file with its `[final_state]` replaced by `final_state`.
    fn tansu_with(final_state: &str) -> String {
        let text = System::named("tansu").unwrap().text;
        let start = text.find("[final_state]").unwrap();
        let end = start + text[start..].find("\n[claims]").unwrap();
        format!("{}{final_state}\n{}", &text[..start], &text[end..])
    }

    fn error(text: &str) -> String {
        System::parse(Path::new("mine.toml"), text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn tansu_and_nisshi_say_how_to_read_their_database() {
        let tansu = System::named("tansu").unwrap();
        let database = tansu.final_state.database.as_ref().unwrap();
        assert_eq!(database.engine, super::Engine::Sqlite);
        assert_eq!(
            database.path.as_ref().unwrap().to_string(),
            "{shared_dir}/tansu.db"
        );
        assert!(tansu.sees().database);
        let nisshi = System::named("nisshi").unwrap();
        let database = nisshi.final_state.database.as_ref().unwrap();
        assert_eq!(database.engine, super::Engine::Postgres);
        assert!(!System::reference().sees().database);
    }

    #[test]
    fn a_malformed_database_names_the_file_line_and_field() {
        let no_path = tansu_with(
            "[final_state]\nread = \"protocol\"\ndatabase = { engine = \"sqlite\", records = \"select 1\" }",
        );
        let line = no_path
            .lines()
            .position(|l| l.starts_with("database ="))
            .unwrap()
            + 1;
        let message = error(&no_path);
        assert!(
            message.starts_with(&format!("mine.toml:{line}: ")),
            "{message}"
        );
        assert!(
            message.contains("engine \"sqlite\" needs path"),
            "{message}"
        );

        let engine = tansu_with(
            "[final_state]\nread = \"protocol\"\ndatabase = { engine = \"mysql\", records = \"x\" }",
        );
        let message = error(&engine);
        assert!(
            message.starts_with(&format!("mine.toml:{line}: ")),
            "{message}"
        );
        assert!(message.contains("mysql"), "{message}");

        let placeholder = tansu_with(
            "[final_state]\nread = \"protocol\"\ndatabase = { engine = \"sqlite\", path = \"{data_dir}/x.db\", records = \"x\" }",
        );
        let message = error(&placeholder);
        assert!(
            message.contains("unknown placeholder {data_dir} (known here: shared_dir)"),
            "{message}"
        );

        let empty = tansu_with(
            "[final_state]\nread = \"protocol\"\ndatabase = { engine = \"sqlite\", path = \"{shared_dir}/x.db\", records = \" \" }",
        );
        assert!(
            error(&empty).contains("records is empty"),
            "{}",
            error(&empty)
        );

        let postgres = tansu_with(
            "[final_state]\nread = \"protocol\"\ndatabase = { engine = \"postgres\", records = \"x\" }",
        );
        assert!(
            error(&postgres).contains("needs a postgres service"),
            "{}",
            error(&postgres)
        );

        let files = tansu_with(
            "[final_state]\nread = \"replica-files\"\ndatabase = { engine = \"sqlite\", path = \"{shared_dir}/x.db\", records = \"x\" }",
        );
        assert!(
            error(&files).contains("final_state.database needs read = \"protocol\""),
            "{}",
            error(&files)
        );

        let typo = tansu_with(
            "[final_state]\nread = \"protocol\"\ndatabase = { engine = \"sqlite\", path = \"{shared_dir}/x.db\", record = \"x\" }",
        );
        assert!(error(&typo).contains("record"), "{}", error(&typo));
    }
}
