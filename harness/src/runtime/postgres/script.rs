//! A system's SQL script (its schema) run on the fresh server before any
//! broker starts: one connection as the superuser, the whole script as one
//! simple Query. PostgreSQL runs a multi-statement simple Query as one
//! implicit transaction, so a script that fails leaves nothing behind, and
//! the error names the statement's SQLSTATE and message.
//!
//! The same exchange reads a system's records after the run ([`query`],
//! observe/database.rs): the rows of the last statement's result, each
//! column by name, in PostgreSQL's text format (a NULL as `None`). The
//! harness speaks this much of the protocol itself rather than linking a
//! client crate or needing `psql`: the startup, one simple Query and its
//! answers are all either use.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::super::RuntimeError;
use super::{
    Attempt, DATABASE, MESSAGE_SIZE_BYTES_MAX, USER, error_response_text, read_until_ready,
    startup_message,
};

/// A bound on one DataRow: a record's key and value, hex-encoded, and the
/// rest of its row.
const ROW_BYTES_MAX: usize = 64 << 20;

/// Runs `sql` on the server at `address` (which must already answer, as
/// [`super::postgres_ready`] saw), within `timeout`.
pub async fn run_script(address: &str, sql: &str, timeout: Duration) -> Result<(), RuntimeError> {
    exchange(address, sql, timeout, "running the system's schema")
        .await
        .map(drop)
}

/// The rows `sql` returns from the server at `address`, within `timeout`:
/// each a map from column name to its value in text form (`None`: NULL).
pub async fn query(address: &str, sql: &str, timeout: Duration) -> Result<Vec<Row>, RuntimeError> {
    let table = exchange(address, sql, timeout, "reading the system's records").await?;
    Ok(table
        .rows
        .into_iter()
        .map(|values| table.columns.iter().cloned().zip(values).collect())
        .collect())
}

/// One row of a query's result: column name to text value (`None`: NULL).
pub type Row = std::collections::BTreeMap<String, Option<String>>;

/// The last result a simple Query returned: its columns' names and rows.
#[derive(Debug, Default, PartialEq)]
struct Table {
    columns: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
}

async fn exchange(
    address: &str,
    sql: &str,
    timeout: Duration,
    doing: &str,
) -> Result<Table, RuntimeError> {
    match tokio::time::timeout(timeout, script_round_trip(address, sql)).await {
        Ok(Ok(table)) => Ok(table),
        Ok(Err(detail)) => Err(RuntimeError::Postgres {
            at: format!("at {address}, {doing}"),
            detail: detail.to_string(),
        }),
        Err(_) => Err(RuntimeError::Timeout {
            what: format!("{doing} at PostgreSQL {address}"),
            timeout,
            detail: None,
        }),
    }
}

/// Why a schema script did not run: the server's words, or the exchange's.
#[derive(Debug, thiserror::Error)]
enum ScriptError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Refused(String),
}

impl From<String> for ScriptError {
    fn from(detail: String) -> Self {
        ScriptError::Refused(detail)
    }
}

async fn script_round_trip(address: &str, sql: &str) -> Result<Table, ScriptError> {
    let mut stream = TcpStream::connect(address).await?;
    stream.write_all(&startup_message(USER, DATABASE)).await?;
    let (read, mut write) = stream.split();
    let mut read = BufReader::new(read);
    read_until_ready(&mut read).await.map_err(|e| match e {
        Attempt::NotYet(detail) | Attempt::Wrong(detail) => detail,
    })?;
    write.write_all(&query_message(sql)?).await?;
    let outcome = read_query_outcome(&mut read).await;
    let _ = write.write_all(&[b'X', 0, 0, 0, 4]).await;
    let _ = write.shutdown().await;
    outcome
}

/// A simple Query message: 'Q', its length, the text and a NUL.
fn query_message(sql: &str) -> Result<Vec<u8>, ScriptError> {
    if sql.contains('\0') {
        return Err(ScriptError::Refused("the script holds a NUL byte".into()));
    }
    let length = i32::try_from(sql.len() + 5)
        .map_err(|_| ScriptError::Refused("the script is too long".to_owned()))?;
    let mut message = vec![b'Q'];
    message.extend_from_slice(&length.to_be_bytes());
    message.extend_from_slice(sql.as_bytes());
    message.push(0);
    Ok(message)
}

/// The backend's answers to one simple Query, up to ReadyForQuery: the first
/// ErrorResponse, if any, is the outcome; else the last result's rows.
async fn read_query_outcome<R: AsyncReadExt + Unpin>(read: &mut R) -> Result<Table, ScriptError> {
    let mut error = None;
    let mut table = Table::default();
    loop {
        let kind = read.read_u8().await?;
        let length = read.read_i32().await?;
        let bound = if kind == b'D' {
            ROW_BYTES_MAX
        } else {
            MESSAGE_SIZE_BYTES_MAX
        };
        let body_bytes = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_sub(4))
            .filter(|&b| b <= bound)
            .ok_or_else(|| format!("message {:?} of length {length}", kind as char))?;
        let mut body = vec![0; body_bytes];
        read.read_exact(&mut body).await?;
        match kind {
            b'E' => {
                error.get_or_insert_with(|| error_response_text(&body));
            }
            b'Z' => return error.map_or(Ok(table), |e| Err(ScriptError::Refused(e))),
            // RowDescription: a new result begins.
            b'T' => {
                table = Table {
                    columns: row_description(&body)?,
                    rows: Vec::new(),
                }
            }
            b'D' => table.rows.push(data_row(&body, table.columns.len())?),
            // CommandComplete, EmptyQueryResponse, NoticeResponse,
            // ParameterStatus.
            b'C' | b'I' | b'N' | b'S' => {}
            other => {
                return Err(ScriptError::Refused(format!(
                    "unexpected message {:?}",
                    other as char
                )));
            }
        }
    }
}

/// The column names of a RowDescription: a count (i16), then per column its
/// NUL-terminated name and 18 bytes (table and type oids, sizes, format).
fn row_description(body: &[u8]) -> Result<Vec<String>, ScriptError> {
    let bad = || ScriptError::Refused("a malformed RowDescription".into());
    let count = body.get(..2).ok_or_else(bad)?;
    let count = i16::from_be_bytes([count[0], count[1]]);
    let mut rest = &body[2..];
    let mut names = Vec::new();
    for _ in 0..count {
        let end = rest.iter().position(|&b| b == 0).ok_or_else(bad)?;
        names.push(String::from_utf8_lossy(&rest[..end]).into_owned());
        rest = rest.get(end + 1 + 18..).ok_or_else(bad)?;
    }
    Ok(names)
}

/// The values of a DataRow: a count (i16), then per column a length (i32,
/// -1 for NULL) and that many bytes of text.
fn data_row(body: &[u8], columns: usize) -> Result<Vec<Option<String>>, ScriptError> {
    let bad = |what: &str| ScriptError::Refused(format!("a malformed DataRow: {what}"));
    let count = body.get(..2).ok_or_else(|| bad("no column count"))?;
    let count = i16::from_be_bytes([count[0], count[1]]);
    if usize::try_from(count).ok() != Some(columns) {
        return Err(bad(&format!("{count} values for {columns} columns")));
    }
    let mut rest = &body[2..];
    let mut values = Vec::with_capacity(columns);
    for _ in 0..count {
        let length = rest.get(..4).ok_or_else(|| bad("cut in a length"))?;
        let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
        rest = &rest[4..];
        match usize::try_from(length) {
            Err(_) => values.push(None),
            Ok(n) => {
                let text = rest.get(..n).ok_or_else(|| bad("cut in a value"))?;
                values.push(Some(String::from_utf8_lossy(text).into_owned()));
                rest = &rest[n..];
            }
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_message_is_q_its_length_the_text_and_a_nul() {
        assert_eq!(
            query_message("select 1").unwrap(),
            b"Q\0\0\0\x0dselect 1\0".to_vec()
        );
        assert!(query_message("a\0b").is_err());
    }

    #[tokio::test]
    async fn the_first_error_is_the_outcome_once_the_backend_is_ready() {
        let mut ok = Vec::new();
        ok.extend_from_slice(b"C\0\0\0\x11CREATE TABLE\0");
        ok.extend_from_slice(&[b'Z', 0, 0, 0, 5, b'I']);
        assert!(read_query_outcome(&mut ok.as_slice()).await.is_ok());

        // A SELECT's rows, by column, NULL as None.
        let mut rows = Vec::new();
        let mut description = vec![0, 2];
        for name in ["topic", "value"] {
            description.extend_from_slice(name.as_bytes());
            description.push(0);
            description.extend_from_slice(&[0; 18]);
        }
        rows.push(b'T');
        rows.extend_from_slice(&(description.len() as i32 + 4).to_be_bytes());
        rows.extend_from_slice(&description);
        let mut row = vec![0u8, 2];
        row.extend_from_slice(&1i32.to_be_bytes());
        row.push(b't');
        row.extend_from_slice(&(-1i32).to_be_bytes());
        rows.push(b'D');
        rows.extend_from_slice(&(row.len() as i32 + 4).to_be_bytes());
        rows.extend_from_slice(&row);
        rows.extend_from_slice(&[b'Z', 0, 0, 0, 5, b'I']);
        let table = read_query_outcome(&mut rows.as_slice()).await.unwrap();
        assert_eq!(table.columns, ["topic", "value"]);
        assert_eq!(table.rows, [vec![Some("t".to_owned()), None]]);

        let mut failed = Vec::new();
        failed.extend_from_slice(b"E\0\0\0\x1aC42P07\0Mtable exists\0\0");
        failed.extend_from_slice(&[b'Z', 0, 0, 0, 5, b'I']);
        let outcome = read_query_outcome(&mut failed.as_slice())
            .await
            .map_err(|e| e.to_string());
        assert!(
            outcome.as_ref().is_err_and(|e| e.starts_with("42P07")),
            "{outcome:?}"
        );
    }
}
