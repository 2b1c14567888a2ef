//! Transactions as a replica's log records them (KIP-98), read by the
//! harness's own code: which transaction each transactional data batch
//! belongs to and how it ended, and whether the aborted-transaction index
//! (`.txnindex`) agrees with the log's markers.
//!
//! The model (KIP-98, "Transactional Messaging in Kafka", and Kafka's
//! `ProducerStateManager`): a producer id has at most one transaction open on
//! a partition at a time. Its first transactional data batch opens it; the
//! next control batch of the same producer id ends it — a COMMIT marker
//! (control record key `version i16, type i16 = 1`) or an ABORT marker (type
//! 0); the marker's value is `version i16, coordinator_epoch i32`
//! (`EndTransactionMarker`). Until a marker follows, the transaction is open,
//! and a read_committed consumer cannot read past its first offset (the last
//! stable offset). Control batches hold no data.
//!
//! A segment's `<base>.txnindex` lists the aborted transactions whose marker
//! is in that segment, 34 bytes each: `version i16 = 0, producer_id i64,
//! first_offset i64, last_offset i64, last_stable_offset i64` (`AbortedTxn`),
//! `last_offset` being the marker's offset and `first_offset` the
//! transaction's first offset on the partition (the marker's own, when the
//! transaction wrote nothing there). The index is what read_committed fetches
//! are told to drop; the log's markers are the truth it is held to here, and
//! each disagreement is a [`Finding`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::finding::{Finding, FindingKind, Location};
use super::segment::{Batch, be_i16, be_i32, be_i64};

/// Bytes of one `.txnindex` entry.
pub const TXN_INDEX_ENTRY_BYTES: usize = 34;
/// The only `AbortedTxn` version Kafka writes.
const TXN_INDEX_VERSION: i16 = 0;

/// How a transaction ended on a partition, as its log says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxnOutcome {
    /// A COMMIT marker of its producer follows it.
    Committed,
    /// An ABORT marker of its producer follows it.
    Aborted,
    /// No marker of its producer follows it (yet).
    Open,
}

/// A transaction marker (a control batch's one record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// The marker a control batch holds, if it is one: one record whose key is
/// `version, type` with type 0 (abort) or 1 (commit). Other control record
/// types (KRaft's) end no transaction.
pub fn marker(batch: &Batch) -> Option<Marker> {
    if !batch.is_control() || !batch.intact {
        return None;
    }
    let [record] = batch.records.as_slice() else {
        return None;
    };
    let key = record.key.as_ref()?.as_bytes();
    if key.len() < 4 {
        return None;
    }
    let commit = match be_i16(key, 2) {
        0 => false,
        1 => true,
        _ => return None,
    };
    let coordinator_epoch = record
        .value
        .as_ref()
        .map(|v| v.as_bytes())
        .filter(|v| v.len() >= 6)
        .map_or(-1, |v| be_i32(v, 2));
    Some(Marker {
        commit,
        coordinator_epoch,
    })
}

/// One transaction of one producer on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTxn {
    pub producer_id: i64,
    /// The epoch of its first batch (the marker's, when it wrote nothing).
    pub producer_epoch: i16,
    /// Its first data offset here; the marker's offset when it wrote none.
    pub first_offset: i64,
    /// The last offset of its last data batch, when it wrote any.
    pub last_data_offset: Option<i64>,
    pub outcome: TxnOutcome,
    /// The marker that ended it, and where.
    pub marker_offset: Option<i64>,
    pub marker_epoch: Option<i16>,
    pub coordinator_epoch: Option<i32>,
}

/// A replica's transactions, and for each transactional data batch the
/// transaction it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transactions {
    /// In the order they began (first offset).
    pub txns: Vec<LogTxn>,
    /// `(base_offset, last_offset, index into txns)` of every intact
    /// transactional data batch, in offset order.
    spans: Vec<(i64, i64, usize)>,
}

impl Transactions {
    /// Reads batches given in offset order (`ReplicaState::transactions`
    /// reads a replica's).
    pub fn of_batches<'b>(batches: impl Iterator<Item = &'b Batch>) -> Transactions {
        let mut txns: Vec<LogTxn> = Vec::new();
        let mut spans = Vec::new();
        // Each producer's open transaction: its index in `txns`.
        let mut open: HashMap<i64, usize> = HashMap::new();
        for batch in batches.filter(|b| b.intact && b.is_transactional()) {
            if batch.is_control() {
                let Some(marker) = marker(batch) else {
                    continue;
                };
                let at = match open.remove(&batch.producer_id) {
                    Some(at) => at,
                    // A marker with nothing before it: a transaction that
                    // wrote nothing here (the coordinator marks every
                    // partition it added).
                    None => {
                        txns.push(LogTxn {
                            producer_id: batch.producer_id,
                            producer_epoch: batch.producer_epoch,
                            first_offset: batch.base_offset,
                            last_data_offset: None,
                            outcome: TxnOutcome::Open,
                            marker_offset: None,
                            marker_epoch: None,
                            coordinator_epoch: None,
                        });
                        txns.len() - 1
                    }
                };
                let txn = &mut txns[at];
                txn.outcome = if marker.commit {
                    TxnOutcome::Committed
                } else {
                    TxnOutcome::Aborted
                };
                txn.marker_offset = Some(batch.base_offset);
                txn.marker_epoch = Some(batch.producer_epoch);
                txn.coordinator_epoch = Some(marker.coordinator_epoch);
                continue;
            }
            let at = *open.entry(batch.producer_id).or_insert_with(|| {
                txns.push(LogTxn {
                    producer_id: batch.producer_id,
                    producer_epoch: batch.producer_epoch,
                    first_offset: batch.base_offset,
                    last_data_offset: None,
                    outcome: TxnOutcome::Open,
                    marker_offset: None,
                    marker_epoch: None,
                    coordinator_epoch: None,
                });
                txns.len() - 1
            });
            txns[at].last_data_offset = Some(batch.last_offset);
            spans.push((batch.base_offset, batch.last_offset, at));
        }
        Transactions { txns, spans }
    }

    /// Whether the replica holds any transactional data or marker.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// The transaction whose data batch holds `offset`, if a transactional
    /// data batch does.
    pub fn txn_at(&self, offset: i64) -> Option<&LogTxn> {
        let i = self.spans.partition_point(|&(_, last, _)| last < offset);
        let &(base, _, at) = self.spans.get(i)?;
        (base <= offset).then(|| &self.txns[at])
    }

    /// How the record at `offset` ended: `None` when it is no transactional
    /// data record.
    pub fn outcome_at(&self, offset: i64) -> Option<TxnOutcome> {
        self.txn_at(offset).map(|t| t.outcome)
    }

    /// Whether the record at `offset` belongs to an aborted transaction.
    pub fn aborted(&self, offset: i64) -> bool {
        self.outcome_at(offset) == Some(TxnOutcome::Aborted)
    }

    /// The transactions no marker ended, in offset order.
    pub fn open(&self) -> impl Iterator<Item = &LogTxn> {
        self.txns.iter().filter(|t| t.outcome == TxnOutcome::Open)
    }
}

/// One entry of a `.txnindex` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// `<20-digit base offset>.txnindex`.
fn txn_index_base_offset(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".txnindex")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The `.txnindex` files of a replica directory (relative to `root`), by
/// base offset.
pub(super) fn txn_index_files(root: &Path, dir: &Path) -> Vec<(i64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return Vec::new();
    };
    let mut files: Vec<(i64, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            Some((txn_index_base_offset(name)?, dir.join(name)))
        })
        .collect();
    files.sort();
    files
}

/// Parses one `.txnindex` file's bytes (`file`: its path, for findings):
/// every whole entry, with a finding for an unknown version or a torn tail.
pub fn parse_txn_index(
    file: &Path,
    bytes: &[u8],
    findings: &mut Vec<Finding>,
) -> Vec<(u64, AbortedTxn)> {
    let mut entries = Vec::with_capacity(bytes.len() / TXN_INDEX_ENTRY_BYTES);
    let chunks = bytes.chunks_exact(TXN_INDEX_ENTRY_BYTES);
    let torn = chunks.remainder().len();
    for (i, entry) in chunks.enumerate() {
        let position = (i * TXN_INDEX_ENTRY_BYTES) as u64;
        let version = be_i16(entry, 0);
        if version != TXN_INDEX_VERSION {
            findings.push(Finding {
                file: file.to_owned(),
                at: Location::Byte(position),
                kind: FindingKind::TxnIndexUnknownVersion { version },
            });
            continue;
        }
        entries.push((
            position,
            AbortedTxn {
                producer_id: be_i64(entry, 2),
                first_offset: be_i64(entry, 10),
                last_offset: be_i64(entry, 18),
                last_stable_offset: be_i64(entry, 26),
            },
        ));
    }
    if torn > 0 {
        // Kafka's sanity check refuses an index whose size is not a
        // multiple of the entry size (`TransactionIndex.sanityCheck`).
        findings.push(Finding {
            file: file.to_owned(),
            at: Location::Byte((bytes.len() - torn) as u64),
            kind: FindingKind::TxnIndexTorn {
                bytes_remaining: torn as u64,
                bytes_needed: TXN_INDEX_ENTRY_BYTES as u64,
            },
        });
    }
    entries
}

/// Reads a replica's `.txnindex` files and holds them to the aborted
/// transactions its markers record, adding a finding for each disagreement:
/// an entry no ABORT marker of its producer at its `last_offset` backs (or
/// whose `first_offset` is not that transaction's), and an ABORT marker no
/// entry lists. A replica directory with neither an index file nor a
/// leader-epoch-checkpoint (the final read's) owes no index.
pub(super) fn check_txn_index<'b>(
    root: &Path,
    dir: &Path,
    batches: impl Iterator<Item = &'b Batch> + Clone,
    findings: &mut Vec<Finding>,
) {
    let files = txn_index_files(root, dir);
    // The final read over the protocol writes segments alone (no epoch
    // file, no index): only a broker's own replica owes an index.
    if files.is_empty()
        && !root
            .join(dir)
            .join(super::checkpoint::LEADER_EPOCH_CHECKPOINT)
            .exists()
    {
        return;
    }
    let txns = Transactions::of_batches(batches.clone());
    let aborted: BTreeMap<(i64, i64), &LogTxn> = txns
        .txns
        .iter()
        .filter(|t| t.outcome == TxnOutcome::Aborted)
        .filter_map(|t| Some(((t.marker_offset?, t.producer_id), t)))
        .collect();
    if files.is_empty() && aborted.is_empty() {
        return;
    }
    let mut listed: BTreeMap<(i64, i64), ()> = BTreeMap::new();
    for (_, file) in files {
        let bytes = match std::fs::read(root.join(&file)) {
            Ok(bytes) => bytes,
            Err(error) => {
                findings.push(Finding {
                    file,
                    at: Location::File,
                    kind: FindingKind::Unreadable {
                        error: error.to_string(),
                    },
                });
                continue;
            }
        };
        for (position, entry) in parse_txn_index(&file, &bytes, findings) {
            let key = (entry.last_offset, entry.producer_id);
            let at = Location::Byte(position);
            match aborted.get(&key) {
                None => findings.push(Finding {
                    file: file.clone(),
                    at,
                    kind: FindingKind::TxnIndexEntryWithoutAbort {
                        producer_id: entry.producer_id,
                        first_offset: entry.first_offset,
                        last_offset: entry.last_offset,
                    },
                }),
                Some(txn) if txn.first_offset != entry.first_offset => findings.push(Finding {
                    file: file.clone(),
                    at,
                    kind: FindingKind::TxnIndexFirstOffsetDisagrees {
                        producer_id: entry.producer_id,
                        last_offset: entry.last_offset,
                        index_first_offset: entry.first_offset,
                        log_first_offset: txn.first_offset,
                    },
                }),
                Some(_) => {}
            }
            listed.insert(key, ());
        }
    }
    for (key, txn) in &aborted {
        if listed.contains_key(key) {
            continue;
        }
        let (file, position) = batch_at(batches.clone(), key.0)
            .map_or((dir.to_owned(), Location::File), |b| {
                (b.file.to_path_buf(), Location::Byte(b.position))
            });
        findings.push(Finding {
            file,
            at: position,
            kind: FindingKind::AbortNotInTxnIndex {
                producer_id: txn.producer_id,
                first_offset: txn.first_offset,
                marker_offset: key.0,
            },
        });
    }
}

/// The intact batch whose base offset is `offset`.
fn batch_at<'b>(mut batches: impl Iterator<Item = &'b Batch>, offset: i64) -> Option<&'b Batch> {
    batches.find(|b| b.intact && b.base_offset == offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::{Codec, Payload, Record};
    use std::sync::Arc;

    /// A batch of `producer` at `base`: data records with `values`, or a
    /// marker (`Some(commit)`).
    pub(crate) fn batch(producer: i64, base: i64, values: &[i64], marker: Option<bool>) -> Batch {
        let records: Vec<Record> = match marker {
            Some(commit) => vec![Record {
                offset: base,
                timestamp: 0,
                key: Some(Payload::from(vec![0, 0, 0, u8::from(commit)])),
                value: Some(Payload::from(vec![0, 0, 0, 0, 0, 5])),
                headers: Box::default(),
            }],
            None => values
                .iter()
                .enumerate()
                .map(|(i, v)| Record {
                    offset: base + i as i64,
                    timestamp: 0,
                    key: None,
                    value: Some(Payload::from(v.to_string().into_bytes())),
                    headers: Box::default(),
                })
                .collect(),
        };
        let control = if marker.is_some() { 0x20 } else { 0 };
        Batch {
            file: Arc::from(Path::new("t-0/00000000000000000000.log")),
            position: base as u64 * 100,
            size_bytes: 100,
            base_offset: base,
            last_offset: base + records.len() as i64 - 1,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            crc_valid: true,
            attributes: if producer >= 0 { 0x10 | control } else { 0 },
            codec: Codec::None,
            first_timestamp: 0,
            max_timestamp: 0,
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: 0,
            records_count: records.len() as i32,
            intact: true,
            records,
        }
    }

    #[test]
    fn each_batch_ends_as_the_next_marker_of_its_producer_says() {
        let batches = [
            batch(7, 0, &[1, 2], None),
            batch(8, 2, &[3], None),
            batch(-1, 3, &[4], None),
            batch(7, 4, &[5], None),
            batch(8, 5, &[], Some(false)),
            batch(7, 6, &[], Some(true)),
            batch(9, 7, &[], Some(false)),
            batch(7, 8, &[6], None),
        ];
        let txns = Transactions::of_batches(batches.iter());
        let outcome = |o| txns.outcome_at(o);
        assert_eq!(outcome(0), Some(TxnOutcome::Committed));
        assert_eq!(outcome(1), Some(TxnOutcome::Committed));
        assert_eq!(outcome(2), Some(TxnOutcome::Aborted));
        assert_eq!(outcome(3), None, "a plain batch");
        assert_eq!(outcome(4), Some(TxnOutcome::Committed));
        assert_eq!(outcome(5), None, "a marker holds no data");
        assert_eq!(outcome(8), Some(TxnOutcome::Open));
        assert_eq!(txns.txns.len(), 4);
        let empty = &txns.txns[2];
        assert_eq!(
            (empty.producer_id, empty.first_offset, empty.outcome),
            (9, 7, TxnOutcome::Aborted)
        );
        let open: Vec<i64> = txns.open().map(|t| t.first_offset).collect();
        assert_eq!(open, vec![8]);
    }

    #[test]
    fn the_index_is_held_to_the_markers() {
        let dir = tempfile::tempdir().unwrap();
        let replica = Path::new("t-0");
        std::fs::create_dir(dir.path().join(replica)).unwrap();
        let batches = [
            batch(7, 0, &[1], None),
            batch(7, 1, &[], Some(false)),
            batch(8, 2, &[2], None),
            batch(8, 3, &[], Some(false)),
        ];
        let entry = |pid: i64, first: i64, last: i64| {
            let mut b = vec![0u8, 0];
            for v in [pid, first, last, 0] {
                b.extend_from_slice(&v.to_be_bytes());
            }
            b
        };
        // Producer 7's abort listed right; producer 8's listed with the
        // wrong first offset; an entry for a commit that never aborted;
        // and a torn tail.
        let mut bytes = entry(7, 0, 1);
        bytes.extend(entry(8, 1, 3));
        bytes.extend(entry(9, 4, 4));
        bytes.extend([0u8; 5]);
        std::fs::write(
            dir.path()
                .join(replica)
                .join("00000000000000000000.txnindex"),
            &bytes,
        )
        .unwrap();
        let mut findings = Vec::new();
        check_txn_index(dir.path(), replica, batches.iter(), &mut findings);
        let kinds: Vec<&FindingKind> = findings.iter().map(|f| &f.kind).collect();
        assert_eq!(
            kinds,
            vec![
                &FindingKind::TxnIndexTorn {
                    bytes_remaining: 5,
                    bytes_needed: 34,
                },
                &FindingKind::TxnIndexFirstOffsetDisagrees {
                    producer_id: 8,
                    last_offset: 3,
                    index_first_offset: 1,
                    log_first_offset: 2,
                },
                &FindingKind::TxnIndexEntryWithoutAbort {
                    producer_id: 9,
                    first_offset: 4,
                    last_offset: 4,
                },
            ]
        );
        // Without the index file, a broker's replica (it has an epoch
        // file) misses each abort; the final read's (no epoch file) owes none.
        std::fs::remove_file(
            dir.path()
                .join(replica)
                .join("00000000000000000000.txnindex"),
        )
        .unwrap();
        let mut findings = Vec::new();
        check_txn_index(dir.path(), replica, batches.iter(), &mut findings);
        assert_eq!(findings, vec![]);
        std::fs::write(
            dir.path().join(replica).join("leader-epoch-checkpoint"),
            "0\n0\n",
        )
        .unwrap();
        let mut findings = Vec::new();
        check_txn_index(dir.path(), replica, batches.iter(), &mut findings);
        assert_eq!(findings.len(), 2, "{findings:?}");
        assert!(matches!(
            findings[0].kind,
            FindingKind::AbortNotInTxnIndex {
                producer_id: 7,
                first_offset: 0,
                marker_offset: 1
            }
        ));
        assert_eq!(findings[1].at, Location::Byte(300));
    }
}
