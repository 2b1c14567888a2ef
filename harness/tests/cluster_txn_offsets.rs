//! A consumer's offsets sent to a transaction (issue 38, item 4's subscribe
//! mode; KIP-98's AddOffsetsToTxn and TxnOffsetCommit, KIP-447's member
//! fields and `require_stable`) against three reference brokers, through the
//! harness's own client: a committed transaction's offsets become the
//! group's, an aborted one's never do, and while a transaction's offsets are
//! pending a stable OffsetFetch says so (UNSTABLE_OFFSET_COMMIT) and a plain
//! one answers the offset from before them. Needs etcd and the workspace's
//! binaries built (`cargo build --workspace --bins`).

use crate::common;

use std::time::Duration;

use epochal::kafka_client::{
    ClientError, KafkaClient, ProduceOptions, ProduceRecord, ProducerIdAndEpoch, ProducerStamp,
    TxnOffset,
};
use epochal::node::NodeId;
use epochal::runtime::{Link, ProcessRuntime};
use tokio::time::Instant;

const CALL: Duration = Duration::from_secs(10);
/// How long the cluster may take to answer a call that is retried while
/// the coordinators load (generous: the tests share two cores with others).
const SETTLE: Duration = Duration::from_secs(60);
/// Kafka's codes worth asking again: COORDINATOR_LOAD_IN_PROGRESS,
/// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS,
/// UNSTABLE_OFFSET_COMMIT (KIP-447).
const RETRIABLE: [i16; 5] = [14, 15, 16, 51, 88];

fn address(runtime: &ProcessRuntime, node: NodeId) -> String {
    runtime
        .link_address(Link::ClientToBroker(node))
        .unwrap()
        .to_owned()
}

/// A connection to the coordinator of `key` (`key_type` 0 a group, 1 a
/// transactional id), asked of b1 until it names one.
async fn coordinator(runtime: &ProcessRuntime, key: &str, txn: bool) -> KafkaClient {
    let deadline = Instant::now() + SETTLE;
    loop {
        let found = async {
            let mut client = KafkaClient::connect(&address(runtime, NodeId::new(1)), "test", CALL)
                .await
                .ok()?;
            let found = if txn {
                client.find_txn_coordinator(key, CALL).await.ok()?
            } else {
                client.find_coordinator(key, CALL).await.ok()?
            };
            let node = NodeId::from_broker_id(found.node_id)?;
            KafkaClient::connect(&address(runtime, node), "test", CALL)
                .await
                .ok()
        };
        if let Some(client) = found.await {
            return client;
        }
        assert!(Instant::now() < deadline, "no coordinator of {key}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A connection to the leader of t-0, as b1's metadata names it.
async fn leader_of_t0(runtime: &ProcessRuntime) -> KafkaClient {
    let deadline = Instant::now() + SETTLE;
    loop {
        let found = async {
            let mut client = KafkaClient::connect(&address(runtime, NodeId::new(1)), "test", CALL)
                .await
                .ok()?;
            let meta = client.metadata(Some(&["t"]), CALL).await.ok()?;
            let node = NodeId::from_broker_id(meta.partition("t", 0)?.leader)?;
            KafkaClient::connect(&address(runtime, node), "test", CALL)
                .await
                .ok()
        };
        if let Some(client) = found.await {
            return client;
        }
        assert!(Instant::now() < deadline, "no leader of t-0");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `call` until it is answered with anything but a retriable code,
/// within [`SETTLE`].
async fn settled<T, F>(mut call: F) -> Result<T, ClientError>
where
    F: AsyncFnMut() -> Result<T, ClientError>,
{
    let deadline = Instant::now() + SETTLE;
    loop {
        match call().await {
            Err(e) if e.code().is_some_and(|c| RETRIABLE.contains(&c)) => {
                assert!(Instant::now() < deadline, "still {e} after {SETTLE:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// One transaction of `id`'s producer: a value to t-0, then `offsets` of
/// group `g` sent to it, ended with `commit`.
async fn transaction(
    runtime: &ProcessRuntime,
    txn: &mut KafkaClient,
    producer: ProducerIdAndEpoch,
    sequence: i32,
    offset: i64,
    commit: bool,
) {
    let id = "tx-offsets";
    settled(async || {
        txn.add_partitions_to_txn(id, producer, &[("t".to_owned(), 0)], CALL)
            .await
    })
    .await
    .unwrap();
    let mut leader = leader_of_t0(runtime).await;
    let stamp = ProducerStamp {
        producer,
        base_sequence: sequence,
    };
    leader
        .produce_transactional(
            id,
            "t",
            0,
            &[ProduceRecord::value(format!("v{sequence}"))],
            &ProduceOptions::default(),
            &stamp,
            CALL,
        )
        .await
        .unwrap();
    settled(async || txn.add_offsets_to_txn(id, producer, "g", CALL).await)
        .await
        .unwrap();
    let mut group = coordinator(runtime, "g", false).await;
    let offsets = [TxnOffset {
        topic: "t".into(),
        partition: 0,
        offset,
    }];
    settled(async || {
        group
            .txn_offset_commit(id, producer, "g", None, &offsets, CALL)
            .await
    })
    .await
    .unwrap();
    if !commit {
        // Pending: a stable read says so; a plain read answers what the
        // group had before the transaction.
        let stable = group.committed_offset_stable("g", "t", 0, CALL).await;
        assert_eq!(stable.unwrap_err().code(), Some(88));
        assert_ne!(
            group.committed_offset("g", "t", 0, CALL).await.unwrap(),
            offset
        );
    }
    settled(async || txn.end_txn(id, producer, commit, CALL).await)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_txn_offsets_move_the_group_on_commit_and_never_on_abort() {
    let run = tempfile::tempdir().unwrap();
    let runtime = common::groups::start_cluster(run.path(), SETTLE, &[]).await;
    let mut admin = KafkaClient::connect(&address(&runtime, NodeId::new(1)), "test", CALL)
        .await
        .unwrap();
    admin.create_topic("t", 1, 3, 10_000, CALL).await.unwrap();
    common::ready(&runtime, SETTLE).await;

    let mut txn = coordinator(&runtime, "tx-offsets", true).await;
    let producer = settled(async || {
        txn.init_transactional_producer("tx-offsets", 60_000, CALL)
            .await
    })
    .await
    .unwrap();

    transaction(&runtime, &mut txn, producer, 0, 5, true).await;
    let mut group = coordinator(&runtime, "g", false).await;
    let read = settled(async || group.committed_offset_stable("g", "t", 0, CALL).await).await;
    assert_eq!(read.unwrap(), 5, "the committed transaction's offset");

    transaction(&runtime, &mut txn, producer, 1, 9, false).await;
    let read = settled(async || group.committed_offset_stable("g", "t", 0, CALL).await).await;
    assert_eq!(
        read.unwrap(),
        5,
        "the aborted transaction's offset moved the group"
    );
    assert_eq!(group.committed_offset("g", "t", 0, CALL).await.unwrap(), 5);

    // A fenced producer's offsets: a new epoch of the id refuses the old
    // one's AddOffsetsToTxn (INVALID_PRODUCER_EPOCH, definite).
    let newer = settled(async || {
        txn.init_transactional_producer("tx-offsets", 60_000, CALL)
            .await
    })
    .await
    .unwrap();
    assert!(newer.producer_epoch > producer.producer_epoch);
    let fenced = txn
        .add_offsets_to_txn("tx-offsets", producer, "g", CALL)
        .await
        .unwrap_err();
    assert_eq!(fenced.code(), Some(47), "{fenced}");
}
