//! A partition log's transactions (KIP-98) as a leader, a follower and a
//! restarted broker see them: an open transaction holds the last stable
//! offset at its first batch; the coordinator's marker ends it (an abort
//! goes into the segment's `.txnindex`, Kafka's 34-byte entries), and the
//! LSO moves once the marker is below the high watermark; a read_committed
//! fetch is told the aborted transactions it overlaps; a follower copying
//! the leader's bytes ends up with the same index and state; truncating
//! below a marker reopens its transaction and drops its index entry; a
//! restart rebuilds an open transaction from the log.

use crate::support;

use epochal_broker::storage::txn::{AbortedTxn, Marker};
use epochal_broker::storage::{LogManager, StorageError};
use support::*;

const PID: i64 = 77;

fn abort(coordinator_epoch: i32) -> Marker {
    Marker {
        commit: false,
        coordinator_epoch,
    }
}

#[test]
fn an_aborted_transaction_is_indexed_bounds_the_lso_and_survives_follower_copy_truncation_and_restart()
 {
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = LogManager::open(leader_dir.path(), config(1 << 20)).unwrap();
    let log = leader.get_or_create(&tp()).unwrap();
    log.append_as_leader(producer_batch(&["plain"]), 0).unwrap();
    log.append_as_leader(transactional_batch(PID, 0, 0, &["t1", "t2"]), 0)
        .unwrap();
    log.set_high_watermark(3);
    assert_eq!(
        log.last_stable_offset(),
        1,
        "the open transaction's first offset"
    );

    let info = log
        .append_marker_as_leader(PID, 0, abort(1), 0, 1_000)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 3));
    assert_eq!(log.last_stable_offset(), 1, "marker not yet below the HW");
    log.set_high_watermark(4);
    assert_eq!(log.last_stable_offset(), 4);
    let aborted = AbortedTxn {
        producer_id: PID,
        first_offset: 1,
        last_offset: 3,
        last_stable_offset: 1,
    };
    assert_eq!(log.aborted_txns(0, 4).unwrap(), vec![aborted]);
    assert_eq!(
        log.aborted_txns(4, 4).unwrap(),
        vec![],
        "ended before the fetch"
    );
    assert_eq!(
        log.aborted_txns(0, 1).unwrap(),
        vec![],
        "starts at the upper bound"
    );
    // A marker from an older coordinator than the last is refused, nothing written.
    let fenced = log.append_marker_as_leader(PID, 0, abort(0), 0, 1_000);
    assert!(
        matches!(fenced, Err(StorageError::ProducerState { .. })),
        "{fenced:?}"
    );
    assert_eq!(log.log_end_offset(), 4);
    // A producer may not send a control batch itself.
    let control = epochal_broker::storage::txn::marker_batch(PID, 0, abort(1), 0);
    assert!(matches!(
        log.append_as_leader(control, 0),
        Err(StorageError::ControlBatchProduced { .. })
    ));
    let index = std::fs::read(leader_dir.path().join("t-0/00000000000000000000.txnindex")).unwrap();
    assert_eq!(index.len(), 34);

    // A follower copying the leader's bytes keeps the same index and state.
    let copied = log.read(0, usize::MAX).unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut follower = LogManager::open(follower_dir.path(), config(1 << 20)).unwrap();
    let flog = follower.get_or_create(&tp()).unwrap();
    flog.append_as_follower(copied).unwrap();
    flog.set_high_watermark(4);
    // Its entry records its own LSO when it took the marker (its HW was 0).
    let copied_entry = AbortedTxn {
        last_stable_offset: 0,
        ..aborted
    };
    assert_eq!(flog.aborted_txns(0, 4).unwrap(), vec![copied_entry]);
    assert_eq!(flog.last_stable_offset(), 4);

    // Truncated below the marker: the transaction is open again, its entry gone.
    flog.truncate_to(3).unwrap();
    assert_eq!(flog.aborted_txns(0, 3).unwrap(), vec![]);
    assert_eq!(
        flog.producer_state()
            .entry(PID)
            .unwrap()
            .current_txn_first_offset,
        Some(1)
    );
    flog.set_high_watermark(3);
    assert_eq!(flog.last_stable_offset(), 1);

    // A restart rebuilds the open transaction from the log.
    follower.shutdown().unwrap();
    drop(follower);
    let mut reopened = LogManager::open(follower_dir.path(), config(1 << 20)).unwrap();
    let rlog = reopened.get_or_create(&tp()).unwrap();
    assert_eq!(
        rlog.producer_state()
            .entry(PID)
            .unwrap()
            .current_txn_first_offset,
        Some(1)
    );
}
