//! A transactional id's state at its coordinator (KIP-98's
//! `TransactionMetadata`) and the transitions the client requests make, as
//! pure functions: each takes the state as the coordinator last wrote it
//! and says what to write to the transaction-state topic (and answer once
//! it is written), or the error Kafka answers. The coordinator around them
//! (writing, markers, timeouts) is the caller's.
//!
//! The rules are those of Kafka 2.x's `TransactionCoordinator` before KIP-890:
//! - InitProducerId of a new id takes a fresh producer id at epoch 0; of a
//!   known one, bumps the epoch (fencing the older producer) once the last
//!   transaction is complete — an ongoing one is aborted first, under the
//!   bumped epoch, and the client is told CONCURRENT_TRANSACTIONS until then;
//! - AddPartitionsToTxn / EndTxn from another producer id are
//!   INVALID_PRODUCER_ID_MAPPING, from an older epoch PRODUCER_FENCED, while
//!   a commit or abort is being written CONCURRENT_TRANSACTIONS;
//! - EndTxn of an ongoing transaction prepares its commit or abort (markers
//!   follow); repeated after it completed, the same outcome is answered
//!   again, the other one is INVALID_TXN_STATE.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

/// Kafka's `TransactionState`, with its ids in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnStatus {
    Empty = 0,
    Ongoing = 1,
    PrepareCommit = 2,
    PrepareAbort = 3,
    CompleteCommit = 4,
    CompleteAbort = 5,
    Dead = 6,
    PrepareEpochFence = 7,
}

impl TxnStatus {
    pub fn from_id(id: i8) -> Option<TxnStatus> {
        use TxnStatus::*;
        [
            Empty,
            Ongoing,
            PrepareCommit,
            PrepareAbort,
            CompleteCommit,
            CompleteAbort,
            Dead,
            PrepareEpochFence,
        ]
        .into_iter()
        .find(|s| *s as i8 == id)
    }

    /// A commit or abort is being written: markers are on their way.
    pub fn preparing(self) -> bool {
        matches!(self, TxnStatus::PrepareCommit | TxnStatus::PrepareAbort)
    }
}

/// What the coordinator keeps of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub status: TxnStatus,
    /// The partitions the ongoing (or completing) transaction wrote to.
    pub partitions: BTreeSet<(String, i32)>,
    pub last_update_ms: i64,
    /// When the ongoing transaction began (its first partition).
    pub start_ms: i64,
}

/// Why a request is refused: the error Kafka answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("the producer id is not this transactional id's")]
    InvalidProducerIdMapping,
    #[error("an older producer epoch: fenced by a newer producer")]
    ProducerFenced,
    #[error("a commit or abort is still being written")]
    ConcurrentTransactions,
    #[error("the transaction is not in a state that allows this")]
    InvalidTxnState,
    #[error("transaction timeout {0} ms above the broker's maximum")]
    InvalidTransactionTimeout(i32),
}

impl TxnError {
    pub fn code(self) -> ResponseError {
        match self {
            TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
            TxnError::ProducerFenced => ResponseError::ProducerFenced,
            TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
            TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
            TxnError::InvalidTransactionTimeout(_) => ResponseError::InvalidTransactionTimeout,
        }
    }
}

/// Kafka's `transaction.max.timeout.ms` default (15 minutes).
pub const MAX_TIMEOUT_MS: i32 = 900_000;

/// What InitProducerId comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Init {
    /// Write this state, then answer its producer id and epoch.
    Ready(TxnMetadata),
    /// An ongoing transaction must be aborted first, under the bumped epoch
    /// (fencing the old producer's further requests): write this
    /// PrepareAbort state and send the markers; the client is answered
    /// CONCURRENT_TRANSACTIONS and asks again.
    AbortFirst(TxnMetadata),
}

/// Whether `m`'s producer epoch can no longer be bumped.
fn epoch_spent(m: &TxnMetadata) -> bool {
    m.producer_epoch >= i16::MAX - 1
}

/// The next epoch of `m`'s producer, or a fresh producer id at epoch 0 when
/// the epoch is spent (Kafka's `prepareIncrementProducerEpoch`).
fn bumped(m: &TxnMetadata, fresh_producer_id: impl FnOnce() -> i64) -> (i64, i16) {
    if epoch_spent(m) {
        (fresh_producer_id(), 0)
    } else {
        (m.producer_id, m.producer_epoch + 1)
    }
}

/// The producer id and epoch an abort of `m`'s ongoing transaction is
/// written and marked under: the bumped epoch, fencing the producer; but
/// never a fresh producer id — the markers must name the producer whose
/// records they end, or its transaction stays open on every partition (the
/// last stable offset stuck). A spent epoch aborts under itself, as Kafka's
/// `abortTimedOutTransactions` does; the next InitProducerId moves to a
/// fresh id.
fn abort_epoch(m: &TxnMetadata) -> (i64, i16) {
    if epoch_spent(m) {
        (m.producer_id, m.producer_epoch)
    } else {
        (m.producer_id, m.producer_epoch + 1)
    }
}

pub fn init_producer_id(
    current: Option<&TxnMetadata>,
    timeout_ms: i32,
    now_ms: i64,
    fresh_producer_id: impl FnOnce() -> i64,
) -> Result<Init, TxnError> {
    if timeout_ms <= 0 || timeout_ms > MAX_TIMEOUT_MS {
        return Err(TxnError::InvalidTransactionTimeout(timeout_ms));
    }
    let Some(m) = current else {
        return Ok(Init::Ready(TxnMetadata {
            producer_id: fresh_producer_id(),
            producer_epoch: 0,
            timeout_ms,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            last_update_ms: now_ms,
            start_ms: -1,
        }));
    };
    match m.status {
        TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence => {
            Err(TxnError::ConcurrentTransactions)
        }
        TxnStatus::Ongoing => {
            let (producer_id, producer_epoch) = abort_epoch(m);
            Ok(Init::AbortFirst(TxnMetadata {
                producer_id,
                producer_epoch,
                status: TxnStatus::PrepareAbort,
                last_update_ms: now_ms,
                ..m.clone()
            }))
        }
        TxnStatus::Empty
        | TxnStatus::CompleteCommit
        | TxnStatus::CompleteAbort
        | TxnStatus::Dead => {
            let (producer_id, producer_epoch) = bumped(m, fresh_producer_id);
            Ok(Init::Ready(TxnMetadata {
                producer_id,
                producer_epoch,
                timeout_ms,
                status: TxnStatus::Empty,
                partitions: BTreeSet::new(),
                last_update_ms: now_ms,
                start_ms: -1,
            }))
        }
    }
}

/// The producer id and epoch a request names, checked against the state.
fn check_producer(
    current: Option<&TxnMetadata>,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<&TxnMetadata, TxnError> {
    let m = current.ok_or(TxnError::InvalidProducerIdMapping)?;
    if m.producer_id != producer_id {
        return Err(TxnError::InvalidProducerIdMapping);
    }
    if m.producer_epoch != producer_epoch {
        return Err(TxnError::ProducerFenced);
    }
    Ok(m)
}

/// AddPartitionsToTxn: `None` when the transaction already holds every
/// partition (nothing to write), else the state to write.
pub fn add_partitions(
    current: Option<&TxnMetadata>,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &BTreeSet<(String, i32)>,
    now_ms: i64,
) -> Result<Option<TxnMetadata>, TxnError> {
    let m = check_producer(current, producer_id, producer_epoch)?;
    if m.status.preparing() || m.status == TxnStatus::PrepareEpochFence {
        return Err(TxnError::ConcurrentTransactions);
    }
    if m.status == TxnStatus::Dead {
        return Err(TxnError::InvalidTxnState);
    }
    let fresh = m.status != TxnStatus::Ongoing;
    if !fresh && partitions.is_subset(&m.partitions) {
        return Ok(None);
    }
    let mut next = m.clone();
    if fresh {
        next.partitions.clear();
        next.start_ms = now_ms;
    }
    next.partitions.extend(partitions.iter().cloned());
    next.status = TxnStatus::Ongoing;
    next.last_update_ms = now_ms;
    Ok(Some(next))
}

/// KIP-890 part 1's check, made for a partition leader before it appends a
/// transactional batch that would open a transaction there: the partition
/// must be in the producer's ongoing transaction (Kafka's
/// `TransactionCoordinator.handleVerifyPartitionsInTransaction`). Anything
/// else — no transaction, another producer, an older epoch, a transaction
/// that has ended or is ending — is INVALID_TXN_STATE (PRODUCER_FENCED for an
/// older epoch), and the batch is refused.
pub fn verify(
    current: Option<&TxnMetadata>,
    producer_id: i64,
    producer_epoch: i16,
    partition: &(String, i32),
) -> Result<(), TxnError> {
    let m = check_producer(current, producer_id, producer_epoch)?;
    if m.status == TxnStatus::Ongoing && m.partitions.contains(partition) {
        Ok(())
    } else {
        Err(TxnError::InvalidTxnState)
    }
}

/// What EndTxn comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Write this Prepare state, answer, then send the markers.
    Prepare(TxnMetadata),
    /// A retry of the outcome already completed: answered at once.
    AlreadyDone,
}

pub fn end_txn(
    current: Option<&TxnMetadata>,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    now_ms: i64,
) -> Result<End, TxnError> {
    let m = check_producer(current, producer_id, producer_epoch)?;
    use TxnStatus::*;
    match (m.status, commit) {
        (Ongoing, _) => Ok(End::Prepare(TxnMetadata {
            status: if commit { PrepareCommit } else { PrepareAbort },
            last_update_ms: now_ms,
            ..m.clone()
        })),
        (CompleteCommit, true) | (CompleteAbort, false) => Ok(End::AlreadyDone),
        (PrepareCommit, true) | (PrepareAbort, false) => Err(TxnError::ConcurrentTransactions),
        (PrepareEpochFence, _) => Err(TxnError::ConcurrentTransactions),
        _ => Err(TxnError::InvalidTxnState),
    }
}

/// Once every marker of a prepared transaction is written: its Complete
/// state (the partitions forgotten).
pub fn complete(m: &TxnMetadata, now_ms: i64) -> Option<TxnMetadata> {
    let status = match m.status {
        TxnStatus::PrepareCommit => TxnStatus::CompleteCommit,
        TxnStatus::PrepareAbort => TxnStatus::CompleteAbort,
        _ => return None,
    };
    Some(TxnMetadata {
        status,
        partitions: BTreeSet::new(),
        last_update_ms: now_ms,
        ..m.clone()
    })
}

/// An ongoing transaction past its timeout, to be aborted by the
/// coordinator (Kafka's `abortTimedOutTransactions`): its PrepareAbort
/// state under a bumped epoch, so the producer that let it lapse is fenced
/// (under the same epoch when it is spent, see [`abort_epoch`]).
pub fn timed_out(m: &TxnMetadata, now_ms: i64) -> Option<TxnMetadata> {
    timed_out_fencing(m, now_ms, true)
}

/// [`timed_out`], the producer fenced only when `fence`. Without the bump
/// (Kafka 0.11.0.0 and .1, KAFKA-6119, fixed in 0.11.0.2 and 1.0.0) the
/// producer that let its transaction lapse is not told: its next
/// AddPartitionsToTxn, at the same epoch, finds the transaction complete and
/// begins a new one with the rest of its writes, which it then commits —
/// what it wrote before the timeout aborted, the rest committed.
pub fn timed_out_fencing(m: &TxnMetadata, now_ms: i64, fence: bool) -> Option<TxnMetadata> {
    if m.status != TxnStatus::Ongoing || now_ms < m.start_ms + i64::from(m.timeout_ms) {
        return None;
    }
    let (producer_id, producer_epoch) = if fence {
        abort_epoch(m)
    } else {
        (m.producer_id, m.producer_epoch)
    };
    Some(TxnMetadata {
        producer_id,
        producer_epoch,
        status: TxnStatus::PrepareAbort,
        last_update_ms: now_ms,
        ..m.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(names: &[(&str, i32)]) -> BTreeSet<(String, i32)> {
        names.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    }

    fn ready(init: Result<Init, TxnError>) -> TxnMetadata {
        match init {
            Ok(Init::Ready(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_transaction_runs_empty_ongoing_prepare_complete_and_a_new_producer_fences_the_old() {
        let m = ready(init_producer_id(None, 60_000, 1, || 500));
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.status),
            (500, 0, TxnStatus::Empty)
        );
        let m = add_partitions(Some(&m), 500, 0, &parts(&[("t", 0)]), 2)
            .unwrap()
            .unwrap();
        assert_eq!((m.status, m.start_ms), (TxnStatus::Ongoing, 2));
        assert_eq!(
            add_partitions(Some(&m), 500, 0, &parts(&[("t", 0)]), 3),
            Ok(None)
        );
        let End::Prepare(p) = end_txn(Some(&m), 500, 0, true, 4).unwrap() else {
            panic!()
        };
        assert_eq!(p.status, TxnStatus::PrepareCommit);
        assert_eq!(
            add_partitions(Some(&p), 500, 0, &parts(&[("t", 1)]), 5),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            end_txn(Some(&p), 500, 0, false, 5),
            Err(TxnError::InvalidTxnState)
        );
        let done = complete(&p, 6).unwrap();
        assert_eq!(
            (done.status, done.partitions.len()),
            (TxnStatus::CompleteCommit, 0)
        );
        assert_eq!(end_txn(Some(&done), 500, 0, true, 7), Ok(End::AlreadyDone));
        assert_eq!(
            end_txn(Some(&done), 500, 0, false, 7),
            Err(TxnError::InvalidTxnState)
        );

        // A new producer with the same transactional id bumps the epoch ...
        let next = ready(init_producer_id(Some(&done), 60_000, 8, || unreachable!()));
        assert_eq!((next.producer_id, next.producer_epoch), (500, 1));
        // ... and the old one is fenced.
        assert_eq!(
            add_partitions(Some(&next), 500, 0, &parts(&[("t", 0)]), 9),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            end_txn(Some(&next), 501, 1, true, 9),
            Err(TxnError::InvalidProducerIdMapping)
        );
    }

    #[test]
    fn init_over_an_ongoing_transaction_aborts_it_first_under_a_bumped_epoch() {
        let m = ready(init_producer_id(None, 60_000, 1, || 7));
        let ongoing = add_partitions(Some(&m), 7, 0, &parts(&[("t", 0)]), 2)
            .unwrap()
            .unwrap();
        let Ok(Init::AbortFirst(abort)) = init_producer_id(Some(&ongoing), 60_000, 3, || 8) else {
            panic!()
        };
        assert_eq!(
            (abort.producer_epoch, abort.status),
            (1, TxnStatus::PrepareAbort)
        );
        assert_eq!(abort.partitions, parts(&[("t", 0)]), "the markers go there");
        assert_eq!(
            init_producer_id(Some(&abort), 60_000, 4, || 8),
            Err(TxnError::ConcurrentTransactions)
        );
        let aborted = complete(&abort, 5).unwrap();
        let again = ready(init_producer_id(Some(&aborted), 60_000, 6, || 8));
        assert_eq!(again.producer_epoch, 2);
    }

    #[test]
    fn epochs_run_out_into_a_fresh_producer_id_and_timeouts_are_refused_or_abort() {
        let m = TxnMetadata {
            producer_epoch: i16::MAX - 1,
            ..ready(init_producer_id(None, 1_000, 0, || 1))
        };
        let next = ready(init_producer_id(Some(&m), 1_000, 1, || 2));
        assert_eq!((next.producer_id, next.producer_epoch), (2, 0));
        assert_eq!(
            init_producer_id(None, MAX_TIMEOUT_MS + 1, 0, || 1),
            Err(TxnError::InvalidTransactionTimeout(MAX_TIMEOUT_MS + 1))
        );
        let ongoing = add_partitions(Some(&next), 2, 0, &parts(&[("t", 0)]), 10)
            .unwrap()
            .unwrap();
        assert_eq!(timed_out(&ongoing, 1_009), None);
        let abort = timed_out(&ongoing, 1_010).unwrap();
        assert_eq!(
            (abort.producer_epoch, abort.status),
            (1, TxnStatus::PrepareAbort)
        );
    }

    #[test]
    fn an_abort_at_a_spent_epoch_names_the_producer_whose_records_it_ends() {
        let spent = TxnMetadata {
            producer_epoch: i16::MAX - 1,
            ..ready(init_producer_id(None, 1_000, 0, || 1))
        };
        let ongoing = add_partitions(Some(&spent), 1, i16::MAX - 1, &parts(&[("t", 0)]), 10)
            .unwrap()
            .unwrap();
        let abort = timed_out(&ongoing, 1_010).unwrap();
        assert_eq!((abort.producer_id, abort.producer_epoch), (1, i16::MAX - 1));
        let Ok(Init::AbortFirst(first)) =
            init_producer_id(Some(&ongoing), 1_000, 11, || unreachable!())
        else {
            panic!()
        };
        assert_eq!((first.producer_id, first.producer_epoch), (1, i16::MAX - 1));
        // Once aborted, the next producer moves to a fresh id.
        let next = ready(init_producer_id(
            Some(&complete(&first, 12).unwrap()),
            1_000,
            13,
            || 2,
        ));
        assert_eq!((next.producer_id, next.producer_epoch), (2, 0));
    }
}
