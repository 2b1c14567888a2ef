//! An application's Fetch request and its answer: per partition, the offset
//! asked from, then the records the answer holds as the client reads them —
//! from the asked offset on (a batch may start below it), without control
//! records and, under read_committed, without the records of the aborted
//! transactions the answer lists (as Kafka's consumer drops them) — and the
//! high watermark and last stable offset the answer reports.

use std::collections::HashSet;

use bytes::Bytes;
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::protocol::Decodable;
use kafka_protocol::records::RecordSet;

use super::wire::{DecodeError, decode_response, whole_batches};

/// One Fetch request of a consumer, and once answered what it read.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetch {
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
    pub partitions: Vec<FetchedPartition>,
}

/// One partition of a Fetch.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchedPartition {
    /// Its name; from Fetch v13 on the request names the topic by id only,
    /// and the name comes from a Metadata answer the links recorded
    /// ([`super::AppFrames::name_fetched_topics`]).
    pub topic: String,
    /// The topic's id (KIP-516), from Fetch v13 on.
    pub topic_id: Option<String>,
    pub partition: i32,
    pub fetch_offset: i64,
    /// Once answered.
    pub answer: Option<FetchAnswer>,
}

/// What the answer said of one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchAnswer {
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// Under read_committed, the aborted transactions the answer listed
    /// (version 4 on): (producer id, first offset).
    pub aborted: Vec<(i64, i64)>,
    pub records: Vec<FetchedRecord>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FetchedRecord {
    pub offset: i64,
    pub value: Option<Bytes>,
}

/// The request's body in `frame` (its header read) at `version`; `None` for
/// a replica's fetch, which is no application's.
pub fn request(mut frame: Bytes, version: i16) -> Result<Option<Fetch>, DecodeError> {
    let request = FetchRequest::decode(&mut frame, version).map_err(DecodeError::Body)?;
    if request.replica_id.0.max(request.replica_state.replica_id.0) >= 0 {
        return Ok(None);
    }
    let mut partitions = Vec::new();
    for topic in &request.topics {
        // Fetch v13 on (KIP-516) names each topic by its id alone.
        let by_id = version >= 13;
        for p in &topic.partitions {
            partitions.push(FetchedPartition {
                topic: topic.topic.0.to_string(),
                topic_id: by_id.then(|| topic.topic_id.to_string()),
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                answer: None,
            });
        }
    }
    Ok(Some(Fetch {
        isolation_level: request.isolation_level,
        partitions,
    }))
}

/// Reads the answer in `frame` into `fetch`.
pub fn answer(fetch: &mut Fetch, version: i16, frame: Bytes) -> Result<(), DecodeError> {
    let response: FetchResponse = decode_response(frame, version)?;
    let committed_only = fetch.isolation_level == 1;
    for topic in &response.responses {
        for data in &topic.partitions {
            let id = (version >= 13).then(|| topic.topic_id.to_string());
            let Some(p) = fetch.partitions.iter_mut().find(|p| {
                let same = match &id {
                    Some(id) => p.topic_id.as_ref() == Some(id),
                    None => p.topic == topic.topic.0.as_str(),
                };
                same && p.partition == data.partition_index
            }) else {
                continue;
            };
            let sets = whole_batches(data.records.clone().unwrap_or_default())?;
            let aborted: Vec<(i64, i64)> = data
                .aborted_transactions
                .iter()
                .flatten()
                .filter(|_| committed_only)
                .map(|a| (a.producer_id.0, a.first_offset))
                .collect();
            p.answer = Some(FetchAnswer {
                error_code: data.error_code,
                high_watermark: data.high_watermark,
                last_stable_offset: data.last_stable_offset,
                records: read_records(&sets, p.fetch_offset, aborted.clone()),
                aborted,
            });
        }
    }
    Ok(())
}

/// The records a consumer takes from `sets`: from `from` on, no control
/// record, none of a transaction `aborted` (`(producer id, first offset)`)
/// names, as Kafka's consumer filters them.
fn read_records(sets: &[RecordSet], from: i64, mut aborted: Vec<(i64, i64)>) -> Vec<FetchedRecord> {
    aborted.sort_by_key(|&(_, first)| std::cmp::Reverse(first));
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut out = Vec::new();
    for set in sets {
        let (Some(first), Some(last)) = (set.records.first(), set.records.last()) else {
            continue;
        };
        while aborted.last().is_some_and(|&(_, at)| at <= last.offset) {
            let (producer, _) = aborted.pop().expect("just looked");
            aborting.insert(producer);
        }
        if first.control {
            // An abort marker ends its producer's aborted transaction.
            let abort = first
                .key
                .as_ref()
                .and_then(|k| k.get(2..4))
                .is_some_and(|t| t == [0, 0]);
            if abort {
                aborting.remove(&first.producer_id);
            }
            continue;
        }
        if first.transactional && aborting.contains(&first.producer_id) {
            continue;
        }
        out.extend(
            set.records
                .iter()
                .filter(|r| r.offset >= from && !r.control)
                .map(|r| FetchedRecord {
                    offset: r.offset,
                    value: r.value.clone(),
                }),
        );
    }
    out
}
