//! What the decoders of each API share: a response's header and body, and
//! the whole record batches of a `records` field.

use bytes::Bytes;
use kafka_protocol::protocol::{Decodable, HeaderVersion};

/// Decodes a response's header and body of type `T` at `version`.
pub(super) fn decode_response<T: Decodable + HeaderVersion>(
    mut frame: Bytes,
    version: i16,
) -> Result<T, String> {
    kafka_protocol::messages::ResponseHeader::decode(&mut frame, T::header_version(version))
        .map_err(|e| format!("header: {e:#}"))?;
    T::decode(&mut frame, version).map_err(|e| format!("{e:#}"))
}

/// The whole record batches at the start of `bytes`, decoded; a batch cut
/// short (a fetch answer's `max_bytes` cuts the last one) ends them.
pub(super) fn whole_batches(
    mut bytes: Bytes,
) -> Result<Vec<kafka_protocol::records::RecordSet>, String> {
    let mut sets = Vec::new();
    // base offset (8) and batch length (4) lead every batch.
    while bytes.len() >= 12 {
        let length = i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let Ok(length) = usize::try_from(length) else {
            return Err(format!("a batch of length {length}"));
        };
        let whole = 12 + length;
        if bytes.len() < whole {
            break;
        }
        let mut batch = bytes.split_to(whole);
        let decoded = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut batch)
            .map_err(|e| format!("record batch: {e:#}"))?;
        sets.extend(decoded);
    }
    Ok(sets)
}
