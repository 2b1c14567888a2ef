//! The transaction coordinator end to end on three real brokers (KIP-98),
//! through a raw client: FindCoordinator for a transactional id makes the
//! transaction-state topic; InitProducerId, AddPartitionsToTxn, a
//! transactional produce and EndTxn commit one transaction and abort the
//! next, and the coordinator's markers let read_committed read the first
//! and told of the second; a second InitProducerId fences the first
//! producer; an InitProducerId over an ongoing transaction aborts it
//! (CONCURRENT_TRANSACTIONS until done, then a bumped epoch); and when the
//! coordinator is killed mid-transaction, the next one reads the state from
//! the log and commits it. Besides: AddOffsetsToTxn's offsets partition gets
//! the commit's marker, and a transaction past its timeout is aborted by the
//! coordinator, fencing its producer.

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{Isolated, KafkaClient, topic, transactional_batch};
use epochal_broker::offsets;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest,
    GroupId, InitProducerIdRequest, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

const TIMEOUT: Duration = Duration::from_secs(60);
const TXN: &str = "tx-a";
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const PRODUCER_FENCED: i16 = 90;
/// What a client retries after finding the coordinator again.
const RETRIABLE: [i16; 3] = [
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
];

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

/// The coordinator of `key` (key type 0 a group, 1 a transactional id),
/// asked of the live brokers.
fn coordinator_of(cluster: &Cluster, live: &[i32], key: &str, key_type: i8) -> i32 {
    common::await_some("a coordinator", TIMEOUT, || {
        live.iter().find_map(|id| {
            let mut c = KafkaClient::connect(&cluster.broker(*id).addr).ok()?;
            let req = FindCoordinatorRequest::default()
                .with_key(StrBytes::from_string(key.to_owned()))
                .with_key_type(key_type);
            let resp = c.send(&req, 3).ok()?;
            (resp.error_code == 0 && live.contains(&resp.node_id.0)).then_some(resp.node_id.0)
        })
    })
}

/// The transaction coordinator of [`TXN`].
fn coordinator(cluster: &Cluster, live: &[i32]) -> i32 {
    coordinator_of(cluster, live, TXN, 1)
}

/// Sends `request` to the coordinator until it answers other than a
/// retriable coordinator error or one of `also_retried`; its code and rest.
fn ask<T>(
    cluster: &Cluster,
    live: &[i32],
    txn: &str,
    what: &str,
    also_retried: &[i16],
    mut request: impl FnMut(&mut KafkaClient) -> Option<(i16, T)>,
) -> (i16, T) {
    common::await_some_or(
        what,
        TIMEOUT,
        || {
            let id = coordinator_of(cluster, live, txn, 1);
            let mut c = KafkaClient::connect(&cluster.broker(id).addr).ok()?;
            let (code, rest) = request(&mut c)?;
            (!RETRIABLE.contains(&code) && !also_retried.contains(&code)).then_some((code, rest))
        },
        || cluster.logs(),
    )
}

/// InitProducerId v4 for [`TXN`]: (code, (producer id, epoch)).
fn init(cluster: &Cluster, live: &[i32], also_retried: &[i16]) -> (i16, (i64, i16)) {
    init_id(cluster, live, TXN, 60_000, also_retried)
}

/// InitProducerId v4 for `txn` with a transaction timeout.
fn init_id(
    cluster: &Cluster,
    live: &[i32],
    txn: &str,
    timeout_ms: i32,
    also_retried: &[i16],
) -> (i16, (i64, i16)) {
    ask(cluster, live, txn, "InitProducerId", also_retried, |c| {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id(txn)))
            .with_transaction_timeout_ms(timeout_ms);
        let resp = c.send(&req, 4).ok()?;
        Some((resp.error_code, (resp.producer_id.0, resp.producer_epoch)))
    })
}

/// AddPartitionsToTxn of `t`-0 at `version` for [`TXN`]: the partition's code.
fn add(
    cluster: &Cluster,
    live: &[i32],
    producer: (i64, i16),
    version: i16,
    also_retried: &[i16],
) -> i16 {
    add_to(cluster, live, TXN, producer, version, also_retried)
}

fn add_to(
    cluster: &Cluster,
    live: &[i32],
    txn: &str,
    (pid, epoch): (i64, i16),
    version: i16,
    also_retried: &[i16],
) -> i16 {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(txn))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(topic("t"))
                .with_partitions(vec![0]),
        ]);
    ask(
        cluster,
        live,
        txn,
        "AddPartitionsToTxn",
        also_retried,
        |c| {
            let resp = c.send(&req, version).ok()?;
            let code =
                resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
            Some((code, ()))
        },
    )
    .0
}

fn end(cluster: &Cluster, live: &[i32], producer: (i64, i16), commit: bool) -> i16 {
    end_of(cluster, live, TXN, producer, commit)
}

fn end_of(
    cluster: &Cluster,
    live: &[i32],
    txn: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(txn_id(txn))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    ask(cluster, live, txn, "EndTxn", &[], |c| {
        Some((c.send(&req, 3).ok()?.error_code, ()))
    })
    .0
}

/// Produces `values` in the producer's transaction to `t`-0's leader.
fn produce(cluster: &Cluster, live: &[i32], (pid, epoch): (i64, i16), seq: i32, values: &[&[u8]]) {
    let state = cluster.await_state("t-0 led by a live broker", TIMEOUT, "t", 0, |s| {
        live.contains(&s.leader)
    });
    let (err, _) = cluster
        .client(state.leader)
        .produce("t", 0, transactional_batch(pid, epoch, seq, values), -1)
        .unwrap();
    assert_eq!(err, 0, "transactional produce");
}

/// What read_committed reads of `t`-0 once no transaction is open there:
/// (committed values, aborted (pid, first offset)).
fn read_committed(cluster: &Cluster, live: &[i32], hw: i64) -> (Vec<String>, Vec<(i64, i64)>) {
    let f = read_settled(cluster, live, "t", 0, hw);
    (f.committed_values(), f.aborted)
}

/// A read_committed fetch of `topic`-`partition` from its leader once its
/// high watermark is `hw` and no transaction is open there.
fn read_settled(cluster: &Cluster, live: &[i32], topic: &str, partition: i32, hw: i64) -> Isolated {
    common::await_some_or(
        &format!("{topic}-{partition}'s LSO at its HW {hw}"),
        TIMEOUT,
        || {
            let state = cluster
                .state(topic, partition)
                .filter(|s| live.contains(&s.leader))?;
            let mut c = KafkaClient::connect(&cluster.broker(state.leader).addr).ok()?;
            let f = c.fetch_isolated(topic, partition, 1);
            (f.high_watermark == hw && f.last_stable_offset == hw).then_some(f)
        },
        || cluster.logs(),
    )
}

#[test]
fn cluster_transactions_commit_abort_fence_and_survive_their_coordinator() {
    let mut cluster = Cluster::start(
        3,
        &["--lease-ttl-s", "2", "--replica-fetch-wait-max-ms", "50"],
    );
    let mut live = vec![1, 2, 3];
    assert_eq!(cluster.client(1).create_topic("t", 1, 3), 0);
    cluster.await_state("a full ISR", TIMEOUT, "t", 0, |s| {
        s.leader > 0 && s.isr.len() == 3
    });

    // A transaction committed, the next aborted.
    let (code, producer) = init(&cluster, &live, &[]);
    assert_eq!((code, producer.1), (0, 0), "a fresh producer id at epoch 0");
    let pid = producer.0;
    assert_eq!(add(&cluster, &live, producer, 3, &[]), 0);
    produce(&cluster, &live, producer, 0, &[b"c1", b"c2"]);
    assert_eq!(end(&cluster, &live, producer, true), 0);
    // The next transaction waits for the commit's markers.
    assert_eq!(
        add(&cluster, &live, producer, 3, &[CONCURRENT_TRANSACTIONS]),
        0
    );
    produce(&cluster, &live, producer, 2, &[b"a1"]);
    assert_eq!(end(&cluster, &live, producer, false), 0);
    // c1 c2 (0, 1), commit marker (2), a1 (3), abort marker (4).
    let (values, aborted) = read_committed(&cluster, &live, 5);
    assert_eq!(values, ["c1", "c2"]);
    assert_eq!(
        aborted,
        [(pid, 3)],
        "the aborted transaction, not the committed one"
    );

    // A second InitProducerId bumps the epoch and fences the first producer.
    let (code, second) = init(&cluster, &live, &[CONCURRENT_TRANSACTIONS]);
    assert_eq!((code, second), (0, (pid, 1)));
    assert_eq!(add(&cluster, &live, producer, 3, &[]), PRODUCER_FENCED);
    assert_eq!(
        add(&cluster, &live, producer, 1, &[]),
        INVALID_PRODUCER_EPOCH,
        "KIP-588: PRODUCER_FENCED only from v2"
    );

    // InitProducerId over an ongoing transaction aborts it first.
    assert_eq!(add(&cluster, &live, second, 3, &[]), 0);
    produce(&cluster, &live, second, 0, &[b"o1"]);
    assert_eq!(init(&cluster, &live, &[]).0, CONCURRENT_TRANSACTIONS);
    let (code, third) = init(&cluster, &live, &[CONCURRENT_TRANSACTIONS]);
    assert_eq!(
        (code, third),
        (0, (pid, 3)),
        "epoch 2 aborted the transaction, 3 is the new producer's"
    );
    // o1 (5), its abort marker (6).
    let (values, aborted) = read_committed(&cluster, &live, 7);
    assert_eq!(values, ["c1", "c2"]);
    assert_eq!(aborted, [(pid, 3), (pid, 5)]);

    // The coordinator dies mid-transaction; its successor reads the
    // transaction-state partition and commits it.
    assert_eq!(add(&cluster, &live, third, 3, &[]), 0);
    produce(&cluster, &live, third, 0, &[b"k1"]);
    let dead = coordinator(&cluster, &live);
    cluster.broker_mut(dead).kill9();
    live.retain(|id| *id != dead);
    assert_eq!(end(&cluster, &live, third, true), 0);
    assert_ne!(coordinator(&cluster, &live), dead);
    // k1 (7), its commit marker (8).
    let (values, _) = read_committed(&cluster, &live, 9);
    assert_eq!(values, ["c1", "c2", "k1"]);
    // And the successor serves the next producer.
    let (code, fourth) = init(&cluster, &live, &[CONCURRENT_TRANSACTIONS]);
    assert_eq!((code, fourth), (0, (pid, 4)));
}

/// AddOffsetsToTxn adds the group's offsets partition, so the commit's
/// marker ends there too; a transaction left open past its timeout is
/// aborted by the coordinator under a bumped epoch, and its producer's
/// late EndTxn is fenced.
#[test]
fn cluster_transactions_add_offsets_partitions_and_abort_what_times_out() {
    let cluster = Cluster::start(
        3,
        &["--lease-ttl-s", "2", "--replica-fetch-wait-max-ms", "50"],
    );
    let live = [1, 2, 3];
    assert_eq!(cluster.client(1).create_topic("t", 1, 3), 0);
    cluster.await_state("a full ISR", TIMEOUT, "t", 0, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    // The offsets topic exists once a group's coordinator was asked for.
    coordinator_of(&cluster, &live, "g", 0);
    let offsets = offsets::partition_for("g", 3);
    cluster.await_state(
        "the group's offsets partition led",
        TIMEOUT,
        offsets::OFFSETS_TOPIC,
        offsets,
        |s| s.leader > 0 && s.isr.len() == 3,
    );

    let (code, producer) = init_id(&cluster, &live, "tx-o", 60_000, &[]);
    assert_eq!(code, 0);
    assert_eq!(add_to(&cluster, &live, "tx-o", producer, 3, &[]), 0);
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id("tx-o"))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_group_id(GroupId(StrBytes::from_static_str("g")));
    let (code, ()) = ask(&cluster, &live, "tx-o", "AddOffsetsToTxn", &[], |c| {
        Some((c.send(&req, 3).ok()?.error_code, ()))
    });
    assert_eq!(code, 0);
    produce(&cluster, &live, producer, 0, &[b"o1"]);
    assert_eq!(end_of(&cluster, &live, "tx-o", producer, true), 0);
    let (values, _) = read_committed(&cluster, &live, 2);
    assert_eq!(values, ["o1"]);
    let markers = read_settled(&cluster, &live, offsets::OFFSETS_TOPIC, offsets, 1);
    assert_eq!(
        markers
            .records
            .iter()
            .map(|r| (r.producer_id, r.marker))
            .collect::<Vec<_>>(),
        [(producer.0, Some(true))],
        "the commit's marker in the group's offsets partition"
    );

    let (code, late) = init_id(&cluster, &live, "tx-late", 1_000, &[]);
    assert_eq!(code, 0);
    assert_eq!(add_to(&cluster, &live, "tx-late", late, 3, &[]), 0);
    produce(&cluster, &live, late, 0, &[b"late"]);
    // late (2), the coordinator's abort marker (3).
    let (values, aborted) = read_committed(&cluster, &live, 4);
    assert_eq!(values, ["o1"]);
    assert_eq!(aborted, [(late.0, 2)]);
    assert_eq!(
        end_of(&cluster, &live, "tx-late", late, true),
        PRODUCER_FENCED,
        "the timed-out producer was fenced by the abort's bumped epoch"
    );
}

const INVALID_TXN_STATE: i16 = 48;

/// A transactional produce to `topic`-`partition`'s leader, naming
/// `transactional_id` as a transactional producer's requests do: its code.
fn produce_named(
    cluster: &Cluster,
    (topic_name, partition): (&str, i32),
    transactional_id: &str,
    (pid, epoch): (i64, i16),
    seq: i32,
    value: &[u8],
) -> i16 {
    let state = cluster.await_state("a leader", TIMEOUT, topic_name, partition, |s| s.leader > 0);
    let batch = transactional_batch(pid, epoch, seq, &[value]);
    cluster
        .client(state.leader)
        .produce_as(topic_name, partition, batch, -1, Some(transactional_id))
        .unwrap()
        .0
}

/// AddPartitionsToTxn of `topic`-`partition` for `txn`: its code.
fn add_partition(
    cluster: &Cluster,
    live: &[i32],
    txn: &str,
    producer: (i64, i16),
    tp: (&str, i32),
) -> i16 {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(txn))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(topic(tp.0))
                .with_partitions(vec![tp.1]),
        ]);
    ask(
        cluster,
        live,
        txn,
        "AddPartitionsToTxn",
        &[CONCURRENT_TRANSACTIONS],
        |c| {
            let resp = c.send(&req, 3).ok()?;
            Some((
                resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
                (),
            ))
        },
    )
    .0
}

/// KIP-890 part 1, on (the default): a transactional produce that would open
/// a transaction on a partition is appended only if the coordinator has the
/// partition in the producer's ongoing transaction. A produce arriving after
/// its transaction was aborted — the late request of KAFKA-14402's hanging
/// transactions — is refused INVALID_TXN_STATE and nothing is left open;
/// so is one to a partition never added. Three partitions led by three
/// brokers put the check on both paths: asked of the coordinator over the
/// network, and answered locally where the leader is the coordinator.
#[test]
fn cluster_transactions_verify_a_partition_before_a_transaction_opens_there() {
    let cluster = Cluster::start(
        3,
        &["--lease-ttl-s", "2", "--replica-fetch-wait-max-ms", "50"],
    );
    let live = [1, 2, 3];
    assert_eq!(cluster.client(1).create_topic("v", 3, 3), 0);
    let mut leaders = std::collections::BTreeSet::new();
    for p in 0..3 {
        let s = cluster.await_state("a full ISR", TIMEOUT, "v", p, |s| {
            s.leader > 0 && s.isr.len() == 3
        });
        leaders.insert(s.leader);
    }
    let (code, producer) = init_id(&cluster, &live, "tx-v", 60_000, &[]);
    assert_eq!(code, 0);
    let coordinator = coordinator_of(&cluster, &live, "tx-v", 1);
    assert!(
        leaders.iter().any(|l| *l != coordinator),
        "some partition's check goes over the network (leaders {leaders:?}, coordinator {coordinator})"
    );
    for p in 0..3 {
        let tp = ("v", p);
        assert_eq!(add_partition(&cluster, &live, "tx-v", producer, tp), 0);
        assert_eq!(produce_named(&cluster, tp, "tx-v", producer, 0, b"in"), 0);
        assert_eq!(end_of(&cluster, &live, "tx-v", producer, false), 0);
        // The abort's marker is at 1; the late produce carries the next
        // sequence, so only the check stands between it and the log.
        read_settled(&cluster, &live, "v", p, 2);
        assert_eq!(
            produce_named(&cluster, tp, "tx-v", producer, 1, b"late"),
            INVALID_TXN_STATE,
            "v-{p}: a produce after its transaction was aborted"
        );
        let f = read_settled(&cluster, &live, "v", p, 2);
        assert_eq!(
            (f.high_watermark, f.last_stable_offset),
            (2, 2),
            "v-{p}: nothing open"
        );
    }
    // In a transaction, a partition that was not added is refused too.
    assert_eq!(
        add_partition(&cluster, &live, "tx-v", producer, ("v", 0)),
        0
    );
    assert_eq!(
        produce_named(&cluster, ("v", 1), "tx-v", producer, 1, b"x"),
        INVALID_TXN_STATE
    );
    assert_eq!(
        produce_named(&cluster, ("v", 0), "tx-v", producer, 1, b"y"),
        0
    );
    assert_eq!(end_of(&cluster, &live, "tx-v", producer, true), 0);
    let (values, _) = {
        let f = read_settled(&cluster, &live, "v", 0, 4);
        (f.committed_values(), f.aborted)
    };
    assert_eq!(values, ["y"]);
}

/// With `transaction_partition_verification = false` (every release before
/// Kafka 3.6) the same late produce is appended and opens a transaction its
/// coordinator knows nothing of: the partition's last stable offset stays
/// at it. Neither the coordinator's timeout — another transaction left open
/// on the partition is aborted by it meanwhile — nor the id's next
/// InitProducerId ends it (KAFKA-14402).
#[test]
fn cluster_transactions_unverified_late_produce_hangs_the_last_stable_offset() {
    let cluster = Cluster::start(
        3,
        &[
            "--lease-ttl-s",
            "2",
            "--replica-fetch-wait-max-ms",
            "50",
            "--transaction-partition-verification",
            "false",
        ],
    );
    let live = [1, 2, 3];
    assert_eq!(cluster.client(1).create_topic("h", 1, 3), 0);
    cluster.await_state("a full ISR", TIMEOUT, "h", 0, |s| {
        s.leader > 0 && s.isr.len() == 3
    });
    let tp = ("h", 0);
    let (code, producer) = init_id(&cluster, &live, "tx-h", 60_000, &[]);
    assert_eq!(code, 0);
    assert_eq!(add_partition(&cluster, &live, "tx-h", producer, tp), 0);
    assert_eq!(produce_named(&cluster, tp, "tx-h", producer, 0, b"in"), 0);
    assert_eq!(end_of(&cluster, &live, "tx-h", producer, false), 0);
    read_settled(&cluster, &live, "h", 0, 2);
    assert_eq!(
        produce_named(&cluster, tp, "tx-h", producer, 1, b"late"),
        0,
        "appended unasked"
    );
    // A transaction the coordinator times out, after the hanging one began.
    let (code, other) = init_id(&cluster, &live, "tx-t", 1_000, &[]);
    assert_eq!(code, 0);
    assert_eq!(add_partition(&cluster, &live, "tx-t", other, tp), 0);
    assert_eq!(
        produce_named(&cluster, tp, "tx-t", other, 0, b"timed-out"),
        0
    );
    // The id's next producer: InitProducerId aborts only what its
    // coordinator knows of.
    let (code, _) = init_id(&cluster, &live, "tx-h", 60_000, &[CONCURRENT_TRANSACTIONS]);
    assert_eq!(code, 0);
    // late (2), timed-out (3), then the timeout's abort marker (4).
    let leader = common::await_some_or(
        "tx-t's abort marker",
        TIMEOUT,
        || {
            let state = cluster.state("h", 0)?;
            let mut c = KafkaClient::connect(&cluster.broker(state.leader).addr).ok()?;
            let f = c.fetch_isolated("h", 0, 0);
            f.records
                .iter()
                .any(|r| {
                    r.producer_id == other.0
                        && r.marker == Some(false)
                        && r.offset < f.high_watermark
                })
                .then_some(state.leader)
        },
        || cluster.logs(),
    );
    let f = KafkaClient::connect(&cluster.broker(leader).addr)
        .unwrap()
        .fetch_isolated("h", 0, 1);
    assert_eq!(
        (f.high_watermark, f.last_stable_offset),
        (5, 2),
        "the late produce's transaction holds the last stable offset"
    );
    assert!(f.committed_values().is_empty());
}

/// KAFKA-6119's setting: with `transaction_timeout_fences_producer = false`
/// the coordinator aborts a lapsed transaction under the same epoch, so its
/// producer, not told, adds its next partition — a new transaction to the
/// coordinator — and commits it: the write before the timeout is aborted,
/// the one after committed, and the producer heard of neither. (With the
/// default, the same AddPartitionsToTxn is PRODUCER_FENCED: the test above.)
#[test]
fn cluster_transactions_without_the_timeout_fence_a_lapsed_producer_commits_half_its_transaction() {
    let cluster = Cluster::start(
        3,
        &[
            "--lease-ttl-s",
            "2",
            "--replica-fetch-wait-max-ms",
            "50",
            "--transaction-timeout-fences-producer",
            "false",
        ],
    );
    let live = [1, 2, 3];
    assert_eq!(cluster.client(1).create_topic("w", 2, 3), 0);
    for p in 0..2 {
        cluster.await_state("a full ISR", TIMEOUT, "w", p, |s| {
            s.leader > 0 && s.isr.len() == 3
        });
    }
    let (code, producer) = init_id(&cluster, &live, "tx-6119", 1_000, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        add_partition(&cluster, &live, "tx-6119", producer, ("w", 0)),
        0
    );
    assert_eq!(
        produce_named(&cluster, ("w", 0), "tx-6119", producer, 0, b"before"),
        0
    );
    // The coordinator's timeout aborts it: the marker on w-0.
    common::await_some_or(
        "the timeout's abort marker on w-0",
        TIMEOUT,
        || {
            let state = cluster.state("w", 0)?;
            let mut c = KafkaClient::connect(&cluster.broker(state.leader).addr).ok()?;
            let f = c.fetch_isolated("w", 0, 0);
            f.records
                .iter()
                .any(|r| r.producer_id == producer.0 && r.marker == Some(false))
                .then_some(())
        },
        || cluster.logs(),
    );
    assert_eq!(
        add_partition(&cluster, &live, "tx-6119", producer, ("w", 1)),
        0,
        "the same epoch: a new transaction"
    );
    assert_eq!(
        produce_named(&cluster, ("w", 1), "tx-6119", producer, 0, b"after"),
        0
    );
    assert_eq!(end_of(&cluster, &live, "tx-6119", producer, true), 0);
    let before = read_settled(&cluster, &live, "w", 0, 2);
    let after = read_settled(&cluster, &live, "w", 1, 2);
    assert_eq!(
        (before.committed_values(), after.committed_values()),
        (Vec::<String>::new(), vec!["after".to_owned()]),
        "half the producer's transaction committed"
    );
}
