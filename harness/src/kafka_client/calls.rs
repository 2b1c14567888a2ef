//! The client's calls, one Kafka API each: Metadata, CreateTopics,
//! DeleteTopics, Produce,
//! Fetch, ListOffsets, and the debugging-consumer reads the observer uses to
//! ask one replica for its high watermark and log end offset.

use std::time::Duration;

use kafka_protocol::messages::fetch_response::PartitionData;

use super::*;

/// A sessionless read-uncommitted Fetch of one partition, as `replica_id`
/// (-1 a consumer, -2 Kafka's debugging consumer).
pub(super) fn fetch_request(
    replica_id: i32,
    topic: &str,
    partition: i32,
    offset: i64,
    options: &FetchOptions,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(options.max_wait_ms)
        .with_min_bytes(options.min_bytes)
        .with_max_bytes(options.max_bytes)
        .with_isolation_level(0)
        // No fetch sessions (KIP-227): epoch -1 asks for a full fetch.
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(options.max_bytes),
                ]),
        ])
}

impl KafkaClient {
    /// Metadata for `topics` (all topics when `None`); never auto-creates.
    pub async fn metadata(
        &mut self,
        topics: Option<&[&str]>,
        deadline: Duration,
    ) -> Result<Metadata, ClientError> {
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
                    .collect()
            }));
        let resp = self.call(&req, METADATA_VERSION, deadline).await?;
        Ok(Metadata {
            brokers: resp
                .brokers
                .iter()
                .map(|b| MetadataBroker {
                    node_id: b.node_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                })
                .collect(),
            controller_id: resp.controller_id.0,
            topics: resp
                .topics
                .iter()
                .map(|t| MetadataTopic {
                    name: t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                    error_code: t.error_code,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| MetadataPartition {
                            partition: p.partition_index,
                            error_code: p.error_code,
                            leader: p.leader_id.0,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    /// Create one topic (setup, not workload); the harness's Metadata never
    /// asks a broker to auto-create one.
    /// TOPIC_ALREADY_EXISTS comes back as [`ClientError::Broker`] with code 36.
    pub async fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        timeout_ms: i32,
        deadline: Duration,
    ) -> Result<(), ClientError> {
        let req = CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic_name(name))
                    .with_num_partitions(partitions)
                    .with_replication_factor(replication_factor),
            ])
            .with_timeout_ms(timeout_ms);
        let resp = self.call(&req, CREATE_TOPICS_VERSION, deadline).await?;
        let topic = resp
            .topics
            .iter()
            .find(|t| t.name.0.as_str() == name)
            .ok_or_else(|| ClientError::Protocol(format!("CreateTopics answer lacks {name}")))?;
        match topic.error_code {
            0 => Ok(()),
            code => Err(ClientError::broker(code)),
        }
    }

    /// Deletes one topic (the topic-lives workload and its liveness probe).
    /// A broker error comes back as [`ClientError::Broker`]: 3
    /// (UNKNOWN_TOPIC_OR_PARTITION) when no such topic is known, 7
    /// (REQUEST_TIMED_OUT) when the deletion did not complete within
    /// `timeout_ms` (KIP-4: the broker answers once every replica has
    /// deleted its log, or at the timeout).
    pub async fn delete_topic(
        &mut self,
        name: &str,
        timeout_ms: i32,
        deadline: Duration,
    ) -> Result<(), ClientError> {
        let req = DeleteTopicsRequest::default()
            .with_topic_names(vec![topic_name(name)])
            .with_timeout_ms(timeout_ms);
        let resp = self.call(&req, DELETE_TOPICS_VERSION, deadline).await?;
        let topic = resp
            .responses
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
            .ok_or_else(|| ClientError::Protocol(format!("DeleteTopics answer lacks {name}")))?;
        match topic.error_code {
            0 => Ok(()),
            code => Err(ClientError::broker(code)),
        }
    }

    /// Produce `records` to one partition as record batches v2 of at most
    /// `records_per_batch` records each, all in one request.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: &[ProduceRecord],
        options: &ProduceOptions,
        deadline: Duration,
    ) -> Result<Produced, ClientError> {
        self.produce_stamped(topic, partition, records, options, None, deadline)
            .await
    }

    /// [`KafkaClient::produce`], the batches stamped by an idempotent
    /// producer when `stamp` is given (idempotent.rs). The broker's
    /// DUPLICATE_SEQUENCE_NUMBER is a success for a stamped produce, with
    /// the offset the broker sent (-1 when it could not say).
    pub(super) async fn produce_stamped(
        &mut self,
        topic: &str,
        partition: i32,
        records: &[ProduceRecord],
        options: &ProduceOptions,
        stamp: Option<&ProducerStamp>,
        deadline: Duration,
    ) -> Result<Produced, ClientError> {
        self.produce_as(topic, partition, records, options, stamp, None, deadline)
            .await
    }

    /// [`Self::produce_stamped`], and with `transactional_id` the batches
    /// are marked transactional and the request names the id (KIP-98).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn produce_as(
        &mut self,
        topic: &str,
        partition: i32,
        records: &[ProduceRecord],
        options: &ProduceOptions,
        stamp: Option<&ProducerStamp>,
        transactional_id: Option<&str>,
        deadline: Duration,
    ) -> Result<Produced, ClientError> {
        let batches = encode_batches_as(records, options, stamp, transactional_id.is_some())?;
        let req = ProduceRequest::default()
            .with_transactional_id(transactional_id.map(|id| {
                kafka_protocol::messages::TransactionalId(StrBytes::from_string(id.to_owned()))
            }))
            .with_acks(options.acks)
            .with_timeout_ms(options.timeout_ms)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic_name(topic))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(batches)),
                    ]),
            ]);
        let Some(resp) = self
            .call_maybe_unanswered(&req, PRODUCE_VERSION, deadline, options.acks != 0)
            .await?
        else {
            return Ok(Produced { base_offset: -1 });
        };
        let p = resp
            .responses
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == partition)
            .ok_or_else(|| missing("Produce", topic, partition))?;
        match p.error_code {
            0 => Ok(Produced {
                base_offset: p.base_offset,
            }),
            DUPLICATE_SEQUENCE_NUMBER if stamp.is_some() => Ok(Produced {
                base_offset: p.base_offset,
            }),
            code => Err(ClientError::broker(code)),
        }
    }

    /// Fetch one partition from `offset` (read-uncommitted, as a consumer
    /// outside transactions reads): records up to the high watermark.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        options: &FetchOptions,
        deadline: Duration,
    ) -> Result<Fetched, ClientError> {
        let raw = self
            .fetch_raw(topic, partition, offset, options, deadline)
            .await?;
        let mut records = Vec::new();
        let mut bytes = raw.records;
        let sets = RecordBatchDecoder::decode_all(&mut bytes)
            .map_err(|e| ClientError::Protocol(format!("fetched batches: {e:#}")))?;
        for record in sets.into_iter().flat_map(|s| s.records) {
            // A compressed batch comes back whole (KIP-74), so it may start
            // below the asked offset; those records were not asked for.
            if record.offset >= offset && !record.control {
                records.push(FetchedRecord {
                    offset: record.offset,
                    key: record.key,
                    value: record.value,
                });
            }
        }
        Ok(Fetched {
            high_watermark: raw.high_watermark,
            records,
        })
    }

    /// [`KafkaClient::fetch`] without decoding: the partition's `records`
    /// bytes as the broker sent them (record batches back to back, whole
    /// batches that may start below `offset`, possibly ending in a partial
    /// batch cut by `max_bytes`), with the high watermark and log start
    /// offset the broker answered. For a reader that keeps the bytes, such as
    /// the final read that writes them out as Kafka segments.
    pub async fn fetch_raw(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        options: &FetchOptions,
        deadline: Duration,
    ) -> Result<FetchedRaw, ClientError> {
        let p = self
            .fetch_partition(-1, topic, partition, offset, options, deadline)
            .await?;
        Ok(FetchedRaw {
            high_watermark: p.high_watermark,
            log_start_offset: p.log_start_offset,
            records: p.records.unwrap_or_default(),
        })
    }

    /// The earliest offset or, for a client, the high watermark of a partition.
    pub async fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
        deadline: Duration,
    ) -> Result<i64, ClientError> {
        self.list_offset_as(-1, 0, topic, partition, spec, deadline)
            .await
    }

    /// The high watermark and log end offset of the replica of `topic`-`partition`
    /// on the broker this client is connected to — a follower as well as the
    /// leader — asked with Kafka's debugging replica id (-2), under
    /// [`REPLICA_OFFSETS_DEADLINE`]. See [`KafkaClient::replica_offsets_within`].
    pub async fn replica_offsets(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<ReplicaOffsets, ClientError> {
        self.replica_offsets_within(topic, partition, REPLICA_OFFSETS_DEADLINE)
            .await
    }

    /// [`KafkaClient::replica_offsets`] with every request inside `deadline`.
    /// Two requests with replica id -2 (see [`DEBUGGING_REPLICA_ID`]):
    /// ListOffsets latest answers the replica's LEO, then a Fetch at that
    /// offset (no wait, 1 byte) answers nothing but the replica's HW. They are
    /// two reads of a moving replica: if the HW read second is above the LEO
    /// read first (appends and HW moves raced them) or the LEO is out of range
    /// by the fetch (truncated meanwhile), both are read again, up to
    /// three times in all; after that a racing pair is returned as read.
    /// A broker that does not host the partition answers
    /// UNKNOWN_TOPIC_OR_PARTITION, one that hosts its log but has no role for
    /// it (yet) NOT_LEADER_OR_FOLLOWER, both as [`ClientError::Broker`].
    pub async fn replica_offsets_within(
        &mut self,
        topic: &str,
        partition: i32,
        deadline: Duration,
    ) -> Result<ReplicaOffsets, ClientError> {
        let end = tokio::time::Instant::now() + deadline;
        let remaining = || {
            let left = end.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                Err(ClientError::Timeout {
                    deadline_ms: deadline_ms(deadline),
                })
            } else {
                Ok(left)
            }
        };
        let mut attempt = 1;
        loop {
            let log_end_offset = self
                .list_offset_as(
                    DEBUGGING_REPLICA_ID,
                    0,
                    topic,
                    partition,
                    OffsetSpec::Latest,
                    remaining()?,
                )
                .await?;
            let high_watermark = self
                .debug_high_watermark(topic, partition, log_end_offset, remaining()?)
                .await;
            let last = attempt >= REPLICA_OFFSETS_ATTEMPTS;
            match high_watermark {
                Ok(high_watermark) if high_watermark <= log_end_offset || last => {
                    return Ok(ReplicaOffsets {
                        high_watermark,
                        log_end_offset,
                    });
                }
                Ok(_) => {}
                Err(e) if e.code() == Some(OFFSET_OUT_OF_RANGE) && !last => {}
                Err(e) => return Err(e),
            }
            attempt += 1;
        }
    }

    /// A Fetch with the debugging replica id at `offset` that returns at once
    /// and asks for one byte: only the answer's high watermark is used (a
    /// batch the broker returns whole anyway, KIP-74, is not decoded).
    async fn debug_high_watermark(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        deadline: Duration,
    ) -> Result<i64, ClientError> {
        let options = FetchOptions {
            max_bytes: 1,
            max_wait_ms: 0,
            min_bytes: 0,
        };
        let p = self
            .fetch_partition(
                DEBUGGING_REPLICA_ID,
                topic,
                partition,
                offset,
                &options,
                deadline,
            )
            .await?;
        Ok(p.high_watermark)
    }

    /// One partition's part of a Fetch answer, as `replica_id`; an error
    /// code, for the whole request or the partition, is the call's error.
    async fn fetch_partition(
        &mut self,
        replica_id: i32,
        topic: &str,
        partition: i32,
        offset: i64,
        options: &FetchOptions,
        deadline: Duration,
    ) -> Result<PartitionData, ClientError> {
        let req = fetch_request(replica_id, topic, partition, offset, options);
        self.fetch_one(req, topic, partition, deadline).await
    }

    /// Sends `req`, a Fetch of `topic`-`partition` alone, and answers that
    /// partition's part; an error code, for the whole request or the
    /// partition, is the call's error.
    pub(super) async fn fetch_one(
        &mut self,
        mut req: FetchRequest,
        topic: &str,
        partition: i32,
        deadline: Duration,
    ) -> Result<PartitionData, ClientError> {
        req.max_wait_ms = req.max_wait_ms.max(self.fetch_max_wait_floor_ms);
        let resp = self.call(&req, self.fetch_version, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        let p = resp
            .responses
            .into_iter()
            .filter(|t| t.topic.0.as_str() == topic)
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| missing("Fetch", topic, partition))?;
        match p.error_code {
            0 => Ok(p),
            code => Err(ClientError::broker(code)),
        }
    }

    /// ListOffsets with the replica id `replica_id`: -1 a client, -2 the
    /// debugging replica id (latest is then the asked replica's LEO); at
    /// `isolation` 0 (read_uncommitted: latest is the high watermark) or 1
    /// (read_committed: latest is the last stable offset, KIP-98).
    pub(super) async fn list_offset_as(
        &mut self,
        replica_id: i32,
        isolation: i8,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
        deadline: Duration,
    ) -> Result<i64, ClientError> {
        let timestamp = match spec {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
        };
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_isolation_level(isolation)
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(partition)
                            .with_timestamp(timestamp),
                    ]),
            ]);
        let resp = self.call(&req, LIST_OFFSETS_VERSION, deadline).await?;
        let p = resp
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| missing("ListOffsets", topic, partition))?;
        match p.error_code {
            0 => Ok(p.offset),
            code => Err(ClientError::broker(code)),
        }
    }
}

/// `records` as record batches v2 of at most `records_per_batch` records.
/// Unstamped, every batch has producer id, epoch and base sequence -1, as a
/// plain producer's do. Stamped, each batch carries the producer id and
/// epoch, and its base sequence is `stamp.base_sequence` plus the records
/// before it in the request.
#[cfg(test)]
pub(super) fn encode_batches(
    records: &[ProduceRecord],
    options: &ProduceOptions,
    stamp: Option<&ProducerStamp>,
) -> Result<Bytes, ClientError> {
    encode_batches_as(records, options, stamp, false)
}

/// [`encode_batches`], every batch marked transactional (attributes bit 4)
/// when `transactional`.
pub(super) fn encode_batches_as(
    records: &[ProduceRecord],
    options: &ProduceOptions,
    stamp: Option<&ProducerStamp>,
    transactional: bool,
) -> Result<Bytes, ClientError> {
    let per_batch = options.records_per_batch.max(1);
    let (producer_id, producer_epoch) = stamp.map_or((-1, -1), |s| {
        (s.producer.producer_id, s.producer.producer_epoch)
    });
    // CreateTime is the wall clock, as a Kafka producer stamps it: a record
    // stamped 0 (1970) is past every topic's retention.ms, and a broker that
    // enforces time retention may delete it once its segment rolls.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut out = BytesMut::new();
    for (n, chunk) in records.chunks(per_batch).enumerate() {
        let base_sequence = match stamp {
            Some(s) => {
                let before = i32::try_from(n * per_batch).unwrap_or(i32::MAX);
                increment_sequence(s.base_sequence, before)
            }
            // No idempotence: the batch's base sequence is -1.
            None => -1,
        };
        let batch: Vec<Record> = chunk
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                transactional,
                control: false,
                // The leader stamps its epoch and offsets on append.
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // The encoder takes the batch's base sequence from its first
                // record and starts a new batch wherever offset - sequence
                // changes, so the records count on from the base (wrapping as
                // i32 inside the batch, as the decoder reads them back; the
                // wire carries the base sequence alone).
                sequence: base_sequence.wrapping_add(i as i32),
                timestamp: now_ms,
                key: r.key.clone(),
                value: Some(r.value.clone()),
                headers: IndexMap::new(),
            })
            .collect();
        RecordBatchEncoder::encode(
            &mut out,
            &batch,
            &RecordEncodeOptions {
                version: 2,
                compression: options.compression.wire(),
            },
        )
        .map_err(|e| ClientError::Protocol(format!("encoding a record batch: {e:#}")))?;
    }
    Ok(out.freeze())
}
