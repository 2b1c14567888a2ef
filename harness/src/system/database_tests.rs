//! `[final_state] database` in a system file: tansu's and nisshi's, and the
//! errors a malformed one gives (the file, the line, the field).

use std::path::Path;

use super::{Engine, System};

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
    assert_eq!(database.engine, Engine::Sqlite);
    assert_eq!(
        database.path.as_ref().unwrap().to_string(),
        "{shared_dir}/tansu.db"
    );
    assert!(tansu.sees().database);
    let nisshi = System::named("nisshi").unwrap();
    let database = nisshi.final_state.database.as_ref().unwrap();
    assert_eq!(database.engine, Engine::Postgres);
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
