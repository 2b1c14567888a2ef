//! A system's SQL script (its schema) run on the fresh server before any
//! broker starts: one connection as the superuser, the whole script as one
//! simple Query. PostgreSQL runs a multi-statement simple Query as one
//! implicit transaction, so a script that fails leaves nothing behind, and
//! the error names the statement's SQLSTATE and message.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::super::RuntimeError;
use super::{
    Attempt, DATABASE, MESSAGE_SIZE_BYTES_MAX, USER, error_response_text, read_until_ready,
    startup_message,
};

/// Runs `sql` on the server at `address` (which must already answer, as
/// [`super::postgres_ready`] saw), within `timeout`.
pub async fn run_script(address: &str, sql: &str, timeout: Duration) -> Result<(), RuntimeError> {
    let failed = |detail: String| RuntimeError::Postgres {
        at: format!("at {address}, running the system's schema"),
        detail,
    };
    match tokio::time::timeout(timeout, script_round_trip(address, sql)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(detail)) => Err(failed(detail.to_string())),
        Err(_) => Err(RuntimeError::Timeout {
            what: format!("the system's schema at PostgreSQL {address}"),
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

async fn script_round_trip(address: &str, sql: &str) -> Result<(), ScriptError> {
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
/// ErrorResponse, if any, is the outcome.
async fn read_query_outcome<R: AsyncReadExt + Unpin>(read: &mut R) -> Result<(), ScriptError> {
    let mut error = None;
    loop {
        let kind = read.read_u8().await?;
        let length = read.read_i32().await?;
        let body_bytes = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_sub(4))
            .filter(|&b| b <= MESSAGE_SIZE_BYTES_MAX)
            .ok_or_else(|| format!("message {:?} of length {length}", kind as char))?;
        let mut body = vec![0; body_bytes];
        read.read_exact(&mut body).await?;
        match kind {
            b'E' => {
                error.get_or_insert_with(|| error_response_text(&body));
            }
            b'Z' => return error.map_or(Ok(()), |e| Err(ScriptError::Refused(e))),
            // CommandComplete, EmptyQueryResponse, NoticeResponse,
            // ParameterStatus, and rows a script's SELECT may return.
            b'C' | b'I' | b'N' | b'S' | b'T' | b'D' => {}
            other => {
                return Err(ScriptError::Refused(format!(
                    "unexpected message {:?}",
                    other as char
                )));
            }
        }
    }
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
