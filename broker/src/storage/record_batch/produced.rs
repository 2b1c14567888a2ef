//! What a topic's configs refuse in a producer's batches beyond their
//! format, checked by the leader with the format before it appends anything:
//! a batch larger than `max.message.bytes` (Kafka's
//! `Log.analyzeAndValidateRecords`: RecordTooLargeException,
//! MESSAGE_TOO_LARGE), and a record without a key in a compacted topic
//! (Kafka's `LogValidator.validateKey`: "Compacted topic cannot accept
//! message without key", InvalidRecordException, INVALID_RECORD).

use bytes::Bytes;

use super::{BatchError, BatchHeader, batch_size, check_records, validate};

/// The limits a topic's configs put on a produce's batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRules {
    /// `cleanup.policy` holds `compact`: every record needs a key.
    pub key_required: bool,
    /// `max.message.bytes`: the largest batch taken, its log overhead
    /// (offset and length) included, as Kafka's `sizeInBytes` counts it.
    pub max_batch_bytes: usize,
}

impl Default for RecordRules {
    /// No limit: what a topic's configs leave to the record format alone.
    fn default() -> Self {
        RecordRules {
            key_required: false,
            max_batch_bytes: usize::MAX,
        }
    }
}

/// A sound batch a topic's configs refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleViolation {
    #[error("a batch of {size} bytes is larger than max.message.bytes ({max})")]
    TooLarge { size: usize, max: usize },
    #[error("record {record} has no key: a compacted topic cannot accept a record without a key")]
    KeyMissing { record: usize },
}

/// Why a producer's records are refused: malformed, or refused by the rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducedError {
    #[error(transparent)]
    Corrupt(#[from] BatchError),
    #[error(transparent)]
    Refused(#[from] RuleViolation),
}

/// [`super::validate_produced`] under a topic's `rules`, in Kafka's order:
/// each batch's size before its CRC, and the keys once every batch has
/// passed (Kafka's `LogValidator` runs after the batches' own checks).
/// Returns each batch's position and header; the first problem is the
/// error, with the position of the batch it is in.
pub fn validate_produced_under(
    records: &Bytes,
    rules: &RecordRules,
) -> Result<Vec<(usize, BatchHeader)>, (usize, ProducedError)> {
    let mut headers = Vec::new();
    let mut first_keyless = None;
    let mut position = 0;
    while position < records.len() {
        let rest = &records[position..];
        let refused = |e: ProducedError| (position, e);
        if let Ok(size) = batch_size(rest)
            && size > rules.max_batch_bytes
        {
            let max = rules.max_batch_bytes;
            return Err(refused(RuleViolation::TooLarge { size, max }.into()));
        }
        let header = validate(rest).map_err(|e| refused(e.into()))?;
        let size = header.size_bytes();
        let batch = records.slice(position..position + size);
        let seen = check_records(&batch, &header).map_err(|e| refused(e.into()))?;
        if first_keyless.is_none() {
            first_keyless = seen.first_keyless.map(|record| (position, record));
        }
        headers.push((position, header));
        position += size;
    }
    if rules.key_required
        && let Some((position, record)) = first_keyless
    {
        return Err((position, RuleViolation::KeyMissing { record }.into()));
    }
    Ok(headers)
}
