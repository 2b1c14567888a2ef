//! What the proxy recorded of the Kafka requests it forwarded, and on client
//! links of the responses too (`epochal-proxy --record`; the format is
//! `faults/src/proxy/link/record.rs`'s), read back with the harness's own
//! reader, and the one kind of request the checkers read from it here: a
//! replica's Fetch, which says which offset of each partition the replica
//! held when it sent it (every offset below its fetch offset). A client
//! link's requests and responses are an application's history
//! (`crate::app`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchRequest, RequestHeader};
use kafka_protocol::protocol::{Decodable, HeaderVersion};
use serde::{Deserialize, Serialize};

use crate::history::clock::ClockPair;
use crate::node::NodeId;

/// A recording stamped with the monotonic clock, with the clocks' anchor
/// after the magic (two u64: wall ns, monotonic ns).
pub const MAGIC: &[u8] = b"EPFRAMES2\n";
/// A recording stamped with the wall clock, with no anchor: still read.
pub const MAGIC_WALL: &[u8] = b"EPFRAMES1\n";
const ANCHOR: usize = 16;
const KIND_REQUEST: u8 = 0;
const KIND_RESPONSE: u8 = 1;
const KIND_GAP: u8 = 2;
/// time (8), connection (8), kind (1), length (4).
const RECORD_HEAD: usize = 21;

/// One recorded request or response (its frame after the size prefix), or
/// a gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    Request {
        time_ns: u64,
        connection: u64,
        frame: Bytes,
    },
    /// A response the proxy wrote back to the client (client links only):
    /// its correlation id names the connection's request it answers.
    Response {
        time_ns: u64,
        connection: u64,
        frame: Bytes,
    },
    /// The proxy dropped `frames` requests here (its writer fell behind).
    Gap { time_ns: u64, frames: u32 },
}

#[derive(Debug, thiserror::Error)]
pub enum FramesError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a recording of epochal-proxy (no {:?} at its start)", path.display(), String::from_utf8_lossy(MAGIC))]
    NotFrames { path: PathBuf },
}

/// Every record of one recording; a record cut short at the end (the proxy
/// ended mid-write) is left out. Each time is in ns since the Unix epoch as
/// the history's clock places it: a monotonic stamp goes through `history`,
/// the clocks the history read when it opened (`clock.json`), or, when the
/// run has none, through the recording's own anchor; a wall-clock stamp (an
/// `EPFRAMES1` recording) is kept as it is.
pub fn read_recording(
    path: &Path,
    history: Option<ClockPair>,
) -> Result<Vec<Recorded>, FramesError> {
    let data = std::fs::read(path).map_err(|source| FramesError::Io {
        path: path.to_owned(),
        source,
    })?;
    if data.starts_with(MAGIC) && data.len() < MAGIC.len() + ANCHOR {
        // The head is written at once; cut short, the file holds no record.
        return Ok(Vec::new());
    }
    let (start, pair) = if data.starts_with(MAGIC) {
        let u64_at = |i: usize| u64::from_be_bytes(data[i..i + 8].try_into().expect("8 bytes"));
        let anchor = ClockPair {
            unix_ns: u64_at(MAGIC.len()),
            monotonic_ns: u64_at(MAGIC.len() + 8),
        };
        (MAGIC.len() + ANCHOR, Some(history.unwrap_or(anchor)))
    } else if data.starts_with(MAGIC_WALL) {
        (MAGIC_WALL.len(), None)
    } else {
        return Err(FramesError::NotFrames {
            path: path.to_owned(),
        });
    };
    let place = |time_ns: u64| pair.map_or(time_ns, |p| p.wall_ns_of(time_ns));
    let data = Bytes::from(data);
    let mut at = start;
    let mut out = Vec::new();
    while at + RECORD_HEAD <= data.len() {
        let u64_at = |i: usize| u64::from_be_bytes(data[i..i + 8].try_into().expect("8 bytes"));
        let time_ns = place(u64_at(at));
        let connection = u64_at(at + 8);
        let kind = data[at + 16];
        let len = u32::from_be_bytes(data[at + 17..at + 21].try_into().expect("4 bytes"));
        at += RECORD_HEAD;
        if kind == KIND_GAP {
            out.push(Recorded::Gap {
                time_ns,
                frames: len,
            });
            continue;
        }
        let end = at + len as usize;
        if end > data.len() {
            break;
        }
        let frame = data.slice(at..end);
        out.push(match kind {
            KIND_REQUEST => Recorded::Request {
                time_ns,
                connection,
                frame,
            },
            KIND_RESPONSE => Recorded::Response {
                time_ns,
                connection,
                frame,
            },
            _ => break,
        });
        at = end;
    }
    Ok(out)
}

/// A replica's Fetch as the proxy forwarded it: `replica` held every offset
/// of the partition below `fetch_offset` when it sent it, no later than
/// `time_ns` (wall clock, ns since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaFetch {
    pub time_ns: u64,
    pub replica: i32,
    pub topic: String,
    pub partition: i32,
    pub fetch_offset: i64,
}

/// What one link's recording says about replicas' fetches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkFetches {
    pub fetches: Vec<ReplicaFetch>,
    /// When the proxy dropped requests it could not record: nothing is
    /// known of the link there.
    pub gaps_ns: Vec<u64>,
    /// Fetch requests that could not be read, or that name topics by id
    /// (version 13 on): counted, never guessed at.
    pub unreadable: u64,
}

/// The replicas' Fetch requests in one recording (consumers' fetches, with
/// replica id -1, are not replicas').
pub fn replica_fetches(recorded: &[Recorded]) -> LinkFetches {
    let mut out = LinkFetches::default();
    for record in recorded {
        let (time_ns, frame) = match record {
            Recorded::Gap { time_ns, .. } => {
                out.gaps_ns.push(*time_ns);
                continue;
            }
            Recorded::Request { time_ns, frame, .. } => (*time_ns, frame),
            Recorded::Response { .. } => continue,
        };
        if frame.len() < 4 || i16::from_be_bytes([frame[0], frame[1]]) != ApiKey::Fetch as i16 {
            continue;
        }
        match decode_fetch(frame.clone()) {
            Some(fetch) => {
                let replica = fetch.replica_id.0.max(fetch.replica_state.replica_id.0);
                if replica < 0 {
                    continue;
                }
                for topic in &fetch.topics {
                    if topic.topic.0.is_empty() {
                        out.unreadable += 1;
                        continue;
                    }
                    for p in &topic.partitions {
                        out.fetches.push(ReplicaFetch {
                            time_ns,
                            replica,
                            topic: topic.topic.0.to_string(),
                            partition: p.partition,
                            fetch_offset: p.fetch_offset,
                        });
                    }
                }
            }
            None => out.unreadable += 1,
        }
    }
    out
}

/// Every replica fetch of a run's recordings (a directory of `.frames`
/// files, one per link), gathered by replica and partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetches {
    /// (replica, topic, partition) → (time_ns, fetch_offset), in time order.
    pub by_replica: BTreeMap<(i32, String, i32), Vec<(u64, i64)>>,
    /// Replicas a gap of some link they dial leaves unknown: the proxy
    /// dropped requests there, so nothing is claimed of them.
    pub gapped: BTreeSet<i32>,
    /// Fetch requests that could not be read.
    pub unreadable: u64,
    /// Recordings read.
    pub links: usize,
}

impl Fetches {
    /// When `replica` first sent a fetch of the partition from past
    /// `offset` (it held `offset` then), if the recordings show one.
    pub fn first_past(
        &self,
        replica: i32,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Option<u64> {
        self.by_replica
            .get(&(replica, topic.to_owned(), partition))?
            .iter()
            .find(|&&(_, fetch_offset)| fetch_offset > offset)
            .map(|&(time, _)| time)
    }
}

/// The recordings in `dir`; `None` when there is no such directory (runs
/// from before the proxy recorded, runtimes that do not record). Times are
/// placed through `history` ([`read_recording`]).
pub fn read_fetches(
    dir: &Path,
    history: Option<ClockPair>,
) -> Result<Option<Fetches>, FramesError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(FramesError::Io {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut fetches = Fetches::default();
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "frames"))
        .collect();
    paths.sort();
    for path in paths {
        // The dialler: `b2` of `b2-b1`. Only brokers fetch as replicas, so a
        // client link's recording (`client-b1`, every produce's payload) is
        // not read.
        let Some(dialler) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.split('-').next())
            .and_then(|s| s.parse::<NodeId>().ok())
        else {
            continue;
        };
        let link = replica_fetches(&read_recording(&path, history)?);
        fetches.links += 1;
        fetches.unreadable += link.unreadable;
        if !link.gaps_ns.is_empty() {
            fetches.gapped.insert(dialler.broker_id());
        }
        for f in link.fetches {
            fetches
                .by_replica
                .entry((f.replica, f.topic, f.partition))
                .or_default()
                .push((f.time_ns, f.fetch_offset));
        }
    }
    for times in fetches.by_replica.values_mut() {
        times.sort_unstable();
    }
    Ok(Some(fetches))
}

fn decode_fetch(mut frame: Bytes) -> Option<FetchRequest> {
    let version = i16::from_be_bytes([*frame.get(2)?, *frame.get(3)?]);
    let header_version = FetchRequest::header_version(version);
    RequestHeader::decode(&mut frame, header_version).ok()?;
    FetchRequest::decode(&mut frame, version).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn fetch_frame(version: i16, replica: i32, offset: i64) -> Bytes {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Fetch as i16)
            .with_request_api_version(version)
            .with_correlation_id(3)
            .with_client_id(Some(StrBytes::from_static_str("broker-2")));
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(replica))
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(1)
                            .with_fetch_offset(offset),
                    ]),
            ]);
        let mut out = BytesMut::new();
        header
            .encode(&mut out, FetchRequest::header_version(version))
            .unwrap();
        request.encode(&mut out, version).unwrap();
        out.freeze()
    }

    /// A wall-clock recording (`EPFRAMES1`): times kept as they are.
    fn recording(records: &[(u8, u64, &[u8])]) -> Vec<u8> {
        let mut out = MAGIC_WALL.to_vec();
        for (kind, time, bytes) in records {
            out.put_u64(*time);
            out.put_u64(1);
            out.put_u8(*kind);
            out.put_u32(bytes.len() as u32);
            out.put_slice(bytes);
        }
        out
    }

    #[test]
    fn a_recording_gives_each_replica_fetch_with_its_time_and_names_gaps_and_cut_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b2-b1.frames");
        let follower = fetch_frame(12, 2, 41);
        let consumer = fetch_frame(12, -1, 7);
        let mut data = recording(&[
            (KIND_REQUEST, 100, &follower),
            (KIND_REQUEST, 150, &consumer),
            (KIND_REQUEST, 170, b"\x00\x01\x00\x0cnot a fetch body"),
            // A client link's response: read, and no replica's fetch.
            (KIND_RESPONSE, 180, b"\x00\x00\x00\x03answer"),
        ]);
        // A gap of 3 frames, then a record cut short by the proxy's end.
        data.extend_from_slice(&recording(&[(KIND_GAP, 200, b"")])[MAGIC_WALL.len()..]);
        let gap_len = data.len() - 4;
        data[gap_len..].copy_from_slice(&3u32.to_be_bytes());
        data.extend_from_slice(
            &recording(&[(KIND_REQUEST, 300, &follower)])[MAGIC_WALL.len()..][..30],
        );
        std::fs::write(&path, &data).unwrap();
        let recorded = read_recording(&path, None).unwrap();
        assert_eq!(recorded.len(), 5, "{recorded:?}");
        assert!(
            matches!(&recorded[3], Recorded::Response { time_ns: 180, connection: 1, frame }
                if frame.as_ref() == b"\x00\x00\x00\x03answer"),
            "{recorded:?}"
        );
        let fetches = replica_fetches(&recorded);
        assert_eq!(
            fetches.fetches,
            vec![ReplicaFetch {
                time_ns: 100,
                replica: 2,
                topic: "t".into(),
                partition: 1,
                fetch_offset: 41
            }]
        );
        assert_eq!(fetches.gaps_ns, vec![200]);
        assert_eq!(fetches.unreadable, 1);
        std::fs::write(&path, b"something else").unwrap();
        let error = read_recording(&path, None).unwrap_err().to_string();
        assert!(
            error.contains("b2-b1.frames") && error.contains("not a recording"),
            "{error}"
        );
    }

    /// A monotonic recording is placed through the history's clocks, not
    /// through the wall clock the proxy read at its start: with the wall
    /// clock stepped 7.5 s between the two (as a VM's was), a fetch 100 ms
    /// after the history opened is 100 ms after it, not 7.6 s.
    #[test]
    fn a_monotonic_recording_is_placed_through_the_historys_clocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b2-b1.frames");
        let second = 1_000_000_000u64;
        // The proxy's anchor: wall 1000 s at monotonic 50 s.
        let mut data = MAGIC.to_vec();
        data.put_u64(1_000 * second);
        data.put_u64(50 * second);
        let follower = fetch_frame(12, 2, 41);
        data.extend_from_slice(
            &recording(&[(KIND_REQUEST, 60 * second, &follower)])[MAGIC_WALL.len()..],
        );
        std::fs::write(&path, &data).unwrap();
        // The history opened at monotonic 59.9 s, when the wall clock,
        // stepped since the proxy started, read 1017.4 s.
        let history = ClockPair {
            unix_ns: 1_017_400_000_000,
            monotonic_ns: 59_900_000_000,
        };
        let placed = read_recording(&path, Some(history)).unwrap();
        let time = |r: &[Recorded]| match r[0] {
            Recorded::Request { time_ns, .. } => time_ns,
            _ => panic!("{r:?}"),
        };
        assert_eq!(time(&placed) - history.unix_ns, 100_000_000);
        // With no clocks from the history, the file's own anchor places it.
        assert_eq!(time(&read_recording(&path, None).unwrap()), 1_010 * second);
    }
}
