//! Background clients (`[workload.background]`): producers and consumers that
//! run beside the scripted steps from the moment the cluster is ready until the
//! last step is done, each one request at a time, as Jepsen's workload clients
//! do. Every op goes to the run's one history, stamped under its lock, so the
//! history's order is real-time order across the steps and the workers.
//!
//! A worker finds the partition's leader in etcd (the same routing the
//! scripted steps use), sends through that node's client proxy, and after an
//! ack records the ISR and leader epoch etcd shows, which the lost-write rule
//! holds to account. An `info` (an answer that never came) retires the
//! worker's history process and it goes on as a fresh one, as Jepsen does
//! with a crashed client. Each producer value is written once in the run,
//! counting up from [`Background::FIRST_VALUE`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::kafka_client::{ClientError, KafkaClient, ProduceOptions};
use super::ops::{self, acks_name, client_outcome, wire_compression};
use crate::history::{OpType, Process, SharedHistory, WriteError};
use crate::observe::node_name;
use crate::runtime::{ClusterView, NodeId, PartitionView};
use crate::schedule::{Acks, Background, PartitionRef, Workload};

/// Extra time a send's answer may take beyond the broker's own acks=all wait.
pub const SEND_MARGIN: Duration = Duration::from_secs(2);

/// Where history processes come from: one counter for the run, shared by the
/// scripted steps and the workers, so no two ever share a number.
#[derive(Clone, Default)]
pub struct Processes(Arc<AtomicU64>);

impl Processes {
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// What every worker shares.
struct Context {
    history: SharedHistory,
    processes: Processes,
    etcd: etcd_client::Client,
    /// Each node's client address (through its client proxy).
    addresses: BTreeMap<NodeId, String>,
    partitions: Vec<PartitionRef>,
    options: ProduceOptions,
    acks: Acks,
    interval: Duration,
    request_timeout: Duration,
    next_value: AtomicI64,
    acked: watch::Sender<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum BackgroundError {
    #[error("background workload: etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("background workload: {0}")]
    History(#[from] WriteError),
    #[error("background workload: {0} workers did not stop within {1:?}")]
    Stuck(usize, Duration),
    #[error("background workload: a worker panicked: {0}")]
    Panicked(String),
}

/// The running workers. Dropping it aborts them; [`Workers::stop`] lets each
/// finish the request it has in flight, so no op is left without a completion.
pub struct Workers {
    stop: watch::Sender<bool>,
    acked: watch::Receiver<u64>,
    tasks: JoinSet<Result<(), WriteError>>,
    request_timeout: Duration,
}

impl Workers {
    /// Starts `config`'s workers against a ready cluster.
    pub async fn start(
        config: &Background,
        workload: &Workload,
        all_partitions: Vec<PartitionRef>,
        addresses: BTreeMap<NodeId, String>,
        etcd_endpoint: &str,
        history: SharedHistory,
        processes: Processes,
    ) -> Result<Workers, BackgroundError> {
        let options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(Duration::from_secs(5));
        let etcd = etcd_client::Client::connect([etcd_endpoint], Some(options)).await?;
        let (acked_tx, acked_rx) = watch::channel(0);
        let (stop_tx, _) = watch::channel(false);
        let request_timeout = Duration::from_millis(workload.request_timeout_ms);
        let context = Arc::new(Context {
            history,
            processes,
            etcd,
            addresses,
            partitions: if config.partitions.is_empty() {
                all_partitions
            } else {
                config.partitions.clone()
            },
            options: ProduceOptions {
                acks: workload.acks.wire(),
                records_per_batch: workload.records_per_batch.max(1) as usize,
                compression: wire_compression(workload.compression),
                timeout_ms: workload.request_timeout_ms as i32,
            },
            acks: workload.acks,
            interval: Duration::from_millis(config.interval_ms),
            request_timeout,
            next_value: AtomicI64::new(Background::FIRST_VALUE),
            acked: acked_tx,
        });
        let mut tasks = JoinSet::new();
        for worker in 0..config.producers as usize {
            let worker = Worker::new(context.clone(), worker, stop_tx.subscribe());
            tasks.spawn(worker.produce());
        }
        for worker in 0..config.consumers as usize {
            let worker = Worker::new(context.clone(), worker, stop_tx.subscribe());
            tasks.spawn(worker.consume());
        }
        Ok(Workers {
            stop: stop_tx,
            acked: acked_rx,
            tasks,
            request_timeout,
        })
    }

    /// Sends acknowledged so far.
    pub fn acknowledged(&self) -> u64 {
        *self.acked.borrow()
    }

    /// Waits until `more` sends beyond those acknowledged now are; on timeout,
    /// how many were.
    pub async fn await_acknowledged(&mut self, more: u64, timeout: Duration) -> Result<u64, u64> {
        let from = *self.acked.borrow_and_update();
        let target = from + more;
        let reached = matches!(
            tokio::time::timeout(timeout, self.acked.wait_for(|&n| n >= target)).await,
            Ok(Ok(_))
        );
        // Not reached: the deadline passed, or every worker is gone (a history
        // write failed) and no more will come.
        let seen = *self.acked.borrow() - from;
        if reached { Ok(seen) } else { Err(seen) }
    }

    /// Tells every worker to stop and waits for each to finish its request in
    /// flight (bounded by the request deadline).
    pub async fn stop(mut self) -> Result<(), BackgroundError> {
        let _ = self.stop.send(true);
        let bound = self.request_timeout + SEND_MARGIN + Duration::from_secs(5);
        let deadline = tokio::time::Instant::now() + bound;
        let mut first_error = None;
        while !self.tasks.is_empty() {
            match tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
                Err(_) => {
                    let stuck = self.tasks.len();
                    self.tasks.abort_all();
                    return Err(BackgroundError::Stuck(stuck, bound));
                }
                Ok(None) => break,
                Ok(Some(Ok(Ok(())))) => {}
                Ok(Some(Ok(Err(e)))) => {
                    first_error.get_or_insert(BackgroundError::History(e));
                }
                Ok(Some(Err(e))) => {
                    first_error.get_or_insert(BackgroundError::Panicked(e.to_string()));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// One worker: its own connections, history process and place in the
/// partitions' round.
struct Worker {
    context: Arc<Context>,
    etcd: etcd_client::Client,
    clients: BTreeMap<NodeId, KafkaClient>,
    process: u64,
    /// The next partition to use (round-robin, starting at the worker's index
    /// so workers spread over partitions).
    turn: usize,
    stop: watch::Receiver<bool>,
    interval: tokio::time::Interval,
}

impl Worker {
    fn new(context: Arc<Context>, index: usize, stop: watch::Receiver<bool>) -> Worker {
        let mut interval = tokio::time::interval(context.interval.max(Duration::from_millis(1)));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Worker {
            etcd: context.etcd.clone(),
            process: context.processes.next(),
            clients: BTreeMap::new(),
            turn: index,
            stop,
            interval,
            context,
        }
    }

    /// Waits for the next turn; false once the run says stop.
    async fn next_turn(&mut self) -> bool {
        if *self.stop.borrow() {
            return false;
        }
        let stopped = tokio::select! {
            _ = self.stop.wait_for(|&stop| stop) => true,
            _ = self.interval.tick() => false,
        };
        !stopped && !*self.stop.borrow()
    }

    fn partition(&mut self) -> PartitionRef {
        let partitions = &self.context.partitions;
        let p = partitions[self.turn % partitions.len()].clone();
        self.turn += 1;
        p
    }

    /// The partition's state in etcd now (`None` when etcd cannot say).
    async fn state(&mut self, partition: &PartitionRef) -> Option<PartitionView> {
        let view = ClusterView::read(&mut self.etcd).await.ok()?;
        view.partition(&partition.topic, partition.partition)
            .cloned()
    }

    /// Invokes `f` with `value` on this worker's process, aimed at the
    /// partition's leader as etcd names it now (added to `value` as `node`);
    /// with no leader known the op fails at once and `None` is returned.
    async fn begin(
        &mut self,
        f: &str,
        partition: &PartitionRef,
        value: &mut Value,
    ) -> Result<Option<NodeId>, WriteError> {
        let node = self.state(partition).await.and_then(|s| s.leader);
        value["node"] = json!(node.map(node_name));
        self.context
            .history
            .invoke(Process::Client(self.process), f, value.clone())?;
        if node.is_none() {
            let why = if f == "send" {
                "no leader to send to"
            } else {
                "no leader to read from"
            };
            self.record(OpType::Fail, f, value.clone(), Some(why.into()))?;
        }
        Ok(node)
    }

    async fn client(&mut self, node: NodeId) -> Result<&mut KafkaClient, ClientError> {
        if !self.clients.contains_key(&node) {
            let address = self.context.addresses.get(&node).ok_or_else(|| {
                ClientError::Protocol(format!("no address for {}", node_name(node)))
            })?;
            let client =
                KafkaClient::connect(address, "epochal-background", self.context.request_timeout)
                    .await?;
            self.clients.insert(node, client);
        }
        Ok(self.clients.get_mut(&node).expect("inserted above"))
    }

    fn record(
        &self,
        kind: OpType,
        f: &str,
        value: Value,
        error: Option<String>,
    ) -> Result<(), WriteError> {
        self.context
            .history
            .append(Process::Client(self.process), kind, f, value, error)
            .map(drop)
    }

    async fn produce(mut self) -> Result<(), WriteError> {
        let context = self.context.clone();
        while self.next_turn().await {
            let partition = self.partition();
            let v = context.next_value.fetch_add(1, Ordering::Relaxed);
            let mut value = json!({
                "partition": partition.to_string(),
                "values": [v],
                "acks": acks_name(context.acks),
            });
            let Some(node) = self.begin("send", &partition, &mut value).await? else {
                continue;
            };
            let deadline = context.request_timeout + SEND_MARGIN;
            let result = match self.client(node).await {
                Ok(client) => ops::send(client, &partition, &[v], &context.options, deadline)
                    .await
                    .map_err(|e| (client_outcome(&e, context.acks.wire()), e)),
                Err(e) => Err((OpType::Fail, e)),
            };
            match result {
                Ok(offsets) => {
                    value["offsets"] = offsets;
                    if let Some(state) = self.state(&partition).await {
                        value["isr"] = json!(state.isr);
                        value["leader_epoch"] = json!(state.leader_epoch);
                    }
                    self.record(OpType::Ok, "send", value, None)?;
                    context.acked.send_modify(|n| *n += 1);
                }
                Err((kind, e)) => {
                    self.clients.remove(&node);
                    self.record(kind, "send", value, Some(e.to_string()))?;
                    if kind == OpType::Info {
                        self.process = context.processes.next();
                    }
                }
            }
        }
        Ok(())
    }

    async fn consume(mut self) -> Result<(), WriteError> {
        let context = self.context.clone();
        // Each partition's next offset to read: the consumer's position.
        let mut positions: BTreeMap<String, u64> = BTreeMap::new();
        while self.next_turn().await {
            let partition = self.partition();
            let from = positions.get(&partition.to_string()).copied().unwrap_or(0);
            let mut value = json!({
                "partition": partition.to_string(),
                "from_offset": from,
            });
            let Some(node) = self.begin("poll", &partition, &mut value).await? else {
                continue;
            };
            let result = match self.client(node).await {
                Ok(client) => ops::poll(client, &partition, from, context.request_timeout).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(polled) => {
                    if let Some(next) = polled.next_offset() {
                        positions.insert(partition.to_string(), next);
                    }
                    value["records"] = json!(polled.records);
                    value["high_watermark"] = json!(polled.high_watermark);
                    if let Some(s) = self.state(&partition).await {
                        value["leader_epoch"] = json!(s.leader_epoch);
                    }
                    self.record(OpType::Ok, "poll", value, None)?;
                }
                Err(e) => {
                    self.clients.remove(&node);
                    // A read changes nothing: a failed one is definite.
                    self.record(OpType::Fail, "poll", value, Some(e.to_string()))?;
                }
            }
        }
        Ok(())
    }
}
