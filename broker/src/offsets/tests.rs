use super::*;
use crate::config::OffsetsLoad;
use crate::replica::test_support::{manager, state};

fn committed(offset: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: 0,
        metadata: String::new(),
        commit_timestamp_ms: 1,
    }
}

fn commits(group: &str, entries: &[(&str, i32, i64)]) -> (String, GroupOffsets) {
    let offsets = entries
        .iter()
        .map(|&(t, p, o)| ((t.to_owned(), p), committed(o)))
        .collect();
    (group.to_owned(), offsets)
}

/// Commits appended to an offsets partition's log are what a coordinator
/// elected later loads: the last commit of each partition wins, across
/// segments and reads, and nothing is served until the load is done.
#[test]
fn a_new_leader_loads_every_commit_from_the_log_and_the_last_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(dir.path(), 1);
    let offsets = Arc::new(OffsetsManager::new(1));
    let tp = offsets.partition_of("g");
    rm.apply_leader_and_isr(vec![(tp.clone(), state(1, 0, vec![1]))]);
    for (group, batch) in [
        commits("g", &[("t", 0, 5), ("t", 1, 7)]),
        commits("h", &[("t", 0, 1)]),
        commits("g", &[("t", 0, 9)]),
    ] {
        rm.append_as_leader(&tp, commit_batch(&group, &batch, 1), 1)
            .unwrap();
    }
    offsets.elected(0, 0);
    assert_eq!(offsets.standing("g"), Standing::Loading);
    assert_eq!(
        offsets.fetch("g", None),
        Err(ResponseError::CoordinatorLoadInProgress)
    );
    load(&offsets, &rm, 0, 0, OffsetsLoad::Current);
    assert_eq!(offsets.standing("g"), Standing::Ready);
    let g = offsets.fetch("g", None).unwrap();
    assert_eq!(g[&("t".to_owned(), 0)].offset, 9);
    assert_eq!(g[&("t".to_owned(), 1)].offset, 7);
    let wanted = [("t".to_owned(), 1), ("t".to_owned(), 5)];
    assert_eq!(offsets.fetch("g", Some(&wanted)).unwrap().len(), 1);
    assert_eq!(offsets.fetch("h", None).unwrap().len(), 1);
    assert!(offsets.fetch("nobody", None).unwrap().is_empty());

    offsets.resigned(0);
    assert_eq!(offsets.fetch("g", None), Err(ResponseError::NotCoordinator));
}

/// A load overtaken by a later election of the same broker does not serve
/// what it read in the earlier epoch.
#[test]
fn a_load_of_an_older_epoch_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(dir.path(), 1);
    let offsets = Arc::new(OffsetsManager::new(1));
    let tp = offsets.partition_of("g");
    rm.apply_leader_and_isr(vec![(tp.clone(), state(1, 0, vec![1]))]);
    offsets.elected(0, 0);
    rm.apply_leader_and_isr(vec![(tp, state(1, 1, vec![1]))]);
    load(&offsets, &rm, 0, 0, OffsetsLoad::Current);
    assert_eq!(offsets.standing("g"), Standing::Loading);
    offsets.elected(0, 1);
    load(&offsets, &rm, 0, 1, OffsetsLoad::Current);
    assert_eq!(offsets.standing("g"), Standing::Ready);
}

/// KAFKA-5600: with the offsets log in several segments, a coordinator on
/// the 0.11.0.0 loader serves each group the offsets of the first segment it
/// appears in; the current loader serves the last commit.
#[test]
fn a_multi_segment_log_loads_the_last_commit_and_kafka_5600_an_older_one() {
    use crate::replica::manager::ReplicaManager;
    use crate::replica::store::{LogConfig, LogManager};
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        ..LogConfig::default()
    };
    let logs = LogManager::open(dir.path(), config).unwrap();
    let rm = ReplicaManager::new(1, 1, crate::config::Truncation::Current, logs, None);
    let offsets = Arc::new(OffsetsManager::new(1));
    let tp = offsets.partition_of("g");
    rm.apply_leader_and_isr(vec![(tp.clone(), state(1, 0, vec![1]))]);
    for offset in 1..=10 {
        let (group, batch) = commits("g", &[("t", 0, offset)]);
        rm.append_as_leader(&tp, commit_batch(&group, &batch, 1), 1)
            .unwrap();
    }
    let key = ("t".to_owned(), 0);
    // A commit batch is over 100 bytes: one per 200-byte segment.
    for (how, want) in [(OffsetsLoad::Current, 10), (OffsetsLoad::Kafka5600, 1)] {
        offsets.elected(0, 0);
        load(&offsets, &rm, 0, 0, how);
        let got = offsets.fetch("g", None).unwrap()[&key].offset;
        assert_eq!(got, want, "{how:?}");
    }
}

/// TxnOffsetCommit (KIP-98): a producer's transactional commits are pending
/// until its marker — a commit makes them the group's, an abort drops them —
/// both while served and when a coordinator elected later loads the log; a
/// second commit of the same producer and epoch (the coordinator stamps each
/// with sequence 0) is appended, not taken for a retry; an older epoch is
/// fenced.
#[test]
fn transactional_commits_wait_for_their_marker_live_and_when_loaded() {
    use crate::storage::txn::Marker;
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(dir.path(), 1);
    let offsets = Arc::new(OffsetsManager::new(1));
    let tp = offsets.partition_of("g");
    rm.apply_leader_and_isr(vec![(tp.clone(), state(1, 0, vec![1]))]);
    offsets.elected(0, 0);
    load(&offsets, &rm, 0, 0, OffsetsLoad::Current);
    let key = ("t".to_owned(), 0);
    let txn = |o: i64, producer: (i64, i16)| {
        let (group, batch) = commits("g", &[("t", 0, o)]);
        let appended =
            rm.append_as_coordinator(&tp, txn_commit_batch(&group, &batch, 1, producer), 1);
        (appended, batch)
    };
    let marker = |producer: (i64, i16), commit: bool| {
        let m = Marker {
            commit,
            coordinator_epoch: 0,
        };
        rm.append_marker(&tp, producer.0, producer.1, m, 1).unwrap();
        offsets.complete_txn(0, producer.0, commit);
    };
    // Producer 7 commits 5 then, in the same transaction, 6; producer 8
    // sends 9 and aborts.
    for o in [5, 6] {
        let (appended, batch) = txn(o, (7, 0));
        assert!(appended.is_ok(), "{o}: {appended:?}");
        offsets.txn_committed("g", 0, 7, batch);
    }
    let (appended, batch) = txn(9, (8, 0));
    appended.unwrap();
    offsets.txn_committed("g", 0, 8, batch);
    assert!(
        offsets.fetch("g", None).unwrap().is_empty(),
        "nothing before a marker"
    );
    assert!(offsets.has_pending("g", Some(std::slice::from_ref(&key))));
    marker((7, 0), true);
    assert_eq!(offsets.fetch("g", None).unwrap()[&key].offset, 6);
    marker((8, 0), false);
    assert_eq!(offsets.fetch("g", None).unwrap()[&key].offset, 6);
    assert!(!offsets.has_pending("g", None));
    // Producer 7 at epoch 1 leaves a commit open; epoch 0 is fenced now.
    let (appended, batch) = txn(11, (7, 1));
    appended.unwrap();
    offsets.txn_committed("g", 0, 7, batch);
    assert_eq!(
        txn(12, (7, 0)).0.unwrap_err(),
        ResponseError::InvalidProducerEpoch
    );
    // A coordinator loading the log sees the same: 6 committed, 11 pending.
    offsets.elected(0, 1);
    rm.apply_leader_and_isr(vec![(tp.clone(), state(1, 1, vec![1]))]);
    load(&offsets, &rm, 0, 1, OffsetsLoad::Current);
    assert_eq!(offsets.fetch("g", None).unwrap()[&key].offset, 6);
    assert!(offsets.has_pending("g", None));
    marker((7, 1), true);
    assert_eq!(offsets.fetch("g", None).unwrap()[&key].offset, 11);
}
