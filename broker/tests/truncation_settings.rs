//! The four `--truncation` settings on the same two pairs of replica logs, end to
//! end through two replica managers on real files: the follower's question and
//! the leader's answer cross the wire codec at the version the setting uses, and
//! the follower's final log end is read back with its leader-epoch checkpoint
//! from disk. Each expectation is the release's documented behaviour
//! (broker/README.md, "Truncation settings"; KIP-101, KIP-279), flaws included.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use epochal_broker::config::Truncation;
use epochal_broker::replica::fetcher::offsets_for_leader_epoch_request;
use epochal_broker::replica::follower::TruncationProgress;
use epochal_broker::replica::isr::IsrChange;
use epochal_broker::replica::leader_and_isr::Role;
use epochal_broker::replica::manager::ReplicaManager;
use epochal_broker::replica::partition::LeaderAndIsrState;
use epochal_broker::replica::store::{EpochEndOffset, LogManager, TopicPartition};
use epochal_broker::replica::truncation;
use epochal_broker::server::handlers::offsets_for_leader_epoch;
use epochal_broker::storage::{LogConfig, record_batch};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::protocol::{Decodable, Encodable};

const LEADER: i32 = 1;
const FOLLOWER: i32 = 2;

fn tp() -> TopicPartition {
    TopicPartition::new("t".to_string(), 0)
}

fn batch(n: usize) -> Bytes {
    let values = (0..n)
        .map(|i| (None, Some(Bytes::from(format!("v{i}")))))
        .collect();
    record_batch::plain_batch(values, 0)
}

fn state(leader: i32, leader_epoch: i32, isr: &[i32]) -> LeaderAndIsrState {
    LeaderAndIsrState {
        controller_epoch: 1,
        leader,
        leader_epoch,
        isr: isr.to_vec(),
        partition_epoch: 0,
        replicas: vec![LEADER, FOLLOWER],
    }
}

fn replica(node_id: i32, dir: &Path, setting: Truncation) -> ReplicaManager {
    let logs = LogManager::open(dir, LogConfig::default()).unwrap();
    ReplicaManager::new(node_id, 1, setting, logs, None)
}

/// Lead `epoch` alone and append `records`, so the HW follows the log end.
fn lead(rm: &ReplicaManager, epoch: i32, records: &[usize]) {
    let d = rm.apply_leader_and_isr(vec![(tp(), state(rm.node_id(), epoch, &[rm.node_id()]))]);
    assert!(matches!(d[0].result, Ok(Role::Leader)), "{:?}", d[0]);
    for n in records {
        rm.append_as_leader(&tp(), batch(*n), 1).unwrap();
    }
}

/// Take the other replica into the ISR in `epoch` without it ever fetching: the
/// HW stays where it is while the log grows past it.
fn freeze_high_watermark(rm: &ReplicaManager, epoch: i32, version: i64) {
    let other = if rm.node_id() == LEADER {
        FOLLOWER
    } else {
        LEADER
    };
    let change = IsrChange {
        tp: tp(),
        leader_epoch: epoch,
        controller_epoch: 1,
        expected_version: version,
        isr: vec![rm.node_id(), other],
        joining: vec![(other, None)],
    };
    rm.isr_written(&change, version);
}

/// The epoch checkpoint as written on disk: `0`, count, `epoch offset` lines.
fn epochs_on_disk(dir: &Path) -> Vec<(i32, i64)> {
    let text = std::fs::read_to_string(dir.join("t-0").join("leader-epoch-checkpoint")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("0"));
    let count: usize = lines.next().unwrap().parse().unwrap();
    let entries: Vec<(i32, i64)> = lines
        .map(|l| {
            let (e, o) = l.split_once(' ').unwrap();
            (e.parse().unwrap(), o.parse().unwrap())
        })
        .collect();
    assert_eq!(entries.len(), count);
    entries
}

fn round_trip_request(
    req: &OffsetForLeaderEpochRequest,
    version: i16,
) -> OffsetForLeaderEpochRequest {
    let mut buf = BytesMut::new();
    req.encode(&mut buf, version).unwrap();
    OffsetForLeaderEpochRequest::decode(&mut buf.freeze(), version).unwrap()
}

fn round_trip_response(
    resp: &OffsetForLeaderEpochResponse,
    version: i16,
) -> OffsetForLeaderEpochResponse {
    let mut buf = BytesMut::new();
    resp.encode(&mut buf, version).unwrap();
    OffsetForLeaderEpochResponse::decode(&mut buf.freeze(), version).unwrap()
}

/// What one follower truncation exchanged and where it left the follower.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// (epoch asked, (epoch answered, end offset)) per round, as decoded off the wire.
    exchanged: Vec<(i32, (i32, i64))>,
    log_end_offset: i64,
}

/// Make `follower` a follower of `leader` in `leader_epoch` and run its
/// truncation to the end, the fetcher's loop without the socket.
fn truncate(
    setting: Truncation,
    leader: &ReplicaManager,
    follower: &ReplicaManager,
    leader_epoch: i32,
) -> Outcome {
    let d = follower.apply_leader_and_isr(vec![(
        tp(),
        state(LEADER, leader_epoch, &[LEADER, FOLLOWER]),
    )]);
    assert!(
        matches!(d[0].result, Ok(Role::Follower { truncate: true, .. })),
        "{:?}",
        d[0]
    );
    let version = truncation::offsets_for_leader_epoch_version(setting);
    let mut exchanged = Vec::new();
    let mut progress = follower.truncation_start(&tp(), leader_epoch).unwrap();
    while let TruncationProgress::Ask(epoch) = progress {
        assert!(
            exchanged.len() < 10,
            "truncation does not converge: {exchanged:?}"
        );
        let req = offsets_for_leader_epoch_request(FOLLOWER, &tp(), leader_epoch, epoch);
        let resp = offsets_for_leader_epoch::answer(leader, round_trip_request(&req, version));
        let resp = round_trip_response(&resp, version);
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "{setting:?}: leader refused");
        exchanged.push((epoch, (p.leader_epoch, p.end_offset)));
        let answer = EpochEndOffset {
            leader_epoch: p.leader_epoch,
            end_offset: p.end_offset,
        };
        progress = follower
            .apply_truncation_answer(&tp(), leader_epoch, answer)
            .unwrap();
    }
    Outcome {
        exchanged,
        log_end_offset: follower.offsets(&tp()).unwrap().0,
    }
}

/// KAFKA-6361's logs: the leader led epoch 1 over [0, 21) and epoch 3 from 21;
/// the follower had [0, 11) of epoch 1 (HW 6) and then led epoch 2 over
/// [11, 16), an epoch the leader never had.
fn never_had(setting: Truncation) -> (Outcome, Vec<(i32, i64)>) {
    let (dl, df) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = replica(LEADER, dl.path(), setting);
    let follower = replica(FOLLOWER, df.path(), setting);
    lead(&leader, 1, &[11, 10]);
    lead(&leader, 3, &[10]);
    assert_eq!(epochs_on_disk(dl.path()), vec![(1, 0), (3, 21)]);
    lead(&follower, 1, &[6]);
    freeze_high_watermark(&follower, 1, 2);
    follower.append_as_leader(&tp(), batch(5), 1).unwrap();
    let d = follower.apply_leader_and_isr(vec![(tp(), state(FOLLOWER, 2, &[FOLLOWER, LEADER]))]);
    assert!(d[0].result.is_ok());
    follower.append_as_leader(&tp(), batch(5), 1).unwrap();
    assert_eq!(follower.offsets(&tp()), Some((16, 6)));
    assert_eq!(epochs_on_disk(df.path()), vec![(1, 0), (2, 11)]);
    let outcome = truncate(setting, &leader, &follower, 3);
    (outcome, epochs_on_disk(df.path()))
}

/// The follower's only epoch (0, over [0, 8), HW 3) is below the leader's
/// first (2, from 0; then 3 from 10).
fn below_first(setting: Truncation) -> (Outcome, Vec<(i32, i64)>) {
    let (dl, df) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = replica(LEADER, dl.path(), setting);
    let follower = replica(FOLLOWER, df.path(), setting);
    lead(&leader, 2, &[10]);
    lead(&leader, 3, &[5]);
    assert_eq!(epochs_on_disk(dl.path()), vec![(2, 0), (3, 10)]);
    lead(&follower, 0, &[3]);
    freeze_high_watermark(&follower, 0, 2);
    follower.append_as_leader(&tp(), batch(5), 1).unwrap();
    assert_eq!(follower.offsets(&tp()), Some((8, 3)));
    let outcome = truncate(setting, &leader, &follower, 3);
    (outcome, epochs_on_disk(df.path()))
}

#[test]
fn high_watermark_leaders_refuse_offsets_for_leader_epoch() {
    // Kafka ≤ 0.10 had no such request; no follower on this setting sends one.
    let dir = tempfile::tempdir().unwrap();
    let leader = replica(LEADER, dir.path(), Truncation::HighWatermark);
    lead(&leader, 0, &[3]);
    let req = offsets_for_leader_epoch_request(FOLLOWER, &tp(), 0, 0);
    let resp = offsets_for_leader_epoch::answer(&leader, req);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(
        (p.error_code, p.leader_epoch, p.end_offset),
        (kafka_protocol::ResponseError::InvalidRequest.code(), -1, -1)
    );
}

#[test]
fn high_watermark_asks_nothing_and_cuts_to_the_high_watermark() {
    // Kafka ≤ 0.10: a new follower truncates to its own HW whatever the epochs.
    let (o, epochs) = never_had(Truncation::HighWatermark);
    assert_eq!(
        o,
        Outcome {
            exchanged: vec![],
            log_end_offset: 6
        }
    );
    assert_eq!(epochs, vec![(1, 0)]);
    let (o, epochs) = below_first(Truncation::HighWatermark);
    assert_eq!(
        o,
        Outcome {
            exchanged: vec![],
            log_end_offset: 3
        }
    );
    assert_eq!(epochs, vec![(0, 0)]);
}

#[test]
fn kip_101_answers_one_offset_and_misses_the_epoch_the_leader_never_had() {
    // v0 carries no epoch (-1 on the wire). For epoch 2, which the leader never
    // had, it answers the start of its next epoch (21): above the follower's
    // LEO, so nothing is cut and the follower keeps its epoch-2 tail — the
    // divergence KAFKA-6361 reported.
    let (o, epochs) = never_had(Truncation::Kip101);
    assert_eq!(
        o,
        Outcome {
            exchanged: vec![(2, (-1, 21))],
            log_end_offset: 16
        }
    );
    assert_eq!(epochs, vec![(1, 0), (2, 11)]);
    // Below the leader's first epoch: -1, so back to the HW.
    let (o, epochs) = below_first(Truncation::Kip101);
    assert_eq!(
        o,
        Outcome {
            exchanged: vec![(0, (-1, -1))],
            log_end_offset: 3
        }
    );
    assert_eq!(epochs, vec![(0, 0)]);
}

#[test]
fn kip_279_answers_the_floor_epoch_and_below_the_first_falls_back_to_the_hw() {
    // (largest epoch ≤ 2, its end) = (1, 21); the follower's epoch 1 ended at
    // 11, so it keeps [0, 11).
    let (o, epochs) = never_had(Truncation::Kip279);
    assert_eq!(
        o,
        Outcome {
            exchanged: vec![(2, (1, 21))],
            log_end_offset: 11
        }
    );
    assert_eq!(epochs, vec![(1, 0)]);
    // 2.0 still answered (-1, -1) below the first epoch: back to the HW.
    let (o, epochs) = below_first(Truncation::Kip279);
    assert_eq!(
        o,
        Outcome {
            exchanged: vec![(0, (-1, -1))],
            log_end_offset: 3
        }
    );
    assert_eq!(epochs, vec![(0, 0)]);
}

#[test]
fn current_answers_below_the_first_epoch_with_the_first_start_offset() {
    let (o, epochs) = never_had(Truncation::Current);
    assert_eq!(
        o,
        Outcome {
            exchanged: vec![(2, (1, 21))],
            log_end_offset: 11
        }
    );
    assert_eq!(epochs, vec![(1, 0)]);
    // KAFKA-7415: (asked, first start offset) = (0, 0). The follower's epoch 0
    // is not on the leader at all, so everything goes, HW included: the HW
    // fallback of older releases kept [0, 3), which the leader never wrote.
    let (o, epochs) = below_first(Truncation::Current);
    assert_eq!(
        o,
        Outcome {
            exchanged: vec![(0, (0, 0))],
            log_end_offset: 0
        }
    );
    assert_eq!(epochs, Vec::<(i32, i64)>::new());
}

#[test]
fn only_current_truncates_again_when_the_leader_did_not_change() {
    // KAFKA-7164: a follower told of a new epoch under the same leader skipped
    // truncation before 2.1, keeping a tail it may have from a missed epoch.
    for setting in [
        Truncation::HighWatermark,
        Truncation::Kip101,
        Truncation::Kip279,
        Truncation::Current,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let follower = replica(FOLLOWER, dir.path(), setting);
        let first =
            follower.apply_leader_and_isr(vec![(tp(), state(LEADER, 3, &[LEADER, FOLLOWER]))]);
        assert!(matches!(
            first[0].result,
            Ok(Role::Follower { truncate: true, .. })
        ));
        let again =
            follower.apply_leader_and_isr(vec![(tp(), state(LEADER, 5, &[LEADER, FOLLOWER]))]);
        let expected = setting == Truncation::Current;
        assert!(
            matches!(again[0].result, Ok(Role::Follower { truncate, .. }) if truncate == expected),
            "{setting:?}: {:?}",
            again[0]
        );
    }
}
