//! The harness's own Kafka client: the workload's op-recording clients,
//! observe/'s replica probes and the run's topic setup all speak through it.
//! It uses nothing else of this crate and never the broker crate: Kafka's wire
//! protocol through `kafka-protocol` only, so it works against any
//! Kafka-format broker.
//!
//! One async connection to one broker, one request in flight at a time, on
//! `kafka-protocol`'s generated messages. Every call runs under a deadline and
//! ends in a typed outcome: the broker's answer, the broker's error code, a
//! timeout, or a refused or dropped connection — the distinctions a history's
//! ok/fail/info is built on. After a timeout or a lost connection the
//! connection is discarded (a late response could otherwise be read as the
//! answer to the next request); later calls report [`ClientError::Closed`].

mod calls;
mod groups;
mod idempotent;
mod transactions;
mod txn_offsets;
mod types;

pub use groups::{Coordinator, Joined, MemberTimeouts, decode_assignment, encode_assignment};
pub use idempotent::{DUPLICATE_SEQUENCE_NUMBER, INIT_PRODUCER_ID_VERSIONS};
pub use txn_offsets::{TxnMember, TxnOffset};
pub use types::{
    Compression, FetchOptions, Fetched, FetchedRaw, FetchedRecord, Metadata, MetadataBroker,
    MetadataPartition, MetadataTopic, OffsetSpec, ProduceOptions, ProduceRecord, Produced,
    ProducerIdAndEpoch, ProducerStamp, ReplicaOffsets, increment_sequence,
};

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
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
/// Not asked for in the handshake: only the topic-lives workload deletes,
/// and a system without DeleteTopics fails those ops alone.
const DELETE_TOPICS_VERSION: i16 = 4;

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
    /// The broker's error `code` as an error, named as kafka-protocol names
    /// it (for a code a caller found in an answer, such as Metadata's).
    pub fn broker(code: i16) -> ClientError {
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

/// A connection to one broker.
#[derive(Debug)]
pub struct KafkaClient {
    addr: String,
    stream: Option<TcpStream>,
    next_correlation_id: i32,
    client_id: String,
    response_bytes_max: usize,
    /// The InitProducerId versions the broker offered in its ApiVersions
    /// answer (min, max); `None` when it offers none. Not required at
    /// connect: only an idempotent producer needs it, and a plain one must
    /// still work against a broker without it.
    init_producer_id_offered: Option<(i16, i16)>,
    /// The Fetch version this connection reads with.
    fetch_version: i16,
    /// The least `max_wait_ms` its Fetch requests ask for.
    fetch_max_wait_floor_ms: i32,
    /// The JoinGroup version this connection joins with.
    join_group_version: i16,
}

// The JoinGroup version subscribed consumers join with (the classic protocol:
// KIP-62's rebalance timeout; JoinGroup v4, at which a first join is
// answered MEMBER_ID_REQUIRED with the id to join again with, KIP-394, as
// every client since Kafka 2.2 joins. v2 was used first, and tansu 0.6.0
// answers even v2 with MEMBER_ID_REQUIRED, which Kafka sends only from v4
// on: docs/findings/tansu-member-id-required-below-v4.md).
const JOIN_GROUP_VERSION: i16 = 4;

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
            init_producer_id_offered: None,
            fetch_version: FETCH_VERSION,
            fetch_max_wait_floor_ms: 0,
            join_group_version: JOIN_GROUP_VERSION,
        };
        client.check_api_versions(connect_timeout).await?;
        Ok(client)
    }

    /// Reads with Fetch `version` instead of the client's own (`None`
    /// keeps it): a system whose answers at the client's version are
    /// malformed says so in its file (`[client] fetch_version`).
    pub fn set_fetch_version(&mut self, version: Option<i16>) {
        self.fetch_version = version.unwrap_or(FETCH_VERSION);
    }

    /// Asks every Fetch to wait at least `ms` (`None`: as each asks): the
    /// system file's `[client] fetch_max_wait_ms`.
    pub fn set_fetch_max_wait(&mut self, ms: Option<i32>) {
        self.fetch_max_wait_floor_ms = ms.unwrap_or(0);
    }

    /// Joins groups with JoinGroup `version` instead of the client's own
    /// (`None` keeps it): the system file's `[client] join_group_version`.
    pub fn set_join_group_version(&mut self, version: Option<i16>) {
        self.join_group_version = version.unwrap_or(JOIN_GROUP_VERSION);
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
        self.init_producer_id_offered = resp
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::InitProducerId as i16)
            .map(|k| (k.min_version, k.max_version));
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
}

fn api(key: i16) -> String {
    ApiKey::try_from(key)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|_| format!("api {key}"))
}

fn missing(api: &str, topic: &str, partition: i32) -> ClientError {
    ClientError::Protocol(format!("{api} answer lacks {topic}-{partition}"))
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
