//! InitProducerId for idempotent producers (KIP-98): a request without a
//! transactional id gets a fresh producer id, unique across the cluster and
//! across restarts (see `producer_id_manager.rs`), with epoch 0 — whatever
//! producer id and epoch it names, as Kafka's `TransactionCoordinator` "blindly
//! accepts" such a request. An idempotent producer that needs a new epoch after
//! an error (KIP-360) therefore simply starts over with a new id here.
//!
//! Transactions are not implemented. A request with a transactional id is
//! answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the answer of a Kafka broker
//! that will not serve that transactional id (`KafkaApis.handleInitProducerIdRequest`
//! checks it first): clients treat it as fatal and say so at once, where
//! COORDINATOR_NOT_AVAILABLE would be retried until the client's own timeout
//! and look like an outage.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::server::context::Broker;

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
    if req.transactional_id.is_some() {
        return Some(ResponseError::TransactionalIdAuthorizationFailed);
    }
    // v3+ (KIP-360) may name the producer's current id and epoch: both or
    // neither.
    match (req.producer_id.0, req.producer_epoch) {
        (NO_PRODUCER_ID, NO_PRODUCER_EPOCH) => None,
        (NO_PRODUCER_ID, _) | (_, NO_PRODUCER_EPOCH) => Some(ResponseError::InvalidRequest),
        _ => None,
    }
}

pub async fn handle(broker: &Broker, req: InitProducerIdRequest) -> InitProducerIdResponse {
    if let Some(code) = refusal(&req) {
        return error(code);
    }
    match broker.producer_ids.generate().await {
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

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::TransactionalId;
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    #[test]
    fn transactional_and_half_named_producers_are_refused() {
        // (kafka-protocol's default transactional id is "", not null.)
        let plain = InitProducerIdRequest::default().with_transactional_id(None);
        assert_eq!(refusal(&plain), None);
        let transactional = plain
            .clone()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))));
        assert_eq!(
            refusal(&transactional),
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        );
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
