//! One client operation as the history records it: a send of values or a
//! bounded poll, and how a client error maps to the op's outcome. Shared by the
//! scripted steps (run.rs) and the background workers (background.rs), so both
//! write the same history shape.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use super::kafka_client::{
    self, ClientError, FetchOptions, KafkaClient, ProduceOptions, ProduceRecord,
};
use crate::history::OpType;
use crate::history::kafka_errors::{Outcome, produce_outcome};
use crate::schedule::{Acks, Compression, PartitionRef};

pub fn acks_name(acks: Acks) -> &'static str {
    match acks {
        Acks::All => "all",
        Acks::Leader => "1",
        Acks::None => "0",
    }
}

pub fn wire_compression(c: Compression) -> kafka_client::Compression {
    match c {
        Compression::None => kafka_client::Compression::None,
        Compression::Gzip => kafka_client::Compression::Gzip,
        Compression::Snappy => kafka_client::Compression::Snappy,
        Compression::Lz4 => kafka_client::Compression::Lz4,
        Compression::Zstd => kafka_client::Compression::Zstd,
    }
}

/// A produce's outcome when the client got no ok: `fail` only when the broker
/// definitely did not apply it (kafka_errors.rs), or the request was never
/// sent; `info` otherwise.
pub fn client_outcome(error: &ClientError, acks: i16) -> OpType {
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

/// A record's value as the workload wrote it (a decimal number), else as text.
pub fn payload_value(value: Option<&Bytes>) -> Value {
    match value {
        None => Value::Null,
        Some(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            text.parse::<i64>()
                .map(|n| json!(n))
                .unwrap_or_else(|_| json!(text))
        }
    }
}

/// Sends `values` (as decimal text) to one partition; on success, the offsets
/// they were given (`null` under acks=0, which returns none).
pub async fn send(
    client: &mut KafkaClient,
    partition: &PartitionRef,
    values: &[i64],
    options: &ProduceOptions,
    deadline: Duration,
) -> Result<Value, ClientError> {
    let records: Vec<ProduceRecord> = values
        .iter()
        .map(|v| ProduceRecord::value(Bytes::from(v.to_string())))
        .collect();
    let produced = client
        .produce(
            &partition.topic,
            partition.partition as i32,
            &records,
            options,
            deadline,
        )
        .await?;
    Ok(if produced.base_offset >= 0 {
        json!(
            (0..values.len() as i64)
                .map(|i| produced.base_offset + i)
                .collect::<Vec<_>>()
        )
    } else {
        Value::Null
    })
}

/// What a bounded poll read: `[offset, value]` pairs below the high watermark
/// its first fetch saw, and that high watermark.
pub struct Polled {
    pub records: Vec<Value>,
    pub high_watermark: i64,
}

impl Polled {
    /// The offset after the last record read, if any was.
    pub fn next_offset(&self) -> Option<u64> {
        self.records
            .last()
            .and_then(|r| r[0].as_u64())
            .map(|o| o + 1)
    }
}

/// Reads one partition from `from_offset` up to the high watermark seen by the
/// first fetch (a bounded poll: it never waits for more).
pub async fn poll(
    client: &mut KafkaClient,
    partition: &PartitionRef,
    from_offset: u64,
    deadline: Duration,
) -> Result<Polled, ClientError> {
    let options = FetchOptions {
        max_wait_ms: 0,
        ..FetchOptions::default()
    };
    let mut offset = from_offset as i64;
    let mut polled = Polled {
        records: Vec::new(),
        high_watermark: -1,
    };
    loop {
        let fetched = client
            .fetch(
                &partition.topic,
                partition.partition as i32,
                offset,
                &options,
                deadline,
            )
            .await?;
        if polled.high_watermark < 0 {
            polled.high_watermark = fetched.high_watermark;
        }
        let Some(last) = fetched.records.last() else {
            return Ok(polled);
        };
        offset = last.offset + 1;
        let high_watermark = polled.high_watermark;
        polled.records.extend(
            fetched
                .records
                .iter()
                .filter(|r| r.offset < high_watermark)
                .map(|r| json!([r.offset, payload_value(r.value.as_ref())])),
        );
        if offset >= high_watermark {
            return Ok(polled);
        }
    }
}
