//! The controller's channel to each live broker (Kafka's ControllerChannelManager):
//! one queue and one sending task per broker, so a slow or unreachable broker
//! delays only its own requests. Requests to one broker go out in order; a
//! failed send reconnects and retries the same request while the broker stays
//! in the channel, so a decision is not silently dropped by a transient error.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse,
};
use tokio::sync::{mpsc, watch};

use crate::client::{ClientError, Connection};

/// LeaderAndIsr v4: flexible, grouped by topic, carries the broker epoch; the
/// last version without topic ids, which this broker does not assign.
pub const LEADER_AND_ISR_VERSION: i16 = 4;
/// UpdateMetadata v7: flexible, grouped by topic, with each topic's id
/// (KIP-516).
pub const UPDATE_METADATA_VERSION: i16 = 7;
/// StopReplica v3: each partition with its delete flag (KIP-570).
pub const STOP_REPLICA_VERSION: i16 = 3;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

#[derive(Debug, Clone)]
pub enum ControlRequest {
    LeaderAndIsr(LeaderAndIsrRequest),
    UpdateMetadata(UpdateMetadataRequest),
    StopReplica(StopReplicaRequest),
}

#[derive(Debug)]
pub enum ControlResponse {
    LeaderAndIsr(LeaderAndIsrResponse),
    UpdateMetadata(UpdateMetadataResponse),
    StopReplica(StopReplicaResponse),
}

impl ControlResponse {
    /// The whole-request error code (0 = none).
    pub fn error_code(&self) -> i16 {
        match self {
            ControlResponse::LeaderAndIsr(r) => r.error_code,
            ControlResponse::UpdateMetadata(r) => r.error_code,
            ControlResponse::StopReplica(r) => r.error_code,
        }
    }
}

/// A response, tagged with the broker it came from, fed back to the controller.
#[derive(Debug)]
pub struct ControlReply {
    pub broker_id: i32,
    pub response: ControlResponse,
}

struct BrokerQueue {
    addr: String,
    tx: mpsc::UnboundedSender<ControlRequest>,
    stop: watch::Sender<bool>,
}

pub struct ControllerChannel {
    controller_id: i32,
    queues: BTreeMap<i32, BrokerQueue>,
    replies: mpsc::UnboundedSender<ControlReply>,
}

impl ControllerChannel {
    pub fn new(controller_id: i32, replies: mpsc::UnboundedSender<ControlReply>) -> Self {
        Self {
            controller_id,
            queues: BTreeMap::new(),
            replies,
        }
    }

    /// Make sure a queue to `broker_id` at `addr` exists (replacing one to an old address).
    pub fn add_broker(&mut self, broker_id: i32, addr: String) {
        if self.queues.get(&broker_id).is_some_and(|q| q.addr == addr) {
            return;
        }
        self.remove_broker(broker_id);
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let replies = self.replies.clone();
        let client_id = format!("controller-{}", self.controller_id);
        tokio::spawn(send_loop(
            broker_id,
            addr.clone(),
            client_id,
            rx,
            stop_rx,
            replies,
        ));
        self.queues
            .insert(broker_id, BrokerQueue { addr, tx, stop });
    }

    pub fn remove_broker(&mut self, broker_id: i32) {
        if let Some(q) = self.queues.remove(&broker_id) {
            let _ = q.stop.send(true);
        }
    }

    pub fn send(&self, broker_id: i32, request: ControlRequest) {
        match self.queues.get(&broker_id) {
            Some(q) => {
                let _ = q.tx.send(request);
            }
            None => tracing::warn!(broker_id, "no channel to broker; control request dropped"),
        }
    }

    pub fn brokers(&self) -> impl Iterator<Item = i32> + '_ {
        self.queues.keys().copied()
    }
}

impl Drop for ControllerChannel {
    /// A controller that stops (resigns) lets what it already queued go out, as
    /// Kafka's request send threads did for a controller resuming from a pause:
    /// whether a stale request is applied is the brokers' controller-epoch check
    /// to decide (KAFKA-532), not an accident of task scheduling. Dropping the
    /// queues closes them; each loop sends what is left, once, and ends.
    fn drop(&mut self) {}
}

async fn send_loop(
    broker_id: i32,
    addr: String,
    client_id: String,
    mut rx: mpsc::UnboundedReceiver<ControlRequest>,
    mut stop: watch::Receiver<bool>,
    replies: mpsc::UnboundedSender<ControlReply>,
) {
    let mut conn: Option<Connection> = None;
    loop {
        // Only an explicit stop ends the loop early; a dropped controller
        // (sender gone, `changed` erring) lets the queue drain.
        let request = tokio::select! {
            Ok(()) = stop.changed() => return,
            r = rx.recv() => match r { Some(r) => r, None => return },
        };
        loop {
            if *stop.borrow() {
                return;
            }
            match send_one(&mut conn, &addr, &client_id, &request).await {
                Ok(response) => {
                    // Logged here as well, so it shows even when the controller
                    // has already resigned for another reason (its own lease).
                    if response.error_code() == ResponseError::StaleControllerEpoch.code() {
                        tracing::warn!(
                            broker_id,
                            "broker answered STALE_CONTROLLER_EPOCH: a newer controller exists"
                        );
                    }
                    let _ = replies.send(ControlReply {
                        broker_id,
                        response,
                    });
                    break;
                }
                Err(e) if rx.is_closed() => {
                    // The controller is gone: no retries on its behalf.
                    tracing::warn!(broker_id, %addr, %e, "control request of a stopped controller failed; dropped");
                    break;
                }
                Err(e) => {
                    tracing::warn!(broker_id, %addr, %e, "control request failed; retrying");
                    conn = None;
                    tokio::select! {
                        _ = stop.changed() => return,
                        _ = tokio::time::sleep(RETRY_BACKOFF) => {}
                    }
                }
            }
        }
    }
}

async fn send_one(
    conn: &mut Option<Connection>,
    addr: &str,
    client_id: &str,
    request: &ControlRequest,
) -> Result<ControlResponse, ClientError> {
    if conn.is_none() {
        *conn = Some(Connection::connect(addr, client_id, REQUEST_TIMEOUT).await?);
    }
    let c = conn.as_mut().expect("connected above");
    Ok(match request {
        ControlRequest::LeaderAndIsr(r) => {
            ControlResponse::LeaderAndIsr(c.send(r, LEADER_AND_ISR_VERSION).await?)
        }
        ControlRequest::UpdateMetadata(r) => {
            ControlResponse::UpdateMetadata(c.send(r, UPDATE_METADATA_VERSION).await?)
        }
        ControlRequest::StopReplica(r) => {
            ControlResponse::StopReplica(c.send(r, STOP_REPLICA_VERSION).await?)
        }
    })
}
