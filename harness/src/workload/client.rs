//! The op-recording client: the one way a client operation reaches the
//! cluster and the history. Scripted `produce`/`consume` steps and the
//! background workers each hold one; it invokes the op, makes the request
//! through the node's client proxy, maps the answer to `ok`, `fail` or `info`
//! (history/kafka_errors.rs decides which broker errors are definite) and
//! records the completion, so every client op in every run has one shape.
//!
//! After an ack it reads the partition's ISR and leader epoch from etcd (a
//! direct connection no fault touches; a read begun after the ack, shared with
//! the other clients: view.rs): the replicas the lost-write rule holds to
//! account. An `info` (an answer that never came) retires the client's
//! history process; its next op runs on a fresh one, as Jepsen gives a crashed
//! worker a new process. A plain client never retries: a retry is a new op.
//! With `[workload] idempotent = true` each process is an idempotent producer
//! instead, which resends a send whose outcome is unknown (producer.rs; the
//! send itself, plain or idempotent, is send.rs).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::producer::{Producer, delivery_timeout};
use super::send_options::{SEND_MARGIN, SendOptions, wire_compression};
use super::view::SharedView;
use crate::history::{
    Body, Op, OpType, Poll, PolledRecord, Process, Read, RecordValue, SharedHistory, WriteError,
};
use crate::kafka_client::{ClientError, FetchOptions, KafkaClient, ProduceOptions};
use crate::node::NodeId;
use crate::observe::PartitionView;
use crate::schedule::PartitionRef;

/// Where history processes come from: one counter for the run, shared by every
/// client, so no two ever share a number.
#[derive(Clone, Default)]
pub struct Processes(Arc<AtomicU64>);

impl Processes {
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// What every client of a run shares.
#[derive(Clone)]
pub struct Clients {
    pub history: SharedHistory,
    pub processes: Processes,
    /// etcd's view, read directly (a connection no fault touches) and shared
    /// by every client: the partition state recorded beside each ack.
    pub view: SharedView,
    /// Each node's client address (through its client proxy).
    pub addresses: Arc<BTreeMap<NodeId, String>>,
    /// Bound on one request (the broker's acks=all wait is this too).
    pub request_timeout: Duration,
    /// `[workload] idempotent`: every process is an idempotent producer.
    pub idempotent: bool,
    /// `[workload] transaction_timeout_ms`: what transactional producers
    /// ask InitProducerId for.
    pub transaction_timeout: Duration,
    /// The Fetch version polls use, when the system's file sets one.
    pub fetch_version: Option<i16>,
    /// The least Fetch wait, when the system's file sets one.
    pub fetch_max_wait_ms: Option<i32>,
    /// The JoinGroup version, when the system's file sets one.
    pub join_group_version: Option<i16>,
    /// Every broker answers as the same Kafka node (the system's
    /// `kafka_node_ids = "shared"`): any broker serves any partition, so a
    /// client that cannot reach one moves to the next (see
    /// [`RecordingClient::unreachable`]).
    pub shared_ids: bool,
    /// The topic-lives workload's last life (lives.rs): its worker counts
    /// it and the liveness probe carries the numbering on.
    pub lives: Arc<std::sync::atomic::AtomicU32>,
}

impl Clients {
    /// A client named `client_id` on the wire; its history process is
    /// taken at its first op.
    pub fn client(&self, client_id: &'static str) -> RecordingClient {
        RecordingClient {
            shared: self.clone(),
            client_id,
            process: None,
            producer: None,
            connections: BTreeMap::new(),
            moved_to: None,
        }
    }

    /// The longest one send may take until its completion is recorded, less
    /// the etcd read after an ack: one request and its margin, or, for an
    /// idempotent producer, every attempt within its delivery timeout.
    pub fn send_bound(&self) -> Duration {
        if self.idempotent {
            delivery_timeout(self.request_timeout)
        } else {
            self.request_timeout + SEND_MARGIN
        }
    }
}

/// One client: its connections (one per node), its current history
/// process and, when idempotent, that process's producer.
pub struct RecordingClient {
    pub(super) shared: Clients,
    client_id: &'static str,
    process: Option<u64>,
    /// The idempotent producer of the current process, made at its first
    /// send (producer.rs); `None` for a plain client.
    pub(super) producer: Option<Producer>,
    pub(super) connections: BTreeMap<NodeId, KafkaClient>,
    /// With shared ids: the broker this client moved to after it could not
    /// reach another, while it serves.
    moved_to: Option<NodeId>,
}

impl RecordingClient {
    /// The client's history process now (taken from the run's counter the
    /// first time, and again after an `info`).
    pub fn process(&mut self) -> u64 {
        *self
            .process
            .get_or_insert_with(|| self.shared.processes.next())
    }

    /// Forgets every connection: after a fault, one to a node that died or
    /// was cut is stale.
    pub fn drop_connections(&mut self) {
        self.connections.clear();
    }

    /// The partition's state in etcd now — read after this call began
    /// (`None` when etcd cannot say).
    pub async fn partition_state(&mut self, partition: &PartitionRef) -> Option<PartitionView> {
        let view = self.shared.view.fresh().await?;
        view.partition(partition).cloned()
    }

    /// The partition's leader for routing a request: as etcd named it at
    /// most `max_age` ago.
    ///
    /// With shared ids every broker leads every partition as the same node,
    /// and the view names the first broker that answered the harness's own
    /// look, which no cut between the clients and a broker touches; a client
    /// that moved (below) stays with the broker it moved to while that one
    /// answers the harness.
    pub async fn route(&self, partition: &PartitionRef, max_age: Duration) -> Option<NodeId> {
        let view = self.shared.view.recent(max_age).await?;
        let leader = view.leader_of(partition)?;
        match self.moved_to {
            Some(moved) if self.shared.shared_ids && view.brokers.contains(&moved) => Some(moved),
            _ => Some(leader),
        }
    }

    /// Notes that a request to `node` failed for want of the network (no
    /// answer, a refused or dropped connection). With shared ids the client
    /// moves to the next broker, as a Kafka client does: it asks another
    /// bootstrap broker for Metadata, and that broker names itself as the
    /// partitions' leader. With own ids the leader is where the partition
    /// is, and the client keeps following the view.
    pub(super) fn unreachable(&mut self, node: NodeId, error: &ClientError) {
        let network = matches!(
            error,
            ClientError::Timeout { .. }
                | ClientError::Refused { .. }
                | ClientError::Dropped(_)
                | ClientError::Connect { .. }
                | ClientError::Closed
        );
        if !self.shared.shared_ids || !network {
            return;
        }
        let nodes: Vec<NodeId> = self.shared.addresses.keys().copied().collect();
        let at = nodes.iter().position(|&n| n == node).unwrap_or(0);
        self.moved_to = nodes.get((at + 1) % nodes.len().max(1)).copied();
    }

    /// Reads `partition` on `node` from `from_offset` up to the high
    /// watermark its first fetch sees, and records the op.
    pub async fn poll(
        &mut self,
        partition: &PartitionRef,
        from_offset: u64,
        node: Option<NodeId>,
    ) -> Result<Op, WriteError> {
        self.poll_as(Poll::new(partition.clone(), from_offset, node))
            .await
    }

    /// [`Self::poll`] of the invoke `poll` (a subscribed consumer's, or the
    /// final read's).
    pub async fn poll_as(&mut self, mut poll: Poll) -> Result<Op, WriteError> {
        let (partition, from_offset, node) = (poll.partition.clone(), poll.from_offset, poll.node);
        let partition = &partition;
        let process = self.invoke(Body::Poll(poll.clone()))?;
        let Some(node) = node else {
            return self.complete(
                process,
                OpType::Fail,
                Body::Poll(poll),
                Some("no leader to read from".into()),
            );
        };
        let deadline = self.shared.request_timeout;
        let result = match self.connection(node, deadline).await {
            Ok(client) => read(client, partition, from_offset, deadline).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(mut read) => {
                read.leader_epoch = self
                    .partition_state(partition)
                    .await
                    .map(|s| s.leader_epoch);
                poll.read = Some(read);
                self.complete(process, OpType::Ok, Body::Poll(poll), None)
            }
            Err(e) => {
                self.connections.remove(&node);
                self.unreachable(node, &e);
                // A read changes nothing: a failed one is definite.
                self.complete(process, OpType::Fail, Body::Poll(poll), Some(e.to_string()))
            }
        }
    }

    /// The wire options of a send: the broker waits for acks=all as long as
    /// the client waits for one request.
    pub(super) fn produce_options(&self, options: &SendOptions) -> ProduceOptions {
        ProduceOptions {
            acks: options.acks.wire(),
            records_per_batch: options.records_per_batch.max(1) as usize,
            compression: wire_compression(options.compression),
            timeout_ms: i32::try_from(self.shared.request_timeout.as_millis()).unwrap_or(i32::MAX),
        }
    }

    pub(super) fn invoke(&mut self, body: Body) -> Result<u64, WriteError> {
        let process = self.process();
        self.shared.history.invoke(Process::Client(process), body)?;
        Ok(process)
    }

    pub(super) fn complete(
        &mut self,
        process: u64,
        kind: OpType,
        body: Body,
        error: Option<String>,
    ) -> Result<Op, WriteError> {
        let op = self
            .shared
            .history
            .append(Process::Client(process), kind, body, error)?;
        if kind == OpType::Info {
            self.process = None;
            // The retired process's producer goes with it: the sequences it
            // sent last may or may not be in the log, so no later batch of
            // that producer id could be numbered correctly (KIP-98's producer
            // fails the same way; KIP-360 bumps the epoch instead). The next
            // process asks for a new producer id.
            self.producer = None;
        }
        Ok(op)
    }

    /// The connection to `node`, made within `connect_timeout` if there is
    /// none.
    pub(super) async fn connection(
        &mut self,
        node: NodeId,
        connect_timeout: Duration,
    ) -> Result<&mut KafkaClient, ClientError> {
        if !self.connections.contains_key(&node) {
            let address = self
                .shared
                .addresses
                .get(&node)
                .ok_or_else(|| ClientError::Protocol(format!("no address for {node}")))?;
            let mut client = KafkaClient::connect(address, self.client_id, connect_timeout).await?;
            client.set_fetch_version(self.shared.fetch_version);
            client.set_fetch_max_wait(self.shared.fetch_max_wait_ms);
            client.set_join_group_version(self.shared.join_group_version);
            self.connections.insert(node, client);
        }
        Ok(self.connections.get_mut(&node).expect("inserted above"))
    }
}

/// Reads one partition from `from_offset` up to the high watermark seen by the
/// first fetch (a bounded poll: it never waits for more).
pub(super) async fn read(
    client: &mut KafkaClient,
    partition: &PartitionRef,
    from_offset: u64,
    deadline: Duration,
) -> Result<Read, ClientError> {
    let options = FetchOptions {
        max_wait_ms: 0,
        ..FetchOptions::default()
    };
    let mut offset = i64::try_from(from_offset).unwrap_or(i64::MAX);
    let mut read = Read {
        records: Vec::new(),
        high_watermark: -1,
        leader_epoch: None,
        above_high_watermark: Vec::new(),
    };
    loop {
        let fetched = client
            .fetch(
                &partition.topic,
                partition.wire_partition(),
                offset,
                &options,
                deadline,
            )
            .await?;
        if read.high_watermark < 0 {
            read.high_watermark = fetched.high_watermark;
        }
        if fetched.high_watermark >= 0 {
            read.above_high_watermark.extend(
                fetched
                    .records
                    .iter()
                    .filter(|r| r.offset >= fetched.high_watermark)
                    .map(|r| (r.offset, fetched.high_watermark)),
            );
        }
        let Some(last) = fetched.records.last() else {
            return Ok(read);
        };
        offset = last.offset + 1;
        let high_watermark = read.high_watermark;
        read.records.extend(
            fetched
                .records
                .iter()
                .filter(|r| r.offset < high_watermark)
                .map(|r| PolledRecord(r.offset, RecordValue::from_bytes(r.value.as_deref()))),
        );
        if offset >= high_watermark {
            return Ok(read);
        }
    }
}
