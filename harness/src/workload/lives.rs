//! The topic-lives workload (`[workload.background] lives`): one client
//! that creates a topic ([`TOPIC`]), writes a few values to it with
//! acks=all, reads it back from its beginning, deletes it, and starts over
//! under the same name, one request at a time, for the whole run. Each
//! creation begins a new life of the name; every step is an op of its own
//! in the history (history/life_op.rs), and the `topic-lives` checker holds
//! each read to the rule that a record written before a creation is never
//! read after it: a deleted topic's log served as its successor's (a
//! replica that kept its log through StopReplica, a deletion that completed
//! before every replica had deleted) is `resurrected-record`.
//!
//! After the final heal the liveness window carries the workload on once
//! more ([`probe`]): the topic is deleted, created again and read, each
//! within the window, and a step that never succeeds is `stuck-topic` (a
//! deletion that waits forever for replicas that have answered, a name that
//! can never be used again).
//!
//! Admin requests go to the nodes in turn; sends and reads to the leader
//! the cluster view names. A create or delete that timed out may still
//! complete (KIP-4: the broker answers at its timeout while the controller
//! goes on), so it is `info`; any other answered error is `fail`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;

use super::client::{RecordingClient, read};
use super::send::produce;
use super::send_options::{SendOptions, send_outcome};
use crate::history::{Body, LifeOp, LifeStep, Op, OpType, WriteError};
use crate::kafka_client::ClientError;
use crate::node::NodeId;
use crate::schedule::{Acks, Compression, PartitionRef};

/// The topic the workload creates and deletes: no schedule's topic.
pub const TOPIC: &str = "epochal-lives";
/// Its values start here, clear of every other workload's.
pub const FIRST_VALUE: i64 = 500_000_000;
/// Values written in each life before it is read and deleted.
const WRITES_PER_LIFE: u32 = 3;
/// The pause between two lives, and after a step that found no leader or
/// an error, so the controller is not asked to create and delete hundreds
/// of topics a second.
const PAUSE: Duration = Duration::from_millis(100);
/// How often a send may find no leader before the life goes on to its
/// read and deletion.
const SEND_TRIES: u32 = 20;
/// Kafka's REQUEST_TIMED_OUT: an admin request whose work may still finish.
const REQUEST_TIMED_OUT: i16 = 7;
/// Kafka's UNKNOWN_TOPIC_OR_PARTITION: on DeleteTopics, no such topic.
const UNKNOWN_TOPIC: i16 = 3;
/// Kafka's TOPIC_ALREADY_EXISTS: on CreateTopics, the name is taken (or
/// its deletion has not completed).
const TOPIC_ALREADY_EXISTS: i16 = 36;

/// What an admin step's answer leaves the workload believing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stands {
    /// A new life began.
    Created,
    /// The name is still taken (its deletion has not completed).
    Taken,
    /// The topic is gone (deleted, or unknown).
    Gone,
    /// Not known: ask again.
    Unknown,
}

/// An op invoked: asked of a node, or already completed (no node to ask).
enum Begun {
    Asked(u64, NodeId),
    Done(Box<Op>),
}

/// One client's lives of [`TOPIC`].
pub struct Lives {
    client: RecordingClient,
    replication: i16,
    /// The next admin request's node, round the nodes.
    turn: usize,
    next_value: i64,
    /// The last op's error, for the probe's evidence.
    last_error: Option<String>,
}

impl Lives {
    pub fn new(client: RecordingClient, nodes: usize) -> Lives {
        Lives {
            client,
            replication: nodes.clamp(1, 3) as i16,
            turn: 0,
            next_value: FIRST_VALUE,
            last_error: None,
        }
    }

    fn partition() -> PartitionRef {
        PartitionRef::new(TOPIC, 0)
    }

    /// The life the next creation begins (the run's counter, shared with
    /// the liveness probe so its ops carry on the numbering).
    fn life(&self) -> u32 {
        self.client.shared.lives.load(Ordering::Relaxed)
    }

    fn next_node(&mut self) -> Option<NodeId> {
        let nodes: Vec<NodeId> = self.client.shared.addresses.keys().copied().collect();
        let node = nodes.get(self.turn % nodes.len().max(1)).copied();
        self.turn += 1;
        node
    }

    /// Runs lives until `stop` says so, finishing the request in flight.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), WriteError> {
        let mut exists = false;
        while !*stop.borrow() {
            let stands = if exists {
                self.live_once(&mut stop).await?;
                if *stop.borrow() {
                    break;
                }
                self.delete().await?
            } else {
                self.create().await?
            };
            exists = match stands {
                Stands::Created | Stands::Taken => true,
                Stands::Gone => false,
                Stands::Unknown => exists,
            };
            pause(&mut stop, PAUSE).await;
        }
        Ok(())
    }

    /// One life's writes and its read.
    async fn live_once(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), WriteError> {
        let mut written = 0;
        let mut tries = 0;
        while written < WRITES_PER_LIFE && tries < SEND_TRIES && !*stop.borrow() {
            tries += 1;
            let value = self.next_value;
            self.next_value += 1;
            if self.send(value).await?.kind == OpType::Ok {
                written += 1;
            } else {
                pause(stop, PAUSE).await;
            }
        }
        self.read().await?;
        Ok(())
    }

    /// `create-topic` of the next life: the life begins when it is ok.
    async fn create(&mut self) -> Result<Stands, WriteError> {
        let life = self.life() + 1;
        let node = self.next_node();
        let op = LifeOp::new(LifeStep::Create, TOPIC, life, node);
        let (kind, error) = self.admin(op).await?;
        if kind != OpType::Fail {
            // Ok, or perhaps: either way the name's next use is a new life.
            self.client.shared.lives.store(life, Ordering::Relaxed);
        }
        Ok(match (kind, error) {
            (OpType::Ok, _) => Stands::Created,
            (_, Some(TOPIC_ALREADY_EXISTS)) => Stands::Taken,
            _ => Stands::Unknown,
        })
    }

    /// `delete-topic` of the current life.
    async fn delete(&mut self) -> Result<Stands, WriteError> {
        let node = self.next_node();
        let op = LifeOp::new(LifeStep::Delete, TOPIC, self.life(), node);
        let (kind, error) = self.admin(op).await?;
        Ok(match (kind, error) {
            (OpType::Ok, _) | (_, Some(UNKNOWN_TOPIC)) => Stands::Gone,
            _ => Stands::Unknown,
        })
    }

    /// Records `op` around its admin call; its type and the broker's
    /// error code, if one answered.
    async fn admin(&mut self, op: LifeOp) -> Result<(OpType, Option<i16>), WriteError> {
        let (process, node) = match self.begin(&op, "no node to ask")? {
            Begun::Asked(process, node) => (process, node),
            Begun::Done(done) => return Ok((done.kind, None)),
        };
        let timeout = self.client.shared.request_timeout;
        let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // The broker answers by its own timeout; the margin lets the answer
        // travel.
        let deadline = timeout + Duration::from_secs(1);
        let replication = self.replication;
        let result = match self.client.connection(node, timeout).await {
            Ok(client) if op.step == LifeStep::Create => {
                client
                    .create_topic(TOPIC, 1, replication, timeout_ms, deadline)
                    .await
            }
            Ok(client) => client.delete_topic(TOPIC, timeout_ms, deadline).await,
            Err(e) => Err(e),
        };
        let code = result.as_ref().err().and_then(ClientError::code);
        let result = result.map_err(|e| (admin_outcome(&e), e));
        let done = self.finish(process, node, op, result, |_, ()| {})?;
        Ok((done.kind, code))
    }

    /// `life-send` of `value` to the leader, acks=all.
    async fn send(&mut self, value: i64) -> Result<Op, WriteError> {
        let partition = Self::partition();
        let node = self
            .client
            .route(&partition, Duration::from_millis(20))
            .await;
        let mut op = LifeOp::new(LifeStep::Send, TOPIC, self.life(), node);
        op.value = Some(value);
        let (process, node) = match self.begin(&op, "no leader to send to")? {
            Begun::Asked(process, node) => (process, node),
            Begun::Done(done) => return Ok(*done),
        };
        let options = SendOptions {
            acks: Acks::All,
            records_per_batch: 1,
            compression: Compression::None,
            key: None,
            value_bytes: None,
        };
        let wire = self.client.produce_options(&options);
        let deadline = self.client.shared.request_timeout + super::send_options::SEND_MARGIN;
        let timeout = self.client.shared.request_timeout;
        let result = match self.client.connection(node, timeout).await {
            Ok(client) => produce(client, &partition, &[value], &options, &wire, deadline)
                .await
                .map_err(|e| (send_outcome(&e, wire.acks), e)),
            Err(e) => Err((OpType::Fail, e)),
        };
        self.finish(process, node, op, result, |op, offsets| {
            op.offset = offsets.and_then(|o| o.first().copied());
        })
    }

    /// `life-read` of partition 0 from offset 0 to the high watermark, on
    /// the leader.
    async fn read(&mut self) -> Result<Op, WriteError> {
        let partition = Self::partition();
        let node = self
            .client
            .route(&partition, Duration::from_millis(20))
            .await;
        let op = LifeOp::new(LifeStep::Read, TOPIC, self.life(), node);
        let (process, node) = match self.begin(&op, "no leader to read from")? {
            Begun::Asked(process, node) => (process, node),
            Begun::Done(done) => return Ok(*done),
        };
        let timeout = self.client.shared.request_timeout;
        let result = match self.client.connection(node, timeout).await {
            Ok(client) => read(client, &partition, 0, timeout).await,
            Err(e) => Err(e),
        };
        // A read changes nothing: a failed one is definite.
        let result = result.map_err(|e| (OpType::Fail, e));
        self.finish(process, node, op, result, |op, read| {
            op.high_watermark = Some(read.high_watermark);
            op.records = Some(read.records);
        })
    }

    /// Invokes `op`; with no node to ask, completes it `fail`, saying `why`.
    fn begin(&mut self, op: &LifeOp, why: &str) -> Result<Begun, WriteError> {
        let process = self.client.invoke(Body::Life(Box::new(op.clone())))?;
        Ok(match op.node {
            Some(node) => Begun::Asked(process, node),
            None => {
                let done = self.complete(process, OpType::Fail, op.clone(), Some(why.into()))?;
                Begun::Done(Box::new(done))
            }
        })
    }

    /// Completes `op` asked of `node`: ok once `fill` wrote what the answer
    /// says into it; otherwise as its error's type, the node's connection
    /// dropped so the next request opens a new one.
    fn finish<T>(
        &mut self,
        process: u64,
        node: NodeId,
        mut op: LifeOp,
        result: Result<T, (OpType, ClientError)>,
        fill: impl FnOnce(&mut LifeOp, T),
    ) -> Result<Op, WriteError> {
        match result {
            Ok(answer) => {
                fill(&mut op, answer);
                self.complete(process, OpType::Ok, op, None)
            }
            Err((kind, e)) => {
                self.client.connections.remove(&node);
                self.complete(process, kind, op, Some(e.to_string()))
            }
        }
    }

    fn complete(
        &mut self,
        process: u64,
        kind: OpType,
        op: LifeOp,
        error: Option<String>,
    ) -> Result<Op, WriteError> {
        self.last_error.clone_from(&error);
        self.client
            .complete(process, kind, Body::Life(Box::new(op)), error)
    }
}

/// An admin request's outcome: a timeout the broker answered (the work goes
/// on) or one the client hit is `info`; any other answer is `fail`.
fn admin_outcome(error: &ClientError) -> OpType {
    match error {
        ClientError::Broker { code, .. } if *code == REQUEST_TIMED_OUT => OpType::Info,
        ClientError::Broker { .. } => OpType::Fail,
        other => send_outcome(other, -1),
    }
}

/// Waits `pause`, or until `stop` says stop.
async fn pause(stop: &mut watch::Receiver<bool>, pause: Duration) {
    tokio::select! {
        _ = stop.wait_for(|&stop| stop) => {}
        _ = tokio::time::sleep(pause) => {}
    }
}

/// Which step of the liveness probe never succeeded, and its last answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeStuck {
    pub step: LifeStep,
    pub last_error: Option<String>,
}

/// The liveness window's look at the topic's lives after the final heal:
/// delete it (until gone), create it again (until ok), read the new life
/// (until ok), each a recorded op, all within `window`; the step that did
/// not succeed in time, if one did not.
pub async fn probe(
    client: RecordingClient,
    nodes: usize,
    window: Duration,
) -> Result<Option<ProbeStuck>, WriteError> {
    let deadline = tokio::time::Instant::now() + window;
    let mut lives = Lives::new(client, nodes);
    let (_never, mut stop) = watch::channel(false);
    let mut last = None;
    let mut step = LifeStep::Delete;
    loop {
        if tokio::time::Instant::now() >= deadline {
            return Ok(Some(ProbeStuck {
                step,
                last_error: last,
            }));
        }
        match step {
            LifeStep::Delete => {
                if lives.delete().await? == Stands::Gone {
                    step = LifeStep::Create;
                    continue;
                }
            }
            LifeStep::Create => match lives.create().await? {
                Stands::Created => {
                    step = LifeStep::Read;
                    continue;
                }
                // The name still taken: delete again.
                Stands::Taken => step = LifeStep::Delete,
                _ => {}
            },
            LifeStep::Read | LifeStep::Send => {
                let op = lives.read().await?;
                if op.kind == OpType::Ok {
                    return Ok(None);
                }
            }
        }
        last = lives.last_error.clone();
        pause(&mut stop, PAUSE).await;
    }
}
