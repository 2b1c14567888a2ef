//! The transaction coordinator end to end on three real brokers (KIP-98),
//! through a raw client: FindCoordinator for a transactional id makes the
//! transaction-state topic; InitProducerId, AddPartitionsToTxn, a
//! transactional produce and EndTxn commit one transaction and abort the
//! next, and the coordinator's markers let read_committed read the first
//! and told of the second; a second InitProducerId fences the first
//! producer; an InitProducerId over an ongoing transaction aborts it
//! (CONCURRENT_TRANSACTIONS until done, then a bumped epoch); and when the
//! coordinator is killed mid-transaction, the next one reads the state from
//! the log and commits it.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::{KafkaClient, topic, transactional_batch};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProducerId, TransactionalId,
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

fn txn_id() -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(TXN))
}

/// The transaction coordinator of [`TXN`], asked of the live brokers.
fn coordinator(cluster: &Cluster, live: &[i32]) -> i32 {
    common::await_some("a transaction coordinator", TIMEOUT, || {
        live.iter().find_map(|id| {
            let mut c = KafkaClient::connect(&cluster.broker(*id).addr).ok()?;
            let req = FindCoordinatorRequest::default()
                .with_key(StrBytes::from_static_str(TXN))
                .with_key_type(1);
            let resp = c.send(&req, 3).ok()?;
            (resp.error_code == 0 && live.contains(&resp.node_id.0)).then_some(resp.node_id.0)
        })
    })
}

/// Sends `request` to the coordinator until it answers other than a
/// retriable coordinator error or one of `also_retried`; its code and rest.
fn ask<T>(
    cluster: &Cluster,
    live: &[i32],
    what: &str,
    also_retried: &[i16],
    mut request: impl FnMut(&mut KafkaClient) -> Option<(i16, T)>,
) -> (i16, T) {
    common::await_some_or(
        what,
        TIMEOUT,
        || {
            let id = coordinator(cluster, live);
            let mut c = KafkaClient::connect(&cluster.broker(id).addr).ok()?;
            let (code, rest) = request(&mut c)?;
            (!RETRIABLE.contains(&code) && !also_retried.contains(&code)).then_some((code, rest))
        },
        || cluster.logs(),
    )
}

/// InitProducerId v4 for [`TXN`]: (code, (producer id, epoch)).
fn init(cluster: &Cluster, live: &[i32], also_retried: &[i16]) -> (i16, (i64, i16)) {
    ask(cluster, live, "InitProducerId", also_retried, |c| {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id()))
            .with_transaction_timeout_ms(60_000);
        let resp = c.send(&req, 4).ok()?;
        Some((resp.error_code, (resp.producer_id.0, resp.producer_epoch)))
    })
}

/// AddPartitionsToTxn of `t`-0 at `version`: the partition's code.
fn add(
    cluster: &Cluster,
    live: &[i32],
    (pid, epoch): (i64, i16),
    version: i16,
    also_retried: &[i16],
) -> i16 {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id())
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(topic("t"))
                .with_partitions(vec![0]),
        ]);
    ask(cluster, live, "AddPartitionsToTxn", also_retried, |c| {
        let resp = c.send(&req, version).ok()?;
        let code =
            resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
        Some((code, ()))
    })
    .0
}

fn end(cluster: &Cluster, live: &[i32], (pid, epoch): (i64, i16), commit: bool) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    ask(cluster, live, "EndTxn", &[], |c| {
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
    common::await_some_or(
        &format!("t-0's LSO at its HW {hw}"),
        TIMEOUT,
        || {
            let state = cluster.state("t", 0).filter(|s| live.contains(&s.leader))?;
            let mut c = KafkaClient::connect(&cluster.broker(state.leader).addr).ok()?;
            let f = c.fetch_isolated("t", 0, 1);
            (f.high_watermark == hw && f.last_stable_offset == hw)
                .then(|| (f.committed_values(), f.aborted.clone()))
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
