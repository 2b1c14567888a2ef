//! An application's traffic, read back from the client links' recordings
//! (`client-b<i>.frames`: `epochal-proxy --record` keeps every request a
//! client link forwards and every response it writes back, the format in
//! `faults/src/proxy/link/record.rs`). Each response is paired with its
//! connection's request of the same correlation id — a response carries no
//! API key, so the decoder remembers each request's key and version per
//! connection — and the pairs of the APIs an application's history is made
//! of are decoded with the `kafka-protocol` crate into [`Exchange`]s:
//! Produce ([`produce`]), Fetch ([`fetch`]), OffsetCommit and OffsetFetch
//! ([`groups`]), JoinGroup and SyncGroup ([`members`]), the transaction
//! APIs InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit
//! and EndTxn ([`txn`]), CreateTopics and DeleteTopics ([`admin`]). Other
//! APIs (Metadata, ApiVersions, FindCoordinator, Heartbeat, ...) pair and
//! pass. A frame of those APIs
//! that does not decode is counted and named (api key, version, proxy,
//! connection), never fatal; so is a response that answers no recorded
//! request (the proxy dropped frames there: a gap) and a request whose
//! version this decoder does not read.
//!
//! Times are the proxy's wall clock, in ns since the Unix epoch: a request
//! no later than it reached the broker whole, a response no later than the
//! client could have read it whole.

pub mod admin;
pub mod deletion;
pub mod fetch;
pub mod groups;
pub mod members;
pub mod produce;
pub mod txn;
mod wire;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_protocol::messages::{self, ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, HeaderVersion};

use super::frames::{FramesError, Recorded, read_recording};
use crate::history::clock::ClockPair;
use wire::DecodeError;

pub use admin::TopicAdmin;
pub use deletion::OffsetDeletion;
pub use fetch::{Fetch, FetchAnswer, FetchedPartition, FetchedRecord};
pub use groups::{OffsetCommit, OffsetFetch};
pub use members::{JoinGroup, Joined, SyncGroup};
pub use produce::{Produce, ProducedPartition};
pub use txn::{AddOffsets, AddPartitions, EndTxn, InitProducerId, Stamp, TxnOffsetCommit};

/// The prefix of a client link's proxy name (`client-b2`).
pub const CLIENT_PROXY_PREFIX: &str = "client-";

/// One request an application sent through a client link, with its answer
/// when the recording has one.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The proxy it went through (`client-b2`).
    pub proxy: String,
    /// The proxy's id for the connection.
    pub connection: u64,
    /// The request header's client id.
    pub client_id: Option<String>,
    pub correlation_id: i32,
    /// When the proxy wrote the request on (wall clock, ns).
    pub request_ns: u64,
    /// When it wrote the answer back; `None`: no answer was recorded (the
    /// connection ended first, the recording did, or acks=0 asked none).
    pub response_ns: Option<u64>,
    pub call: Call,
}

/// What the request asked and, once answered, what the answer said.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Produce(Produce),
    Fetch(Fetch),
    OffsetCommit(OffsetCommit),
    OffsetFetch(OffsetFetch),
    CreateTopics(TopicAdmin),
    DeleteTopics(TopicAdmin),
    /// OffsetDelete or DeleteGroups.
    OffsetDeletion(OffsetDeletion),
    JoinGroup(JoinGroup),
    SyncGroup(SyncGroup),
    InitProducerId(InitProducerId),
    AddPartitionsToTxn(AddPartitions),
    AddOffsetsToTxn(AddOffsets),
    TxnOffsetCommit(TxnOffsetCommit),
    EndTxn(EndTxn),
}

/// A frame the decoder could not read, named.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Undecodable {
    pub proxy: String,
    pub connection: u64,
    /// `None`: a response that answers no recorded request.
    pub api_key: Option<i16>,
    pub api_version: Option<i16>,
    pub why: String,
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let api = match (self.api_key, self.api_version) {
            (Some(key), Some(version)) => {
                let name = ApiKey::try_from(key).map_or("unknown".to_owned(), |k| format!("{k:?}"));
                format!("{name} (key {key}) v{version}")
            }
            _ => "a response".to_owned(),
        };
        write!(
            f,
            "{api} on {} connection {}: {}",
            self.proxy, self.connection, self.why
        )
    }
}

/// Everything the client links' recordings say of the application.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppFrames {
    /// Every decoded exchange, in the order of its request's time.
    pub exchanges: Vec<Exchange>,
    /// Frames not decoded, at most [`UNDECODABLE_KEPT`] of them named.
    pub undecodable: Vec<Undecodable>,
    /// How many frames were not decoded (named or not).
    pub undecodable_count: u64,
    /// Frames the proxies dropped (gaps), summed.
    pub dropped: u64,
    /// The recordings read.
    pub links: Vec<PathBuf>,
    /// Topic ids (KIP-516) to their names, from every Metadata answer the
    /// links recorded: a Fetch from v13 on names its topics by id alone.
    pub topic_names: BTreeMap<String, String>,
}

/// The named undecodable frames kept; the rest are counted.
pub const UNDECODABLE_KEPT: usize = 100;

impl AppFrames {
    /// Takes the topic ids a Metadata answer (`frame`, at `version`) names.
    fn learn_topic_ids(&mut self, version: i16, frame: Bytes) -> Result<(), DecodeError> {
        let response: messages::MetadataResponse = wire::decode_response(frame, version)?;
        for topic in &response.topics {
            if let Some(name) = &topic.name
                && !topic.topic_id.is_nil()
            {
                self.topic_names
                    .insert(topic.topic_id.to_string(), name.0.to_string());
            }
        }
        Ok(())
    }

    /// Names each fetched partition that its request named by topic id
    /// alone, from the Metadata answers every link recorded (a client may
    /// learn an id from one broker and fetch from another). A partition
    /// whose id no answer named is left out of its Fetch and counted.
    fn name_fetched_topics(&mut self) {
        let mut unnamed = Vec::new();
        for exchange in &mut self.exchanges {
            let Call::Fetch(fetch) = &mut exchange.call else {
                continue;
            };
            fetch.partitions.retain_mut(|p| match &p.topic_id {
                Some(id) if p.topic.is_empty() => match self.topic_names.get(id) {
                    Some(name) => {
                        p.topic.clone_from(name);
                        true
                    }
                    None => {
                        unnamed.push((exchange.proxy.clone(), exchange.connection, id.clone()));
                        false
                    }
                },
                _ => true,
            });
        }
        for (proxy, connection, id) in unnamed {
            self.undecodable(Undecodable {
                proxy,
                connection,
                api_key: Some(ApiKey::Fetch as i16),
                api_version: None,
                why: format!("fetches topic id {id}, which no recorded Metadata answer named"),
            });
        }
    }

    fn undecodable(&mut self, frame: Undecodable) {
        self.undecodable_count += 1;
        if self.undecodable.len() < UNDECODABLE_KEPT {
            self.undecodable.push(frame);
        }
    }
}

/// Every client link's recording in `dir` (`client-*.frames`), up to
/// `until_ns` (ns since the Unix epoch as the history's clock places it:
/// later records are left out, and a request answered later stays
/// unanswered), each time placed through `history` (`read_recording`). No
/// directory: nothing.
pub fn read_app_frames(
    dir: &Path,
    until_ns: u64,
    history: Option<ClockPair>,
) -> Result<AppFrames, FramesError> {
    let mut out = AppFrames::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(FramesError::Io {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "frames"))
        .filter(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .is_some_and(|s| s.starts_with(CLIENT_PROXY_PREFIX))
        })
        .collect();
    paths.sort();
    for path in paths {
        let proxy = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let recorded = read_recording(&path, history)?;
        decode_link(&proxy, &recorded, until_ns, &mut out);
        out.links.push(path);
    }
    out.name_fetched_topics();
    out.exchanges.sort_by_key(|e| e.request_ns);
    Ok(out)
}

/// A request waiting for its answer.
struct Pending {
    api_key: i16,
    api_version: i16,
    /// The decoded exchange, for the APIs the history holds.
    exchange: Option<Exchange>,
    /// A Metadata request: its answer names topic ids.
    metadata: bool,
}

/// Decodes one link's records into `out`.
pub fn decode_link(proxy: &str, recorded: &[Recorded], until_ns: u64, out: &mut AppFrames) {
    // Per connection: correlation id → the request it names.
    let mut pending: HashMap<u64, BTreeMap<i32, Pending>> = HashMap::new();
    for record in recorded {
        match record {
            Recorded::Gap { time_ns, frames } if *time_ns <= until_ns => {
                out.dropped += u64::from(*frames);
            }
            Recorded::Gap { .. } => {}
            Recorded::Request {
                time_ns,
                connection,
                frame,
            } if *time_ns <= until_ns => {
                let named = |why: String, key, version| Undecodable {
                    proxy: proxy.to_owned(),
                    connection: *connection,
                    api_key: key,
                    api_version: version,
                    why,
                };
                match request(proxy, *connection, *time_ns, frame.clone()) {
                    Ok((correlation_id, request)) => {
                        pending
                            .entry(*connection)
                            .or_default()
                            .insert(correlation_id, request);
                    }
                    Err((why, key, version)) => out.undecodable(named(why, key, version)),
                }
            }
            Recorded::Response {
                time_ns,
                connection,
                frame,
            } if *time_ns <= until_ns => {
                let Some(correlation_id) = frame
                    .get(..4)
                    .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
                else {
                    continue;
                };
                let waiting = pending
                    .get_mut(connection)
                    .and_then(|p| p.remove(&correlation_id));
                let Some(waiting) = waiting else {
                    out.undecodable(Undecodable {
                        proxy: proxy.to_owned(),
                        connection: *connection,
                        api_key: None,
                        api_version: None,
                        why: format!("correlation id {correlation_id} answers no recorded request"),
                    });
                    continue;
                };
                if waiting.metadata {
                    if let Err(why) = out.learn_topic_ids(waiting.api_version, frame.clone()) {
                        out.undecodable(Undecodable {
                            proxy: proxy.to_owned(),
                            connection: *connection,
                            api_key: Some(waiting.api_key),
                            api_version: Some(waiting.api_version),
                            why: format!("response: {why}"),
                        });
                    }
                    continue;
                }
                let Some(mut exchange) = waiting.exchange else {
                    continue;
                };
                exchange.response_ns = Some(*time_ns);
                match answer(&mut exchange.call, waiting.api_version, frame.clone()) {
                    Ok(()) => out.exchanges.push(exchange),
                    Err(why) => {
                        // Its answer is unknown: the request stays, unanswered.
                        exchange.response_ns = None;
                        out.exchanges.push(exchange);
                        out.undecodable(Undecodable {
                            proxy: proxy.to_owned(),
                            connection: *connection,
                            api_key: Some(waiting.api_key),
                            api_version: Some(waiting.api_version),
                            why: format!("response: {why}"),
                        });
                    }
                }
            }
            Recorded::Request { .. } | Recorded::Response { .. } => {}
        }
    }
    // Never answered in the recording: each stays, its outcome unknown,
    // except an acks=0 produce, which asks no answer.
    for requests in pending.into_values() {
        out.exchanges
            .extend(requests.into_values().filter_map(|p| p.exchange));
    }
}

/// Why a request does not decode: the words, its api key and version.
type RequestError = (String, Option<i16>, Option<i16>);

/// The request in `frame`: its correlation id and what to remember of it.
fn request(
    proxy: &str,
    connection: u64,
    time_ns: u64,
    mut frame: Bytes,
) -> Result<(i32, Pending), RequestError> {
    let (Some(key), Some(version)) = (
        frame.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]])),
        frame.get(2..4).map(|b| i16::from_be_bytes([b[0], b[1]])),
    ) else {
        return Err(("shorter than a request header".to_owned(), None, None));
    };
    let fail = |why: String| (why, Some(key), Some(version));
    let correlation_id = frame
        .get(4..8)
        .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| fail("shorter than a request header".to_owned()))?;
    let api = ApiKey::try_from(key).ok();
    let mut pending = Pending {
        api_key: key,
        api_version: version,
        exchange: None,
        metadata: api == Some(ApiKey::Metadata),
    };
    let (Some(api), true) = (api, correlation_id >= 0) else {
        // Not an API at all (or the proxy's own duplicate, under a negative
        // correlation id, whose answer the client never saw).
        return Ok((correlation_id, pending));
    };
    let header_version = match api {
        ApiKey::Produce => kafka_protocol::messages::ProduceRequest::header_version(version),
        ApiKey::Fetch => kafka_protocol::messages::FetchRequest::header_version(version),
        ApiKey::OffsetCommit => {
            kafka_protocol::messages::OffsetCommitRequest::header_version(version)
        }
        ApiKey::OffsetFetch => {
            kafka_protocol::messages::OffsetFetchRequest::header_version(version)
        }
        ApiKey::CreateTopics => {
            kafka_protocol::messages::CreateTopicsRequest::header_version(version)
        }
        ApiKey::DeleteTopics => {
            kafka_protocol::messages::DeleteTopicsRequest::header_version(version)
        }
        ApiKey::JoinGroup => messages::JoinGroupRequest::header_version(version),
        ApiKey::SyncGroup => messages::SyncGroupRequest::header_version(version),
        ApiKey::InitProducerId => messages::InitProducerIdRequest::header_version(version),
        ApiKey::AddPartitionsToTxn => messages::AddPartitionsToTxnRequest::header_version(version),
        ApiKey::AddOffsetsToTxn => messages::AddOffsetsToTxnRequest::header_version(version),
        ApiKey::TxnOffsetCommit => messages::TxnOffsetCommitRequest::header_version(version),
        ApiKey::EndTxn => messages::EndTxnRequest::header_version(version),
        ApiKey::OffsetDelete => messages::OffsetDeleteRequest::header_version(version),
        ApiKey::DeleteGroups => messages::DeleteGroupsRequest::header_version(version),
        // Not an API of the history.
        _ => return Ok((correlation_id, pending)),
    };
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| fail(format!("request header: {e:#}")))?;
    let call = match api {
        ApiKey::JoinGroup
        | ApiKey::SyncGroup
        | ApiKey::InitProducerId
        | ApiKey::AddPartitionsToTxn
        | ApiKey::AddOffsetsToTxn
        | ApiKey::TxnOffsetCommit
        | ApiKey::EndTxn
        | ApiKey::OffsetDelete
        | ApiKey::DeleteGroups => {
            group_or_txn_request(api, frame, version).map_err(|e| fail(e.to_string()))?
        }
        ApiKey::Produce => {
            Call::Produce(produce::request(frame, version).map_err(|e| fail(e.to_string()))?)
        }
        ApiKey::OffsetCommit => Call::OffsetCommit(
            groups::commit_request(frame, version).map_err(|e| fail(e.to_string()))?,
        ),
        ApiKey::OffsetFetch => Call::OffsetFetch(
            groups::fetch_request(frame, version).map_err(|e| fail(e.to_string()))?,
        ),
        ApiKey::CreateTopics => Call::CreateTopics(
            admin::create_request(frame, version).map_err(|e| fail(e.to_string()))?,
        ),
        ApiKey::DeleteTopics => Call::DeleteTopics(
            admin::delete_request(frame, version).map_err(|e| fail(e.to_string()))?,
        ),
        _ => match fetch::request(frame, version).map_err(|e| fail(e.to_string()))? {
            Some(fetch) => Call::Fetch(fetch),
            // A replica's fetch on a client link is no application's.
            None => return Ok((correlation_id, pending)),
        },
    };
    pending.exchange = Some(Exchange {
        proxy: proxy.to_owned(),
        connection,
        client_id: header.client_id.map(|c| c.to_string()),
        correlation_id,
        request_ns: time_ns,
        response_ns: None,
        call,
    });
    Ok((correlation_id, pending))
}

/// Reads `frame`, the answer to `call` at `version`, into it.
fn answer(call: &mut Call, version: i16, frame: Bytes) -> Result<(), DecodeError> {
    match call {
        Call::Produce(produce) => produce::answer(produce, version, frame),
        Call::Fetch(fetch) => fetch::answer(fetch, version, frame),
        Call::OffsetCommit(commit) => groups::commit_answer(commit, version, frame),
        Call::OffsetFetch(fetch) => groups::fetch_answer(fetch, version, frame),
        Call::CreateTopics(admin) => admin::create_answer(admin, version, frame),
        Call::DeleteTopics(admin) => admin::delete_answer(admin, version, frame),
        Call::JoinGroup(join) => members::join_answer(join, version, frame),
        Call::SyncGroup(sync) => members::sync_answer(sync, version, frame),
        Call::InitProducerId(init) => txn::init_answer(init, version, frame),
        Call::AddPartitionsToTxn(add) => txn::add_partitions_answer(add, version, frame),
        Call::AddOffsetsToTxn(add) => txn::add_offsets_answer(add, version, frame),
        Call::TxnOffsetCommit(commit) => txn::offset_commit_answer(commit, version, frame),
        Call::EndTxn(end) => txn::end_answer(end, version, frame),
        Call::OffsetDeletion(d) if d.whole_groups => {
            deletion::delete_groups_answer(d, version, frame)
        }
        Call::OffsetDeletion(d) => deletion::offset_delete_answer(d, version, frame),
    }
}

/// The body of a group-membership, offset-deletion or transaction request
/// (its header read).
fn group_or_txn_request(api: ApiKey, frame: Bytes, version: i16) -> Result<Call, DecodeError> {
    Ok(match api {
        ApiKey::JoinGroup => Call::JoinGroup(members::join_request(frame, version)?),
        ApiKey::SyncGroup => Call::SyncGroup(members::sync_request(frame, version)?),
        ApiKey::InitProducerId => Call::InitProducerId(txn::init_request(frame, version)?),
        ApiKey::AddPartitionsToTxn => {
            Call::AddPartitionsToTxn(txn::add_partitions_request(frame, version)?)
        }
        ApiKey::AddOffsetsToTxn => Call::AddOffsetsToTxn(txn::add_offsets_request(frame, version)?),
        ApiKey::TxnOffsetCommit => {
            Call::TxnOffsetCommit(txn::offset_commit_request(frame, version)?)
        }
        ApiKey::OffsetDelete => {
            Call::OffsetDeletion(deletion::offset_delete_request(frame, version)?)
        }
        ApiKey::DeleteGroups => {
            Call::OffsetDeletion(deletion::delete_groups_request(frame, version)?)
        }
        _ => Call::EndTxn(txn::end_request(frame, version)?),
    })
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;
