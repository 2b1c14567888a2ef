//! Acceptance (issue 5): a broker restarted before its old lease expired takes
//! its registration key over (same create revision, new incarnation), and the
//! controller notices the restart (KAFKA-1120). With broker-epoch fencing, the
//! default (KIP-380: a bounced broker is processed as failed and restarted),
//! it leaves every ISR and rejoins once caught up; without it, as this broker
//! did before, a restarted follower keeps its ISR membership and is sent its
//! partitions' state (its state-change.log shows it). Either way a restarted
//! leader's partition moves to another ISR member with the epoch raised by
//! one — also when the restarted leader was the controller and its successor
//! only finds out from etcd.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, batch, topic};
use epochal_broker::state_change_log::{self, Outcome, StateChange};
use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::{BrokerId, LeaderAndIsrRequest, UpdateMetadataRequest};

const TIMEOUT: Duration = Duration::from_secs(60);
const FLAGS: &[&str] = &[
    // Far longer than a restart: the old lease is alive throughout.
    "--lease-ttl-s",
    "20",
    "--replica-fetch-wait-max-ms",
    "100",
    "--replica-lag-time-max-ms",
    "30000",
];
/// The same, with the pre-KIP-380 behaviour: a bounced broker keeps its ISR memberships.
const FLAGS_WITHOUT_BROKER_EPOCHS: &[&str] = &[
    "--lease-ttl-s",
    "20",
    "--replica-fetch-wait-max-ms",
    "100",
    "--replica-lag-time-max-ms",
    "30000",
    "--broker-epoch-fencing",
    "false",
];

/// `n` acks=all writes `{prefix}-{i}` to `topic`-`partition`, each acknowledged.
fn write_acked(client: &mut KafkaClient, topic: &str, partition: i32, prefix: &str, n: usize) {
    for i in 0..n {
        let v = format!("{prefix}-{i}");
        assert_eq!(
            client
                .produce(topic, partition, batch(&[v.as_bytes()]), -1)
                .unwrap()
                .0,
            0
        );
    }
}

/// Awaits one acks=all write of `value` acknowledged by `client` (a new
/// leader may refuse writes until it has applied its election).
fn await_write(
    cluster: &Cluster,
    client: &mut KafkaClient,
    topic: &str,
    partition: i32,
    value: &[u8],
) {
    common::await_some_or(
        "the leader to take an acks=all write",
        TIMEOUT,
        || {
            let r = client.produce(topic, partition, batch(&[value]), -1).ok()?;
            (r.0 == 0).then_some(r)
        },
        || cluster.logs(),
    );
}

/// Creates topic `k` of two partitions (k-1's replicas are [2, 3, 1], so its
/// leader, 2, is not the controller, 1), writes ten values to k-1, restarts
/// its leader within its lease and returns the state of the new epoch: one
/// above, led by 3, the next ISR member in assignment order.
/// Broker 2, leader of k-1, bounces; the controller's decision for k-1, as
/// broker 3 applied it. Not etcd's state: by the time a busy test reads it,
/// the new leader may already have taken a caught-up bounced broker back into
/// the ISR (an ISR-only write, same epoch), hiding what the controller decided.
fn bounce_the_leader_of_k1(cluster: &mut Cluster) -> StateChange {
    assert_eq!(cluster.client(1).create_topic("k", 2, 3), 0);
    let before = cluster.await_state("a full ISR", TIMEOUT, "k", 1, |s| {
        s.leader == 2 && s.isr.len() == 3
    });
    let mut leader = cluster.client(2);
    write_acked(&mut leader, "k", 1, "before", 10);
    let restarted_ms = StateChange::now_ms();
    cluster.restart(2);
    let after = decided(cluster, 3, "k", 1, restarted_ms, before.leader_epoch);
    assert_eq!(after.leader_epoch, before.leader_epoch + 1, "{after:?}");
    assert_eq!(after.leader, 3, "the next ISR member in assignment order");
    after
}

/// The first LeaderAndIsr for `topic`-`partition` past `epoch` that broker
/// `id` applied since `since_ms`: a controller decision as it was sent.
fn decided(
    cluster: &Cluster,
    id: i32,
    topic: &str,
    partition: i32,
    since_ms: u64,
    epoch: i32,
) -> StateChange {
    common::await_some_or(
        &format!("broker {id} to apply a new epoch of {topic}-{partition}"),
        TIMEOUT,
        || {
            applied_since(cluster, id, since_ms)
                .into_iter()
                .find(|c| c.topic == topic && c.partition == partition && c.leader_epoch > epoch)
        },
        || cluster.logs(),
    )
}

fn applied_since(cluster: &Cluster, id: i32, since_ms: u64) -> Vec<StateChange> {
    state_change_log::read_all(&cluster.broker(id).data_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| {
            c.request == "LeaderAndIsr" && c.outcome == Outcome::Applied && c.time_ms >= since_ms
        })
        .collect()
}

#[test]
fn cluster_rejoin_without_broker_epochs_a_follower_restarted_within_its_lease_keeps_its_isr_membership()
 {
    let mut cluster = Cluster::start(3, FLAGS_WITHOUT_BROKER_EPOCHS);
    assert_eq!(cluster.client(1).create_topic("j", 1, 3), 0);
    let before = cluster.await_state("a full ISR", TIMEOUT, "j", 0, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    // Broker 1 is the controller; restart a follower that is not.
    let follower = (1..=3).find(|id| *id != before.leader && *id != 1).unwrap();
    let mut leader = cluster.client(before.leader);
    write_acked(&mut leader, "j", 0, "before", 10);

    let restarted_ms = StateChange::now_ms();
    cluster.restart(follower);
    let told = common::await_some_or(
        "the restarted follower to be sent its partition's state",
        TIMEOUT,
        || {
            applied_since(&cluster, follower, restarted_ms)
                .into_iter()
                .find(|c| c.topic == "j" && c.partition == 0)
        },
        || cluster.logs(),
    );
    assert_eq!(told.leader, before.leader);
    assert_eq!(
        told.leader_epoch, before.leader_epoch,
        "no new epoch for a follower"
    );
    assert!(told.isr.contains(&follower), "still in the ISR: {told:?}");
    assert!(
        cluster.broker(1).log().contains("restarted=true"),
        "the controller saw a restart within the lease"
    );

    // Still in the ISR, so acks=all needs it: writes complete only as it fetches.
    write_acked(&mut leader, "j", 0, "after", 10);
    let after = cluster.state("j", 0).unwrap();
    assert_eq!(
        (after.leader, after.leader_epoch, after.isr.len()),
        (before.leader, before.leader_epoch, 3),
        "the follower never left the ISR: {after:?}"
    );
    cluster.await_converged(&[1, 2, 3], "j", 0, 1, TIMEOUT);
}

#[test]
fn cluster_rejoin_without_broker_epochs_a_leader_restarted_within_its_lease_hands_over_with_a_new_epoch()
 {
    let mut cluster = Cluster::start(3, FLAGS_WITHOUT_BROKER_EPOCHS);
    let after = bounce_the_leader_of_k1(&mut cluster);
    assert!(
        after.isr.contains(&2),
        "the restarted broker stays in the ISR"
    );
    let mut new_leader = cluster.client(3);
    await_write(&cluster, &mut new_leader, "k", 1, b"after");
    assert_eq!(new_leader.fetch_all("k", 1, 0).len(), 11);
    cluster.await_converged(&[1, 2, 3], "k", 1, 1, TIMEOUT);
}

#[test]
fn cluster_rejoin_without_broker_epochs_a_restarted_controller_and_leader_is_noticed_by_the_next_controller()
 {
    // The old process's controller key lives until its lease expires; keep the
    // TTL short so the next controller comes soon.
    let mut cluster = Cluster::start(
        3,
        &[
            "--lease-ttl-s",
            "3",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "30000",
            "--broker-epoch-fencing",
            "false",
        ],
    );
    assert_eq!(cluster.client(1).create_topic("c", 1, 3), 0);
    let before = cluster.await_state("a full ISR", TIMEOUT, "c", 0, |s| {
        s.leader == 1 && s.isr.len() == 3
    });
    let mut leader = cluster.client(1);
    assert_eq!(
        leader.produce("c", 0, batch(&[b"before"]), -1).unwrap().0,
        0
    );

    cluster.restart(1);
    let after = cluster.await_state("a new epoch for c-0", TIMEOUT, "c", 0, |s| {
        s.leader_epoch > before.leader_epoch
    });
    assert_eq!(after.leader_epoch, before.leader_epoch + 1, "{after:?}");
    assert_eq!(after.leader, 2, "the next ISR member in assignment order");
    assert!(
        after.isr.contains(&1),
        "the restarted broker stays in the ISR"
    );
    // Followers learn epoch 1 from its first batch (the new leader recorded it
    // at election, KAFKA-7415); write one so the epoch files can agree.
    let mut new_leader = cluster.client(2);
    await_write(&cluster, &mut new_leader, "c", 0, b"after");
    cluster.await_converged(&[1, 2, 3], "c", 0, 1, TIMEOUT);
}

#[test]
fn cluster_rejoin_a_restarted_leader_and_follower_leave_the_isr_and_rejoin_once_caught_up() {
    let mut cluster = Cluster::start(3, FLAGS);
    // The leader bounces: leadership moves on and the bounced broker leaves
    // the ISR in the same decision (KIP-380).
    let after = bounce_the_leader_of_k1(&mut cluster);
    assert!(
        !after.isr.contains(&2),
        "the bounced broker left the ISR: {after:?}"
    );
    assert!(
        cluster.broker(1).log().contains("restarted=true"),
        "the controller saw a restart within the lease"
    );
    let mut new_leader = cluster.client(3);
    await_write(&cluster, &mut new_leader, "k", 1, b"after");
    // Caught up, it is taken back into the ISR by the leader.
    cluster.await_state("the bounced broker back in the ISR", TIMEOUT, "k", 1, |s| {
        s.isr.contains(&2)
    });

    // A follower bounces: the leader stays, the follower leaves the ISR and
    // comes back once caught up. Broker 2 again, not broker 1: broker 1 is
    // the controller, and a controller that bounces hands its key over, so a
    // successor that takes over after its re-registration sees a live broker,
    // not a bounce (as Kafka's does: KIP-380 compares broker epochs a live
    // controller has cached).
    let state = cluster.state("k", 1).unwrap();
    let restarted_ms = StateChange::now_ms();
    cluster.restart(2);
    let left = decided(
        &cluster,
        state.leader,
        "k",
        1,
        restarted_ms,
        state.leader_epoch,
    );
    assert_eq!(left.leader, state.leader, "{left:?}");
    assert!(!left.isr.contains(&2), "{left:?}");
    cluster.await_state("the follower back in the ISR", TIMEOUT, "k", 1, |s| {
        s.isr.len() == 3
    });
    // The ISR change raised the epoch; followers learn it from a batch of it.
    let mut leader = cluster.client(left.leader);
    await_write(&cluster, &mut leader, "k", 1, b"last");
    cluster.await_converged(&[1, 2, 3], "k", 1, 1, TIMEOUT);
}

/// KIP-380: a control request addressed to a registration this broker does
/// not hold is refused whole with STALE_BROKER_EPOCH. Such a request may not be
/// meant for this process at all: under ci/stress.sh another test cluster's
/// controller, still retrying a broker of its own that had died, reached a
/// gate broker restarted on that port, which applied a leader for an epoch its
/// own etcd never held. Older than the broker's registration, it is refused at
/// once (Kafka's rule); newer, once the session has not switched to it within
/// a lease TTL and etcd holds another. Refused, it applies nothing and leaves
/// alone the controller epoch the broker holds (a far higher one here), so its
/// own controller's next decision still applies.
#[test]
fn cluster_rejoin_a_control_request_for_a_registration_not_held_is_refused_and_changes_nothing() {
    // A short lease: a request naming a newer registration waits one TTL.
    let mut cluster = Cluster::start(
        3,
        &[
            "--lease-ttl-s",
            "3",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "30000",
        ],
    );
    assert_eq!(cluster.client(1).create_topic("s", 1, 3), 0);
    let before = cluster.await_state("a full ISR", TIMEOUT, "s", 0, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    // A follower that is not the controller (broker 1), and the third broker.
    let target = (2..=3).find(|id| *id != before.leader).unwrap();
    let other = (2..=3).find(|id| *id != target).unwrap();
    let since_ms = StateChange::now_ms();
    let foreign_controller_epoch = 1_000;
    // etcd's first write is revision 2, so every registration is newer than
    // 1; none of this cluster's reaches a million.
    for broker_epoch in [1, 1_000_000] {
        let partition = LeaderAndIsrPartitionState::default()
            .with_partition_index(0)
            .with_controller_epoch(foreign_controller_epoch)
            .with_leader(BrokerId(target))
            .with_leader_epoch(before.leader_epoch + 10)
            .with_isr(vec![BrokerId(target)])
            .with_replicas(vec![BrokerId(1), BrokerId(2), BrokerId(3)]);
        let leader_and_isr = LeaderAndIsrRequest::default()
            .with_controller_id(BrokerId(9))
            .with_controller_epoch(foreign_controller_epoch)
            .with_broker_epoch(broker_epoch)
            .with_topic_states(vec![
                LeaderAndIsrTopicState::default()
                    .with_topic_name(topic("s"))
                    .with_partition_states(vec![partition]),
            ]);
        let mut client = cluster.client(target);
        let answer = client.send(&leader_and_isr, 4).unwrap();
        assert_eq!(
            answer.error_code, STALE_BROKER_EPOCH,
            "{broker_epoch}: {answer:?}"
        );
        let update_metadata = UpdateMetadataRequest::default()
            .with_controller_id(BrokerId(9))
            .with_controller_epoch(foreign_controller_epoch)
            .with_broker_epoch(broker_epoch);
        let answer = client.send(&update_metadata, 6).unwrap();
        assert_eq!(
            answer.error_code, STALE_BROKER_EPOCH,
            "{broker_epoch}: {answer:?}"
        );
    }

    let refused: Vec<StateChange> = state_change_log::read_all(&cluster.broker(target).data_dir)
        .unwrap()
        .into_iter()
        .filter(|c| {
            c.time_ms >= since_ms
                && c.topic == "s"
                && c.request == "LeaderAndIsr"
                && c.outcome == Outcome::Rejected
                && c.reason
                    .as_deref()
                    .is_some_and(|r| r.contains("STALE_BROKER_EPOCH"))
        })
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        applied_since(&cluster, target, since_ms).is_empty(),
        "{refused:?}"
    );

    // Its own controller's next decision (the third broker bounces and leaves
    // the ISR) still applies: controller epoch 1000 was never taken.
    let decided_ms = StateChange::now_ms();
    cluster.restart(other);
    let next = decided(&cluster, target, "s", 0, decided_ms, before.leader_epoch);
    assert_eq!(next.leader_epoch, before.leader_epoch + 1, "{next:?}");
    assert!(!next.isr.contains(&other), "{next:?}");
}

/// Kafka's STALE_BROKER_EPOCH error code (KIP-380).
const STALE_BROKER_EPOCH: i16 = 77;
