//! Why the idempotent producer's rules (KIP-98) refuse a batch. It lives
//! apart from the state the rules check (`producer_state.rs`) because the
//! storage's own error, [`StorageError`](crate::storage::StorageError),
//! carries it while that state's file returns `StorageError`: this file is
//! below both.

/// Why a leader refuses a producer's batch. Each maps to the Kafka error the
/// producer is answered with (see `replica::manager::storage_error_code`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerStateError {
    /// INVALID_RECORD: an idempotent batch must carry a sequence (Kafka's
    /// `LogValidator`: "Invalid sequence number … in record batch with producerId").
    #[error("producer {producer_id}: invalid base sequence {base_sequence}")]
    InvalidSequence {
        producer_id: i64,
        base_sequence: i32,
    },
    /// INVALID_PRODUCER_EPOCH: a newer epoch of this producer id has written
    /// here, so this one is fenced (KIP-98; the error code Kafka ≥ 2.7 answers a
    /// produce with, KIP-588).
    #[error(
        "producer {producer_id}: epoch {epoch} is older than the current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    /// OUT_OF_ORDER_SEQUENCE_NUMBER: the batch does not continue the producer's
    /// sequence (a gap, an old sequence no longer among the last five, or a new
    /// epoch not starting at 0).
    #[error(
        "producer {producer_id} epoch {epoch}: sequence {first_sequence} does not follow \
         {last_sequence} (current epoch {current_epoch})"
    )]
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
        first_sequence: i32,
        last_sequence: i32,
    },
    /// TRANSACTION_COORDINATOR_FENCED: a marker from an older transaction
    /// coordinator than the one that wrote this producer's last marker.
    #[error(
        "producer {producer_id}: marker of coordinator epoch {coordinator_epoch}, older than {current}"
    )]
    CoordinatorFenced {
        producer_id: i64,
        coordinator_epoch: i32,
        current: i32,
    },
}
