//! The synthetic run's transactional producers ([transactions]): each runs
//! `txn` ops of two sends and a read_committed poll, one at a time, meant
//! to commit (every `txn_abort_every`-th of the spec to abort). As a
//! transactional producer's requests land (KIP-98), the invoke appends the
//! transaction's data batches at once (open: read_uncommitted consumers see
//! them, read_committed ones stop before them) and reads; the completion
//! appends a marker to each partition it wrote, commit or abort, and
//! answers `ok` with the sends' offsets, the poll's records, the producer
//! and `commit_ns` (just before the completion). Reads of committed data
//! stop at the last stable offset: the first offset of a transaction still
//! open on the partition.

use std::collections::{BTreeMap, HashMap};

use super::subscribers::NO_VALUE;
use crate::history::{Intent, MicroOp, Txn, TxnPoll, TxnSend};

/// The first transactional producer's id; the others count up from it.
pub const TXN_PRODUCER_ID_BASE: i64 = 7_000;
/// Records a transaction's poll returns at most.
pub(super) const TXN_POLL_RECORDS_MAX: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Committed,
    Aborted,
}

/// One transactional producer.
pub(super) struct Transactor {
    pub producer_id: i64,
    /// Per partition, where its read_committed consumer polls next.
    pub positions: Vec<u64>,
    /// The transaction in flight: its serial, the partitions it wrote and
    /// its completion's body.
    pub in_flight: Option<(u32, Vec<usize>, Txn)>,
}

/// Every transactional producer, and what the logs hold of transactions.
pub(super) struct Transactors {
    abort_every: u64,
    pub members: Vec<Transactor>,
    /// Per partition: offset → the serial of the transaction whose data is there.
    txn_at: Vec<HashMap<i64, u32>>,
    /// Per transaction serial: how it stands.
    states: Vec<State>,
    /// Per partition: the first offset of each open transaction → its serial.
    open_first: Vec<BTreeMap<i64, u32>>,
}

impl Transactors {
    /// `transactors` producers over `partitions`, every `abort_every`-th
    /// transaction aborted (0: none).
    pub(super) fn new(transactors: u64, partitions: u32, abort_every: u64) -> Transactors {
        let partitions = partitions as usize;
        Transactors {
            abort_every,
            members: (0..transactors)
                .map(|t| Transactor {
                    producer_id: TXN_PRODUCER_ID_BASE + t as i64,
                    positions: vec![0; partitions],
                    in_flight: None,
                })
                .collect(),
            txn_at: vec![HashMap::new(); partitions],
            states: Vec::new(),
            open_first: vec![BTreeMap::new(); partitions],
        }
    }

    /// A new transaction: its serial and what it is meant to end with.
    pub(super) fn begin(&mut self) -> (u32, Intent) {
        let serial = self.states.len() as u32;
        self.states.push(State::Open);
        let every = self.abort_every;
        let intent = if every > 0 && u64::from(serial) % every == every - 1 {
            Intent::Abort
        } else {
            Intent::Commit
        };
        (serial, intent)
    }

    /// Transaction `serial` wrote at `offset` of partition `p`; `first`:
    /// its first write there, which opens it on `p`.
    pub(super) fn wrote(&mut self, p: usize, offset: i64, serial: u32, first: bool) {
        self.txn_at[p].insert(offset, serial);
        if first {
            self.open_first[p].insert(offset, serial);
        }
    }

    /// Transaction `serial` ended on each partition of `written`.
    pub(super) fn ended(&mut self, serial: u32, written: &[usize], commit: bool) {
        for &p in written {
            self.open_first[p].retain(|_, s| *s != serial);
        }
        self.states[serial as usize] = if commit {
            State::Committed
        } else {
            State::Aborted
        };
    }

    /// Partition `p`'s last stable offset: the first offset of a
    /// transaction open on it, else its end (`log_end`).
    pub(super) fn stable_offset(&self, p: usize, log_end: usize) -> usize {
        self.open_first[p]
            .keys()
            .next()
            .map_or(log_end, |&first| first as usize)
    }

    /// Whether `value` at `offset` of partition `p` is committed data: a
    /// plain record, or one of a committed transaction (no marker).
    pub(super) fn committed(&self, p: usize, offset: i64, value: i64) -> bool {
        match self.txn_at[p].get(&offset) {
            Some(&serial) => self.states[serial as usize] == State::Committed,
            None => value != NO_VALUE,
        }
    }
}

/// The invoke of a transaction whose completion is `done`: its micro-ops
/// without results, no producer yet.
pub(super) fn invoke_of(done: &Txn) -> Txn {
    Txn {
        ops: done
            .ops
            .iter()
            .map(|op| match op {
                MicroOp::Send(send) => MicroOp::Send(TxnSend {
                    offset: None,
                    ..send.clone()
                }),
                MicroOp::Poll(poll) => MicroOp::Poll(TxnPoll {
                    records: None,
                    ..poll.clone()
                }),
            })
            .collect(),
        producer: None,
        ..done.clone()
    }
}
