//! One async connection to one broker, one request in flight at a time, on
//! `kafka-protocol`'s generated messages. Every call runs under a deadline and
//! ends in a typed outcome: the broker's answer, the broker's error code, a
//! timeout, or a refused or dropped connection — the distinctions a history's
//! ok/fail/info is built on. After a timeout or a lost connection the
//! connection is discarded (a late response could otherwise be read as the
//! answer to the next request); later calls report [`ClientError::Closed`].

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, CreateTopicsRequest, FetchRequest, ListOffsetsRequest,
    MetadataRequest, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression as WireCompression, Record, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The versions this client speaks. All are inside what `epochal-broker`
/// advertises (broker/README.md) and what Kafka 2.4+ brokers accept; the
/// ApiVersions handshake checks them against the broker before any other call.
const API_VERSIONS_VERSION: i16 = 3;
const METADATA_VERSION: i16 = 9;
const PRODUCE_VERSION: i16 = 9;
const FETCH_VERSION: i16 = 12;
const LIST_OFFSETS_VERSION: i16 = 7;
const CREATE_TOPICS_VERSION: i16 = 4;

/// Kafka's debugging consumer replica id (`Request.DebuggingConsumerId`,
/// `ListOffsetsRequest.DEBUGGING_REPLICA_ID`). Kafka's ReplicaManager
/// (core/src/main/scala/kafka/server/ReplicaManager.scala) requires the leader
/// for every fetch or ListOffsets except one carrying this id: its
/// `fetchOnlyFromLeader` is false for it alone. Such a Fetch reads the asked
/// replica up to that replica's high watermark and answers with that HW; such a
/// ListOffsets latest gets no isolation level (only -1 does) and so answers
/// that replica's log end offset.
const DEBUGGING_REPLICA_ID: i32 = -2;

/// OFFSET_OUT_OF_RANGE: the log was truncated below an offset just listed.
const OFFSET_OUT_OF_RANGE: i16 = 1;

/// How often [`KafkaClient::replica_offsets_within`] reads its two offsets
/// again when appends or a truncation raced its two requests.
const REPLICA_OFFSETS_ATTEMPTS: usize = 3;

/// The whole-call deadline of [`KafkaClient::replica_offsets`].
pub const REPLICA_OFFSETS_DEADLINE: Duration = Duration::from_secs(5);

/// Responses larger than this are refused by default: a corrupt or hostile
/// size prefix must not make the harness allocate gigabytes.
pub const RESPONSE_BYTES_MAX_DEFAULT: usize = 64 << 20;

/// Why a call did not return the broker's successful answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The broker answered with a non-zero error code: a definite outcome
    /// or not depending on the code (the history's table decides).
    #[error("broker answered error code {code} ({name})")]
    Broker { code: i16, name: String },
    /// The deadline passed with no answer; the request may or may not have
    /// taken effect.
    #[error("no answer within {deadline_ms} ms")]
    Timeout { deadline_ms: u64 },
    /// Nothing listened at the address: the request was never sent.
    #[error("connection refused by {addr}")]
    Refused { addr: String },
    /// The connection broke (EOF, reset) after it was established; a request
    /// in flight may or may not have taken effect.
    #[error("connection dropped: {0}")]
    Dropped(std::io::Error),
    /// Connecting failed for another reason than a refusal.
    #[error("connect to {addr} failed: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    /// The connection was discarded by an earlier timeout or failure.
    #[error("connection closed after an earlier failure")]
    Closed,
    /// The broker does not speak a version this client needs.
    #[error("broker does not support {api:?} v{version} (it offers {offered})")]
    Unsupported {
        api: ApiKey,
        version: i16,
        offered: String,
    },
    /// A response that does not fit the request: wrong correlation id, a frame
    /// above the size limit, an undecodable body or a missing partition.
    #[error("protocol violation: {0}")]
    Protocol(String),
}

impl ClientError {
    fn broker(code: i16) -> ClientError {
        let name = kafka_protocol::ResponseError::try_from_code(code)
            .map(|e| format!("{e:?}"))
            .unwrap_or_else(|| "unknown".to_string());
        ClientError::Broker { code, name }
    }

    /// The broker's error code, when the broker answered with one.
    pub fn code(&self) -> Option<i16> {
        match self {
            ClientError::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A record batch's compression codec (attributes bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn wire(self) -> WireCompression {
        match self {
            Compression::None => WireCompression::None,
            Compression::Gzip => WireCompression::Gzip,
            Compression::Snappy => WireCompression::Snappy,
            Compression::Lz4 => WireCompression::Lz4,
            Compression::Zstd => WireCompression::Zstd,
        }
    }
}

/// One value to produce, with an optional key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRecord {
    pub key: Option<Bytes>,
    pub value: Bytes,
}

impl ProduceRecord {
    pub fn value(value: impl Into<Bytes>) -> ProduceRecord {
        ProduceRecord {
            key: None,
            value: value.into(),
        }
    }

    pub fn keyed(key: impl Into<Bytes>, value: impl Into<Bytes>) -> ProduceRecord {
        ProduceRecord {
            key: Some(key.into()),
            value: value.into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProduceOptions {
    /// 0, 1 or -1 (all), as Kafka's producer `acks`.
    pub acks: i16,
    /// Records are cut into batches of at most this many, all sent in one
    /// request; at least 1.
    pub records_per_batch: usize,
    pub compression: Compression,
    /// The broker's own wait for acks=all (the request's `timeout_ms`).
    pub timeout_ms: i32,
}

impl Default for ProduceOptions {
    fn default() -> Self {
        ProduceOptions {
            acks: -1,
            records_per_batch: 1,
            compression: Compression::None,
            timeout_ms: 10_000,
        }
    }
}

/// A produce the broker accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Produced {
    /// The offset of the first record; -1 for acks=0, which gets no answer.
    pub base_offset: i64,
}

#[derive(Debug, Clone)]
pub struct FetchOptions {
    pub max_bytes: i32,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            max_bytes: 1 << 20,
            max_wait_ms: 100,
            min_bytes: 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// One fetch's answer for one partition: records at or above the fetch offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub high_watermark: i64,
    pub records: Vec<FetchedRecord>,
}

/// ListOffsets' two lookups this client makes (no timestamps: no time index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    /// The log end for the broker, which for a client is the high watermark.
    Latest,
}

/// One replica's own high watermark and log end offset, as the replica itself
/// reports them (leader or follower), read with the debugging replica id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaOffsets {
    pub high_watermark: i64,
    pub log_end_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataBroker {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataPartition {
    pub partition: i32,
    pub error_code: i16,
    /// -1 when the partition has no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataTopic {
    pub name: String,
    pub error_code: i16,
    pub partitions: Vec<MetadataPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub brokers: Vec<MetadataBroker>,
    pub controller_id: i32,
    pub topics: Vec<MetadataTopic>,
}

impl Metadata {
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&MetadataPartition> {
        self.topics
            .iter()
            .find(|t| t.name == topic)?
            .partitions
            .iter()
            .find(|p| p.partition == partition)
    }
}

/// A connection to one broker.
#[derive(Debug)]
pub struct KafkaClient {
    addr: String,
    stream: Option<TcpStream>,
    next_correlation_id: i32,
    client_id: String,
    response_bytes_max: usize,
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn deadline_ms(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

/// A read or write failure on an established connection.
fn dropped(e: std::io::Error) -> ClientError {
    ClientError::Dropped(e)
}

/// A sessionless read-uncommitted Fetch of one partition, as `replica_id`
/// (-1 a consumer, -2 Kafka's debugging consumer).
fn fetch_request(
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
    /// Connect to `addr` within `connect_timeout` and check, through
    /// ApiVersions (under the same deadline), that the broker speaks every
    /// version this client uses.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        connect_timeout: Duration,
    ) -> Result<KafkaClient, ClientError> {
        let stream = match tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await {
            Err(_) => {
                return Err(ClientError::Timeout {
                    deadline_ms: deadline_ms(connect_timeout),
                });
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(ClientError::Refused {
                    addr: addr.to_string(),
                });
            }
            Ok(Err(source)) => {
                return Err(ClientError::Connect {
                    addr: addr.to_string(),
                    source,
                });
            }
            Ok(Ok(s)) => s,
        };
        // Requests are small and latency matters more than packing.
        let _ = stream.set_nodelay(true);
        let mut client = KafkaClient {
            addr: addr.to_string(),
            stream: Some(stream),
            next_correlation_id: 0,
            client_id: client_id.to_string(),
            response_bytes_max: RESPONSE_BYTES_MAX_DEFAULT,
        };
        client.check_api_versions(connect_timeout).await?;
        Ok(client)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Refuse response frames above `bytes`.
    pub fn set_response_bytes_max(&mut self, bytes: usize) {
        self.response_bytes_max = bytes;
    }

    /// False once a timeout or failure discarded the connection.
    pub fn is_connected(&self) -> bool {
        self.stream.is_some()
    }

    async fn check_api_versions(&mut self, deadline: Duration) -> Result<(), ClientError> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("epochal"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let resp = self.call(&req, API_VERSIONS_VERSION, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        let needed = [
            (ApiKey::Metadata, METADATA_VERSION),
            (ApiKey::Produce, PRODUCE_VERSION),
            (ApiKey::Fetch, FETCH_VERSION),
            (ApiKey::ListOffsets, LIST_OFFSETS_VERSION),
            (ApiKey::CreateTopics, CREATE_TOPICS_VERSION),
        ];
        for (api, version) in needed {
            let offered = resp.api_keys.iter().find(|k| k.api_key == api as i16);
            match offered {
                Some(k) if (k.min_version..=k.max_version).contains(&version) => {}
                other => {
                    return Err(ClientError::Unsupported {
                        api,
                        version,
                        offered: other
                            .map(|k| format!("v{}-v{}", k.min_version, k.max_version))
                            .unwrap_or_else(|| "none".to_string()),
                    });
                }
            }
        }
        Ok(())
    }

    /// Send one request and read its response, all within `deadline`. Any
    /// failure but a decoded response discards the connection.
    async fn call<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        deadline: Duration,
    ) -> Result<R::Response, ClientError> {
        self.call_maybe_unanswered(req, version, deadline, true)
            .await?
            .ok_or_else(|| ClientError::Protocol("no response".to_string()))
    }

    /// [`KafkaClient::call`] for a request the broker may not answer (Kafka
    /// sends nothing back to an acks=0 produce).
    async fn call_maybe_unanswered<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        deadline: Duration,
        expects_response: bool,
    ) -> Result<Option<R::Response>, ClientError> {
        let outcome =
            tokio::time::timeout(deadline, self.exchange(req, version, expects_response)).await;
        match outcome {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => {
                self.stream = None;
                Err(e)
            }
            Err(_) => {
                self.stream = None;
                Err(ClientError::Timeout {
                    deadline_ms: deadline_ms(deadline),
                })
            }
        }
    }

    async fn exchange<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        expects_response: bool,
    ) -> Result<Option<R::Response>, ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let frame = self.frame(req, version, correlation_id)?;
        let response_bytes_max = self.response_bytes_max;
        let stream = self.stream.as_mut().ok_or(ClientError::Closed)?;
        stream.write_all(&frame).await.map_err(dropped)?;
        if !expects_response {
            return Ok(None);
        }
        let mut body = read_frame(stream, response_bytes_max).await?;
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| ClientError::Protocol(format!("response header: {e:#}")))?;
        if header.correlation_id != correlation_id {
            return Err(ClientError::Protocol(format!(
                "correlation id {} answers request {correlation_id}",
                header.correlation_id
            )));
        }
        R::Response::decode(&mut body, version)
            .map(Some)
            .map_err(|e| ClientError::Protocol(format!("{} v{version}: {e:#}", api(R::KEY))))
    }

    fn frame<R: Request>(
        &self,
        req: &R,
        version: i16,
        correlation_id: i32,
    ) -> Result<BytesMut, ClientError> {
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&[0; 4]);
        header
            .encode(&mut frame, R::header_version(version))
            .and_then(|()| req.encode(&mut frame, version))
            .map_err(|e| ClientError::Protocol(format!("encoding request: {e:#}")))?;
        let size = i32::try_from(frame.len() - 4)
            .map_err(|_| ClientError::Protocol("request above 2 GiB".to_string()))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        Ok(frame)
    }

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

    /// Create one topic (setup, not workload): the broker never auto-creates.
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
        let batches = encode_batches(records, options)?;
        let req = ProduceRequest::default()
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
        let req = fetch_request(-1, topic, partition, offset, options);
        let resp = self.call(&req, FETCH_VERSION, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        let p = resp
            .responses
            .iter()
            .filter(|t| t.topic.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| missing("Fetch", topic, partition))?;
        if p.error_code != 0 {
            return Err(ClientError::broker(p.error_code));
        }
        let mut records = Vec::new();
        if let Some(bytes) = &p.records {
            let mut bytes = bytes.clone();
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
        }
        Ok(Fetched {
            high_watermark: p.high_watermark,
            records,
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
        self.list_offset_as(-1, topic, partition, spec, deadline)
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
        let req = fetch_request(DEBUGGING_REPLICA_ID, topic, partition, offset, &options);
        let resp = self.call(&req, FETCH_VERSION, deadline).await?;
        if resp.error_code != 0 {
            return Err(ClientError::broker(resp.error_code));
        }
        let p = resp
            .responses
            .iter()
            .filter(|t| t.topic.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| missing("Fetch", topic, partition))?;
        match p.error_code {
            0 => Ok(p.high_watermark),
            code => Err(ClientError::broker(code)),
        }
    }

    /// ListOffsets with the replica id `replica_id`: -1 a client, -2 the
    /// debugging replica id (latest is then the asked replica's LEO).
    async fn list_offset_as(
        &mut self,
        replica_id: i32,
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
            .with_isolation_level(0)
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

fn api(key: i16) -> String {
    ApiKey::try_from(key)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|_| format!("api {key}"))
}

fn missing(api: &str, topic: &str, partition: i32) -> ClientError {
    ClientError::Protocol(format!("{api} answer lacks {topic}-{partition}"))
}

fn encode_batches(
    records: &[ProduceRecord],
    options: &ProduceOptions,
) -> Result<Bytes, ClientError> {
    let per_batch = options.records_per_batch.max(1);
    let mut out = BytesMut::new();
    for chunk in records.chunks(per_batch) {
        let batch: Vec<Record> = chunk
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                transactional: false,
                control: false,
                // The leader stamps its epoch and offsets on append.
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // No idempotence, so the batch's base sequence is -1; the
                // encoder starts a new batch wherever offset - sequence
                // changes, so the records count on from it.
                sequence: (i as i32).wrapping_sub(1),
                timestamp: 0,
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

/// Read one response frame, refusing a size prefix that is negative or above
/// `bytes_max` before allocating anything for it.
async fn read_frame(stream: &mut TcpStream, bytes_max: usize) -> Result<Bytes, ClientError> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await.map_err(dropped)?;
    let size = i32::from_be_bytes(size);
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= bytes_max)
        .ok_or_else(|| {
            ClientError::Protocol(format!(
                "response frame of {size} bytes (limit {bytes_max})"
            ))
        })?;
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).await.map_err(dropped)?;
    Ok(Bytes::from(body))
}
