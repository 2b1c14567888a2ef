//! The producer-state machine on its own: duplicates, gaps, epochs, wrap,
//! replicated batches, and snapshots written, reloaded, cut and corrupted.

use super::*;

/// A batch of `count` records of producer `pid` in `epoch`, sequences from
/// `first_sequence`, at offsets from `first_offset`.
fn batch(
    pid: i64,
    epoch: i16,
    first_sequence: i32,
    count: i32,
    first_offset: i64,
) -> ProducerBatch {
    ProducerBatch {
        producer_id: pid,
        producer_epoch: epoch,
        first_sequence,
        last_sequence: increment_sequence(first_sequence, count - 1),
        first_offset,
        last_offset: first_offset + i64::from(count) - 1,
        max_timestamp: 1_000 + first_offset,
        transactional: false,
    }
}

/// Appends as a leader would: check, then commit at the batch's end.
fn append(
    state: &mut ProducerStateManager,
    b: ProducerBatch,
) -> Result<LeaderCheck, ProducerStateError> {
    let check = state.check_leader_append(&[b])?;
    if let LeaderCheck::Append(pending) = &check {
        state.commit(pending.clone(), b.last_offset + 1);
    }
    Ok(check)
}

fn appended(state: &mut ProducerStateManager, b: ProducerBatch) {
    let check = append(state, b).unwrap();
    assert!(matches!(check, LeaderCheck::Append(_)), "{b:?}: {check:?}");
}

fn manager() -> (tempfile::TempDir, ProducerStateManager) {
    let dir = tempfile::tempdir().unwrap();
    let state = ProducerStateManager::open(dir.path()).unwrap();
    (dir, state)
}

#[test]
fn a_retried_batch_is_a_duplicate_answered_with_its_original_offsets() {
    let (_dir, mut state) = manager();
    appended(&mut state, batch(7, 0, 0, 5, 0));
    appended(&mut state, batch(7, 0, 5, 5, 5));
    let Ok(LeaderCheck::Duplicate(original)) = append(&mut state, batch(7, 0, 0, 5, 10)) else {
        panic!("the retry of the first batch is a duplicate");
    };
    assert_eq!((original.first_offset(), original.last_offset), (0, 4));
    assert_eq!((original.first_sequence(), original.last_sequence), (0, 4));
    // Same first sequence but a different last one is not the same batch.
    assert!(matches!(
        append(&mut state, batch(7, 0, 0, 3, 10)),
        Err(ProducerStateError::OutOfOrderSequence { .. })
    ));
    // Another producer's batch with the same sequences is its own.
    appended(&mut state, batch(8, 0, 0, 5, 10));
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let (_dir, mut state) = manager();
    for i in 0..6 {
        appended(&mut state, batch(1, 0, i, 1, i64::from(i)));
    }
    assert_eq!(
        state.entry(1).unwrap().batches().count(),
        NUM_BATCHES_TO_RETAIN
    );
    assert!(matches!(
        append(&mut state, batch(1, 0, 1, 1, 6)),
        Ok(LeaderCheck::Duplicate(_))
    ));
    // Sequence 0 has been forgotten: a retry of it is out of order, not a duplicate.
    assert!(matches!(
        append(&mut state, batch(1, 0, 0, 1, 6)),
        Err(ProducerStateError::OutOfOrderSequence {
            first_sequence: 0,
            last_sequence: 5,
            ..
        })
    ));
}

#[test]
fn a_gap_is_out_of_order_and_changes_nothing() {
    let (_dir, mut state) = manager();
    appended(&mut state, batch(1, 0, 0, 3, 0));
    let before = state.entry(1).cloned();
    assert_eq!(
        append(&mut state, batch(1, 0, 4, 1, 3)),
        Err(ProducerStateError::OutOfOrderSequence {
            producer_id: 1,
            epoch: 0,
            current_epoch: 0,
            first_sequence: 4,
            last_sequence: 2,
        })
    );
    assert_eq!(state.entry(1).cloned(), before);
    assert_eq!(state.map_end_offset(), 3);
    appended(&mut state, batch(1, 0, 3, 1, 3));
}

#[test]
fn a_new_epoch_starts_at_zero_and_fences_the_old_one() {
    let (_dir, mut state) = manager();
    appended(&mut state, batch(1, 0, 0, 3, 0));
    assert!(matches!(
        append(&mut state, batch(1, 1, 3, 1, 3)),
        Err(ProducerStateError::OutOfOrderSequence {
            epoch: 1,
            current_epoch: 0,
            ..
        })
    ));
    appended(&mut state, batch(1, 1, 0, 2, 3));
    assert_eq!(state.entry(1).unwrap().producer_epoch, 1);
    assert_eq!(
        state.entry(1).unwrap().batches().count(),
        1,
        "epoch 0's batches forgotten"
    );
    // The old epoch is fenced, even for a batch that was in the log.
    assert_eq!(
        append(&mut state, batch(1, 0, 0, 3, 5)),
        Err(ProducerStateError::InvalidProducerEpoch {
            producer_id: 1,
            epoch: 0,
            current_epoch: 1,
        })
    );
    assert_eq!(
        append(&mut state, batch(1, 0, 3, 1, 5)),
        Err(ProducerStateError::InvalidProducerEpoch {
            producer_id: 1,
            epoch: 0,
            current_epoch: 1,
        })
    );
}

#[test]
fn an_unknown_producer_may_start_at_any_sequence_but_needs_one() {
    let (_dir, mut state) = manager();
    appended(&mut state, batch(3, 2, 40, 2, 0));
    appended(&mut state, batch(3, 2, 42, 1, 2));
    assert_eq!(
        append(&mut state, batch(4, 0, -1, 1, 3)),
        Err(ProducerStateError::InvalidSequence {
            producer_id: 4,
            base_sequence: -1,
        })
    );
}

#[test]
fn sequences_wrap_at_i32_max() {
    assert_eq!(increment_sequence(i32::MAX, 1), 0);
    assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
    assert_eq!(decrement_sequence(5, 2), 3);
    let (_dir, mut state) = manager();
    appended(&mut state, batch(1, 0, i32::MAX - 2, 3, 0));
    assert_eq!(state.entry(1).unwrap().last_sequence(), i32::MAX);
    appended(&mut state, batch(1, 0, 0, 1, 3));
    // A batch that itself spans the wrap, and its retry.
    let (_dir, mut state) = manager();
    appended(&mut state, batch(1, 0, i32::MAX - 1, 4, 0));
    assert_eq!(state.entry(1).unwrap().last_sequence(), 1);
    let Ok(LeaderCheck::Duplicate(original)) = append(&mut state, batch(1, 0, i32::MAX - 1, 4, 4))
    else {
        panic!("the retry of a wrapping batch is a duplicate");
    };
    assert_eq!(original.first_sequence(), i32::MAX - 1);
    appended(&mut state, batch(1, 0, 2, 1, 4));
}

#[test]
fn several_batches_of_one_append_are_checked_against_each_other() {
    let (_dir, state) = manager();
    let check = state
        .check_leader_append(&[batch(1, 0, 0, 2, 0), batch(1, 0, 2, 2, 2)])
        .unwrap();
    assert!(matches!(check, LeaderCheck::Append(_)));
    assert!(matches!(
        state.check_leader_append(&[batch(1, 0, 0, 2, 0), batch(1, 0, 3, 2, 2)]),
        Err(ProducerStateError::OutOfOrderSequence {
            first_sequence: 3,
            last_sequence: 1,
            ..
        })
    ));
    // Nothing is applied before the commit.
    assert!(state.entry(1).is_none());
}

#[test]
fn replicated_batches_are_applied_without_the_rules() {
    let (_dir, mut leader) = manager();
    let (_dir2, mut follower) = manager();
    let batches = [
        batch(1, 0, 10, 2, 0),
        batch(2, 0, 0, 1, 2),
        batch(1, 0, 12, 3, 3),
    ];
    for b in batches {
        appended(&mut leader, b);
        follower.apply_replicated(&b);
    }
    let all = |s: &ProducerStateManager| s.producers().cloned().collect::<Vec<_>>();
    assert_eq!(all(&follower), all(&leader));
    // What a leader would refuse, a follower takes as the log says it.
    follower.apply_replicated(&batch(1, 0, 99, 1, 6));
    assert_eq!(follower.entry(1).unwrap().last_sequence(), 99);
    follower.apply_replicated(&batch(2, -1, 0, 1, 7));
    assert_eq!(follower.entry(2).unwrap().producer_epoch, -1);
}

#[test]
fn a_snapshot_round_trips_keeping_each_producers_last_batch() {
    let (dir, mut state) = manager();
    appended(&mut state, batch(1, 0, 0, 2, 0));
    appended(&mut state, batch(1, 0, 2, 3, 2));
    appended(&mut state, batch(9, 4, 7, 1, 5));
    state.take_snapshot().unwrap();
    assert!(dir.path().join("00000000000000000006.snapshot").exists());

    let mut reloaded = ProducerStateManager::open(dir.path()).unwrap();
    assert_eq!(reloaded.truncate_and_reload(0, 6).unwrap(), Some(6));
    assert_eq!(reloaded.map_end_offset(), 6);
    let last = |s: &ProducerStateManager, pid| {
        let e = s.entry(pid).unwrap();
        (e.producer_epoch, e.batches().last().copied())
    };
    assert_eq!(last(&reloaded, 1), last(&state, 1));
    assert_eq!(last(&reloaded, 9), last(&state, 9));
    assert_eq!(
        reloaded.entry(1).unwrap().batches().count(),
        1,
        "Kafka writes one batch"
    );
    // The last batch is still recognised as a duplicate, and the sequence goes on.
    assert!(matches!(
        append(&mut reloaded, batch(1, 0, 2, 3, 6)),
        Ok(LeaderCheck::Duplicate(m)) if m.first_offset() == 2
    ));
    appended(&mut reloaded, batch(1, 0, 5, 1, 6));
}

#[test]
fn reloading_drops_snapshots_past_the_log_end_and_keeps_two() {
    let (dir, mut state) = manager();
    for (i, end) in [(0, 1), (1, 2), (2, 3)] {
        appended(&mut state, batch(1, 0, i, 1, end - 1));
        state.take_snapshot().unwrap();
    }
    assert_eq!(
        state.snapshot_offsets(),
        vec![2, 3],
        "the newest two are kept"
    );
    assert!(!dir.path().join(producer_snapshot::file_name(1)).exists());
    // The log was cut to 2: the snapshot at 3 describes records that are gone.
    assert_eq!(state.truncate_and_reload(0, 2).unwrap(), Some(2));
    assert_eq!(state.snapshot_offsets(), vec![2]);
    assert!(!dir.path().join(producer_snapshot::file_name(3)).exists());
    assert_eq!(state.entry(1).unwrap().last_sequence(), 1);
    // Cut below every snapshot: nothing to load, replay from the log start.
    assert_eq!(state.truncate_and_reload(0, 1).unwrap(), None);
    assert!(state.entry(1).is_none());
    assert!(state.snapshot_offsets().is_empty());
    state.truncate_fully_and_start_at(50).unwrap();
    assert_eq!(state.map_end_offset(), 50);
}

#[test]
fn a_corrupt_snapshot_is_deleted_and_the_next_older_one_loaded() {
    let (dir, mut state) = manager();
    appended(&mut state, batch(1, 0, 0, 1, 0));
    state.take_snapshot().unwrap();
    appended(&mut state, batch(1, 0, 1, 1, 1));
    state.take_snapshot().unwrap();
    let newest = dir.path().join(producer_snapshot::file_name(2));
    let mut bytes = std::fs::read(&newest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&newest, bytes).unwrap();

    let mut reloaded = ProducerStateManager::open(dir.path()).unwrap();
    assert_eq!(
        reloaded.truncate_and_reload(0, 2).unwrap(),
        Some(1),
        "replay from the older one"
    );
    assert!(!newest.exists(), "the corrupt file is deleted");
    assert_eq!(reloaded.entry(1).unwrap().last_sequence(), 0);

    // With every snapshot unreadable, the state starts empty at the log start.
    std::fs::write(dir.path().join(producer_snapshot::file_name(1)), b"garbage").unwrap();
    let mut reloaded = ProducerStateManager::open(dir.path()).unwrap();
    assert_eq!(reloaded.truncate_and_reload(0, 2).unwrap(), None);
    assert!(reloaded.producers().next().is_none());
    assert!(producer_snapshot::list(dir.path()).unwrap().is_empty());
}

fn marker(commit: bool, coordinator_epoch: i32) -> Marker {
    Marker {
        commit,
        coordinator_epoch,
    }
}

#[test]
fn a_transaction_holds_the_first_unstable_offset_until_its_marker_is_replicated() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = ProducerStateManager::open(dir.path()).unwrap();
    appended(&mut state, batch(1, 0, 0, 2, 0));
    assert_eq!(state.first_unstable_offset(2), None, "not transactional");
    let txn = ProducerBatch {
        transactional: true,
        ..batch(2, 0, 0, 3, 2)
    };
    appended(&mut state, txn);
    appended(
        &mut state,
        ProducerBatch {
            transactional: true,
            ..batch(2, 0, 3, 1, 5)
        },
    );
    assert_eq!(state.entry(2).unwrap().current_txn_first_offset, Some(2));
    assert_eq!(state.first_unstable_offset(6), Some(2));
    state.check_marker(2, 0, marker(false, 4)).unwrap();
    let done = state.complete_txn(2, 0, marker(false, 4), 6);
    assert_eq!(
        done,
        CompletedTxn {
            producer_id: 2,
            first_offset: 2,
            last_offset: 6,
            aborted: true
        }
    );
    assert_eq!(state.entry(2).unwrap().current_txn_first_offset, None);
    assert_eq!(
        state.first_unstable_offset(6),
        Some(2),
        "marker not yet below the HW"
    );
    assert_eq!(state.first_unstable_offset(7), None);
    state.on_high_watermark(7);
    assert_eq!(
        state.first_unstable_offset(0),
        None,
        "forgotten once below the HW"
    );
    // Snapshots keep an open transaction and the coordinator epoch.
    appended(
        &mut state,
        ProducerBatch {
            transactional: true,
            ..batch(2, 0, 4, 1, 7)
        },
    );
    state.set_map_end_offset(8);
    state.take_snapshot().unwrap();
    let mut reloaded = ProducerStateManager::open(dir.path()).unwrap();
    reloaded.truncate_and_reload(0, 8).unwrap();
    let entry = reloaded.entry(2).unwrap();
    assert_eq!(
        (entry.current_txn_first_offset, entry.coordinator_epoch),
        (Some(7), 4)
    );
    assert_eq!(reloaded.first_unstable_offset(8), Some(7));
}

#[test]
fn a_marker_from_an_older_producer_or_coordinator_epoch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = ProducerStateManager::open(dir.path()).unwrap();
    appended(
        &mut state,
        ProducerBatch {
            transactional: true,
            ..batch(3, 2, 0, 1, 0)
        },
    );
    state.complete_txn(3, 2, marker(true, 5), 1);
    assert!(matches!(
        state.check_marker(3, 1, marker(true, 5)),
        Err(ProducerStateError::InvalidProducerEpoch { .. })
    ));
    assert!(matches!(
        state.check_marker(3, 2, marker(true, 4)),
        Err(ProducerStateError::CoordinatorFenced { .. })
    ));
    assert!(state.check_marker(3, 2, marker(true, 5)).is_ok());
}
