//! What a send is below any client: its options (acks, batching,
//! compression, key, value size), the records it writes, the bound on its
//! answer, and the op type a send that got no ok records. The op-recording
//! client (client.rs, send.rs) and the idempotent producer (producer.rs) both
//! build on it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::history::kafka_errors::{Outcome, produce_outcome};
use crate::history::{OpType, padded};
use crate::kafka_client::{self, ClientError, ProduceRecord};
use crate::schedule::{Acks, Compression, Workload};

/// Extra time a send's answer may take beyond the broker's own acks=all wait.
pub const SEND_MARGIN: Duration = Duration::from_secs(2);

/// How a send is made: acks, batching, compression, and the record's key
/// and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOptions {
    pub acks: Acks,
    pub records_per_batch: u32,
    pub compression: Compression,
    /// Every record's key (`None`: no key).
    pub key: Option<Arc<str>>,
    /// Pad each value to this many bytes ([`padded`]); `None`: the value alone.
    pub value_bytes: Option<u32>,
}

impl SendOptions {
    /// The workload's defaults.
    pub fn of(workload: &Workload) -> SendOptions {
        SendOptions {
            acks: workload.acks,
            records_per_batch: workload.records_per_batch,
            compression: workload.compression,
            key: None,
            value_bytes: None,
        }
    }
}

/// The records a send of `values` writes: each value as [`padded`] text,
/// with the send's key.
pub(super) fn records(values: &[i64], send: &SendOptions) -> Vec<ProduceRecord> {
    values
        .iter()
        .map(|&v| {
            let value = Bytes::from(padded(v, send.value_bytes));
            match &send.key {
                Some(key) => ProduceRecord::keyed(Bytes::from(key.to_string()), value),
                None => ProduceRecord::value(value),
            }
        })
        .collect()
}

/// Each of `count` values' offset from the first's; `None` when the broker
/// gave none (-1: acks=0, or a duplicate it could not place).
pub(super) fn offsets(base_offset: i64, count: usize) -> Option<Vec<i64>> {
    (base_offset >= 0).then(|| (0..count as i64).map(|i| base_offset + i).collect())
}

/// A produce's outcome when the client got no ok: `fail` only when the broker
/// definitely did not apply it (kafka_errors.rs), or the request was never
/// sent; `info` otherwise.
pub fn send_outcome(error: &ClientError, acks: i16) -> OpType {
    match error {
        ClientError::Broker { code, .. } => match produce_outcome(*code, acks) {
            Outcome::Definite => OpType::Fail,
            Outcome::Indefinite => OpType::Info,
        },
        // Never sent: nothing listened, or the connection was already gone.
        ClientError::Refused { .. } | ClientError::Connect { .. } | ClientError::Closed => {
            OpType::Fail
        }
        // Refused at connect time by the version check: nothing was produced.
        ClientError::Unsupported { .. } => OpType::Fail,
        ClientError::Timeout { .. } | ClientError::Dropped(_) | ClientError::Protocol(_) => {
            OpType::Info
        }
    }
}

/// The schedule's compression as the wire names it.
pub(super) fn wire_compression(c: Compression) -> kafka_client::Compression {
    match c {
        Compression::None => kafka_client::Compression::None,
        Compression::Gzip => kafka_client::Compression::Gzip,
        Compression::Snappy => kafka_client::Compression::Snappy,
        Compression::Lz4 => kafka_client::Compression::Lz4,
        Compression::Zstd => kafka_client::Compression::Zstd,
    }
}
