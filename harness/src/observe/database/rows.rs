//! A database's rows as records: the columns `[final_state] database`'s
//! `records` query returns (system/database.rs lists them), each value in
//! text form as both clients give it, checked one by one so a malformed row
//! is named by its number, and by its partition and offset when those read.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::topic_partition::PartitionRef;

/// One row as a client returned it: column name to text value (`None`: NULL).
pub type Row = BTreeMap<String, Option<String>>;

/// Kafka's batch attribute bits a row's `attributes` may carry (the
/// compression bits, 0-2, are ignored: the rows hold records uncompressed).
const TIMESTAMP_LOG_APPEND: i16 = 1 << 3;
const TRANSACTIONAL: i16 = 1 << 4;
const CONTROL: i16 = 1 << 5;

/// One record as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub attributes: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timestamp: i64,
}

impl DbRecord {
    pub fn transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL != 0
    }

    pub fn control(&self) -> bool {
        self.attributes & CONTROL != 0
    }

    pub fn log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_LOG_APPEND != 0
    }
}

/// A row that is not a record: its number (1-based, in the order the query
/// returned it), where it is when that much was read, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("row {row}{}: {what}", .at.as_ref().map(|at| format!(" ({at})")).unwrap_or_default())]
pub struct RowError {
    pub row: usize,
    pub at: Option<String>,
    pub what: ColumnError,
}

/// What is wrong with a row's columns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnError {
    #[error("no column `{name}` (the row has: {has})")]
    Missing { name: String, has: String },
    #[error("column `{0}` is null")]
    Null(String),
    #[error("column `{name}`: `{text}` is not an integer of its range")]
    NotInteger { name: String, text: String },
    #[error("column `{name}`: {value} is not an i16")]
    NotI16 { name: String, value: i64 },
    #[error("partition {partition} and offset {offset}: neither may be negative")]
    Negative { partition: i32, offset: i64 },
    #[error("column `{name}`: `{text}` is not hex{}", if *.odd { ": an odd number of digits" } else { "" })]
    NotHex {
        name: String,
        text: String,
        odd: bool,
    },
}

/// `row` (numbered `number`) as a record.
pub fn record(number: usize, row: &Row) -> Result<DbRecord, RowError> {
    let mut at = None;
    let error = |at: &Option<String>, what: ColumnError| RowError {
        row: number,
        at: at.clone(),
        what,
    };
    let topic = text(row, "topic")
        .and_then(|t| t.ok_or_else(|| ColumnError::Null("topic".into())))
        .map_err(|what| error(&at, what))?
        .to_owned();
    let partition: i32 = required(row, "partition").map_err(|what| error(&at, what))?;
    let offset: i64 = required(row, "offset").map_err(|what| error(&at, what))?;
    if partition < 0 || offset < 0 {
        return Err(error(&at, ColumnError::Negative { partition, offset }));
    }
    at = Some(format!(
        "{} offset {offset}",
        PartitionRef::new(topic.clone(), partition.unsigned_abs())
    ));
    let optional = |name: &str| -> Result<Option<i64>, RowError> {
        match text(row, name) {
            Err(_) | Ok(None) => Ok(None),
            Ok(Some(text)) => integer(name, text).map(Some).map_err(|w| error(&at, w)),
        }
    };
    let narrow = |name: &str, value: Option<i64>| -> Result<i16, RowError> {
        value.map_or(Ok(-1), |v| {
            i16::try_from(v).map_err(|_| {
                let what = ColumnError::NotI16 {
                    name: name.to_owned(),
                    value: v,
                };
                error(&at, what)
            })
        })
    };
    let attributes = match optional("attributes")? {
        None => 0,
        Some(v) => narrow("attributes", Some(v))?,
    };
    let producer_epoch = narrow("producer_epoch", optional("producer_epoch")?)?;
    Ok(DbRecord {
        key: bytes(row, "key", false).map_err(|w| error(&at, w))?,
        value: bytes(row, "value", true).map_err(|w| error(&at, w))?,
        attributes,
        producer_id: optional("producer_id")?.unwrap_or(-1),
        producer_epoch,
        timestamp: optional("timestamp")?.unwrap_or(-1),
        topic,
        partition,
        offset,
    })
}

/// A column's text (`None`: NULL), or why the row has no such column.
fn text<'a>(row: &'a Row, name: &str) -> Result<Option<&'a str>, ColumnError> {
    match row.get(name) {
        Some(value) => Ok(value.as_deref()),
        None => Err(ColumnError::Missing {
            name: name.to_owned(),
            has: row
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn integer<T: std::str::FromStr>(name: &str, text: &str) -> Result<T, ColumnError> {
    text.trim().parse().map_err(|_| ColumnError::NotInteger {
        name: name.to_owned(),
        text: text.to_owned(),
    })
}

fn required<T: std::str::FromStr>(row: &Row, name: &str) -> Result<T, ColumnError> {
    let text = text(row, name)?.ok_or_else(|| ColumnError::Null(name.to_owned()))?;
    integer(name, text)
}

/// A hex-encoded column's bytes; NULL is `None`. `needed`: the column must
/// be there (it may be NULL).
fn bytes(row: &Row, name: &str, needed: bool) -> Result<Option<Bytes>, ColumnError> {
    match text(row, name) {
        Err(missing) if needed => Err(missing),
        Err(_) | Ok(None) => Ok(None),
        Ok(Some(hex)) => decode_hex(hex)
            .map(|b| Some(Bytes::from(b)))
            .ok_or_else(|| ColumnError::NotHex {
                name: name.to_owned(),
                text: shorten(hex),
                odd: !hex.len().is_multiple_of(2),
            }),
    }
}

/// Hex text (either case) as bytes; `None` when it is not hex.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some((digit(pair[0])? << 4) | digit(pair[1])?))
        .collect::<Option<Vec<u8>>>()
}

/// At most 40 characters of `text`, for an error message.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(columns: &[(&str, Option<&str>)]) -> Row {
        columns
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn a_row_reads_as_a_record_and_optional_columns_default() {
        let full = row(&[
            ("topic", Some("t")),
            ("partition", Some("1")),
            ("offset", Some("7")),
            ("key", None),
            ("value", Some("00fF")),
            ("attributes", Some("48")),
            ("producer_id", Some("12")),
            ("producer_epoch", Some("3")),
            ("timestamp", Some("1700000000000")),
        ]);
        let r = record(1, &full).unwrap();
        assert_eq!((r.topic.as_str(), r.partition, r.offset), ("t", 1, 7));
        assert_eq!(r.key, None);
        assert_eq!(r.value.as_deref(), Some(&[0x00, 0xff][..]));
        assert!(r.transactional() && r.control() && !r.log_append_time());
        assert_eq!((r.producer_id, r.producer_epoch), (12, 3));
        let bare = row(&[
            ("topic", Some("t")),
            ("partition", Some("0")),
            ("offset", Some("0")),
            ("value", None),
        ]);
        let r = record(1, &bare).unwrap();
        assert_eq!((r.attributes, r.producer_id, r.producer_epoch), (0, -1, -1));
        assert_eq!((r.timestamp, r.value), (-1, None));
    }

    #[test]
    fn a_malformed_row_is_named_by_number_and_place() {
        let good = [
            ("topic", Some("t")),
            ("partition", Some("0")),
            ("offset", Some("5")),
            ("value", Some("31")),
        ];
        let with = |name: &str, value: Option<&str>| {
            let mut r = row(&good);
            r.insert(name.to_owned(), value.map(str::to_owned));
            r
        };
        let error = |r: Row| record(3, &r).unwrap_err().to_string();
        assert_eq!(
            error(with("offset", Some("five"))),
            "row 3: column `offset`: `five` is not an integer of its range"
        );
        assert_eq!(
            error(with("value", Some("3g"))),
            "row 3 (t-0 offset 5): column `value`: `3g` is not hex"
        );
        assert_eq!(
            error(with("value", Some("313"))),
            "row 3 (t-0 offset 5): column `value`: `313` is not hex: an odd number of digits"
        );
        assert_eq!(
            error(with("producer_epoch", Some("40000"))),
            "row 3 (t-0 offset 5): column `producer_epoch`: 40000 is not an i16"
        );
        assert_eq!(error(with("topic", None)), "row 3: column `topic` is null");
        assert_eq!(
            error(with("partition", Some("-1"))),
            "row 3: partition -1 and offset 5: neither may be negative"
        );
        let mut no_value = row(&good);
        no_value.remove("value");
        assert_eq!(
            error(no_value),
            "row 3 (t-0 offset 5): no column `value` (the row has: offset, partition, topic)"
        );
    }
}
