//! A small blocking Kafka client for tests, on kafka-protocol's messages: one
//! connection, one request at a time, every read bounded by a timeout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, FetchRequest, InitProducerIdRequest, ListOffsetsRequest,
    MetadataRequest, MetadataResponse, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

pub const PRODUCE_VERSION: i16 = 9;
pub const FETCH_VERSION: i16 = 12;

/// (error code, high watermark, [(offset, value)]) of one fetched partition.
pub type Fetched = (i16, i64, Vec<(i64, Vec<u8>)>);

/// One record of a fetch, control records (transaction markers) included.
#[derive(Debug, Clone)]
pub struct FetchedRecord {
    pub offset: i64,
    pub producer_id: i64,
    /// A transaction marker: `Some(true)` a commit, `Some(false)` an abort.
    pub marker: Option<bool>,
    pub value: Vec<u8>,
}

/// A fetch at an isolation level: what a read_committed consumer is told.
#[derive(Debug, Clone)]
pub struct Isolated {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// (producer id, first offset) of each aborted transaction overlapped.
    pub aborted: Vec<(i64, i64)>,
    pub records: Vec<FetchedRecord>,
}

impl Isolated {
    /// The data records a read_committed consumer delivers: below the last
    /// stable offset, without an aborted transaction's (a producer's records
    /// from an aborted transaction's first offset to its abort marker), as
    /// Kafka's consumer `Fetcher` filters them.
    pub fn committed_values(&self) -> Vec<String> {
        let mut aborting = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for r in self
            .records
            .iter()
            .filter(|r| r.offset < self.last_stable_offset)
        {
            if self.aborted.contains(&(r.producer_id, r.offset)) {
                aborting.insert(r.producer_id);
            }
            match r.marker {
                Some(_) => {
                    aborting.remove(&r.producer_id);
                }
                None if aborting.contains(&r.producer_id) => {}
                None => out.push(String::from_utf8_lossy(&r.value).into_owned()),
            }
        }
        out
    }
}

pub struct KafkaClient {
    stream: TcpStream,
    next_correlation_id: i32,
}

pub fn topic(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// One record batch (magic 2, uncompressed) holding `values`.
pub fn batch(values: &[&[u8]]) -> Bytes {
    // A plain producer's batch: no producer id or epoch, base sequence -1.
    idempotent_batch(-1, -1, -1, values)
}

/// One batch as an idempotent producer sends it (KIP-98): producer id and epoch
/// in the header, sequences from `base_sequence`.
pub fn idempotent_batch(
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    values: &[&[u8]],
) -> Bytes {
    producer_batch(producer_id, producer_epoch, base_sequence, false, values)
}

/// [`idempotent_batch`] inside a transaction (the transactional bit, KIP-98).
pub fn transactional_batch(
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    values: &[&[u8]],
) -> Bytes {
    producer_batch(producer_id, producer_epoch, base_sequence, true, values)
}

fn producer_batch(
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    values: &[&[u8]],
) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: base_sequence.wrapping_add(i as i32),
            timestamp: 0,
            key: None,
            value: Some(Bytes::copy_from_slice(v)),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

impl KafkaClient {
    pub fn connect(addr: &str) -> std::io::Result<KafkaClient> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(15)))?;
        stream.set_nodelay(true)?;
        Ok(KafkaClient {
            stream,
            next_correlation_id: 1,
        })
    }

    pub fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Read one response frame (without its size prefix).
    pub fn read_frame(&mut self) -> std::io::Result<Bytes> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut buf)?;
        Ok(Bytes::from(buf))
    }

    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }

    /// True if the broker closed the connection (EOF within the read timeout).
    pub fn is_closed_by_peer(&mut self) -> bool {
        let mut b = [0u8; 1];
        // Closing with unread bytes in its receive buffer makes the broker's
        // kernel send a reset rather than a FIN; both mean closed.
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    }

    /// The encoded frame (size prefix included) of a request.
    pub fn frame<R: Request>(&mut self, req: &R, version: i16) -> (i32, BytesMut) {
        let cid = self.next_correlation_id;
        self.next_correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(cid)
            .with_client_id(Some(StrBytes::from_static_str("epochal-test")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .unwrap();
        req.encode(&mut body, version).unwrap();
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(&body);
        (cid, frame)
    }

    pub fn send<R: Request>(&mut self, req: &R, version: i16) -> std::io::Result<R::Response> {
        let (cid, frame) = self.frame(req, version);
        self.stream.write_all(&frame)?;
        let mut resp = self.read_frame()?;
        let header = ResponseHeader::decode(&mut resp, R::Response::header_version(version))
            .map_err(std::io::Error::other)?;
        assert_eq!(header.correlation_id, cid, "correlation id");
        R::Response::decode(&mut resp, version).map_err(std::io::Error::other)
    }

    /// InitProducerId at `version`; returns (error code, producer id, epoch).
    pub fn init_producer_id(
        &mut self,
        version: i16,
        transactional_id: Option<&str>,
    ) -> std::io::Result<(i16, i64, i16)> {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(
                transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))),
            )
            .with_transaction_timeout_ms(-1);
        let resp = self.send(&req, version)?;
        Ok((resp.error_code, resp.producer_id.0, resp.producer_epoch))
    }

    /// CreateTopics v4; returns the topic's error code.
    pub fn create_topic(&mut self, name: &str, partitions: i32, replication_factor: i16) -> i16 {
        let req = CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic(name))
                    .with_num_partitions(partitions)
                    .with_replication_factor(replication_factor),
            ])
            .with_timeout_ms(15_000);
        let resp = self.send(&req, 4).expect("CreateTopics");
        resp.topics[0].error_code
    }

    /// Metadata of `topics` (all when `None`), never asking the broker to
    /// create one (`metadata_creating` does).
    pub fn metadata(&mut self, topics: Option<&[&str]>) -> MetadataResponse {
        self.metadata_with(topics, false)
    }

    /// Metadata of `topics`, letting the broker auto-create unknown ones.
    pub fn metadata_creating(&mut self, topics: &[&str]) -> MetadataResponse {
        self.metadata_with(Some(topics), true)
    }

    fn metadata_with(&mut self, topics: Option<&[&str]>, create: bool) -> MetadataResponse {
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(create)
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| {
                        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                            .with_name(Some(topic(t)))
                    })
                    .collect()
            }));
        self.send(&req, 9).expect("Metadata")
    }

    /// Produce one batch; returns (error code, base offset).
    pub fn produce(
        &mut self,
        name: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
    ) -> std::io::Result<(i16, i64)> {
        self.produce_as(name, partition, records, acks, None)
    }

    /// [`Self::produce`] naming a transactional id, as a transactional
    /// producer's requests do (KIP-890's check needs it).
    pub fn produce_as(
        &mut self,
        name: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
        transactional_id: Option<&str>,
    ) -> std::io::Result<(i16, i64)> {
        let req = ProduceRequest::default()
            .with_transactional_id(transactional_id.map(|id| {
                kafka_protocol::messages::TransactionalId(
                    kafka_protocol::protocol::StrBytes::from_string(id.to_owned()),
                )
            }))
            .with_acks(acks)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic(name))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(records)),
                    ]),
            ]);
        let resp = self.send(&req, PRODUCE_VERSION)?;
        let p = &resp.responses[0].partition_responses[0];
        Ok((p.error_code, p.base_offset))
    }

    /// Fetch from `offset`; returns (error code, high watermark, [(offset, value)]).
    pub fn fetch(
        &mut self,
        name: &str,
        partition: i32,
        offset: i64,
        max_wait_ms: i32,
    ) -> std::io::Result<Fetched> {
        self.fetch_as(-1, name, partition, offset, max_wait_ms)
    }

    /// [`KafkaClient::fetch`] with the replica id `replica_id` (-1 a client,
    /// -2 Kafka's debugging consumer).
    pub fn fetch_as(
        &mut self,
        replica_id: i32,
        name: &str,
        partition: i32,
        offset: i64,
        max_wait_ms: i32,
    ) -> std::io::Result<Fetched> {
        let req = fetch_request(replica_id, name, partition, offset)
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1);
        let resp = self.send(&req, FETCH_VERSION)?;
        let p = &resp.responses[0].partitions[0];
        let mut out = Vec::new();
        if let Some(mut records) = p.records.clone() {
            for set in
                RecordBatchDecoder::decode_all(&mut records).map_err(std::io::Error::other)?
            {
                for r in set.records {
                    out.push((r.offset, r.value.map(|v| v.to_vec()).unwrap_or_default()));
                }
            }
        }
        Ok((p.error_code, p.high_watermark, out))
    }

    /// Fetch v11 of a whole partition (from offset 0) at `isolation_level`
    /// (0 read_uncommitted, 1 read_committed), asserting no error.
    pub fn fetch_isolated(&mut self, name: &str, partition: i32, isolation_level: i8) -> Isolated {
        let req = fetch_request(-1, name, partition, 0).with_isolation_level(isolation_level);
        let resp = self.send(&req, FETCH_VERSION).expect("fetch");
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch {name}-{partition}");
        let mut records = Vec::new();
        if let Some(mut raw) = p.records.clone() {
            for set in RecordBatchDecoder::decode_all(&mut raw).expect("batches decode") {
                for r in set.records {
                    // A control record's key: version i16, type i16 (0 abort, 1 commit).
                    let marker = r
                        .control
                        .then(|| r.key.as_ref().is_some_and(|k| k.get(3) == Some(&1)));
                    records.push(FetchedRecord {
                        offset: r.offset,
                        producer_id: r.producer_id,
                        marker,
                        value: r.value.map(|v| v.to_vec()).unwrap_or_default(),
                    });
                }
            }
        }
        Isolated {
            high_watermark: p.high_watermark,
            last_stable_offset: p.last_stable_offset,
            aborted: p
                .aborted_transactions
                .iter()
                .flatten()
                .map(|a| (a.producer_id.0, a.first_offset))
                .collect(),
            records,
        }
    }

    /// ListOffsets v5 for one timestamp (-2 earliest, -1 latest) with the
    /// replica id `replica_id`; returns (error code, offset).
    pub fn list_offset_as(
        &mut self,
        replica_id: i32,
        name: &str,
        partition: i32,
        timestamp: i64,
    ) -> std::io::Result<(i16, i64)> {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(topic(name))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(partition)
                            .with_timestamp(timestamp),
                    ]),
            ]);
        let resp = self.send(&req, 5)?;
        let p = &resp.topics[0].partitions[0];
        Ok((p.error_code, p.offset))
    }

    /// Fetch everything from `offset` up to the high watermark.
    pub fn fetch_all(
        &mut self,
        name: &str,
        partition: i32,
        mut offset: i64,
    ) -> Vec<(i64, Vec<u8>)> {
        let mut out = Vec::new();
        for _ in 0..10_000 {
            let (err, hw, recs) = self.fetch(name, partition, offset, 100).expect("fetch");
            assert_eq!(err, 0, "fetch error");
            for (o, v) in recs {
                if o >= offset {
                    offset = o + 1;
                    out.push((o, v));
                }
            }
            if offset >= hw {
                return out;
            }
        }
        panic!("fetch_all did not reach the high watermark");
    }
}

/// A Fetch of one partition from `offset`, up to 1 MiB, without a session.
fn fetch_request(replica_id: i32, name: &str, partition: i32, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic(name))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

pub fn api_key_of<R: Request>() -> ApiKey {
    ApiKey::try_from(R::KEY).unwrap()
}
