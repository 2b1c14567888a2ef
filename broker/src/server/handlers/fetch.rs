//! Fetch: read each partition from the requested offset, a client only up to
//! the high watermark, a follower (replica id ≥ 0) up to the log end, which also
//! reports its position to the leader. Only the leader answers, except for
//! Kafka's debugging replica id -2, which reads any replica holding the log —
//! follower too — up to that replica's own HW (Kafka's ReplicaManager turns
//! off `fetchOnlyFromLeader` for `DebuggingConsumerId` alone; see
//! `replica::manager::DEBUGGING_REPLICA_ID`). Wait up to `max_wait_ms` until
//! `min_bytes` are available. The current leader epoch (KIP-320) is checked:
//! older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.
//! `max_bytes` caps the whole answer and `partition_max_bytes` each
//! partition, except that the first partition with data returns its first
//! batch whole even when it exceeds them (KIP-74), so a large batch never
//! stalls a consumer (`partition_budget`).
//! Fetch sessions (KIP-227) are not kept: every response is sessionless (id 0).
//! From v13 a request names each topic by its id alone (KIP-516), resolved
//! through the metadata the controller sent; an id it does not hold is
//! UNKNOWN_TOPIC_ID for each of that topic's partitions, and the answer names
//! topics by id as asked.
//! A read_committed client (isolation_level 1, KIP-98) reads up to the last
//! stable offset and is told the aborted transactions there.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId};

/// Fetch's isolation_level for read_committed (KIP-98).
const READ_COMMITTED: i8 = 1;

use crate::replica::leader::ReadBudget;
use crate::replica::manager::ReplicaManager;
use crate::replica::store::TopicPartition;
use crate::server::metadata_cache::MetadataCache;

/// Reads through `replicas` alone; `metadata` only resolves a v13+
/// request's topic ids to names.
pub async fn handle(
    replicas: &ReplicaManager,
    metadata: &MetadataCache,
    req: FetchRequest,
    version: i16,
    client_id: &str,
) -> FetchResponse {
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    // Since Fetch v15 (KIP-903) the replica id travels in ReplicaState.
    let replica_id = if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    // A follower's run, from its client id (fetcher.rs): its fetches count
    // toward joining an ISR only for that run (KIP-903).
    let names = topic_names(metadata, &req, version);
    if replica_id >= 0
        && let Some(run) = crate::replica::fetcher::follower_incarnation(client_id)
    {
        let partitions = req.topics.iter().zip(&names).flat_map(|(t, name)| {
            let name = name.clone().unwrap_or_default();
            t.partitions
                .iter()
                .map(move |p| TopicPartition::new(name.clone(), p.partition))
        });
        replicas.note_follower_run(partitions, replica_id, run);
    }
    if replica_id >= 0 {
        // What each follower's log start is (KIP-107): a DeleteRecords
        // waits for it.
        let starts = req.topics.iter().zip(&names).flat_map(|(t, name)| {
            let name = name.clone().unwrap_or_default();
            t.partitions.iter().map(move |p| {
                (
                    TopicPartition::new(name.clone(), p.partition),
                    p.log_start_offset,
                )
            })
        });
        replicas.note_follower_log_starts(starts, replica_id);
    }
    loop {
        let notified = replicas.appended().notified();
        let (response, bytes, any_error) = read_once(replicas, &req, &names, replica_id);
        let done = bytes >= req.min_bytes.max(0) as usize
            || any_error
            || tokio::time::Instant::now() >= deadline;
        if done {
            return response;
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Each requested topic's name: as given before v13, from its id from v13
/// on (`None`: an id this broker's metadata does not hold).
fn topic_names(metadata: &MetadataCache, req: &FetchRequest, version: i16) -> Vec<Option<String>> {
    req.topics
        .iter()
        .map(|t| match version {
            ..13 => Some(t.topic.0.to_string()),
            _ => metadata.topic_named(&t.topic_id.to_string()),
        })
        .collect()
}

fn read_once(
    replicas: &ReplicaManager,
    req: &FetchRequest,
    names: &[Option<String>],
    replica_id: i32,
) -> (FetchResponse, usize, bool) {
    let max_bytes = if req.max_bytes <= 0 {
        i32::MAX as usize
    } else {
        req.max_bytes as usize
    };
    let mut total = 0usize;
    let mut any_error = false;
    let mut topics = Vec::with_capacity(req.topics.len());
    for (t, name) in req.topics.iter().zip(names) {
        let topic = FetchableTopicResponse::default()
            .with_topic(t.topic.clone())
            .with_topic_id(t.topic_id);
        let Some(name) = name.clone() else {
            any_error = true;
            let parts = t.partitions.iter().map(|p| {
                PartitionData::default()
                    .with_partition_index(p.partition)
                    .with_error_code(ResponseError::UnknownTopicId.code())
                    .with_high_watermark(-1)
                    .with_records(Some(Default::default()))
            });
            topics.push(topic.with_partitions(parts.collect()));
            continue;
        };
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: p.partition,
            };
            let base = PartitionData::default().with_partition_index(p.partition);
            let budget = partition_budget(max_bytes, total, p.partition_max_bytes);
            if budget.max_bytes == 0 && !budget.min_one_batch {
                parts.push(
                    base.with_high_watermark(replicas.high_watermark(&tp).unwrap_or(-1))
                        .with_records(Some(Default::default())),
                );
                continue;
            }
            match replicas.read_within(
                &tp,
                p.fetch_offset,
                budget,
                replica_id,
                p.current_leader_epoch,
                req.isolation_level == READ_COMMITTED,
            ) {
                Ok(r) => {
                    total += r.records.len();
                    let aborted = r
                        .aborted
                        .iter()
                        .map(|(pid, first)| {
                            AbortedTransaction::default()
                                .with_producer_id(ProducerId(*pid))
                                .with_first_offset(*first)
                        })
                        .collect();
                    parts.push(
                        base.with_high_watermark(r.high_watermark)
                            .with_last_stable_offset(r.last_stable_offset)
                            .with_log_start_offset(r.log_start_offset)
                            .with_aborted_transactions(Some(aborted))
                            .with_records(Some(r.records)),
                    );
                }
                Err(e) => {
                    any_error = true;
                    parts.push(
                        base.with_error_code(e.code())
                            .with_high_watermark(-1)
                            .with_records(Some(Default::default())),
                    );
                }
            }
        }
        topics.push(topic.with_partitions(parts));
    }
    (
        FetchResponse::default().with_responses(topics),
        total,
        any_error,
    )
}

/// What one partition of a Fetch may read once `total` bytes of the answer
/// are taken, as Kafka's `ReplicaManager.readFromLocalLog` (KIP-74): each
/// partition gets `min(partition_max_bytes, max_bytes - total)`, and only
/// while nothing has been read yet may a first batch larger than that come
/// whole (`minOneMessage`), so a consumer never sticks on a large batch yet
/// an answer is never larger than `max_bytes` unless it is that one batch
/// (librdkafka drops the connection over an answer above its
/// `receive.message.max.bytes`).
/// Fetch v3+ limits are soft this way; v0-v2 had hard limits, which this
/// broker does not serve (v4+).
fn partition_budget(max_bytes: usize, total: usize, partition_max_bytes: i32) -> ReadBudget {
    ReadBudget {
        max_bytes: (partition_max_bytes.max(0) as usize).min(max_bytes.saturating_sub(total)),
        min_one_batch: total == 0,
    }
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
