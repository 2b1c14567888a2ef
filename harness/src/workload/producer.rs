//! The idempotent producer (KIP-98) each client process is under
//! `[workload] idempotent = true`. Before its first send it gets a producer
//! id and epoch from InitProducerId (no transactional id, so any live node
//! may answer); it keeps the next sequence of each partition; and every send
//! stamps its batches with the id, the epoch and consecutive sequences. A
//! send whose outcome is unknown is sent again — the same batches with the
//! same stamp — to whichever node etcd names leader now, after a short
//! backoff, until an answer settles it or the send's delivery timeout
//! passes. A leader that holds the batch already answers with its offset
//! rather than append it twice: that is the guarantee the `duplicates`
//! checker holds an idempotent run to.
//!
//! The op's type is what the attempts prove. Any success (a duplicate's
//! answer included) is `ok`. A refusal of the first attempt, with nothing
//! sent before it that may have landed, is `fail`: the sequence was not used
//! and the next send reuses it. Once an attempt's outcome was unknown, only
//! a success settles the send; a refusal that cannot change on a resend, or
//! the deadline, leaves it `info`, and the process (and its producer) is
//! retired. A process never runs two sends at once, so sequences are never
//! in flight out of order.
//!
//! Here: the producer's state and the rules that read an attempt's answer;
//! the send that applies them, attempt by attempt, is send.rs.

use std::collections::BTreeMap;
use std::time::Duration;

use super::send_options::{SEND_MARGIN, send_outcome};
use crate::history::OpType;
use crate::history::kafka_errors::produce_retriable;
use crate::kafka_client::{
    ClientError, Produced, ProducerIdAndEpoch, ProducerStamp, increment_sequence,
};
use crate::node::NodeId;
use crate::schedule::PartitionRef;

/// Pause before a resend: Kafka's producer default `retry.backoff.ms`.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Bound on one node's InitProducerId answer, connecting included: a paused
/// or cut node must not spend the send's whole budget while another node
/// would answer at once.
pub const INIT_PRODUCER_ID_NODE_TIMEOUT: Duration = Duration::from_secs(2);

/// How old etcd's view may be when a resend is routed (as the background
/// workers route their sends).
pub(super) const ROUTE_MAX_AGE: Duration = Duration::from_millis(20);

/// Kafka's codes that say the leader's producer state does not match this
/// producer's: OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
/// UNKNOWN_PRODUCER_ID, PRODUCER_FENCED. After one the producer is dropped
/// and the next send asks for a new id, as Kafka's producer resets its id
/// (before KIP-360) rather than send more sequences the leader will refuse.
pub(super) const STALE_PRODUCER_ERRORS: [i16; 4] = [45, 47, 59, 90];

/// The longest an idempotent send may take, every attempt and the
/// InitProducerId before the first included: twice one request's bound. One
/// request's bound alone would never retry a request that timed out (a
/// paused or cut leader), the case a retry is for; Kafka's own
/// `delivery.timeout.ms` must likewise cover `request.timeout.ms` and more.
pub fn delivery_timeout(request_timeout: Duration) -> Duration {
    2 * (request_timeout + SEND_MARGIN)
}

/// One process's producer: who it is, and each partition's next sequence.
#[derive(Debug)]
pub struct Producer {
    id: ProducerIdAndEpoch,
    next_sequence: BTreeMap<PartitionRef, i32>,
}

impl Producer {
    pub fn new(id: ProducerIdAndEpoch) -> Producer {
        Producer {
            id,
            next_sequence: BTreeMap::new(),
        }
    }

    /// The stamp of the next send to `partition`: sequences start at 0.
    pub fn stamp(&self, partition: &PartitionRef) -> ProducerStamp {
        ProducerStamp {
            producer: self.id,
            base_sequence: self.next_sequence.get(partition).copied().unwrap_or(0),
        }
    }

    /// `records` sent to `partition` are in its log: the next send's
    /// sequence follows them. Only a success moves it: a refused send's
    /// sequence was never used.
    pub fn acknowledged(&mut self, partition: &PartitionRef, records: usize) {
        let next = increment_sequence(
            self.stamp(partition).base_sequence,
            i32::try_from(records).unwrap_or(i32::MAX),
        );
        self.next_sequence.insert(partition.clone(), next);
    }
}

/// What one attempt's answer says of a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The batches are in the log (perhaps from an earlier attempt).
    Acked,
    /// They may or may not be.
    Unknown,
    /// This attempt appended nothing; `retriable`: a resend may succeed
    /// (another leader, more replicas in sync, a node back up).
    Refused { retriable: bool },
}

impl Attempt {
    /// `sent`: whether the produce request went out (a connection that
    /// could not be made, or failed its version check, never carried it).
    pub fn of(result: &Result<Produced, ClientError>, sent: bool) -> Attempt {
        let error = match result {
            Ok(_) => return Attempt::Acked,
            Err(error) => error,
        };
        if !sent {
            return Attempt::Refused {
                retriable: !matches!(error, ClientError::Unsupported { .. }),
            };
        }
        match send_outcome(error, -1) {
            OpType::Info => Attempt::Unknown,
            _ => Attempt::Refused {
                retriable: match error {
                    ClientError::Broker { code, .. } => produce_retriable(*code),
                    // Never sent: nothing listened or the connection was
                    // gone; the partition may be led elsewhere by now.
                    ClientError::Refused { .. }
                    | ClientError::Connect { .. }
                    | ClientError::Closed => true,
                    _ => false,
                },
            },
        }
    }

    /// What the send is after this attempt, `unknown_before` saying whether
    /// an earlier attempt's outcome was unknown; `None`: send it again.
    pub fn settles(self, unknown_before: bool) -> Option<OpType> {
        match (self, unknown_before) {
            (Attempt::Acked, _) => Some(OpType::Ok),
            (Attempt::Unknown, _) => None,
            // Nothing sent before may have landed, and this was refused.
            (Attempt::Refused { .. }, false) => Some(OpType::Fail),
            (Attempt::Refused { retriable: true }, true) => None,
            // An earlier attempt may have landed; a resend cannot tell.
            (Attempt::Refused { retriable: false }, true) => Some(OpType::Info),
        }
    }
}

/// Why a process got no producer id; the send it was for fails unstamped
/// with this as its error.
#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    /// A node does not speak InitProducerId; every node runs the same broker,
    /// so none does.
    #[error(
        "no producer id from {node}: {source}; `idempotent = true` needs a broker that answers InitProducerId"
    )]
    Unsupported {
        node: NodeId,
        #[source]
        source: ClientError,
    },
    /// No node answered before the send's deadline; each node's last error.
    #[error(
        "no producer id: no node answered InitProducerId within {elapsed_ms} ms ({})",
        node_errors(errors)
    )]
    NoAnswer {
        elapsed_ms: u128,
        errors: BTreeMap<NodeId, ClientError>,
    },
}

/// `b1: ...; b2: ...`.
fn node_errors(errors: &BTreeMap<NodeId, ClientError>) -> String {
    let errors: Vec<String> = errors.iter().map(|(n, e)| format!("{n}: {e}")).collect();
    errors.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(code: i16) -> Result<Produced, ClientError> {
        Err(ClientError::Broker {
            code,
            name: String::new(),
        })
    }

    fn timeout() -> Result<Produced, ClientError> {
        Err(ClientError::Timeout { deadline_ms: 1 })
    }

    #[test]
    fn a_success_settles_ok_whatever_came_before() {
        let ok = Ok(Produced { base_offset: 3 });
        for unknown_before in [false, true] {
            assert_eq!(
                Attempt::of(&ok, true).settles(unknown_before),
                Some(OpType::Ok)
            );
        }
    }

    #[test]
    fn an_unknown_outcome_is_sent_again() {
        // Timed out, dropped, NOT_LEADER_OR_FOLLOWER after a failover,
        // REQUEST_TIMED_OUT: the batch may be in the log.
        let dropped = Err(ClientError::Dropped(
            std::io::ErrorKind::ConnectionReset.into(),
        ));
        for result in [timeout(), dropped, broker(6), broker(7)] {
            let attempt = Attempt::of(&result, true);
            assert_eq!(attempt, Attempt::Unknown, "{result:?}");
            assert_eq!(attempt.settles(false), None);
            assert_eq!(attempt.settles(true), None);
        }
    }

    #[test]
    fn a_first_refusal_fails_and_a_later_one_is_info_or_retried() {
        // OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
        // UNKNOWN_PRODUCER_ID: definite, and a resend cannot change them.
        for code in [45, 47, 59] {
            let attempt = Attempt::of(&broker(code), true);
            assert_eq!(attempt, Attempt::Refused { retriable: false });
            assert_eq!(attempt.settles(false), Some(OpType::Fail), "{code}");
            assert_eq!(attempt.settles(true), Some(OpType::Info), "{code}");
        }
        // The old leader is gone or the new one short of replicas: after an
        // unknown outcome, try again; as the first answer, a plain failure.
        let refused = Err(ClientError::Refused {
            addr: "127.0.0.1:1".into(),
        });
        for attempt in [
            Attempt::of(&refused, true),
            Attempt::of(&broker(19), true),
            Attempt::of(&timeout(), false),
        ] {
            assert_eq!(attempt, Attempt::Refused { retriable: true });
            assert_eq!(attempt.settles(false), Some(OpType::Fail));
            assert_eq!(attempt.settles(true), None);
        }
    }

    #[test]
    fn sequences_count_per_partition_and_move_only_on_success() {
        let mut producer = Producer::new(ProducerIdAndEpoch {
            producer_id: 9,
            producer_epoch: 0,
        });
        let (t0, t1) = (PartitionRef::new("t", 0), PartitionRef::new("t", 1));
        assert_eq!(producer.stamp(&t0).base_sequence, 0);
        producer.acknowledged(&t0, 3);
        assert_eq!(producer.stamp(&t0).base_sequence, 3);
        assert_eq!(producer.stamp(&t1).base_sequence, 0);
        producer.acknowledged(&t0, 2);
        assert_eq!(producer.stamp(&t0).base_sequence, 5);
        assert_eq!(producer.stamp(&t0).producer.producer_id, 9);
    }

    #[test]
    fn the_delivery_timeout_leaves_room_for_a_retry_after_a_timed_out_request() {
        // A paused leader uses one request's whole bound; a backoff and a
        // second request the broker may wait its full acks=all time on must
        // still fit.
        for request in [Duration::from_millis(500), Duration::from_secs(10)] {
            let one = request + SEND_MARGIN;
            assert!(delivery_timeout(request) >= one + RETRY_BACKOFF + request);
        }
    }
}
