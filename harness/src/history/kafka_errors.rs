//! Which Kafka error codes the workload can see, and whether each makes the
//! outcome of the operation definite. Jepsen's rule (jepsen.io's analyses,
//! Maelstrom's `doc/protocol.md` "Errors" table marks each code definite or
//! indefinite): only an error that proves the operation did not take effect may
//! become `fail`; anything else, and every timeout or dropped connection, is
//! `info`, because a write the broker may have appended can still surface later.
//!
//! Codes and names are Kafka's (`org.apache.kafka.common.protocol.Errors`,
//! <https://kafka.apache.org/protocol#protocol_error_codes>).

/// Did the operation certainly not happen?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The broker refused before changing anything: record as `fail`.
    Definite,
    /// It may have been applied (or the code is unknown to us): record as `info`.
    Indefinite,
}

/// How a produce's outcome depends on acks, for the one code where it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Produce {
    Always(Outcome),
    /// Definite with acks 0/1, indefinite with acks=all (see NOT_LEADER_OR_FOLLOWER).
    DependsOnAcks,
}

pub struct KafkaError {
    pub code: i16,
    pub name: &'static str,
    produce: Produce,
}

use Outcome::{Definite, Indefinite};
use Produce::{Always, DependsOnAcks};

/// Every code the workload's requests (Metadata, Produce, Fetch, ListOffsets) can
/// return. Reads change nothing, so a failed fetch or list-offsets is always
/// definite; this table is about produce.
pub const KAFKA_ERRORS: &[KafkaError] = &[
    // Kafka: "The server experienced an unexpected error" — may be after append.
    e(-1, "UNKNOWN_SERVER_ERROR", Always(Indefinite)),
    e(1, "OFFSET_OUT_OF_RANGE", Always(Definite)),
    // Batch validation (CRC, format) runs before the append.
    e(2, "CORRUPT_MESSAGE", Always(Definite)),
    e(3, "UNKNOWN_TOPIC_OR_PARTITION", Always(Definite)),
    e(4, "INVALID_FETCH_SIZE", Always(Definite)),
    e(5, "LEADER_NOT_AVAILABLE", Always(Definite)),
    // Checked before the append — but with acks=all a leader that appends and
    // then loses leadership while the produce waits for the ISR answers this
    // same code (Kafka's Partition.checkEnoughReplicasReachOffset, reached from
    // DelayedProduce). The appended batch may survive on the new leader, so with
    // acks=all the client cannot tell the two apart.
    e(6, "NOT_LEADER_OR_FOLLOWER", DependsOnAcks),
    // The produce timed out waiting for the ISR: appended on the leader already.
    e(7, "REQUEST_TIMED_OUT", Always(Indefinite)),
    e(10, "MESSAGE_TOO_LARGE", Always(Definite)),
    // Kafka's client-side code for a dropped connection; never on the wire from
    // a broker, listed so the workload maps it through the same table.
    e(13, "NETWORK_EXCEPTION", Always(Indefinite)),
    e(17, "INVALID_TOPIC_EXCEPTION", Always(Definite)),
    e(18, "RECORD_LIST_TOO_LARGE", Always(Definite)),
    // min.insync.replicas checked before the append (Kafka docs, min.insync.replicas).
    e(19, "NOT_ENOUGH_REPLICAS", Always(Definite)),
    // Kafka: "Messages are written to the log, but to fewer in-sync replicas than
    // required" — the bytes are in the leader's log and may be replicated later.
    e(20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", Always(Indefinite)),
    e(21, "INVALID_REQUIRED_ACKS", Always(Definite)),
    e(29, "TOPIC_AUTHORIZATION_FAILED", Always(Definite)),
    e(35, "UNSUPPORTED_VERSION", Always(Definite)),
    e(42, "INVALID_REQUEST", Always(Definite)),
    e(43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", Always(Definite)),
    // The idempotent producer's codes (KIP-98). The leader validates a batch's
    // producer epoch and sequence before it appends (Kafka's
    // ProducerAppendInfo), so a batch refused with one of these was not
    // appended — by this request.
    e(45, "OUT_OF_ORDER_SEQUENCE_NUMBER", Always(Definite)),
    // The batch is a retry of one already appended: it happened. The
    // idempotent client counts it a success before this table is asked;
    // anyone else who sees it must not call the write failed.
    e(46, "DUPLICATE_SEQUENCE_NUMBER", Always(Indefinite)),
    e(47, "INVALID_PRODUCER_EPOCH", Always(Definite)),
    // A disk error can strike mid-append: part of the batch may be on disk.
    e(56, "KAFKA_STORAGE_ERROR", Always(Indefinite)),
    // The leader holds no state for the producer id (KIP-360's case: it was
    // lost or expired); checked before the append.
    e(59, "UNKNOWN_PRODUCER_ID", Always(Definite)),
    e(74, "FENCED_LEADER_EPOCH", Always(Definite)),
    e(75, "UNKNOWN_LEADER_EPOCH", Always(Definite)),
    e(76, "UNSUPPORTED_COMPRESSION_TYPE", Always(Definite)),
    e(87, "INVALID_RECORD", Always(Definite)),
    // A newer epoch of the producer id exists (KIP-588); before the append.
    e(90, "PRODUCER_FENCED", Always(Definite)),
];

/// Definite produce errors that say only that this leader, now, did not
/// append the batch — the partition is between leaders, short of in-sync
/// replicas, or the request went to a node that is gone — so the same batch
/// may yet succeed elsewhere or a moment later. Kafka's producer retries
/// them (each is a `RetriableException`); an idempotent send whose earlier
/// attempt may have landed retries them too, rather than give up on a
/// sequence whose fate it does not know. Every other definite error ends it.
pub const RETRIABLE_PRODUCE_ERRORS: &[i16] = &[
    3,  // UNKNOWN_TOPIC_OR_PARTITION: a broker not (yet) told of the partition
    5,  // LEADER_NOT_AVAILABLE
    6,  // NOT_LEADER_OR_FOLLOWER
    19, // NOT_ENOUGH_REPLICAS
    74, // FENCED_LEADER_EPOCH
    75, // UNKNOWN_LEADER_EPOCH
];

/// Whether a produce that failed with `code` may succeed if sent again.
pub fn produce_retriable(code: i16) -> bool {
    RETRIABLE_PRODUCE_ERRORS.contains(&code)
}

const fn e(code: i16, name: &'static str, produce: Produce) -> KafkaError {
    KafkaError {
        code,
        name,
        produce,
    }
}

/// Looks a code up in the table.
pub fn kafka_error(code: i16) -> Option<&'static KafkaError> {
    KAFKA_ERRORS.iter().find(|err| err.code == code)
}

/// The outcome of a produce sent with `acks` that the broker answered `code`
/// (non-zero). A code missing from the table is indefinite: not knowing what
/// an error means is no proof the write did not happen.
pub fn produce_outcome(code: i16, acks: i16) -> Outcome {
    match kafka_error(code).map(|err| err.produce) {
        Some(Always(outcome)) => outcome,
        Some(DependsOnAcks) if acks == -1 => Indefinite,
        Some(DependsOnAcks) => Definite,
        None => Indefinite,
    }
}

/// A read (fetch, list offsets, metadata) changes nothing, so any answered
/// error is definite; only a transport failure leaves it `info`.
pub fn read_outcome(_code: i16) -> Outcome {
    Definite
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_named() {
        for (i, a) in KAFKA_ERRORS.iter().enumerate() {
            assert!(!a.name.is_empty());
            for b in &KAFKA_ERRORS[i + 1..] {
                assert_ne!(a.code, b.code, "{} and {}", a.name, b.name);
            }
        }
    }

    #[test]
    fn after_append_and_timeouts_are_indefinite() {
        assert_eq!(produce_outcome(20, -1), Indefinite);
        assert_eq!(produce_outcome(7, -1), Indefinite);
        assert_eq!(produce_outcome(13, 1), Indefinite);
        assert_eq!(produce_outcome(19, -1), Definite);
    }

    #[test]
    fn not_leader_is_indefinite_only_with_acks_all() {
        assert_eq!(produce_outcome(6, -1), Indefinite);
        assert_eq!(produce_outcome(6, 1), Definite);
        assert_eq!(produce_outcome(6, 0), Definite);
    }

    #[test]
    fn idempotence_refusals_are_definite_and_retriable_codes_are_named() {
        for code in [45, 47, 59, 90] {
            assert_eq!(produce_outcome(code, -1), Definite, "{code}");
            assert!(!produce_retriable(code), "{code}");
        }
        // A duplicate was appended once already: never a failure.
        assert_eq!(produce_outcome(46, -1), Indefinite);
        for &code in RETRIABLE_PRODUCE_ERRORS {
            assert!(kafka_error(code).is_some(), "{code} is in the table");
        }
    }

    #[test]
    fn an_unknown_code_is_indefinite() {
        assert_eq!(produce_outcome(9999, 1), Indefinite);
        assert_eq!(
            kafka_error(20).unwrap().name,
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
        );
    }
}
