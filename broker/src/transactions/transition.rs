//! One transition of a transactional id's state, as Kafka's
//! `TransactionStateManager.appendTransactionToLog` makes it: the new state is
//! appended to the id's transaction-state partition as one record (key and
//! value of `log_record.rs`) with acks=all, and taken into memory only once
//! the in-sync replicas hold it — a coordinator never answers from, or sends
//! markers for, a state a successor could fail to read. Transitions of one
//! coordinator are serialized (`TxnCoordinator::writing`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_protocol::ResponseError;

use super::TxnHost;
use super::coordinator::Coordinating;
use super::log_record;
use super::state::{TxnError, TxnMetadata};
use crate::replica::store::TopicPartition;
use crate::storage::record_batch;

/// How long a state's append waits for the in-sync replicas (Kafka waits
/// `request.timeout.ms`; a client's own request times out at 30 s).
const APPEND_TIMEOUT: Duration = Duration::from_secs(10);
/// A fenced leader's wait is looked at again this often.
const ACK_RECHECK: Duration = Duration::from_millis(50);

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Why a transition was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The state machine refused the request.
    #[error(transparent)]
    Refused(#[from] TxnError),
    /// This broker cannot coordinate the id now, or the write failed.
    #[error("coordinator: {0:?}")]
    Coordinator(ResponseError),
}

impl TransitionError {
    /// The error the client is answered. KIP-588: PRODUCER_FENCED only to
    /// clients that know it (`fenced_known`), INVALID_PRODUCER_EPOCH before
    /// (Kafka's `KafkaApis` maps it per API version).
    pub fn code(self, fenced_known: bool) -> ResponseError {
        match self {
            TransitionError::Refused(TxnError::ProducerFenced) if !fenced_known => {
                ResponseError::InvalidProducerEpoch
            }
            TransitionError::Refused(e) => e.code(),
            TransitionError::Coordinator(e) => e,
        }
    }
}

/// What a transition came to, and the coordinator epoch it was made in.
#[derive(Debug)]
pub struct Written<T> {
    pub outcome: T,
    pub leader_epoch: i32,
}

/// What `decide` makes of the current state: the state to write (`None`:
/// nothing to write), and what the caller gets back.
pub type Decision<T> = Result<(Option<TxnMetadata>, T), TxnError>;

/// Makes `transactional_id`'s next state with `decide` (given the current
/// state and a source of fresh producer ids), writes it and applies it once
/// acknowledged.
pub async fn write<T>(
    broker: &impl TxnHost,
    transactional_id: &str,
    mut decide: impl FnMut(Option<&TxnMetadata>, &mut dyn FnMut() -> i64) -> Decision<T>,
) -> Result<Written<T>, TransitionError> {
    let coordinator = &broker.coordinator();
    let _writing = coordinator.writing.lock().await;
    let Coordinating {
        partition,
        leader_epoch,
        current,
    } = coordinator
        .lookup(transactional_id)
        .map_err(TransitionError::Coordinator)?;
    let (next, outcome) = with_fresh_id(broker, |fresh| decide(current.as_ref(), fresh)).await??;
    if let Some(next) = next {
        append(broker, &partition, transactional_id, &next).await?;
        if !coordinator.apply(transactional_id, leader_epoch, next) {
            return Err(TransitionError::Coordinator(ResponseError::NotCoordinator));
        }
    }
    Ok(Written {
        outcome,
        leader_epoch,
    })
}

/// Runs `decide`; if it asked for a fresh producer id, takes one from the
/// broker's blocks (the ones idempotent producers get theirs from) and runs
/// it again with that id — the state functions are pure, so only the run
/// that is kept spends an id.
async fn with_fresh_id<R>(
    broker: &impl TxnHost,
    mut decide: impl FnMut(&mut dyn FnMut() -> i64) -> R,
) -> Result<R, TransitionError> {
    let mut asked = false;
    let first = decide(&mut || {
        asked = true;
        -1
    });
    if !asked {
        return Ok(first);
    }
    drop(first);
    match broker.producer_ids().generate().await {
        Ok(id) => Ok(decide(&mut || id)),
        Err(e) => {
            tracing::warn!(%e, "no producer id for a transactional id: could not claim a block");
            Err(TransitionError::Coordinator(
                ResponseError::CoordinatorLoadInProgress,
            ))
        }
    }
}

/// Appends `m` as `transactional_id`'s state and awaits the ISR.
async fn append(
    broker: &impl TxnHost,
    tp: &TopicPartition,
    transactional_id: &str,
    m: &TxnMetadata,
) -> Result<(), TransitionError> {
    let batch = record_batch::plain_batch(
        vec![(
            Some(log_record::encode_key(transactional_id)),
            Some(log_record::encode_value(m)),
        )],
        now_ms(),
    );
    let failed = |e| TransitionError::Coordinator(append_error(e));
    let ticket = broker
        .replicas()
        .append_as_leader(tp, batch, -1)
        .map_err(failed)?;
    let deadline = tokio::time::Instant::now() + APPEND_TIMEOUT;
    let status = broker
        .replicas()
        .await_ack(tp, &ticket, deadline, ACK_RECHECK)
        .await;
    match status.and_then(|s| s.code()) {
        Some(0) => Ok(()),
        Some(code) => Err(failed(
            ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError),
        )),
        None => Err(failed(ResponseError::RequestTimedOut)),
    }
}

/// An append's error as the coordinator answers it (Kafka's mapping in
/// `TransactionStateManager.appendTransactionToLog`).
fn append_error(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::UnknownTopicOrPartition
        | ResponseError::NotEnoughReplicas
        | ResponseError::NotEnoughReplicasAfterAppend
        | ResponseError::RequestTimedOut => ResponseError::CoordinatorNotAvailable,
        ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => {
            ResponseError::NotCoordinator
        }
        _ => ResponseError::UnknownServerError,
    }
}
