//! InitProducerId (KIP-98). A request without a transactional id (an
//! idempotent producer) gets a fresh producer id, unique across the cluster
//! and across restarts (see `producer_id_manager.rs`), with epoch 0 —
//! whatever producer id and epoch it names, as Kafka's `TransactionCoordinator`
//! "blindly accepts" such a request. An idempotent producer that needs a new
//! epoch after an error (KIP-360) therefore simply starts over with a new id
//! here.
//!
//! A request with a transactional id goes to the id's coordinator
//! ([`crate::transactions`]): a new id gets a fresh producer id at epoch 0, a
//! known one its epoch bumped, fencing the older producer; an ongoing
//! transaction is aborted first under the bumped epoch (PrepareAbort written,
//! markers sent) and the client told CONCURRENT_TRANSACTIONS until that is
//! done. The producer id and epoch a v3+ request names (KIP-360) are not
//! checked for a transactional id: every request bumps.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::transactions::TxnHost;
use crate::transactions::coordinator::MarkerJob;
use crate::transactions::state::{self, Init};
use crate::transactions::transition::{self, Written};

/// `RecordBatch.NO_PRODUCER_ID` and `NO_PRODUCER_EPOCH`.
const NO_PRODUCER_ID: i64 = -1;
const NO_PRODUCER_EPOCH: i16 = -1;

fn error(code: ResponseError) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(code.code())
        .with_producer_id(ProducerId(NO_PRODUCER_ID))
        .with_producer_epoch(NO_PRODUCER_EPOCH)
}

/// What a request is answered without asking for an id, if anything: Kafka's
/// checks, in Kafka's order.
pub fn refusal(req: &InitProducerIdRequest) -> Option<ResponseError> {
    // `TransactionCoordinator.handleInitProducerId`: an empty id is invalid.
    if req
        .transactional_id
        .as_ref()
        .is_some_and(|id| id.is_empty())
    {
        return Some(ResponseError::InvalidRequest);
    }
    // v3+ (KIP-360) may name the producer's current id and epoch: both or
    // neither.
    match (req.producer_id.0, req.producer_epoch) {
        (NO_PRODUCER_ID, NO_PRODUCER_EPOCH) => None,
        (NO_PRODUCER_ID, _) | (_, NO_PRODUCER_EPOCH) => Some(ResponseError::InvalidRequest),
        _ => None,
    }
}

pub async fn handle(
    host: &impl TxnHost,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    if let Some(code) = refusal(&req) {
        return error(code);
    }
    if let Some(id) = &req.transactional_id {
        return transactional(host, id, req.transaction_timeout_ms, version).await;
    }
    match host.producer_ids().generate().await {
        Ok(producer_id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(0),
        Err(e) => {
            // Retriable for the client, as the KRaft-era Kafka answers while it
            // waits for a block (`RPCProducerIdManager`): etcd may be back soon.
            tracing::warn!(%e, "no producer id: could not claim a block of producer ids");
            error(ResponseError::CoordinatorLoadInProgress)
        }
    }
}

/// InitProducerId for a transactional id, at its coordinator.
async fn transactional(
    host: &impl TxnHost,
    transactional_id: &str,
    timeout_ms: i32,
    version: i16,
) -> InitProducerIdResponse {
    let now = transition::now_ms();
    let written = transition::write(host, transactional_id, |current, fresh| {
        Ok(
            match state::init_producer_id(current, timeout_ms, now, fresh)? {
                Init::Ready(m) => (Some(m.clone()), Init::Ready(m)),
                Init::AbortFirst(m) => (Some(m.clone()), Init::AbortFirst(m)),
            },
        )
    })
    .await;
    match written {
        Ok(Written {
            outcome: Init::Ready(m),
            ..
        }) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(m.producer_id))
            .with_producer_epoch(m.producer_epoch),
        Ok(Written {
            outcome: Init::AbortFirst(prepared),
            leader_epoch,
        }) => {
            host.coordinator().send_markers(MarkerJob {
                transactional_id: transactional_id.to_owned(),
                coordinator_epoch: leader_epoch,
                prepared,
            });
            error(ResponseError::ConcurrentTransactions)
        }
        // KIP-588: PRODUCER_FENCED from v4.
        Err(e) => error(e.code(version >= 4)),
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::TransactionalId;
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    #[test]
    fn empty_transactional_ids_and_half_named_producers_are_refused() {
        // (kafka-protocol's default transactional id is "", not null.)
        let plain = InitProducerIdRequest::default().with_transactional_id(None);
        assert_eq!(refusal(&plain), None);
        let transactional = plain
            .clone()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))));
        assert_eq!(refusal(&transactional), None);
        let empty = plain
            .clone()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(""))));
        assert_eq!(refusal(&empty), Some(ResponseError::InvalidRequest));
        let bump = plain
            .clone()
            .with_producer_id(ProducerId(7))
            .with_producer_epoch(3);
        assert_eq!(refusal(&bump), None, "KIP-360: gets a new id");
        let half = plain.clone().with_producer_id(ProducerId(7));
        assert_eq!(refusal(&half), Some(ResponseError::InvalidRequest));
        let other_half = plain.with_producer_epoch(2);
        assert_eq!(refusal(&other_half), Some(ResponseError::InvalidRequest));
    }
}
