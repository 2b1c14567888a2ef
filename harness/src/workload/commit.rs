//! The group ops of a consumer that assigns its own partitions ([groups]):
//! `commit` an offset and read back what is `committed`, each through the
//! group's coordinator, found with FindCoordinator on the broker the client
//! asks first. A commit whose request went out and got no definite answer is
//! `info` (it may have been appended); one refused before any append — the
//! coordinator still loading, or not the coordinator — is `fail`. A read
//! changes nothing: any failure is `fail`.

use kafka_protocol::ResponseError;

use super::client::RecordingClient;
use crate::history::{Body, Commit, Committed, Op, OpType, WriteError};
use crate::kafka_client::ClientError;
use crate::node::NodeId;
use crate::schedule::PartitionRef;
use crate::topic_partition::{OFFSETS_TOPIC, offsets_partition_of};

/// Errors a coordinator answers before it appends anything.
const REFUSED_BEFORE_APPEND: &[ResponseError] = &[
    ResponseError::CoordinatorLoadInProgress,
    ResponseError::IllegalGeneration,
    ResponseError::UnknownMemberId,
    ResponseError::RebalanceInProgress,
    ResponseError::InvalidGroupId,
    ResponseError::GroupAuthorizationFailed,
];

/// Errors a commit or a read of a committed offset is retried on: the
/// coordinator moved, is not elected yet or is still loading its offsets
/// partition.
const COORDINATOR_RETRIABLE: &[ResponseError] = &[
    ResponseError::NotCoordinator,
    ResponseError::CoordinatorNotAvailable,
    ResponseError::CoordinatorLoadInProgress,
];

/// A failed commit's completion: `fail` when it was never sent, or the
/// coordinator refused it before any append, else `info` (it may have been
/// appended).
pub(super) fn commit_outcome(sent: bool, error: &ClientError) -> OpType {
    let definite = !sent
        || matches!(
            error,
            ClientError::Broker { code, .. }
                if REFUSED_BEFORE_APPEND.iter().any(|r| r.code() == *code)
        )
        || matches!(
            error,
            ClientError::Refused { .. } | ClientError::Connect { .. }
        );
    if definite { OpType::Fail } else { OpType::Info }
}

/// The pause between two attempts of a read.
const RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

impl RecordingClient {
    /// The coordinator of `group`, asked of `first` (then the other nodes):
    /// the node whose Kafka id it names, or, with shared ids, the node asked.
    /// Everything inside `deadline`: each connection and request gets what
    /// is left of it.
    pub(super) async fn coordinator(
        &mut self,
        group: &str,
        first: NodeId,
        deadline: tokio::time::Instant,
    ) -> Result<NodeId, ClientError> {
        let mut nodes: Vec<NodeId> = self.shared.addresses.keys().copied().collect();
        nodes.sort_by_key(|&n| n != first);
        loop {
            let mut last = ClientError::Closed;
            for &node in &nodes {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                let asked = match self.connection(node, left).await {
                    Ok(client) => client.find_coordinator(group, left).await,
                    Err(e) => Err(e),
                };
                match asked {
                    Ok(found) => {
                        let named = NodeId::new(u32::try_from(found.node_id).unwrap_or(0));
                        return Ok(if self.shared.addresses.contains_key(&named) {
                            named
                        } else {
                            node
                        });
                    }
                    Err(e) => {
                        self.connections.remove(&node);
                        last = e;
                    }
                }
            }
            // The coordinator not elected yet (the offsets topic is being
            // made, or its leader moved): ask again, as a consumer does.
            let retriable = matches!(
                &last,
                ClientError::Broker { code, .. } if COORDINATOR_RETRIABLE.iter().any(|r| r.code() == *code)
            );
            if !retriable || tokio::time::Instant::now() + RETRY_BACKOFF >= deadline {
                return Err(last);
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }

    /// Commits `offset` of `partition` for `group` (asking `first` for the
    /// coordinator) and records the op. As KafkaConsumer#commitSync does
    /// within its timeout, a commit answered by a coordinator that moved, is
    /// not elected yet or is still loading ([`COORDINATOR_RETRIABLE`]'s errors) is
    /// sent again to the coordinator asked anew: one op, whose outcome is the
    /// last attempt's (the same offset committed twice is the same commit).
    pub async fn commit(
        &mut self,
        group: &str,
        partition: &PartitionRef,
        offset: i64,
        first: NodeId,
    ) -> Result<Op, WriteError> {
        let mut commit = Commit {
            group: group.to_owned(),
            partition: partition.clone(),
            offset,
            node: None,
            generation: None,
            member: None,
            deleted: false,
        };
        let process = self.invoke(Body::Commit(commit.clone()))?;
        let deadline = tokio::time::Instant::now() + self.shared.request_timeout;
        let mut sent_any = false;
        loop {
            let (sent, result) = match self.coordinator(group, first, deadline).await {
                Ok(coordinator) => {
                    commit.node = Some(coordinator);
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    self.send_commit(coordinator, &commit, left).await
                }
                Err(e) => (false, Err(e)),
            };
            sent_any |= sent;
            let error = match result {
                Ok(()) => return self.complete(process, OpType::Ok, Body::Commit(commit), None),
                Err(e) => e,
            };
            if let Some(node) = commit.node {
                self.connections.remove(&node);
            }
            let retriable = matches!(
                &error,
                ClientError::Broker { code, .. } if COORDINATOR_RETRIABLE.iter().any(|r| r.code() == *code)
            );
            if !retriable || tokio::time::Instant::now() + RETRY_BACKOFF >= deadline {
                let kind = commit_outcome(sent_any, &error);
                return self.complete(process, kind, Body::Commit(commit), Some(error.to_string()));
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }

    /// Reads `group`'s committed offset of `partition` and records the op.
    pub async fn committed(
        &mut self,
        group: &str,
        partition: &PartitionRef,
        first: NodeId,
    ) -> Result<Op, WriteError> {
        self.committed_as(group, partition, first, false).await
    }

    /// Reads `group`'s committed offset of `partition` as a read_committed
    /// consumer does (KIP-447's `require_stable`: a partition with a
    /// transaction's offsets pending is asked again until they are settled
    /// or the request timeout passes) and records the op.
    pub async fn committed_stable(
        &mut self,
        group: &str,
        partition: &PartitionRef,
        first: NodeId,
    ) -> Result<Op, WriteError> {
        self.committed_as(group, partition, first, true).await
    }

    async fn committed_as(
        &mut self,
        group: &str,
        partition: &PartitionRef,
        first: NodeId,
        stable: bool,
    ) -> Result<Op, WriteError> {
        let mut read = Committed {
            group: group.to_owned(),
            partition: partition.clone(),
            node: None,
            offset: None,
            leader: None,
            stable,
        };
        let process = self.invoke(Body::Committed(read.clone()))?;
        let timeout = self.shared.request_timeout;
        // As KafkaConsumer#committed does within its timeout: a coordinator
        // that moved, is not known yet or is still loading is asked again.
        let deadline = tokio::time::Instant::now() + timeout;
        let result = loop {
            let attempt = match self.coordinator(group, first, deadline).await {
                Ok(coordinator) => {
                    read.node = Some(coordinator);
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    let (topic, p) = (&partition.topic, partition.wire_partition());
                    match self.connection(coordinator, left).await {
                        Ok(client) if stable => {
                            client.committed_offset_stable(group, topic, p, left).await
                        }
                        Ok(client) => client.committed_offset(group, topic, p, left).await,
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            let retriable = matches!(
                &attempt,
                Err(ClientError::Broker { code, .. }) if COORDINATOR_RETRIABLE.iter().any(|r| r.code() == *code)
                    || (stable && *code == ResponseError::UnstableOffsetCommit.code())
            );
            if !retriable || tokio::time::Instant::now() + RETRY_BACKOFF >= deadline {
                break attempt;
            }
            if let Some(node) = read.node {
                self.connections.remove(&node);
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        };
        match result {
            Ok(offset) => {
                read.offset = Some(offset);
                read.leader = self.offsets_leader(group).await;
                self.complete(process, OpType::Ok, Body::Committed(read), None)
            }
            Err(e) => {
                if let Some(node) = read.node {
                    self.connections.remove(&node);
                }
                self.complete(
                    process,
                    OpType::Fail,
                    Body::Committed(read),
                    Some(e.to_string()),
                )
            }
        }
    }

    /// Commits `offset` of `partition` for `group` and reads it back from
    /// the same coordinator, recording neither (the liveness window's group
    /// probe, run/liveness.rs): `Ok` only when the read answers `offset`.
    pub async fn commit_round_trip(
        &mut self,
        group: &str,
        partition: &PartitionRef,
        offset: i64,
        first: NodeId,
        deadline: tokio::time::Instant,
    ) -> Result<(), ClientError> {
        let coordinator = self.coordinator(group, first, deadline).await?;
        let left = || deadline.saturating_duration_since(tokio::time::Instant::now());
        let commit = Commit {
            group: group.to_owned(),
            partition: partition.clone(),
            offset,
            node: Some(coordinator),
            generation: None,
            member: None,
            deleted: false,
        };
        let (topic, p) = (&partition.topic, partition.wire_partition());
        let (_, committed) = self.send_commit(coordinator, &commit, left()).await;
        let read = match committed {
            Ok(()) => match self.connection(coordinator, left()).await {
                Ok(client) => client.committed_offset(group, topic, p, left()).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match read {
            Ok(read) if read == offset => Ok(()),
            Ok(read) => Err(ClientError::Protocol(format!(
                "committed {offset} to {coordinator}, read back {read}"
            ))),
            Err(e) => {
                self.connections.remove(&coordinator);
                Err(e)
            }
        }
    }

    /// Sends `commit` to `coordinator`: whether it went out, and the answer.
    pub(super) async fn send_commit(
        &mut self,
        coordinator: NodeId,
        commit: &Commit,
        timeout: std::time::Duration,
    ) -> (bool, Result<(), ClientError>) {
        let client = match self.connection(coordinator, timeout).await {
            Ok(client) => client,
            Err(e) => return (false, Err(e)),
        };
        let answer = client
            .commit_offset(
                &commit.group,
                commit.generation.unwrap_or(-1),
                commit.member.as_deref().unwrap_or(""),
                &commit.partition.topic,
                commit.partition.wire_partition(),
                commit.offset,
                timeout,
            )
            .await;
        (true, answer)
    }

    /// The leader etcd names now for `group`'s offsets partition (the
    /// partitions of `__consumer_offsets` the view lists); `None` where
    /// etcd does not say.
    async fn offsets_leader(&mut self, group: &str) -> Option<NodeId> {
        let view = self.shared.view.fresh().await?;
        let partitions = view
            .partitions
            .keys()
            .filter(|p| p.topic == OFFSETS_TOPIC)
            .count() as u32;
        if partitions == 0 {
            return None;
        }
        view.leader_of(&offsets_partition_of(group, partitions))
    }
}
