//! Followers fetching from their leader (Kafka's ReplicaFetcherThread): one
//! task per followed partition, started by a LeaderAndIsr that makes this
//! broker a follower and replaced by the next one. A task first truncates the
//! log as `--truncation` says (asking the leader OffsetsForLeaderEpoch, KIP-101 /
//! KIP-279), then fetches from its log end with the replica id set, long-polling
//! up to `--replica-fetch-wait-max-ms`, appends what it gets and takes the
//! leader's high watermark.
//!
//! Under `--truncation high-watermark` a fetch the leader answers
//! OFFSET_OUT_OF_RANGE resets the log as Kafka 0.10 did (to the leader's log
//! end, or its start) instead of truncating again; see
//! `reset_after_out_of_range`.
//!
//! A task never decides leadership: an error that means the leader moved makes it
//! back off and retry until the controller's next LeaderAndIsr replaces it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest,
};
use tokio::task::JoinHandle;

use super::follower::{StorageOrRole, TruncationProgress};
use super::manager::ReplicaManager;
use super::store::{EpochEndOffset, TopicPartition};
use super::truncation::{self, MAX_TRUNCATION_ROUNDS, OutOfRangeReset};
use crate::client::{ClientError, Connection, topic_name};
use crate::failpoints::{self, Failpoint};

/// Fetch v12: the last version before topic ids; carries the current leader
/// epoch (KIP-320) so a stale leader answers FENCED_LEADER_EPOCH.
pub const FETCH_VERSION: i16 = 12;
/// Kafka's replica.fetch.backoff.ms is 1 s; shorter keeps failover quick.
const BACKOFF: Duration = Duration::from_millis(200);
/// Kafka's replica.fetch.max.bytes default.
const FETCH_MAX_BYTES: i32 = 1024 * 1024;
/// On top of the long poll: how long a fetch may take before the connection is
/// given up (Kafka's replica.socket.timeout.ms is 30 s; a cut link must not hold
/// a follower that long).
const SOCKET_TIMEOUT_EXTRA: Duration = Duration::from_secs(5);

/// Where and how a follower fetches one partition.
#[derive(Debug, Clone)]
pub struct FetchTarget {
    pub tp: TopicPartition,
    pub leader: i32,
    pub leader_addr: String,
    pub leader_epoch: i32,
    pub truncate: bool,
}

/// The running fetcher tasks, by partition.
pub struct FetcherManager {
    replicas: Arc<ReplicaManager>,
    fetch_wait: Duration,
    tasks: Mutex<HashMap<TopicPartition, JoinHandle<()>>>,
}

impl FetcherManager {
    pub fn new(replicas: Arc<ReplicaManager>, fetch_wait: Duration) -> Self {
        Self {
            replicas,
            fetch_wait,
            tasks: Mutex::new(HashMap::new()),
        }
    }

    /// Start following `target` (replacing any fetcher of the partition).
    pub fn follow(&self, target: FetchTarget) {
        let tp = target.tp.clone();
        let task = tokio::spawn(run(self.replicas.clone(), self.fetch_wait, target));
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = tasks.insert(tp, task) {
            old.abort();
        }
    }

    /// Stop fetching a partition (this broker became its leader).
    pub fn stop(&self, tp: &TopicPartition) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = tasks.remove(tp) {
            old.abort();
        }
    }

    pub fn stop_all(&self) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        for (_, t) in tasks.drain() {
            t.abort();
        }
    }
}

impl Drop for FetcherManager {
    fn drop(&mut self) {
        self.stop_all();
    }
}

#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("leader answered {0:?}")]
    Leader(ResponseError),
    #[error(transparent)]
    Local(#[from] StorageOrRole),
    #[error("truncation did not finish in {MAX_TRUNCATION_ROUNDS} rounds")]
    Unfinished,
}

async fn run(replicas: Arc<ReplicaManager>, fetch_wait: Duration, target: FetchTarget) {
    let FetchTarget {
        tp,
        leader,
        leader_addr,
        leader_epoch,
        truncate,
    } = target;
    tracing::info!(topic = %tp.topic, partition = tp.partition, leader, %leader_addr, leader_epoch, truncate, "following");
    // Evaluated once per fetcher: a scenario's way to leave a follower stuck.
    if failpoints::hit_or_return(Failpoint::FollowerFetcherDies) {
        tracing::error!(
            topic = %tp.topic,
            partition = tp.partition,
            leader_epoch,
            "failpoint follower-fetcher-dies: this partition's fetcher stops before it \
             truncates or fetches (as a fetcher thread killed by an error did before KIP-461)"
        );
        return;
    }
    // The run's incarnation rides in the client id (`replica-<id>/<run>`):
    // Fetch v15 carries it as ReplicaState.ReplicaEpoch (KIP-903), but this
    // broker's replication speaks v12, before topic ids.
    let client_id = follower_client_id(replicas.node_id(), replicas.incarnation());
    let mut conn: Option<Connection> = None;
    let mut must_truncate = truncate;
    let old_kafka = truncation::resets_on_out_of_range(replicas.truncation());
    loop {
        let result = async {
            if conn.is_none() {
                conn = Some(
                    Connection::connect(
                        &leader_addr,
                        &client_id,
                        fetch_wait + SOCKET_TIMEOUT_EXTRA,
                    )
                    .await?,
                );
            }
            let c = conn.as_mut().expect("connected above");
            if must_truncate {
                truncate_log(&replicas, c, &tp, leader_epoch).await?;
                must_truncate = false;
            }
            match fetch_once(&replicas, c, &tp, leader_epoch, fetch_wait).await {
                Err(FetchError::Leader(ResponseError::OffsetOutOfRange)) if old_kafka => {
                    reset_after_out_of_range(&replicas, c, &tp, leader_epoch).await
                }
                Err(FetchError::Leader(ResponseError::OffsetOutOfRange)) => {
                    start_at_leader_start(&replicas, c, &tp, leader_epoch).await
                }
                fetched => fetched,
            }
        }
        .await;
        match result {
            Ok(()) => continue,
            Err(FetchError::Local(StorageOrRole::Role(_))) => {
                // LeaderAndIsr moved us on; our replacement is (being) started.
                return;
            }
            Err(FetchError::Local(StorageOrRole::Storage(e))) if old_kafka => {
                // Kafka 0.10 put a partition whose fetched data it could not
                // append aside and fetched it again after the back-off
                // (AbstractFetcherThread.processFetchRequest); it did not
                // truncate again.
                tracing::warn!(topic = %tp.topic, partition = tp.partition, %e, "could not append fetched batches; fetching again");
            }
            Err(FetchError::Leader(ResponseError::OffsetOutOfRange))
            | Err(FetchError::Local(StorageOrRole::Storage(_))) => {
                // Our log does not continue the leader's: truncate again.
                tracing::warn!(topic = %tp.topic, partition = tp.partition, "fetch position rejected; truncating again");
                must_truncate = true;
            }
            Err(FetchError::Client(e)) => {
                tracing::debug!(topic = %tp.topic, partition = tp.partition, %e, "fetch connection failed");
                conn = None;
            }
            Err(e) => {
                tracing::debug!(topic = %tp.topic, partition = tp.partition, %e, "fetch failed")
            }
        }
        tokio::time::sleep(BACKOFF).await;
    }
}

/// KIP-279's follower loop: ask about our latest epoch, cut, and ask again
/// while the leader answers an epoch we do not have.
async fn truncate_log(
    replicas: &ReplicaManager,
    conn: &mut Connection,
    tp: &TopicPartition,
    leader_epoch: i32,
) -> Result<(), FetchError> {
    let version = truncation::offsets_for_leader_epoch_version(replicas.truncation());
    let mut progress = replicas.truncation_start(tp, leader_epoch)?;
    for _ in 0..MAX_TRUNCATION_ROUNDS {
        let TruncationProgress::Ask(epoch) = progress else {
            return Ok(());
        };
        let request = offsets_for_leader_epoch_request(replicas.node_id(), tp, leader_epoch, epoch);
        let response = conn.send(&request, version).await?;
        let answer = only_partition(&response.topics, |t| &t.partitions, |p| p.error_code)?;
        let answer = EpochEndOffset {
            leader_epoch: if version >= 1 {
                answer.leader_epoch
            } else {
                -1
            },
            end_offset: answer.end_offset,
        };
        tracing::info!(topic = %tp.topic, partition = tp.partition, asked = epoch, ?answer, "OffsetsForLeaderEpoch answered");
        progress = replicas.apply_truncation_answer(tp, leader_epoch, answer)?;
    }
    Err(FetchError::Unfinished)
}

/// Kafka ≤ 0.10's `ReplicaFetcherThread.handleOffsetOutOfRange` (0.10.x), for
/// `truncation = high-watermark`: ask the leader for its log end (ListOffsets,
/// latest, as a replica); if it is below ours, cut our log to it, else our
/// fetch offset was below the leader's start, so ask for that and restart the
/// log empty there. Then fetch on from the new log end. The source admits the
/// first branch may leave the replicas' logs different below that point, and
/// does not repair it; neither do we, so the checkers can see it.
///
/// One departure: with unclean leader election disabled for the topic, 0.10
/// halted the broker instead of cutting ("Halting because log truncation is
/// not allowed"); here the follower cuts and carries on whatever that setting,
/// so a run reaches an end the checkers can judge.
async fn reset_after_out_of_range(
    replicas: &ReplicaManager,
    conn: &mut Connection,
    tp: &TopicPartition,
    leader_epoch: i32,
) -> Result<(), FetchError> {
    let log_end_offset = replicas
        .follower_fetch_offset(tp, leader_epoch)
        .map_err(|e| FetchError::Local(StorageOrRole::Role(e)))?;
    let leader_end = leader_offset(replicas, conn, tp, LATEST_TIMESTAMP).await?;
    let reset = truncation::out_of_range_reset(log_end_offset, leader_end);
    let leader_start = match reset {
        OutOfRangeReset::TruncateTo(_) => -1,
        OutOfRangeReset::StartAtLeaderStart => {
            leader_offset(replicas, conn, tp, EARLIEST_TIMESTAMP).await?
        }
    };
    tracing::warn!(
        topic = %tp.topic,
        partition = tp.partition,
        log_end_offset,
        leader_end,
        leader_start,
        ?reset,
        "fetch offset out of range on the leader; resetting as Kafka 0.10 did"
    );
    replicas.reset_after_out_of_range(tp, leader_epoch, reset, leader_start)?;
    Ok(())
}

/// A fetch below the leader's log start (DeleteRecords moved it past this
/// follower's log end, KIP-107) restarts the log empty at the leader's
/// start, as Kafka's `AbstractFetcherThread.fetchOffsetAndTruncate` does
/// when the leader's start is above the follower's end; any other
/// OFFSET_OUT_OF_RANGE is the follower's log not continuing the leader's,
/// answered by truncating again.
async fn start_at_leader_start(
    replicas: &ReplicaManager,
    conn: &mut Connection,
    tp: &TopicPartition,
    leader_epoch: i32,
) -> Result<(), FetchError> {
    let log_end_offset = replicas
        .follower_fetch_offset(tp, leader_epoch)
        .map_err(|e| FetchError::Local(StorageOrRole::Role(e)))?;
    let leader_start = leader_offset(replicas, conn, tp, EARLIEST_TIMESTAMP).await?;
    if leader_start <= log_end_offset {
        return Err(FetchError::Leader(ResponseError::OffsetOutOfRange));
    }
    replicas.reset_after_out_of_range(
        tp,
        leader_epoch,
        OutOfRangeReset::StartAtLeaderStart,
        leader_start,
    )?;
    Ok(())
}

/// ListOffsets' special timestamps: the log end, and the log start.
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
/// ListOffsets v1 (Kafka 0.10.1): one offset per partition.
const LIST_OFFSETS_VERSION: i16 = 1;

/// One offset of the leader's log, asked as a replica (so "latest" is its log
/// end, not its high watermark).
async fn leader_offset(
    replicas: &ReplicaManager,
    conn: &mut Connection,
    tp: &TopicPartition,
    timestamp: i64,
) -> Result<i64, FetchError> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(replicas.node_id()))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name(&tp.topic))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(tp.partition)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let response = conn.send(&request, LIST_OFFSETS_VERSION).await?;
    let answer = only_partition(&response.topics, |t| &t.partitions, |p| p.error_code)?;
    Ok(answer.offset)
}

/// The answer for the one partition a follower's request names (each asks
/// about one): missing, it is UNKNOWN_SERVER_ERROR; with an error code, that
/// error.
fn only_partition<'a, T, P>(
    topics: &'a [T],
    partitions: impl FnOnce(&'a T) -> &'a [P],
    error_code: impl FnOnce(&P) -> i16,
) -> Result<&'a P, FetchError> {
    let answer = topics
        .first()
        .and_then(|t| partitions(t).first())
        .ok_or(FetchError::Leader(ResponseError::UnknownServerError))?;
    match error_code(answer) {
        0 => Ok(answer),
        code => Err(FetchError::Leader(
            ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError),
        )),
    }
}

/// The follower's question about one of its epochs. Fields the chosen version
/// lacks (the current leader epoch before v2, the replica id before v3) are simply
/// not sent.
pub fn offsets_for_leader_epoch_request(
    node_id: i32,
    tp: &TopicPartition,
    current_leader_epoch: i32,
    epoch: i32,
) -> OffsetForLeaderEpochRequest {
    OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(node_id))
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(topic_name(&tp.topic))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(tp.partition)
                        .with_current_leader_epoch(current_leader_epoch)
                        .with_leader_epoch(epoch),
                ]),
        ])
}

async fn fetch_once(
    replicas: &ReplicaManager,
    conn: &mut Connection,
    tp: &TopicPartition,
    leader_epoch: i32,
    fetch_wait: Duration,
) -> Result<(), FetchError> {
    let offset = replicas
        .follower_fetch_offset(tp, leader_epoch)
        .map_err(|e| FetchError::Local(StorageOrRole::Role(e)))?;
    let log_start_offset = replicas
        .follower_log_start_offset(tp, leader_epoch)
        .map_err(|e| FetchError::Local(StorageOrRole::Role(e)))?;
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(replicas.node_id()))
        .with_max_wait_ms(fetch_wait.as_millis() as i32)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(&tp.topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(tp.partition)
                        .with_current_leader_epoch(leader_epoch)
                        .with_fetch_offset(offset)
                        .with_log_start_offset(log_start_offset)
                        .with_partition_max_bytes(FETCH_MAX_BYTES),
                ]),
        ]);
    let response = conn.send(&request, FETCH_VERSION).await?;
    let data = only_partition(&response.responses, |t| &t.partitions, |p| p.error_code)?;
    let records = data.records.clone().unwrap_or_default();
    replicas.append_as_follower_from(
        tp,
        leader_epoch,
        records,
        data.high_watermark,
        data.log_start_offset,
    )?;
    Ok(())
}

/// The client id a follower's fetches carry: its id and this run's
/// registration incarnation.
pub fn follower_client_id(node_id: i32, incarnation: u64) -> String {
    format!("replica-{node_id}/{incarnation}")
}

/// The incarnation a follower's fetch names in its client id, if any.
pub fn follower_incarnation(client_id: &str) -> Option<u64> {
    client_id
        .strip_prefix("replica-")?
        .split_once('/')?
        .1
        .parse()
        .ok()
}
