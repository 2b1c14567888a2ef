//! What the decoders of each API share: a response's header and body, and
//! the whole record batches of a `records` field.

use bytes::Bytes;
use kafka_protocol::protocol::{Decodable, HeaderVersion};

/// Why a recorded frame could not be read as its API's message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("header: {0:#}")]
    Header(#[source] anyhow::Error),
    #[error("{0:#}")]
    Body(#[source] anyhow::Error),
    #[error("record batch: {0:#}")]
    RecordBatch(#[source] anyhow::Error),
    #[error("a batch of length {0}")]
    BatchLength(i32),
}

/// Decodes a response's header and body of type `T` at `version`.
pub(super) fn decode_response<T: Decodable + HeaderVersion>(
    mut frame: Bytes,
    version: i16,
) -> Result<T, DecodeError> {
    kafka_protocol::messages::ResponseHeader::decode(&mut frame, T::header_version(version))
        .map_err(DecodeError::Header)?;
    T::decode(&mut frame, version).map_err(DecodeError::Body)
}

/// The whole record batches at the start of `bytes`, decoded; a batch cut
/// short (a fetch answer's `max_bytes` cuts the last one) ends them.
pub(super) fn whole_batches(
    mut bytes: Bytes,
) -> Result<Vec<kafka_protocol::records::RecordSet>, DecodeError> {
    let mut sets = Vec::new();
    // base offset (8) and batch length (4) lead every batch.
    while bytes.len() >= 12 {
        let length = i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let Ok(length) = usize::try_from(length) else {
            return Err(DecodeError::BatchLength(length));
        };
        let whole = 12 + length;
        if bytes.len() < whole {
            break;
        }
        let mut batch = bytes.split_to(whole);
        let decoded = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut batch)
            .map_err(DecodeError::RecordBatch)?;
        sets.extend(decoded);
    }
    Ok(sets)
}
