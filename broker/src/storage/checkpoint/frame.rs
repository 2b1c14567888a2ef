//! The frame every checkpoint file shares: a version line, a count line, then
//! one entry a line, rendered, and read as strictly as Kafka's `CheckpointFile`
//! reads it. What an entry line holds is the caller's (`checkpoint.rs`).
//! [`CheckpointError`], what a read refuses, lives here, below the storage's
//! own error ([`StorageError`](crate::storage::StorageError)) that carries it,
//! since `checkpoint.rs` returns that error.

use std::path::{Path, PathBuf};

/// The only checkpoint version Kafka has defined.
pub const CHECKPOINT_VERSION: i32 = 0;

/// A checkpoint file that exists but cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: unsupported checkpoint version {version} (expected {CHECKPOINT_VERSION})")]
    UnsupportedVersion { path: PathBuf, version: i32 },
    /// `line` is 1-based, counting the version and count lines.
    #[error("{path} line {line}: malformed line {text:?}")]
    MalformedLine {
        path: PathBuf,
        line: usize,
        text: String,
    },
    #[error("{path}: expected {expected} entries, found {found}")]
    CountMismatch {
        path: PathBuf,
        expected: i64,
        found: usize,
    },
}

/// Renders the version and count lines and one line per entry.
pub(super) fn render<T>(
    entries: impl ExactSizeIterator<Item = T>,
    line: impl Fn(T) -> String,
) -> String {
    let mut out = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for entry in entries {
        out.push_str(&line(entry));
        out.push('\n');
    }
    out
}

/// Splits an entry line on single spaces or runs of whitespace, as Kafka's `\s+`
/// does; a line with leading whitespace or too few/many fields is malformed.
pub(super) fn fields<const N: usize>(text: &str) -> Option<[&str; N]> {
    if text.starts_with(char::is_whitespace) {
        return None;
    }
    let mut parts = text.split_whitespace();
    let mut out = [""; N];
    for slot in &mut out {
        *slot = parts.next()?;
    }
    parts.next().is_none().then_some(out)
}

/// Parses the frame and hands each entry line to `entry`. `path` is only for
/// error messages.
pub(super) fn parse<T>(
    path: &Path,
    bytes: &[u8],
    entry: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, CheckpointError> {
    let malformed = |line: usize, text: &[u8]| CheckpointError::MalformedLine {
        path: path.to_path_buf(),
        line,
        text: String::from_utf8_lossy(text).into_owned(),
    };
    // `lines` of a byte slice: split on '\n', drop a trailing '\r' as Java's
    // readLine does, and ignore the final empty piece after a trailing newline.
    let mut lines = bytes
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .collect::<Vec<_>>();
    if bytes.ends_with(b"\n") || bytes.is_empty() {
        lines.pop();
    }
    let mut lines = lines.into_iter();
    let text = |n: usize, l: &[u8]| -> Result<String, CheckpointError> {
        String::from_utf8(l.to_vec()).map_err(|_| malformed(n, l))
    };

    let Some((n, version_line)) = lines.next() else {
        return Ok(Vec::new());
    };
    let version: i32 = text(n, version_line)?
        .parse()
        .map_err(|_| malformed(n, version_line))?;
    if version != CHECKPOINT_VERSION {
        return Err(CheckpointError::UnsupportedVersion {
            path: path.to_path_buf(),
            version,
        });
    }
    // Kafka reads a file that stops after its version line as empty.
    let Some((n, count_line)) = lines.next() else {
        return Ok(Vec::new());
    };
    let expected: i64 = text(n, count_line)?
        .parse()
        .map_err(|_| malformed(n, count_line))?;
    let mut entries = Vec::new();
    for (n, line) in lines {
        let parsed = entry(&text(n, line)?).ok_or_else(|| malformed(n, line))?;
        entries.push(parsed);
    }
    if i64::try_from(entries.len()) != Ok(expected) {
        return Err(CheckpointError::CountMismatch {
            path: path.to_path_buf(),
            expected,
            found: entries.len(),
        });
    }
    Ok(entries)
}
