//! The transactional producer's op ([transactions]): one `txn` op is one
//! transaction of up to four micro-ops — sends, and read_committed polls —
//! meant to commit or to abort, as Jepsen's Kafka workload runs them
//! (history/txn_op.rs has the op's format and what its completion types
//! mean).
//!
//! A transaction goes as a Kafka producer's does (KIP-98): the coordinator
//! of the process's transactional id (FindCoordinator, key type 1) gives a
//! producer id and epoch (InitProducerId, which fences the id's older
//! producers and aborts what they left open); each partition is added
//! (AddPartitionsToTxn) before the first send to it; sends are stamped as an
//! idempotent producer's and marked transactional; polls read at
//! read_committed from the process's position in the partition; EndTxn ends
//! it. Requests to the coordinator go on a connection of their own, so a
//! fault that holds one connection's produce requests does not hold the
//! coordinator's (a real client's coordinator and leader may share a node).
//!
//! What the completion says is what the requests prove: `ok` once EndTxn
//! was answered (commit: committed; abort: aborted); `fail` when the
//! transaction can no longer commit — any failure before EndTxn(commit) is
//! sent, after which the transaction is aborted (EndTxn(abort), one
//! attempt: were it lost, the coordinator's timeout or the next
//! InitProducerId ends it), or EndTxn(commit) answered a definite error;
//! `info` when EndTxn(commit) went out and no attempt within the deadline
//! settled it. After anything but a clean `ok` the process starts its next
//! transaction from a fresh InitProducerId: the sequences it sent may or may
//! not be in the logs, and the new epoch restarts them (KIP-360's bump).

use std::collections::{BTreeMap, BTreeSet};

use std::time::Duration;

use super::client::RecordingClient;
use super::producer::{RETRY_BACKOFF, ROUTE_MAX_AGE};
use super::subscribe::Membership;
use crate::history::{
    Body, Intent, MicroOp, Op, OpType, PolledRecord, RecordValue, Txn, TxnPoll, TxnProducer,
    TxnSend, WriteError,
};
use crate::kafka_client::{
    ClientError, FetchOptions, KafkaClient, ProduceOptions, ProduceRecord, ProducerIdAndEpoch,
    ProducerStamp, increment_sequence,
};
use crate::node::NodeId;
use crate::schedule::PartitionRef;

/// Kafka's error codes the transactional calls retry: the coordinator is
/// moving or busy (COORDINATOR_LOAD_IN_PROGRESS 14, COORDINATOR_NOT_AVAILABLE
/// 15, NOT_COORDINATOR 16), or the last transaction's markers are still
/// being written (CONCURRENT_TRANSACTIONS 51).
pub(super) const COORDINATOR_RETRIABLE: [i16; 4] = [14, 15, 16, 51];

/// How long a transaction may keep starting requests, with clients'
/// request timeout `request_timeout`: InitProducerId, an add and a request
/// per micro-op, EndTxn and its retries.
fn txn_budget(request_timeout: Duration) -> Duration {
    request_timeout * 6
}

/// The longest one transaction may take until its completion is recorded:
/// its budget, and the request in flight when the budget ran out (a
/// produce's wait is its request timeout and the margin). A request held
/// longer than this reaches its broker after its transaction gave up.
pub fn txn_bound(request_timeout: Duration) -> Duration {
    txn_budget(request_timeout) + request_timeout + super::send_options::SEND_MARGIN
}

/// What a micro-op is to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    Send(PartitionRef, i64),
    Poll(PartitionRef),
}

/// One process's transactional producer: its id and what it knows.
#[derive(Debug)]
pub struct TxnProducerState {
    pub transactional_id: String,
    pub(super) producer: Option<ProducerIdAndEpoch>,
    coordinator: Option<(NodeId, KafkaClient)>,
    next_sequence: BTreeMap<PartitionRef, i32>,
    /// The next offset its polls read from, per partition (a subscribed
    /// consumer's transactions set them from its group's committed offsets).
    pub(super) positions: BTreeMap<PartitionRef, u64>,
}

impl TxnProducerState {
    pub fn new(transactional_id: String) -> Self {
        TxnProducerState {
            transactional_id,
            producer: None,
            coordinator: None,
            next_sequence: BTreeMap::new(),
            positions: BTreeMap::new(),
        }
    }

    /// Forgets the producer: the next transaction begins with InitProducerId.
    fn reset(&mut self) {
        self.producer = None;
        self.coordinator = None;
        self.next_sequence.clear();
    }
}

/// The invoke of a transaction of `planned` micro-ops meant to end as
/// `intent`; `group`: a subscribed consumer's, whose offsets it sends.
pub(super) fn planned_txn(
    state: &TxnProducerState,
    planned: &[Planned],
    intent: Intent,
    group: Option<String>,
) -> Txn {
    Txn {
        transactional_id: state.transactional_id.clone(),
        intent,
        ops: planned
            .iter()
            .map(|p| match p {
                Planned::Send(partition, value) => MicroOp::Send(TxnSend {
                    partition: partition.clone(),
                    value: *value,
                    offset: None,
                }),
                Planned::Poll(partition) => MicroOp::Poll(TxnPoll {
                    partition: partition.clone(),
                    records: None,
                }),
            })
            .collect(),
        node: state.coordinator.as_ref().map(|(n, _)| *n),
        group,
        offsets: Default::default(),
        producer: None,
        commit_ns: None,
    }
}

/// Why a transaction stopped before its end.
#[derive(Debug)]
pub(super) struct Stopped(pub(super) String);

impl RecordingClient {
    /// Runs one transaction of `planned` micro-ops, meant to end as
    /// `intent`, and records it as one `txn` op.
    pub async fn txn(
        &mut self,
        state: &mut TxnProducerState,
        planned: &[Planned],
        intent: Intent,
    ) -> Result<Op, WriteError> {
        let txn = planned_txn(state, planned, intent, None);
        self.record_txn(state, txn, None).await
    }

    /// Records `txn` (its invoke now) and runs it; with `member`, as that
    /// subscribed consumer's transaction, sending the positions its polls
    /// moved to as its group's offsets (txn_subscribe.rs).
    pub(super) async fn record_txn(
        &mut self,
        state: &mut TxnProducerState,
        mut txn: Txn,
        member: Option<&Membership>,
    ) -> Result<Op, WriteError> {
        let process = self.invoke(Body::Txn(txn.clone()))?;
        let deadline = tokio::time::Instant::now() + self.txn_budget();
        let body = self.run_txn(state, &mut txn, deadline, member).await;
        txn.node = state.coordinator.as_ref().map(|(n, _)| *n);
        txn.producer = state.producer.map(|p| TxnProducer {
            id: p.producer_id,
            epoch: p.producer_epoch,
        });
        let (kind, error) = match body {
            Ok(()) => (OpType::Ok, None),
            Err((kind, error)) => {
                state.reset();
                (kind, Some(error))
            }
        };
        self.complete(process, kind, Body::Txn(txn), error)
    }

    /// How long a transaction may keep starting requests: InitProducerId,
    /// an add and a request per micro-op, EndTxn and its retries.
    fn txn_budget(&self) -> Duration {
        txn_budget(self.shared.request_timeout)
    }

    /// The longest one transaction may take until its completion is
    /// recorded: [`txn_bound`].
    pub fn txn_bound(&self) -> Duration {
        txn_bound(self.shared.request_timeout)
    }

    async fn run_txn(
        &mut self,
        state: &mut TxnProducerState,
        txn: &mut Txn,
        deadline: tokio::time::Instant,
        member: Option<&Membership>,
    ) -> Result<(), (OpType, String)> {
        if state.producer.is_none() {
            self.init_producer(state, deadline)
                .await
                .map_err(|Stopped(e)| (OpType::Fail, format!("no producer id: {e}")))?;
        }
        let mut added: BTreeSet<PartitionRef> = BTreeSet::new();
        for i in 0..txn.ops.len() {
            let done = match &txn.ops[i] {
                MicroOp::Send(send) => {
                    let (partition, value) = (send.partition.clone(), send.value);
                    self.txn_send(state, &mut added, &partition, value, deadline)
                        .await
                        .map(|offset| {
                            if let MicroOp::Send(send) = &mut txn.ops[i] {
                                send.offset = Some(offset);
                            }
                        })
                }
                MicroOp::Poll(poll) => {
                    let partition = poll.partition.clone();
                    self.txn_poll(state, &partition).await.map(|records| {
                        if let MicroOp::Poll(poll) = &mut txn.ops[i] {
                            poll.records = Some(records);
                        }
                    })
                }
            };
            if let Err(Stopped(error)) = done {
                // It can no longer commit: end it as aborted, one attempt.
                if !added.is_empty() {
                    let _ = self.end(state, false, deadline, true).await;
                }
                return Err((OpType::Fail, error));
            }
        }
        if let Some(member) = member {
            let sent = self.send_offsets(state, txn, member, deadline).await;
            if let Err(Stopped(error)) = sent {
                if !added.is_empty() || !txn.offsets.is_empty() {
                    let _ = self.end(state, false, deadline, true).await;
                }
                return Err((OpType::Fail, error));
            }
        }
        // AddOffsetsToTxn put the group's offsets partition in it.
        if added.is_empty() && txn.offsets.is_empty() {
            // Nothing was added, so the coordinator has no transaction to
            // end: a producer ends a read-only transaction without EndTxn,
            // as Kafka's TransactionManager does.
            return Ok(());
        }
        let commit = txn.intent == Intent::Commit;
        txn.commit_ns = Some(self.shared.history.now_ns());
        match self.end(state, commit, deadline, false).await {
            Ok(()) => Ok(()),
            Err(EndError::Definite(e)) => Err((OpType::Fail, e)),
            // An abort that was not answered still cannot commit.
            Err(EndError::Unknown(e)) if !commit => Err((OpType::Fail, e)),
            Err(EndError::Unknown(e)) => Err((OpType::Info, e)),
        }
    }

    /// Finds the coordinator and takes a producer id and a new epoch.
    pub(super) async fn init_producer(
        &mut self,
        state: &mut TxnProducerState,
        deadline: tokio::time::Instant,
    ) -> Result<(), Stopped> {
        // `transaction.timeout.ms`: a transaction its producer left open is
        // aborted by the coordinator this long after it began.
        let timeout = self.shared.transaction_timeout;
        let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        loop {
            let request = self.shared.request_timeout;
            let id = state.transactional_id.clone();
            let result = match self.txn_coordinator(state, deadline).await {
                Ok(client) => {
                    client
                        .init_transactional_producer(&id, timeout_ms, request)
                        .await
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(producer) => {
                    state.producer = Some(producer);
                    state.next_sequence.clear();
                    return Ok(());
                }
                Err(e) => self.coordinator_failed(state, e, deadline).await?,
            }
        }
    }

    /// After a coordinator request failed with `e`: waits and lets the
    /// caller ask again when it may succeed, else stops with `e`.
    pub(super) async fn coordinator_failed(
        &mut self,
        state: &mut TxnProducerState,
        e: ClientError,
        deadline: tokio::time::Instant,
    ) -> Result<(), Stopped> {
        let retriable = match &e {
            ClientError::Broker { code, .. } => COORDINATOR_RETRIABLE.contains(code),
            ClientError::Unsupported { .. } | ClientError::Protocol(_) => false,
            _ => true,
        };
        if !retriable || tokio::time::Instant::now() + RETRY_BACKOFF >= deadline {
            return Err(Stopped(e.to_string()));
        }
        if !matches!(&e, ClientError::Broker { code: 51, .. }) {
            // Moved, dead or cut: find it again.
            state.coordinator = None;
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
        Ok(())
    }

    /// The connection to the transactional id's coordinator, found by asking
    /// the nodes in turn when there is none.
    pub(super) async fn txn_coordinator<'s>(
        &mut self,
        state: &'s mut TxnProducerState,
        deadline: tokio::time::Instant,
    ) -> Result<&'s mut KafkaClient, ClientError> {
        if state.coordinator.is_none() {
            let request = self.shared.request_timeout;
            let mut last = ClientError::Protocol("no node to ask".into());
            let nodes: Vec<NodeId> = self.shared.addresses.keys().copied().collect();
            for node in nodes {
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
                let found = match self.connection(node, request).await {
                    Ok(client) => {
                        client
                            .find_txn_coordinator(&state.transactional_id, request)
                            .await
                    }
                    Err(e) => Err(e),
                };
                let found = match found {
                    Ok(found) => found,
                    Err(e) => {
                        self.connections.remove(&node);
                        last = e;
                        continue;
                    }
                };
                // The node whose Kafka id it names, or, with shared ids
                // (every broker answers as one node), the node asked, as
                // for a group's coordinator (commit.rs).
                let coordinator = match NodeId::from_broker_id(found.node_id) {
                    Some(named) if self.shared.addresses.contains_key(&named) => named,
                    _ if self.shared.shared_ids => node,
                    Some(named) => {
                        last = ClientError::Protocol(format!("no address for {named}"));
                        continue;
                    }
                    None => {
                        last = ClientError::Protocol(format!("coordinator {}", found.node_id));
                        continue;
                    }
                };
                let Some(address) = self.shared.addresses.get(&coordinator) else {
                    last = ClientError::Protocol(format!("no address for {coordinator}"));
                    continue;
                };
                let client = KafkaClient::connect(address, "epochal-txn", request).await?;
                state.coordinator = Some((coordinator, client));
                break;
            }
            if state.coordinator.is_none() {
                return Err(last);
            }
        }
        Ok(&mut state.coordinator.as_mut().expect("found above").1)
    }

    async fn txn_send(
        &mut self,
        state: &mut TxnProducerState,
        added: &mut BTreeSet<PartitionRef>,
        partition: &PartitionRef,
        value: i64,
        deadline: tokio::time::Instant,
    ) -> Result<Option<i64>, Stopped> {
        let producer = state
            .producer
            .ok_or_else(|| Stopped("no producer".into()))?;
        if !added.contains(partition) {
            let wanted = [(partition.topic.clone(), partition.wire_partition())];
            loop {
                let request = self.shared.request_timeout;
                let id = state.transactional_id.clone();
                let result = match self.txn_coordinator(state, deadline).await {
                    Ok(client) => {
                        client
                            .add_partitions_to_txn(&id, producer, &wanted, request)
                            .await
                    }
                    Err(e) => Err(e),
                };
                match result {
                    Ok(()) => break,
                    Err(e) => self.coordinator_failed(state, e, deadline).await?,
                }
            }
            added.insert(partition.clone());
        }
        let node = self
            .route(partition, ROUTE_MAX_AGE)
            .await
            .ok_or_else(|| Stopped(format!("no leader of {partition} to send to")))?;
        let stamp = ProducerStamp {
            producer,
            base_sequence: state.next_sequence.get(partition).copied().unwrap_or(0),
        };
        let options = ProduceOptions {
            timeout_ms: i32::try_from(self.shared.request_timeout.as_millis()).unwrap_or(i32::MAX),
            ..ProduceOptions::default()
        };
        let request = self.shared.request_timeout + super::send_options::SEND_MARGIN;
        let id = state.transactional_id.clone();
        let record = [ProduceRecord::value(value.to_string())];
        let result = match self.connection(node, self.shared.request_timeout).await {
            Ok(client) => {
                client
                    .produce_transactional(
                        &id,
                        &partition.topic,
                        partition.wire_partition(),
                        &record,
                        &options,
                        &stamp,
                        request,
                    )
                    .await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(produced) => {
                state.next_sequence.insert(
                    partition.clone(),
                    increment_sequence(stamp.base_sequence, 1),
                );
                Ok((produced.base_offset >= 0).then_some(produced.base_offset))
            }
            Err(e) => {
                self.connections.remove(&node);
                Err(Stopped(format!("send to {partition} at {node}: {e}")))
            }
        }
    }

    async fn txn_poll(
        &mut self,
        state: &mut TxnProducerState,
        partition: &PartitionRef,
    ) -> Result<Vec<PolledRecord>, Stopped> {
        let node = self
            .route(partition, ROUTE_MAX_AGE)
            .await
            .ok_or_else(|| Stopped(format!("no leader of {partition} to read from")))?;
        let from = state.positions.get(partition).copied().unwrap_or(0);
        let request = self.shared.request_timeout;
        let options = FetchOptions {
            max_wait_ms: 0,
            ..FetchOptions::default()
        };
        let offset = i64::try_from(from).unwrap_or(i64::MAX);
        let result = match self.connection(node, request).await {
            Ok(client) => {
                client
                    .fetch_committed(
                        &partition.topic,
                        partition.wire_partition(),
                        offset,
                        &options,
                        request,
                    )
                    .await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(fetched) => {
                let records: Vec<PolledRecord> = fetched
                    .records
                    .iter()
                    .map(|r| PolledRecord(r.offset, RecordValue::from_bytes(r.value.as_deref())))
                    .collect();
                if let Some(last) = fetched.records.last() {
                    let next = u64::try_from(last.offset + 1).unwrap_or(0);
                    state.positions.insert(partition.clone(), next);
                }
                Ok(records)
            }
            Err(e) => {
                self.connections.remove(&node);
                Err(Stopped(format!("poll of {partition} at {node}: {e}")))
            }
        }
    }

    /// EndTxn, retried while the answer may still come (the coordinator
    /// moving, the markers of the last transaction still going out, no
    /// answer) unless `once`.
    pub(super) async fn end(
        &mut self,
        state: &mut TxnProducerState,
        commit: bool,
        deadline: tokio::time::Instant,
        once: bool,
    ) -> Result<(), EndError> {
        let Some(producer) = state.producer else {
            return Err(EndError::Definite("no producer".into()));
        };
        let mut sent = false;
        loop {
            let request = self.shared.request_timeout;
            let id = state.transactional_id.clone();
            let result = match self.txn_coordinator(state, deadline).await {
                Ok(client) => {
                    sent = true;
                    client.end_txn(&id, producer, commit, request).await
                }
                Err(e) => Err(e),
            };
            let e = match result {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let definite = match &e {
                ClientError::Broker { code, .. } => !COORDINATOR_RETRIABLE.contains(code),
                _ => false,
            };
            if definite {
                return Err(EndError::Definite(e.to_string()));
            }
            if once {
                return Err(EndError::Unknown(e.to_string()));
            }
            if let Err(Stopped(e)) = self.coordinator_failed(state, e, deadline).await {
                return Err(if sent {
                    EndError::Unknown(e)
                } else {
                    EndError::Definite(e)
                });
            }
        }
    }
}

/// How an EndTxn ended when it was not answered with success.
pub(super) enum EndError {
    /// Answered with an error that settles it, or never sent.
    Definite(String),
    /// Sent, and no answer settled it.
    Unknown(String),
}
