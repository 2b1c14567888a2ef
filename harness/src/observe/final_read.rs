//! Jepsen's final read, over the Kafka protocol: every partition of every
//! topic read through a fresh client as a consumer reads it (ListOffsets
//! earliest and latest, then Fetch read_uncommitted, replica id -1, from the
//! earliest offset up to the high watermark) and written byte for byte as
//! Kafka log segments, so the harness's own reader (`reader/`) reads it back
//! like any replica's data directory. It is how the final state of a broker
//! whose files the harness cannot read (tansu keeps its log in PostgreSQL)
//! reaches the checkers.
//!
//! It owns the directory it is given and writes nothing anywhere else; it
//! never produces, commits or otherwise acts on the cluster. Layout written:
//!
//! ```text
//! <dir>/<topic>-<partition>/<20-digit base offset>.log   the fetched batches
//! <dir>/replication-offset-checkpoint                    each partition's HW
//! <dir>/final-read.json                                  the summary (FinalRead)
//! <dir>/partial/<topic>-<partition>.log                  a partition that failed
//! ```
//!
//! A partition is moved into place only once read to its high watermark, so
//! the reader never takes a half-read partition for a short log; what a
//! failed partition's fetches returned stays in `partial/`, a name the reader
//! does not read as a replica, and final-read.json says why it failed.
//!
//! What it does not do: read followers (a consumer reads the leader; the
//! replicas' agreement is for the segment-reading checkers), read past the
//! high watermark it listed, decode records (the reader does, and reports
//! damage as findings), or read internal topics (`__` prefix).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::kafka_client::{ClientError, FetchOptions, KafkaClient, Metadata, OffsetSpec};
use crate::node::NodeId;
use crate::reader::checkpoint::OffsetEntry;
use crate::reader::segment::{BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES};
use crate::store::{StoreError, write_json};
use crate::topic_partition::PartitionRef;

use super::segments::{
    DirError, INTERNAL_TOPIC_PREFIX, legal_topic_name, prepare_dir, segment_file_name,
    write_high_watermarks,
};

/// The summary's file name in the final read's directory.
pub const FINAL_READ_JSON: &str = "final-read.json";

/// Where a partition that could not be read to its high watermark is left.
pub const PARTIAL_DIR: &str = "partial";

/// The client id every connection of a final read presents.
const CLIENT_ID: &str = "epochal-final-read";

/// Bytes one Fetch asks for.
const FETCH_BYTES: i32 = 1 << 20;

/// A batch larger than [`FETCH_BYTES`] comes back whole from a broker that
/// follows KIP-74; from one that cuts it, the Fetch is made again with room
/// for the batch, up to this (the client refuses responses above 64 MiB).
const FETCH_BYTES_MAX: i32 = 32 << 20;

/// The byte offset of a v2 batch's magic byte, and of its lastOffsetDelta.
const MAGIC_AT: usize = 16;
const LAST_OFFSET_DELTA_AT: usize = 23;
const RECORDS_COUNT_AT: usize = 57;

/// What a final read read, as written to `final-read.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalRead {
    /// The address the topics were listed through.
    pub bootstrap: String,
    /// The broker that address is (set by the run that made the read), so a
    /// checker can name where the final log came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<NodeId>,
    /// Every partition of every non-internal topic, by topic then partition;
    /// failed ones included, with their error.
    pub partitions: Vec<PartitionRead>,
}

/// One partition's final read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRead {
    pub topic: String,
    pub partition: i32,
    /// The leader Metadata named (-1 for none).
    pub leader: i32,
    /// The address that was asked: the leader's advertised address after the
    /// caller's rewrite, or the bootstrap when Metadata named no leader.
    pub broker: String,
    /// ListOffsets earliest: the log start offset.
    pub earliest: Option<i64>,
    /// ListOffsets latest as a consumer asks it: the high watermark.
    pub latest: Option<i64>,
    /// The segment written, relative to the final read's directory: in
    /// `<topic>-<partition>/` when read whole, in `partial/` when not.
    pub segment: Option<PathBuf>,
    /// Bytes of whole batches written.
    pub bytes: u64,
    pub batches: u64,
    /// The records those batches declare, control records included.
    pub records: u64,
    /// Why the partition could not be read to its high watermark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FinalRead {
    /// The partitions read to their high watermark.
    pub fn complete(&self) -> impl Iterator<Item = &PartitionRead> {
        self.partitions.iter().filter(|p| p.error.is_none())
    }
}

/// Why a final read did not read every partition.
#[derive(Debug, thiserror::Error)]
pub enum FinalReadError {
    /// The directory could not be made ready (it must be new or empty), or
    /// its checkpoint written.
    #[error("final read: {0}")]
    Dir(#[from] DirError),
    /// The topics could not be listed: nothing was read.
    #[error("final read: Metadata from {broker}: {source}")]
    Metadata {
        broker: String,
        #[source]
        source: ClientError,
    },
    /// Metadata answered a topic the read cannot take: nothing was read.
    #[error("final read: Metadata from {broker} answers topic {topic:?} {problem}")]
    BadTopic {
        broker: String,
        topic: String,
        #[source]
        problem: TopicProblem,
    },
    #[error("final read: writing {FINAL_READ_JSON}: {0}")]
    Summary(#[source] StoreError),
    /// Some partitions could not be read; every other one was, and is
    /// written, as is the summary.
    #[error(
        "final read through {}: {} of {} partitions not read: {}",
        .read.bootstrap,
        .failures.len(),
        .read.partitions.len(),
        .failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Incomplete {
        read: FinalRead,
        failures: Vec<PartitionReadError>,
    },
}

/// What is wrong with a topic in a Metadata answer.
#[derive(Debug, thiserror::Error)]
pub enum TopicProblem {
    #[error("with {0}")]
    Error(#[source] ClientError),
    /// Not a name Kafka allows (`[a-zA-Z0-9._-]`, 1 to 249 characters, not
    /// `.` or `..`): it would not be a safe directory name either.
    #[error("as a name Kafka does not allow")]
    IllegalName,
    #[error("with partition {0}")]
    NegativePartition(i32),
}

/// One partition that could not be read to its high watermark, and the
/// broker that was asked.
#[derive(Debug, thiserror::Error)]
#[error("{partition} from {broker}: {cause}")]
pub struct PartitionReadError {
    pub partition: PartitionRef,
    pub broker: String,
    #[source]
    pub cause: PartitionReadCause,
}

#[derive(Debug, thiserror::Error)]
pub enum PartitionReadCause {
    #[error("Metadata names no leader ({source})")]
    NoLeader {
        #[source]
        source: ClientError,
    },
    #[error("Metadata names leader {leader}, which its broker list lacks")]
    UnknownLeader { leader: i32 },
    #[error("connecting: {0}")]
    Connect(#[source] ClientError),
    #[error("ListOffsets {spec:?}: {source}")]
    ListOffsets {
        spec: OffsetSpec,
        #[source]
        source: ClientError,
    },
    #[error("ListOffsets answers earliest {earliest} and latest {latest}")]
    BadOffsets { earliest: i64, latest: i64 },
    #[error("Fetch at offset {offset}: {source}")]
    Fetch {
        offset: i64,
        #[source]
        source: ClientError,
    },
    #[error("Fetch at offset {offset} answers {source}")]
    Batches {
        offset: i64,
        #[source]
        source: BatchFrameError,
    },
    /// The answer held no whole batch the read still needs: no progress.
    #[error(
        "Fetch at offset {offset} (max {max_bytes} bytes) answers no whole batch at or past it \
         ({bytes} bytes, high watermark {high_watermark}), short of the listed latest {latest}"
    )]
    NoProgress {
        offset: i64,
        max_bytes: i32,
        bytes: usize,
        high_watermark: i64,
        latest: i64,
    },
    #[error("the final read's {total:?} passed before this partition was read")]
    Deadline { total: Duration },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A fetched buffer that is not record batches v2 back to back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchFrameError {
    #[error("a batch at byte {position} with length {batch_length}, below a v2 header's")]
    BadLength { position: usize, batch_length: i32 },
    #[error("a batch at byte {position} with magic {magic}, not 2")]
    UnsupportedMagic { position: usize, magic: i8 },
    #[error("a batch at byte {position} with base offset {base_offset}")]
    NegativeOffset { position: usize, base_offset: i64 },
}

/// One whole v2 batch in a fetched buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BatchFrame {
    base_offset: i64,
    last_offset: i64,
    records: i32,
    /// Where it lies in the buffer, framing included.
    bytes: Range<usize>,
}

/// A fetched buffer cut into whole batches.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WholeBatches {
    batches: Vec<BatchFrame>,
    /// The size (framing included) the batch after the last whole one
    /// declares, when `max_bytes` cut it after its length field.
    cut_batch_bytes: Option<usize>,
}

/// Cuts `bytes` into whole v2 batches: each is baseOffset (i64), batchLength
/// (i32), then batchLength bytes. A batch the buffer ends inside was cut by
/// `max_bytes` and is dropped (the next Fetch starts at it); a whole batch
/// that is not v2, or a length no v2 batch can have, is an error.
fn whole_batches(bytes: &[u8]) -> Result<WholeBatches, BatchFrameError> {
    let mut batches = Vec::new();
    let mut position = 0;
    let mut cut_batch_bytes = None;
    while position < bytes.len() {
        let rest = &bytes[position..];
        if rest.len() < LOG_OVERHEAD_BYTES {
            break;
        }
        let batch_length = i32::from_be_bytes(field(rest, 8));
        if batch_length < (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32 {
            return Err(BatchFrameError::BadLength {
                position,
                batch_length,
            });
        }
        let size = LOG_OVERHEAD_BYTES + batch_length as usize;
        if rest.len() < size {
            cut_batch_bytes = Some(size);
            break;
        }
        let magic = rest[MAGIC_AT] as i8;
        if magic != 2 {
            return Err(BatchFrameError::UnsupportedMagic { position, magic });
        }
        let base_offset = i64::from_be_bytes(field(rest, 0));
        if base_offset < 0 {
            return Err(BatchFrameError::NegativeOffset {
                position,
                base_offset,
            });
        }
        let last_offset_delta = i32::from_be_bytes(field(rest, LAST_OFFSET_DELTA_AT));
        batches.push(BatchFrame {
            base_offset,
            last_offset: base_offset.saturating_add(i64::from(last_offset_delta)),
            records: i32::from_be_bytes(field(rest, RECORDS_COUNT_AT)),
            bytes: position..position + size,
        });
        position += size;
    }
    Ok(WholeBatches {
        batches,
        cut_batch_bytes,
    })
}

/// `N` bytes of `bytes` at `at`; callers have checked they are there.
fn field<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    bytes[at..at + N].try_into().expect("the field is inside")
}

/// The batches of one Fetch answer a segment still needs, given the next
/// offset it needs and the high watermark it is read to: a batch that ends
/// below `next` is already written (a broker returns whole batches, so the
/// first may start below the fetch offset and overlap the last one written),
/// and one that starts at or past `latest` is past the high watermark listed.
fn needed_batches(batches: &[BatchFrame], mut next: i64, latest: i64) -> Vec<&BatchFrame> {
    let mut needed = Vec::new();
    for batch in batches {
        if batch.base_offset >= latest {
            break;
        }
        if batch.last_offset < next {
            continue;
        }
        next = batch.last_offset.saturating_add(1);
        needed.push(batch);
    }
    needed
}

/// `host:port` as a client dials it (IPv6 hosts bracketed).
fn host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The final read of the cluster `address` belongs to, into `dir` (new or
/// empty), every request under `deadline_per_request` and the whole read
/// under `total`; each leader is dialled at the address it advertises.
/// See [`final_read_with`].
pub async fn final_read(
    address: &str,
    dir: &Path,
    deadline_per_request: Duration,
    total: Duration,
) -> Result<FinalRead, FinalReadError> {
    let options = FinalReadOptions::new(deadline_per_request, total);
    final_read_with(address, dir, &options).await
}

/// How a final read is made beyond where from and where to.
#[derive(Debug, Clone)]
pub struct FinalReadOptions {
    /// The broker `address` is, recorded in the summary.
    pub via: Option<NodeId>,
    /// Advertised addresses to dial elsewhere (see [`final_read_with`]).
    pub rewrite: BTreeMap<String, String>,
    /// Where to dial a leader by its Kafka node id when `rewrite` does not
    /// know the address it advertises: a broker that advertises the address
    /// it listens on (noida: `0.0.0.0:9092` in a container) is reached at
    /// its node's direct address. Empty when node ids are not the harness's
    /// node numbers (a system whose brokers all answer as one node).
    pub by_node: BTreeMap<i32, String>,
    pub per_request: Duration,
    pub total: Duration,
    /// The Fetch version to read with, when not the client's own
    /// (a system file's `[client] fetch_version`).
    pub fetch_version: Option<i16>,
    /// The least Fetch wait (a system file's `[client] fetch_max_wait_ms`).
    pub fetch_max_wait_ms: Option<i32>,
}

impl FinalReadOptions {
    pub fn new(per_request: Duration, total: Duration) -> Self {
        FinalReadOptions {
            via: None,
            rewrite: BTreeMap::new(),
            by_node: BTreeMap::new(),
            per_request,
            total,
            fetch_version: None,
            fetch_max_wait_ms: None,
        }
    }
}

/// [`final_read`], dialling a leader that advertises an address in
/// `options.rewrite` at the address it maps to (the harness reads around the fault
/// proxies a broker advertises), any other leader at its node id's address in
/// `options.by_node`, and one in neither as advertised.
///
/// Lists the topics by Metadata through `address`, then reads each
/// partition from its leader in turn. A partition that fails does not stop
/// the others: it is left in `partial/`, and once every partition was tried
/// the summary is written and the error lists every failure
/// ([`FinalReadError::Incomplete`], which holds the summary too).
pub async fn final_read_with(
    address: &str,
    dir: &Path,
    options: &FinalReadOptions,
) -> Result<FinalRead, FinalReadError> {
    let rewrite = &options.rewrite;
    let via = options.via;
    let mut session = Session {
        dir,
        per_request: options.per_request,
        total: options.total,
        end: Instant::now() + options.total,
        clients: BTreeMap::new(),
        fetch_version: options.fetch_version,
        fetch_max_wait_ms: options.fetch_max_wait_ms,
    };
    prepare_dir(dir)?;
    let metadata = session.metadata(address).await?;
    let mut read = FinalRead {
        bootstrap: address.to_owned(),
        via,
        partitions: Vec::new(),
    };
    let mut failures = Vec::new();
    let mut topics: Vec<_> = metadata
        .topics
        .iter()
        .filter(|t| !t.name.starts_with(INTERNAL_TOPIC_PREFIX))
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for topic in topics {
        let mut partitions: Vec<_> = topic.partitions.iter().collect();
        partitions.sort_by_key(|p| p.partition);
        for p in partitions {
            let advertised = leader_address(&metadata, p.leader, p.error_code);
            let broker = advertised.as_ref().map_or_else(
                |_| address.to_owned(),
                |a| {
                    let direct = rewrite.get(a).or_else(|| options.by_node.get(&p.leader));
                    direct.unwrap_or(a).clone()
                },
            );
            let mut summary = PartitionRead {
                topic: topic.name.clone(),
                partition: p.partition,
                leader: p.leader,
                broker: broker.clone(),
                earliest: None,
                latest: None,
                segment: None,
                bytes: 0,
                batches: 0,
                records: 0,
                error: None,
            };
            let outcome = match advertised {
                Ok(_) => session.read_partition(&broker, &mut summary).await,
                Err(cause) => Err(cause),
            };
            if let Err(cause) = outcome {
                let failure = PartitionReadError {
                    partition: PartitionRef::new(
                        topic.name.clone(),
                        u32::try_from(p.partition).expect("checked >= 0 with the metadata"),
                    ),
                    broker,
                    cause,
                };
                summary.error = Some(failure.cause.to_string());
                failures.push(failure);
            }
            read.partitions.push(summary);
        }
    }
    write_summary(dir, &read)?;
    if failures.is_empty() {
        Ok(read)
    } else {
        Err(FinalReadError::Incomplete { read, failures })
    }
}

/// The advertised address of partition leader `leader`, or why there is none.
fn leader_address(
    metadata: &Metadata,
    leader: i32,
    error_code: i16,
) -> Result<String, PartitionReadCause> {
    if leader < 0 {
        return Err(PartitionReadCause::NoLeader {
            source: ClientError::broker(error_code),
        });
    }
    metadata
        .brokers
        .iter()
        .find(|b| b.node_id == leader)
        .map(|b| host_port(&b.host, b.port))
        .ok_or(PartitionReadCause::UnknownLeader { leader })
}

/// The high watermarks of the partitions read whole, then the summary.
fn write_summary(dir: &Path, read: &FinalRead) -> Result<(), FinalReadError> {
    let high_watermarks: Vec<OffsetEntry> = read
        .complete()
        .filter_map(|p| {
            Some(OffsetEntry {
                topic: p.topic.clone(),
                partition: p.partition,
                offset: p.latest?,
            })
        })
        .collect();
    write_high_watermarks(dir, &high_watermarks)?;
    write_json(&dir.join(FINAL_READ_JSON), read).map_err(FinalReadError::Summary)
}

/// One final read's connections (one per broker address) and deadlines.
struct Session<'a> {
    dir: &'a Path,
    per_request: Duration,
    total: Duration,
    end: Instant,
    clients: BTreeMap<String, KafkaClient>,
    fetch_version: Option<i16>,
    fetch_max_wait_ms: Option<i32>,
}

impl Session<'_> {
    /// The per-request deadline, cut to what is left of the total.
    fn left(&self) -> Duration {
        self.end
            .saturating_duration_since(Instant::now())
            .min(self.per_request)
    }

    /// The next request's deadline; none once the total has passed.
    fn deadline(&self) -> Result<Duration, PartitionReadCause> {
        match self.left() {
            left if left.is_zero() => Err(PartitionReadCause::Deadline { total: self.total }),
            left => Ok(left),
        }
    }

    /// A connection to `address`, made afresh when there is none or the
    /// last one was discarded by a failure.
    async fn client(&mut self, address: &str) -> Result<&mut KafkaClient, PartitionReadCause> {
        let connected = self
            .clients
            .get(address)
            .is_some_and(KafkaClient::is_connected);
        if !connected {
            let mut client = KafkaClient::connect(address, CLIENT_ID, self.deadline()?)
                .await
                .map_err(PartitionReadCause::Connect)?;
            client.set_fetch_version(self.fetch_version);
            client.set_fetch_max_wait(self.fetch_max_wait_ms);
            self.clients.insert(address.to_owned(), client);
        }
        Ok(self.clients.get_mut(address).expect("inserted above"))
    }

    async fn metadata(&mut self, address: &str) -> Result<Metadata, FinalReadError> {
        let failed = |source| FinalReadError::Metadata {
            broker: address.to_owned(),
            source,
        };
        let mut client = KafkaClient::connect(address, CLIENT_ID, self.left())
            .await
            .map_err(failed)?;
        client.set_fetch_version(self.fetch_version);
        client.set_fetch_max_wait(self.fetch_max_wait_ms);
        let metadata = client.metadata(None, self.left()).await.map_err(failed)?;
        for topic in &metadata.topics {
            let bad = |problem| FinalReadError::BadTopic {
                broker: address.to_owned(),
                topic: topic.name.clone(),
                problem,
            };
            if topic.error_code != 0 {
                return Err(bad(TopicProblem::Error(ClientError::broker(
                    topic.error_code,
                ))));
            }
            if !legal_topic_name(&topic.name) {
                return Err(bad(TopicProblem::IllegalName));
            }
            if let Some(p) = topic.partitions.iter().find(|p| p.partition < 0) {
                return Err(bad(TopicProblem::NegativePartition(p.partition)));
            }
        }
        self.clients.insert(address.to_owned(), client);
        Ok(metadata)
    }

    async fn list_offset(
        &mut self,
        broker: &str,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
    ) -> Result<i64, PartitionReadCause> {
        let deadline = self.deadline()?;
        self.client(broker)
            .await?
            .list_offset(topic, partition, spec, deadline)
            .await
            .map_err(|source| PartitionReadCause::ListOffsets { spec, source })
    }

    /// Reads one partition from `broker` into `partial/`, then moves it into
    /// its directory; `summary` says how far it got, failed or not.
    async fn read_partition(
        &mut self,
        broker: &str,
        summary: &mut PartitionRead,
    ) -> Result<(), PartitionReadCause> {
        let (topic, partition) = (summary.topic.clone(), summary.partition);
        let earliest = self
            .list_offset(broker, &topic, partition, OffsetSpec::Earliest)
            .await?;
        summary.earliest = Some(earliest);
        let latest = self
            .list_offset(broker, &topic, partition, OffsetSpec::Latest)
            .await?;
        summary.latest = Some(latest);
        if earliest < 0 || latest < earliest {
            return Err(PartitionReadCause::BadOffsets { earliest, latest });
        }

        let dir_name = format!("{topic}-{partition}");
        let partial = Path::new(PARTIAL_DIR).join(format!("{dir_name}.log"));
        let written = write_error(self.dir.join(&partial));
        std::fs::create_dir_all(self.dir.join(PARTIAL_DIR)).map_err(&written)?;
        let mut file = BufWriter::new(File::create(self.dir.join(&partial)).map_err(&written)?);
        summary.segment = Some(partial.clone());

        let mut next = earliest;
        let mut first_base_offset = None;
        let mut options = FetchOptions {
            max_bytes: FETCH_BYTES,
            max_wait_ms: 0,
            min_bytes: 0,
        };
        while next < latest {
            let deadline = self.deadline()?;
            let fetched = self
                .client(broker)
                .await?
                .fetch_raw(&topic, partition, next, &options, deadline)
                .await
                .map_err(|source| PartitionReadCause::Fetch {
                    offset: next,
                    source,
                })?;
            let cut =
                whole_batches(&fetched.records).map_err(|source| PartitionReadCause::Batches {
                    offset: next,
                    source,
                })?;
            let needed = needed_batches(&cut.batches, next, latest);
            if needed.is_empty() {
                // A broker that cuts even the first batch at max_bytes
                // (before KIP-74) is asked again with room for it.
                match cut.cut_batch_bytes.and_then(|b| i32::try_from(b).ok()) {
                    Some(size) if size > options.max_bytes && size <= FETCH_BYTES_MAX => {
                        options.max_bytes = size;
                        continue;
                    }
                    _ => {
                        return Err(PartitionReadCause::NoProgress {
                            offset: next,
                            max_bytes: options.max_bytes,
                            bytes: fetched.records.len(),
                            high_watermark: fetched.high_watermark,
                            latest,
                        });
                    }
                }
            }
            for batch in needed {
                file.write_all(&fetched.records[batch.bytes.clone()])
                    .map_err(&written)?;
                first_base_offset.get_or_insert(batch.base_offset);
                summary.bytes += batch.bytes.len() as u64;
                summary.batches += 1;
                summary.records += u64::try_from(batch.records).unwrap_or(0);
                next = batch.last_offset.saturating_add(1);
            }
        }
        file.flush().map_err(&written)?;
        drop(file);

        // Kafka names a segment after its first batch's base offset, and an
        // empty log's active segment after the log start offset.
        let segment =
            Path::new(&dir_name).join(segment_file_name(first_base_offset.unwrap_or(earliest)));
        let placed = write_error(self.dir.join(&segment));
        std::fs::create_dir(self.dir.join(&dir_name)).map_err(&placed)?;
        std::fs::rename(self.dir.join(&partial), self.dir.join(&segment)).map_err(&placed)?;
        summary.segment = Some(segment);
        // Left empty by the last partition that was read whole.
        let _ = std::fs::remove_dir(self.dir.join(PARTIAL_DIR));
        Ok(())
    }
}

fn write_error(path: PathBuf) -> impl Fn(io::Error) -> PartitionReadCause {
    move |source| PartitionReadCause::Write {
        path: path.clone(),
        source,
    }
}

#[cfg(test)]
mod tests;
