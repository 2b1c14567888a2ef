//! The idempotent producer's calls (KIP-98): InitProducerId, which hands out
//! a producer id and epoch, and Produce with every batch stamped with them
//! and a sequence, so a leader can tell a retried batch from a new one. The
//! client keeps no producer state itself: the sequences a producer is at
//! belong to its owner (workload/producer.rs), which decides what to resend.
//! A broker's answer to a batch it already holds — success with the original
//! offset, or on older brokers DUPLICATE_SEQUENCE_NUMBER — is a success here:
//! the batch is in the log once.

use std::ops::RangeInclusive;
use std::time::Duration;

use kafka_protocol::messages::{InitProducerIdRequest, TransactionalId};

use super::*;

/// The InitProducerId versions this client speaks; the highest the broker
/// also offers is used. v0 is Kafka 0.11's; v2 is flexible (KIP-482), v3 adds
/// the producer id and epoch a producer asks to bump (KIP-360, sent as -1
/// here: this client asks for a new id instead), v4 may answer PRODUCER_FENCED
/// (KIP-588). Each asks the same thing of a non-transactional producer.
pub const INIT_PRODUCER_ID_VERSIONS: RangeInclusive<i16> = 0..=4;

/// Kafka's `InitProducerIdRequest.NO_TRANSACTION_TIMEOUT_MS`: the timeout an
/// idempotent producer without a transactional id sends (the broker ignores
/// it: there is no transaction to time out).
const NO_TRANSACTION_TIMEOUT_MS: i32 = i32::MAX;

/// DUPLICATE_SEQUENCE_NUMBER: the batch is a retry of one the leader already
/// appended. Kafka's producer counts it a success (Sender.java); brokers
/// since Kafka 1.0 answer most duplicates with success and the original
/// offset instead (KAFKA-5793).
pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;

impl KafkaClient {
    /// A new producer id and epoch for a producer without a transactional id
    /// (any broker may answer one: no coordinator is involved), in the
    /// highest version both sides speak. A broker that offers no version
    /// this client speaks is [`ClientError::Unsupported`]; an answered error
    /// code is [`ClientError::Broker`].
    pub async fn init_producer_id(
        &mut self,
        deadline: Duration,
    ) -> Result<ProducerIdAndEpoch, ClientError> {
        self.init_producer(None, NO_TRANSACTION_TIMEOUT_MS, deadline)
            .await
    }

    /// InitProducerId for `transactional_id` (none: an idempotent producer
    /// without one) with its transaction timeout.
    pub(super) async fn init_producer(
        &mut self,
        transactional_id: Option<TransactionalId>,
        transaction_timeout_ms: i32,
        deadline: Duration,
    ) -> Result<ProducerIdAndEpoch, ClientError> {
        let version = self.init_producer_id_version()?;
        let req = InitProducerIdRequest::default()
            .with_transactional_id(transactional_id)
            .with_transaction_timeout_ms(transaction_timeout_ms);
        let resp = self.call(&req, version, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        Ok(ProducerIdAndEpoch {
            producer_id: resp.producer_id.0,
            producer_epoch: resp.producer_epoch,
        })
    }

    /// [`KafkaClient::produce`] by an idempotent producer: every batch carries
    /// `stamp`'s producer id and epoch, and sequences counting on from its
    /// base sequence. DUPLICATE_SEQUENCE_NUMBER is returned as a success,
    /// with the offset the broker sent (-1 when it could not say).
    pub async fn produce_idempotent(
        &mut self,
        topic: &str,
        partition: i32,
        records: &[ProduceRecord],
        options: &ProduceOptions,
        stamp: &ProducerStamp,
        deadline: Duration,
    ) -> Result<Produced, ClientError> {
        self.produce_stamped(topic, partition, records, options, Some(stamp), deadline)
            .await
    }

    pub(super) fn init_producer_id_version(&self) -> Result<i16, ClientError> {
        let ours = INIT_PRODUCER_ID_VERSIONS;
        let unsupported = |offered: String| ClientError::Unsupported {
            api: ApiKey::InitProducerId,
            version: *ours.end(),
            offered,
        };
        let (min, max) = self
            .init_producer_id_offered
            .ok_or_else(|| unsupported("none".to_string()))?;
        let version = max.min(*ours.end());
        if version < min.max(*ours.start()) {
            return Err(unsupported(format!("v{min}-v{max}")));
        }
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::RecordBatchDecoder;

    use super::super::calls::encode_batches;
    use super::*;

    fn records(n: usize) -> Vec<ProduceRecord> {
        (0..n)
            .map(|i| ProduceRecord::value(i.to_string()))
            .collect()
    }

    /// (producer id, epoch, base sequence, records) of each encoded batch.
    fn batches(
        stamp: Option<&ProducerStamp>,
        n: usize,
        per_batch: usize,
    ) -> Vec<(i64, i16, i32, usize)> {
        let options = ProduceOptions {
            records_per_batch: per_batch,
            ..ProduceOptions::default()
        };
        let mut bytes = encode_batches(&records(n), &options, stamp).unwrap();
        RecordBatchDecoder::decode_all(&mut bytes)
            .unwrap()
            .into_iter()
            .map(|set| {
                let first = &set.records[0];
                (
                    first.producer_id,
                    first.producer_epoch,
                    first.sequence,
                    set.records.len(),
                )
            })
            .collect()
    }

    #[test]
    fn stamped_batches_carry_the_producer_and_consecutive_base_sequences() {
        let stamp = ProducerStamp {
            producer: ProducerIdAndEpoch {
                producer_id: 4000,
                producer_epoch: 2,
            },
            base_sequence: 7,
        };
        assert_eq!(
            batches(Some(&stamp), 5, 2),
            vec![(4000, 2, 7, 2), (4000, 2, 9, 2), (4000, 2, 11, 1)]
        );
        // A plain producer's batches are as before: no producer, sequence -1.
        assert_eq!(batches(None, 3, 2), vec![(-1, -1, -1, 2), (-1, -1, -1, 1)]);
    }

    #[test]
    fn sequences_wrap_to_zero_as_kafka_counts_them() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        let stamp = ProducerStamp {
            producer: ProducerIdAndEpoch {
                producer_id: 1,
                producer_epoch: 0,
            },
            base_sequence: i32::MAX,
        };
        // The second batch starts past the wrap, at 0.
        let got = batches(Some(&stamp), 2, 1);
        assert_eq!(
            got.iter().map(|b| b.2).collect::<Vec<_>>(),
            vec![i32::MAX, 0]
        );
    }

    #[test]
    fn the_highest_init_producer_id_version_both_speak_is_used() {
        let version = |offered| {
            let client = KafkaClient {
                addr: String::new(),
                stream: None,
                next_correlation_id: 0,
                client_id: String::new(),
                response_bytes_max: RESPONSE_BYTES_MAX_DEFAULT,
                init_producer_id_offered: offered,
                fetch_version: FETCH_VERSION,
                fetch_max_wait_floor_ms: 0,
                join_group_version: JOIN_GROUP_VERSION,
            };
            client.init_producer_id_version()
        };
        assert_eq!(version(Some((0, 1))).unwrap(), 1);
        assert_eq!(version(Some((0, 5))).unwrap(), 4);
        let none = version(None).unwrap_err();
        assert!(none.to_string().contains("InitProducerId"), "{none}");
        assert!(none.to_string().contains("offers none"), "{none}");
        let too_new = version(Some((5, 6))).unwrap_err();
        assert!(too_new.to_string().contains("v5-v6"), "{too_new}");
    }
}
