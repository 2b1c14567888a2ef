//! One send of an op-recording client (client.rs), recorded as one op: a
//! plain send, one request never retried (a retry is a new op); or, under
//! `[workload] idempotent = true` with acks=all, a send as the process's
//! idempotent producer (producer.rs: its state and the rules that read each
//! attempt), resent with the same stamp until an answer settles it or its
//! delivery timeout passes.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use tokio::time::Instant;

use super::client::RecordingClient;
use super::producer::{
    Attempt, INIT_PRODUCER_ID_NODE_TIMEOUT, Producer, ProducerIdError, RETRY_BACKOFF,
    ROUTE_MAX_AGE, STALE_PRODUCER_ERRORS, delivery_timeout,
};
use super::send_options::{SEND_MARGIN, SendOptions, offsets, records, send_outcome};
use crate::history::{Acked, Body, Idempotence, Op, OpType, Send, WriteError};
use crate::kafka_client::{
    ClientError, KafkaClient, ProduceOptions, Produced, ProducerIdAndEpoch, ProducerStamp,
};
use crate::node::NodeId;
use crate::schedule::{Acks, PartitionRef};

impl RecordingClient {
    /// Sends `values` to `partition` on `node` (`None`: no leader was known,
    /// and the op fails at once) and records the op; returns its completion.
    pub async fn send(
        &mut self,
        partition: &PartitionRef,
        values: Vec<i64>,
        node: Option<NodeId>,
        options: SendOptions,
    ) -> Result<Op, WriteError> {
        // Kafka's producer refuses idempotence without acks=all, and so does
        // the schedule; a caller that asks for other acks gets a plain send.
        if self.shared.idempotent && options.acks == Acks::All {
            return self.send_idempotent(partition, values, node, options).await;
        }
        let mut send = unanswered(partition, values, &options, node);
        let process = self.invoke(Body::Send(send.clone()))?;
        let Some(node) = node else {
            return self.complete(
                process,
                OpType::Fail,
                Body::Send(send),
                Some("no leader to send to".into()),
            );
        };
        let wire = self.produce_options(&options);
        // The broker's own acks=all wait, then a margin for the answer to travel.
        let deadline = self.shared.request_timeout + SEND_MARGIN;
        // A connection that cannot be made (or fails its version check) never
        // carried the produce: a definite failure whatever the error.
        let result = match self.connection(node, self.shared.request_timeout).await {
            Ok(client) => produce(client, partition, &send.values, &options, &wire, deadline)
                .await
                .map_err(|e| (send_outcome(&e, wire.acks), e)),
            Err(e) => Err((OpType::Fail, e)),
        };
        match result {
            Ok(offsets) => {
                let state = self.partition_state(partition).await;
                send.acked = Some(Acked {
                    offsets,
                    isr: state.as_ref().map(|s| NodeId::ids(&s.isr)),
                    leader_epoch: state.map(|s| s.leader_epoch),
                });
                self.complete(process, OpType::Ok, Body::Send(send), None)
            }
            Err((kind, e)) => {
                self.connections.remove(&node);
                self.unreachable(node, &e);
                self.complete(process, kind, Body::Send(send), Some(e.to_string()))
            }
        }
    }
    /// [`RecordingClient::send`] as an idempotent producer (see the module
    /// docs); `node`: where the first attempt goes.
    async fn send_idempotent(
        &mut self,
        partition: &PartitionRef,
        values: Vec<i64>,
        node: Option<NodeId>,
        options: SendOptions,
    ) -> Result<Op, WriteError> {
        let deadline = Instant::now() + delivery_timeout(self.shared.request_timeout);
        let mut send = unanswered(partition, values, &options, node);
        // The producer id comes first, as Kafka's producer gets one before
        // its first batch, so the invoke names the stamp every attempt will
        // carry. Without a leader or an id nothing is sent: the op fails
        // unstamped.
        let first = match node {
            None => Err("no leader to send to".to_string()),
            Some(node) => self
                .producer_stamp(partition, node, deadline)
                .await
                .map(|stamp| (node, stamp))
                .map_err(|e| e.to_string()),
        };
        let (node, stamp) = match first {
            Ok(first) => first,
            Err(why) => {
                let process = self.invoke(Body::Send(send.clone()))?;
                return self.complete(process, OpType::Fail, Body::Send(send), Some(why));
            }
        };
        send.producer = Some(Idempotence {
            id: stamp.producer.producer_id,
            epoch: stamp.producer.producer_epoch,
            base_sequence: stamp.base_sequence,
            attempts: None,
        });
        let process = self.invoke(Body::Send(send.clone()))?;
        let (settled, sent) = self
            .attempts(partition, &send.values, &options, node, &stamp, deadline)
            .await;
        if let Some(producer) = &mut send.producer {
            producer.attempts = Some(sent);
        }
        match settled {
            Ok(produced) => {
                if let Some(producer) = &mut self.producer {
                    producer.acknowledged(partition, send.values.len());
                }
                let state = self.partition_state(partition).await;
                send.acked = Some(Acked {
                    offsets: offsets(produced.base_offset, send.values.len()),
                    isr: state.as_ref().map(|s| NodeId::ids(&s.isr)),
                    leader_epoch: state.map(|s| s.leader_epoch),
                });
                self.complete(process, OpType::Ok, Body::Send(send), None)
            }
            Err((kind, error)) => self.complete(process, kind, Body::Send(send), Some(error)),
        }
    }

    /// Sends the stamped batches to `first`, then, while the outcome is
    /// unknown, to whichever node leads, until they settle or `deadline`
    /// passes; with how many requests went out.
    async fn attempts(
        &mut self,
        partition: &PartitionRef,
        values: &[i64],
        options: &SendOptions,
        first: NodeId,
        stamp: &ProducerStamp,
        deadline: Instant,
    ) -> (Settled, u32) {
        let records = records(values, options);
        let wire = self.produce_options(options);
        let request_timeout = self.shared.request_timeout;
        let mut sent = 0u32;
        let mut unknown = false;
        let mut target = Some(first);
        let mut last_error = String::new();
        loop {
            if let Some(node) = target {
                // Each attempt has one request's bound, as a plain send does.
                let end = deadline.min(Instant::now() + request_timeout + SEND_MARGIN);
                let left = || end.saturating_duration_since(Instant::now());
                let (result, went_out) =
                    match self.connection(node, left().min(request_timeout)).await {
                        Err(e) => (Err(e), false),
                        Ok(client) => {
                            sent += 1;
                            let result = client
                                .produce_idempotent(
                                    &partition.topic,
                                    partition.wire_partition(),
                                    &records,
                                    &wire,
                                    stamp,
                                    left(),
                                )
                                .await;
                            (result, true)
                        }
                    };
                let attempt = Attempt::of(&result, went_out);
                let error = match result {
                    Ok(produced) => return (Ok(produced), sent),
                    Err(error) => error,
                };
                self.connections.remove(&node);
                self.unreachable(node, &error);
                if matches!(error, ClientError::Broker { code, .. } if STALE_PRODUCER_ERRORS.contains(&code))
                {
                    self.producer = None;
                }
                last_error = error.to_string();
                if let Some(kind) = attempt.settles(unknown) {
                    if unknown {
                        last_error = format!(
                            "{last_error} (after a send whose outcome is unknown; {sent} sent)"
                        );
                    }
                    return (Err((kind, last_error)), sent);
                }
                unknown |= attempt == Attempt::Unknown;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            tokio::time::sleep_until((now + RETRY_BACKOFF).min(deadline)).await;
            // No leader named yet: wait another backoff and ask again.
            target = tokio::time::timeout_at(deadline, self.route(partition, ROUTE_MAX_AGE))
                .await
                .ok()
                .flatten();
        }
        let error = format!(
            "{last_error} (no definite answer to {sent} sends within {} ms)",
            delivery_timeout(request_timeout).as_millis()
        );
        (Err((OpType::Info, error)), sent)
    }

    /// The stamp of the next send to `partition`, getting the process its
    /// producer id first if it has none (asking `first` before the others).
    async fn producer_stamp(
        &mut self,
        partition: &PartitionRef,
        first: NodeId,
        deadline: Instant,
    ) -> Result<ProducerStamp, ProducerIdError> {
        if self.producer.is_none() {
            let id = self.init_producer_id(first, deadline).await?;
            self.producer = Some(Producer::new(id));
        }
        Ok(self.producer.as_ref().expect("made above").stamp(partition))
    }

    /// InitProducerId from any node that answers: `first` (the leader a
    /// moment ago, so likely up), then the others in order, round after
    /// round, each node bounded by [`INIT_PRODUCER_ID_NODE_TIMEOUT`] and all
    /// by `deadline`. `Err` names each node's last error.
    async fn init_producer_id(
        &mut self,
        first: NodeId,
        deadline: Instant,
    ) -> Result<ProducerIdAndEpoch, ProducerIdError> {
        let started = Instant::now();
        let mut nodes = vec![first];
        nodes.extend(self.shared.addresses.keys().filter(|&&n| n != first));
        let mut errors: BTreeMap<NodeId, ClientError> = BTreeMap::new();
        while Instant::now() < deadline {
            for &node in &nodes {
                let end = deadline.min(Instant::now() + INIT_PRODUCER_ID_NODE_TIMEOUT);
                let left = || end.saturating_duration_since(Instant::now());
                if left().is_zero() {
                    break;
                }
                let result = match self.connection(node, left()).await {
                    Ok(client) => client.init_producer_id(left()).await,
                    Err(e) => Err(e),
                };
                match result {
                    Ok(id) => return Ok(id),
                    // Every node runs the same broker: if one does not speak
                    // InitProducerId, none does.
                    Err(
                        source @ ClientError::Unsupported {
                            api: ApiKey::InitProducerId,
                            ..
                        },
                    ) => {
                        return Err(ProducerIdError::Unsupported { node, source });
                    }
                    Err(e) => {
                        self.connections.remove(&node);
                        errors.insert(node, e);
                    }
                }
            }
            let now = Instant::now();
            tokio::time::sleep_until((now + RETRY_BACKOFF).min(deadline)).await;
        }
        Err(ProducerIdError::NoAnswer {
            elapsed_ms: started.elapsed().as_millis(),
            errors,
        })
    }
}

/// How the attempts ended: the success, or the op type and the error.
type Settled = Result<Produced, (OpType, String)>;

/// Sends `values` (as decimal text) to one partition; on success, the offsets
/// they were given (`None` under acks=0, which returns none).
pub(super) async fn produce(
    client: &mut KafkaClient,
    partition: &PartitionRef,
    values: &[i64],
    send: &SendOptions,
    options: &ProduceOptions,
    deadline: Duration,
) -> Result<Option<Vec<i64>>, ClientError> {
    let records = records(values, send);
    let produced = client
        .produce(
            &partition.topic,
            partition.wire_partition(),
            &records,
            options,
            deadline,
        )
        .await?;
    Ok(offsets(produced.base_offset, values.len()))
}

/// A send as its invoke records it: nothing stamped, nothing acknowledged.
fn unanswered(
    partition: &PartitionRef,
    values: Vec<i64>,
    options: &SendOptions,
    node: Option<NodeId>,
) -> Send {
    Send {
        partition: partition.clone(),
        values,
        acks: options.acks,
        node,
        producer: None,
        acked: None,
        app: None,
    }
}
