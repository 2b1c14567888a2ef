//! What a poll returned, as the history holds it: `[offset, value]` pairs
//! whose value reads as the workload wrote it (a number, other text, or
//! null), and the workload's padding of a value to a record size. Shared by
//! the `poll` op and a transaction's polls (op.rs, txn_op.rs).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The value inside a record's text: the text itself, or, when it is the
/// workload's padding of a value to a record size (`value_bytes`: the digits,
/// a space, then only dots), the digits before the space.
pub fn value_text(text: &str) -> &str {
    match text.split_once(' ') {
        Some((value, padding))
            if !value.is_empty() && !padding.is_empty() && padding.bytes().all(|b| b == b'.') =>
        {
            value
        }
        _ => text,
    }
}

/// A value as the workload writes it: its decimal digits, and with
/// `value_bytes` a space and dots up to that many bytes (`7 ......`), which
/// [`value_text`] reads back as the value alone. A size below the digits' own
/// is the digits alone. Kept beside its reader so the two cannot drift.
pub fn padded(value: i64, value_bytes: Option<u32>) -> String {
    let digits = value.to_string();
    match value_bytes.map(|n| n as usize) {
        Some(n) if n > digits.len() + 1 => format!("{digits} {}", ".".repeat(n - digits.len() - 1)),
        _ => digits,
    }
}

/// `[offset, value]`: one record a poll returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolledRecord(pub i64, pub RecordValue);

impl PolledRecord {
    pub fn offset(&self) -> i64 {
        self.0
    }

    pub fn value(&self) -> &RecordValue {
        &self.1
    }
}

/// A record's value as the workload wrote it: decimal text reads as a number,
/// other text as a string, no value as null.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordValue {
    Number(i64),
    Text(String),
    Null,
}

impl RecordValue {
    /// From the record's bytes (`None`: a null value).
    pub fn from_bytes(bytes: Option<&[u8]>) -> RecordValue {
        match bytes {
            None => RecordValue::Null,
            Some(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                value_text(&text)
                    .parse::<i64>()
                    .map(RecordValue::Number)
                    .unwrap_or_else(|_| RecordValue::Text(text.into_owned()))
            }
        }
    }

    pub fn as_number(&self) -> Option<i64> {
        match self {
            RecordValue::Number(n) => Some(*n),
            _ => None,
        }
    }
}

/// `5`, `"text"` or `null`, as JSON prints it.
impl std::fmt::Display for RecordValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordValue::Number(n) => write!(f, "{n}"),
            RecordValue::Text(t) => write!(f, "{}", Value::String(t.clone())),
            RecordValue::Null => f.write_str("null"),
        }
    }
}

/// A value longer than this is kept as its length and hash.
pub const KEPT_BYTES: usize = 64;

/// A record's value as an application's op keeps it ([apps]): its text when
/// short ([`KEPT_BYTES`]) and UTF-8, else its length and FNV-1a hash; `null`
/// for a null value. The same bytes always keep the same form, so a kept
/// value is compared with a replica's record by this form.
pub fn kept_form(value: Option<&[u8]>) -> serde_json::Value {
    match value {
        None => serde_json::Value::Null,
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) if bytes.len() <= KEPT_BYTES => serde_json::Value::String(text.to_owned()),
            _ => serde_json::Value::String(format!(
                "{} bytes, fnv1a {:016x}",
                bytes.len(),
                fnv1a(bytes)
            )),
        },
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
