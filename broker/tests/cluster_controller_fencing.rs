//! Acceptance (issue 6): KAFKA-532's paused ("GC") controller, with and without
//! controller-epoch fencing. One sequence, two settings:
//!
//! 1. Broker 1 is controller and leads `t-0` (replicas 1, 2, 3; full ISR); its
//!    failpoint stops it once, after it took a broker loss off its queue and
//!    before it handled it. Its lease is the longest, so what follows happens
//!    while it sits there.
//! 2. Broker 2 is killed: its registration expires and controller 1 stops on that
//!    event. Broker 2 is restarted at once and registers again.
//! 3. Controller 1's lease expires; a new controller (epoch 2) moves `t-0` to
//!    broker 2 (epoch 1, ISR [2, 3]), which takes acks=all writes.
//! 4. Controller 1 is resumed with SIGCONT. It handles the stale event first — in
//!    its view broker 2 is gone — before it looks at its own session.
//!
//! Fencing on: its write is refused by Jun Rao's per-path rule (`t-0`'s state
//! now carries controller epoch 2, above its 1), it resigns, and no broker
//! applies anything from controller epoch 1. Fencing off: it
//! re-reads, re-decides from its stale view (leader 3, epoch 2) and writes;
//! broker 3 applies it while broker 2, which it believes dead, is never told.
//! Two brokers then lead `t-0` in different epochs and both acknowledge a write
//! at the same offset: the logs on disk diverge.

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::cluster::Cluster;
use common::kafka_client::batch;
use epochal_broker::controller::metadata_store::controller_epoch_key;
use nix::sys::signal::Signal;

const TIMEOUT: Duration = Duration::from_secs(60);
/// Kafka's NOT_LEADER_OR_FOLLOWER.
const NOT_LEADER: i16 = 6;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A broker's state-change.log lines as JSON.
fn state_changes(cluster: &Cluster, id: i32) -> Vec<serde_json::Value> {
    std::fs::read_to_string(cluster.broker(id).data_dir.join("state-change.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Lines of any broker's state-change.log from controller epoch 1 written at or
/// after `since_ms` with `outcome`.
fn from_old_controller(cluster: &Cluster, since_ms: u64, outcome: &str) -> Vec<(i32, String)> {
    (1..=3)
        .flat_map(|id| {
            state_changes(cluster, id)
                .into_iter()
                .filter(|c| {
                    c["controller_epoch"] == 1
                        && c["outcome"] == outcome
                        && c["time_ms"].as_u64().unwrap_or(0) >= since_ms
                })
                .map(move |c| (id, c.to_string()))
        })
        .collect()
}

/// Steps 1–4; returns the wall-clock time of the SIGCONT.
fn pause_controller_over_a_takeover(fencing: bool) -> (Cluster, u64) {
    let fencing = fencing.to_string();
    let mut cluster = Cluster::start_with_env(
        3,
        &[
            "--flush-messages",
            "1",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "30000",
            "--controller-epoch-fencing",
            &fencing,
            // Without KIP-380's takeover rule: broker 2, killed and back, is
            // registered since t-0's state was written, and with broker
            // epochs the new controller takes it out of the ISR at takeover
            // (partition_election::restarted_unseen) instead of electing it,
            // which is KIP-380's business, not controller-epoch fencing's.
            // (These tests passed with broker epochs only while broker 2's
            // restart came after its lease lapsed: a key created anew, which
            // takeovers did not count.)
            "--broker-epoch-fencing",
            "false",
        ],
        // The paused controller's lease outlives broker 2's restart by seconds.
        |id| {
            let ttl = if id == 1 { "8" } else { "2" };
            vec!["--lease-ttl-s".into(), ttl.into()]
        },
        |id| {
            if id == 1 {
                vec![(
                    "EPOCHAL_FAILPOINTS",
                    "controller-before-broker-loss=1*stop".to_string(),
                )]
            } else {
                vec![]
            }
        },
    );
    assert_eq!(cluster.client(1).create_topic("t", 1, 3), 0);
    cluster.await_state("a full ISR under broker 1", TIMEOUT, "t", 0, |s| {
        s.leader == 1 && s.isr.len() == 3
    });
    let mut c1 = cluster.client(1);
    for i in 0..5 {
        let value = format!("a{i}");
        assert_eq!(
            c1.produce("t", 0, batch(&[value.as_bytes()]), -1).unwrap(),
            (0, i)
        );
    }

    cluster.broker_mut(2).kill9();
    common::await_some_or(
        "controller 1 to stop at controller-before-broker-loss",
        TIMEOUT,
        || (cluster.broker(1).proc_state() == Some('T')).then_some(()),
        || cluster.logs(),
    );
    cluster.restart(2);
    assert_eq!(
        cluster.etcd.get(&controller_epoch_key()).as_deref(),
        Some("1"),
        "broker 2 must be back before controller 1's lease expires"
    );

    let state = cluster.await_state("the new controller's leader", TIMEOUT, "t", 0, |s| {
        s.controller_epoch == 2 && s.leader == 2
    });
    assert_eq!((state.leader_epoch, state.isr.clone()), (1, vec![2, 3]));
    let mut c2 = cluster.client(2);
    for i in 0..3 {
        let value = format!("b{i}");
        let acked = common::await_some_or(
            "broker 2 to acknowledge with acks=all",
            TIMEOUT,
            || {
                let r = c2.produce("t", 0, batch(&[value.as_bytes()]), -1).unwrap();
                (r.0 == 0).then_some(r.1)
            },
            || cluster.logs(),
        );
        assert_eq!(acked, 5 + i);
    }

    let resumed_ms = now_ms();
    cluster.broker(1).signal(Signal::SIGCONT);
    (cluster, resumed_ms)
}

#[test]
fn cluster_controller_fencing_on_a_resumed_controller_resigns_and_nothing_it_decided_is_applied() {
    let (cluster, resumed_ms) = pause_controller_over_a_takeover(true);
    let reason = common::await_some_or(
        "controller 1 to resign",
        TIMEOUT,
        || {
            cluster
                .broker(1)
                .log()
                .lines()
                .find(|l| l.contains("resigned as controller") && l.contains("epoch=1"))
                .map(str::to_string)
        },
        || cluster.logs(),
    );
    assert!(reason.contains("stored controller epoch 2"), "{reason}");
    // The write was refused, so the new controller's state stands.
    let state = cluster.state("t", 0).unwrap();
    assert_eq!(
        (state.leader, state.leader_epoch, state.controller_epoch),
        (2, 1, 2)
    );
    assert_eq!(from_old_controller(&cluster, resumed_ms, "applied"), vec![]);
    // Broker 2 alone leads: it acknowledges, broker 3 refuses.
    assert_eq!(
        cluster
            .client(2)
            .produce("t", 0, batch(&[b"c"]), -1)
            .unwrap(),
        (0, 8)
    );
    assert_eq!(
        cluster
            .client(3)
            .produce("t", 0, batch(&[b"c"]), 1)
            .unwrap()
            .0,
        NOT_LEADER
    );
}

#[test]
fn cluster_controller_fencing_off_a_resumed_controller_splits_leadership_and_the_logs_diverge() {
    let (cluster, resumed_ms) = pause_controller_over_a_takeover(false);
    // Its stale decision is written and applied by broker 3.
    cluster.await_state(
        "controller 1's stale decision in etcd",
        TIMEOUT,
        "t",
        0,
        |s| s.controller_epoch == 1 && s.leader == 3 && s.leader_epoch == 2,
    );
    let applied = common::await_some_or(
        "broker 3 to apply controller 1's LeaderAndIsr",
        TIMEOUT,
        || {
            let lines = from_old_controller(&cluster, resumed_ms, "applied");
            lines
                .iter()
                .any(|(id, l)| {
                    *id == 3 && l.contains("\"LeaderAndIsr\"") && l.contains("\"leader\":3")
                })
                .then_some(lines)
        },
        || cluster.logs(),
    );
    assert!(
        applied.iter().all(|(id, _)| *id != 2),
        "broker 2 was never told: {applied:?}"
    );
    // Broker 3 leads epoch 2 with ISR [3] and acknowledges with acks=all; broker
    // 2 still leads epoch 1 and acknowledges with acks=1 — at the same offset.
    let mut c3 = cluster.client(3);
    let on_3 = common::await_some_or(
        "broker 3 to acknowledge as leader",
        TIMEOUT,
        || {
            let r = c3.produce("t", 0, batch(&[b"split-on-3"]), -1).unwrap();
            (r.0 == 0).then_some(r.1)
        },
        || cluster.logs(),
    );
    let on_2 = cluster
        .client(2)
        .produce("t", 0, batch(&[b"split-on-2"]), 1)
        .unwrap();
    assert_eq!(on_2, (0, on_3), "both leaders acknowledge offset {on_3}");
    let bytes = |id: i32| -> Vec<u8> {
        cluster
            .segments(id, "t", 0)
            .into_iter()
            .flat_map(|(_, b)| b)
            .collect()
    };
    let has = |id: i32, needle: &[u8]| bytes(id).windows(needle.len()).any(|w| w == needle);
    assert!(has(3, b"split-on-3") && !has(3, b"split-on-2"));
    assert!(has(2, b"split-on-2") && !has(2, b"split-on-3"));
}

/// The brokers' half of KAFKA-532: a controller stopped after its etcd write and
/// before its LeaderAndIsr went out (so no etcd fence can catch it) resumes
/// after a new controller spoke to the brokers. They answer
/// STALE_CONTROLLER_EPOCH, it resigns, and no broker applies its LeaderAndIsr.
#[test]
fn cluster_controller_fencing_on_brokers_refuse_a_resumed_controllers_requests_and_it_resigns() {
    // Placement: t-0 on [1, 2], t-1 on [2, 3]. Controller 1 writes both initial
    // states (failpoint passes twice), then stops after writing t-1's next state
    // when broker 3 is lost.
    let mut cluster = Cluster::start_with_env(
        3,
        &[
            "--flush-messages",
            "1",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "30000",
        ],
        |id| {
            let ttl = if id == 1 { "8" } else { "2" };
            vec!["--lease-ttl-s".into(), ttl.into()]
        },
        |id| {
            if id == 1 {
                vec![(
                    "EPOCHAL_FAILPOINTS",
                    "controller-after-write=2*off->1*stop".to_string(),
                )]
            } else {
                vec![]
            }
        },
    );
    assert_eq!(cluster.client(1).create_topic("t", 2, 2), 0);
    cluster.await_state("t-1 fully in sync", TIMEOUT, "t", 1, |s| {
        s.leader == 2 && s.isr.len() == 2
    });
    cluster.broker_mut(3).kill9();
    common::await_some_or(
        "controller 1 to stop at controller-after-write",
        TIMEOUT,
        || (cluster.broker(1).proc_state() == Some('T')).then_some(()),
        || cluster.logs(),
    );
    // Its decision is in etcd, not yet sent.
    let written = cluster.state("t", 1).unwrap();
    assert_eq!(
        (
            written.leader,
            written.leader_epoch,
            written.isr.clone(),
            written.controller_epoch
        ),
        (2, 1, vec![2], 1)
    );
    // Broker 2 becomes controller (epoch 2) and tells itself so.
    cluster.await_state("the new controller's t-0 leader", TIMEOUT, "t", 0, |s| {
        s.controller_epoch == 2 && s.leader == 2
    });
    common::await_some_or(
        "broker 2 to apply controller epoch 2",
        TIMEOUT,
        || {
            state_changes(&cluster, 2)
                .iter()
                .any(|c| c["controller_epoch"] == 2 && c["outcome"] == "applied")
                .then_some(())
        },
        || cluster.logs(),
    );

    let resumed_ms = now_ms();
    cluster.broker(1).signal(Signal::SIGCONT);
    // It resigns — on the brokers' answer, or first on its own lapsed session,
    // whichever it meets first after the resume — and it hears the answer.
    common::await_some_or(
        "controller 1 to resign and hear STALE_CONTROLLER_EPOCH",
        TIMEOUT,
        || {
            let log = cluster.broker(1).log();
            (log.lines()
                .any(|l| l.contains("resigned as controller") && l.contains("epoch=1"))
                && log.lines().any(|l| {
                    l.contains("broker answered STALE_CONTROLLER_EPOCH")
                        && l.contains("broker_id=2")
                }))
            .then_some(())
        },
        || cluster.logs(),
    );
    let log = cluster.broker(1).log();
    let resigned = log
        .lines()
        .find(|l| l.contains("resigned as controller") && l.contains("epoch=1"));
    println!("controller 1: {}", resigned.unwrap_or_default());
    let rejected = from_old_controller(&cluster, resumed_ms, "rejected");
    assert!(
        rejected.iter().any(|(id, l)| *id == 2
            && l.contains("\"LeaderAndIsr\"")
            && l.contains("STALE_CONTROLLER_EPOCH")),
        "{rejected:?}"
    );
    // Nothing from controller epoch 1 is applied after the resume, except the
    // UpdateMetadata its own broker takes from it: broker 1 never heard of
    // epoch 2 (the new controller counts it gone), as in Kafka.
    let applied = from_old_controller(&cluster, resumed_ms, "applied");
    assert!(
        applied
            .iter()
            .all(|(id, l)| *id == 1 && l.contains("\"UpdateMetadata\"")),
        "{applied:?}"
    );
}

/// Placement: t-0 on [1, 2], t-1 on [2, 3]. Controller 1 (lease 8 s, the
/// others 2 s) stops once at `controller-before-broker-loss`; controller-epoch
/// fencing is on, broker-epoch fencing off.
fn start_cluster_stopping_controller_1_on_a_broker_loss() -> Cluster {
    Cluster::start_with_env(
        3,
        &[
            "--flush-messages",
            "1",
            "--replica-fetch-wait-max-ms",
            "100",
            "--replica-lag-time-max-ms",
            "30000",
            "--controller-epoch-fencing",
            "true",
            // Without KIP-380's takeover rule: broker 3, killed and back, is
            // registered since t-1's state was written, and with broker
            // epochs the new controller takes it out of t-1's ISR at takeover
            // (partition_election::restarted_unseen), rewriting t-1 at
            // controller epoch 2, so the stale decision this test is about
            // would be refused in etcd before any broker saw it. (It passed
            // before only when broker 3's restart came after its lease lapsed,
            // a key created anew that takeovers did not count.)
            "--broker-epoch-fencing",
            "false",
        ],
        |id| {
            let ttl = if id == 1 { "8" } else { "2" };
            vec!["--lease-ttl-s".into(), ttl.into()]
        },
        |id| {
            if id == 1 {
                vec![(
                    "EPOCHAL_FAILPOINTS",
                    "controller-before-broker-loss=1*stop".to_string(),
                )]
            } else {
                vec![]
            }
        },
    )
}

/// Broker 3 is killed: controller 1 stops holding "broker 3 lost", and broker
/// 3 restarts and registers again before controller 1's lease expires.
fn stop_controller_1_holding_broker_3s_loss(cluster: &mut Cluster) {
    cluster.broker_mut(3).kill9();
    common::await_some_or(
        "controller 1 to stop at controller-before-broker-loss",
        TIMEOUT,
        || (cluster.broker(1).proc_state() == Some('T')).then_some(()),
        || cluster.logs(),
    );
    cluster.restart(3);
    assert_eq!(
        cluster.etcd.get(&controller_epoch_key()).as_deref(),
        Some("1"),
        "broker 3 must be back before controller 1's lease expires"
    );
}

/// The new controller rewrites t-0 only; t-1 keeps controller epoch 1, while
/// broker 2 has heard controller epoch 2 (its takeover's full state).
fn await_a_takeover_that_leaves_t1_alone(cluster: &Cluster) {
    cluster.await_state("the new controller's t-0 leader", TIMEOUT, "t", 0, |s| {
        s.controller_epoch == 2 && s.leader == 2
    });
    common::await_some_or(
        "broker 2 to apply controller epoch 2",
        TIMEOUT,
        || {
            state_changes(cluster, 2)
                .iter()
                .any(|c| c["controller_epoch"] == 2 && c["outcome"] == "applied")
                .then_some(())
        },
        || cluster.logs(),
    );
    let before = cluster.state("t", 1).unwrap();
    assert_eq!(
        (before.leader, before.isr.clone(), before.controller_epoch),
        (2, vec![2, 3], 1),
        "the new controller must not have rewritten t-1"
    );
}

/// Broker 2 answers the resumed controller's LeaderAndIsr with
/// STALE_CONTROLLER_EPOCH, and it resigns; returns its resignation line.
fn await_resignation_on_broker_2s_answer(cluster: &Cluster) -> String {
    common::await_some_or(
        "controller 1 to resign and hear STALE_CONTROLLER_EPOCH from broker 2",
        TIMEOUT,
        || {
            let log = cluster.broker(1).log();
            (log.lines()
                .any(|l| l.contains("resigned as controller") && l.contains("epoch=1"))
                && log.lines().any(|l| {
                    l.contains("broker answered STALE_CONTROLLER_EPOCH")
                        && l.contains("broker_id=2")
                }))
            .then_some(())
        },
        || cluster.logs(),
    );
    let log = cluster.broker(1).log();
    log.lines()
        .find(|l| l.contains("resigned as controller") && l.contains("epoch=1"))
        .unwrap_or_default()
        .to_string()
}

/// Broker 2 rejected controller epoch 1's LeaderAndIsr, and its decision is in
/// no broker's log as applied: no LeaderAndIsr of epoch 1 after the resume;
/// only its own broker (never told of epoch 2: the new controller counts it
/// gone) takes its UpdateMetadata, as in Kafka.
fn assert_the_brokers_refused_the_stale_decision(cluster: &Cluster, resumed_ms: u64) {
    let rejected = from_old_controller(cluster, resumed_ms, "rejected");
    assert!(
        rejected.iter().any(|(id, l)| *id == 2
            && l.contains("\"LeaderAndIsr\"")
            && l.contains("STALE_CONTROLLER_EPOCH")),
        "{rejected:?}"
    );
    let applied = from_old_controller(cluster, resumed_ms, "applied");
    assert!(
        applied
            .iter()
            .all(|(id, l)| *id == 1 && l.contains("\"UpdateMetadata\"")),
        "{applied:?}"
    );
}

/// The acceptance sequence of issue 6 where the brokers, not etcd, stop the
/// resumed controller. Placement: t-0 on [1, 2], t-1 on [2, 3] (leader 2,
/// follower 3). Controller 1 stops at `controller-before-broker-loss` holding
/// "broker 3 lost"; broker 3 restarts and registers again; controller 1's lease
/// expires and a new controller (epoch 2) takes over. It rewrites t-0 (its leader,
/// broker 1, is gone) but has no reason to touch t-1 (leader 2, ISR [2, 3], all
/// live), whose stored controller epoch stays 1 — while every broker hears epoch 2
/// in its full-state LeaderAndIsr and UpdateMetadata. Resumed, controller 1
/// handles its stale event: the per-path rule (1 ≤ 1) lets it drop broker 3 from
/// t-1's ISR in etcd, and its LeaderAndIsr at controller epoch 1 reaches broker
/// 2, which answers STALE_CONTROLLER_EPOCH. Controller 1 resigns and no broker
/// applies its decision.
#[test]
fn cluster_controller_fencing_on_a_controller_resumed_before_handling_a_broker_loss_gets_stale_from_brokers()
 {
    let mut cluster = start_cluster_stopping_controller_1_on_a_broker_loss();
    assert_eq!(cluster.client(1).create_topic("t", 2, 2), 0);
    cluster.await_state("t-0 fully in sync", TIMEOUT, "t", 0, |s| {
        s.leader == 1 && s.isr.len() == 2
    });
    cluster.await_state("t-1 fully in sync", TIMEOUT, "t", 1, |s| {
        s.leader == 2 && s.isr == vec![2, 3]
    });
    stop_controller_1_holding_broker_3s_loss(&mut cluster);
    await_a_takeover_that_leaves_t1_alone(&cluster);

    let resumed_ms = now_ms();
    cluster.broker(1).signal(Signal::SIGCONT);

    // Its stale decision passes the per-path rule in etcd: broker 3 out of t-1's ISR.
    cluster.await_state(
        "controller 1's stale t-1 decision in etcd",
        TIMEOUT,
        "t",
        1,
        |s| s.controller_epoch == 1 && s.leader == 2 && s.isr == vec![2],
    );
    let resigned = await_resignation_on_broker_2s_answer(&cluster);
    // Which check it met first: the brokers' answer, or its own session, which
    // lapsed while it was stopped and is looked at right after the event —
    // still lapsed, or already replaced by a new lease (the session's own
    // thread re-registers as soon as the process runs again).
    println!("controller 1: {resigned}");
    assert!(
        resigned.contains("STALE_CONTROLLER_EPOCH")
            || resigned.contains("session not live")
            || resigned.contains("own etcd lease replaced"),
        "{resigned}"
    );
    assert_the_brokers_refused_the_stale_decision(&cluster, resumed_ms);
    // Broker 2 still leads t-1 and acknowledges.
    assert_eq!(
        cluster
            .client(2)
            .produce("t", 1, batch(&[b"after"]), 1)
            .unwrap()
            .0,
        0
    );
}
