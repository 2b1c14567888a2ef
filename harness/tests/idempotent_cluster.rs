//! Idempotence against the real `epochal-broker` (it must answer
//! InitProducerId and check sequences, issue 20): the workload client's
//! stamped batches on the wire — a resent batch answered with its original
//! offset and not appended again, a gap refused — and a whole run with
//! `[workload] idempotent = true` in which the leader stops between its
//! append and its answer, so an idempotent send is resent to the new leader
//! and the run must still hold every value once. Needs etcd and the
//! workspace's binaries built (`cargo build --workspace --bins`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::bin_dir;
use common::scenario::{latest, read_results, run_quietly, show};
use epochal::history::{OpType, read_history};
use epochal::kafka_client::{
    FetchOptions, KafkaClient, OffsetSpec, ProduceOptions, ProduceRecord, ProducerStamp,
};
use epochal::node::NodeId;
use epochal::runtime::{ClusterConfig, ProcessRuntime, Runtime};

const CALL: Duration = Duration::from_secs(10);

fn records(values: &[&str]) -> Vec<ProduceRecord> {
    values
        .iter()
        .map(|v| ProduceRecord::value(v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_idempotent_produce_a_resent_batch_keeps_its_offset_and_a_gap_is_refused() {
    let run = tempfile::tempdir().unwrap();
    let runtime = ProcessRuntime::start(ClusterConfig::new(1, bin_dir(), run.path()))
        .await
        .unwrap();
    common::ready(&runtime, Duration::from_secs(30)).await;
    let addr = runtime.client_address(NodeId::new(1)).unwrap();
    let mut client = KafkaClient::connect(&addr, "epochal-test", CALL)
        .await
        .unwrap();
    client.create_topic("t", 1, 1, 10_000, CALL).await.unwrap();
    common::ready(&runtime, Duration::from_secs(30)).await;

    let id = client.init_producer_id(CALL).await.unwrap();
    assert!(id.producer_id >= 0 && id.producer_epoch >= 0, "{id:?}");
    let stamp = |base_sequence| ProducerStamp {
        producer: id,
        base_sequence,
    };
    let options = ProduceOptions::default();
    let mut produce = async |values: &[&str], base_sequence| {
        client
            .produce_idempotent(
                "t",
                0,
                &records(values),
                &options,
                &stamp(base_sequence),
                CALL,
            )
            .await
    };
    assert_eq!(produce(&["a", "b"], 0).await.unwrap().base_offset, 0);
    // The same batches again, as a retry after a lost answer: the leader
    // answers with the offset it has and appends nothing.
    assert_eq!(produce(&["a", "b"], 0).await.unwrap().base_offset, 0);
    assert_eq!(produce(&["c"], 2).await.unwrap().base_offset, 2);
    // A sequence past the next one: OUT_OF_ORDER_SEQUENCE_NUMBER.
    let gap = produce(&["x"], 7).await.unwrap_err();
    assert_eq!(gap.code(), Some(45), "{gap}");

    // Another producer gets another id; a plain produce is unchanged.
    let other = client.init_producer_id(CALL).await.unwrap();
    assert_ne!(other.producer_id, id.producer_id);
    let plain = client
        .produce("t", 0, &records(&["plain"]), &options, CALL)
        .await
        .unwrap();
    assert_eq!(plain.base_offset, 3);
    assert_eq!(
        client
            .list_offset("t", 0, OffsetSpec::Latest, CALL)
            .await
            .unwrap(),
        4
    );
    let fetched = client
        .fetch("t", 0, 0, &FetchOptions::default(), CALL)
        .await
        .unwrap();
    let values: Vec<String> = fetched
        .records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_ref().unwrap()).into_owned())
        .collect();
    assert_eq!(values, ["a", "b", "c", "plain"]);
}

/// Three brokers; b1 leads t-0 and stops itself (SIGSTOP) right after its
/// first append as leader, before answering it. Two idempotent background
/// producers: the send b1 took times out, and is resent, same stamp, to the
/// leader etcd names once b1's lease is gone. b1 is resumed later and
/// rejoins as a follower.
const STOPPED_AFTER_APPEND: &str = r#"
[cluster]
brokers = 3

[[cluster.topic]]
name = "t"
partitions = 1
replication_factor = 3

[cluster.settings]
min_insync_replicas = 2
lease_ttl_s = 3

[cluster.node.b1.failpoints]
leader-after-append = "1*stop"

[workload]
idempotent = true
request_timeout_ms = 4000

[workload.background]
producers = 2
interval_ms = 10

[[step]]
await = "b1 not in ISR of t-0"
timeout_ms = 30000

[[step]]
await = "20 more writes acknowledged"
timeout_ms = 30000

[[step]]
fault = { resume = "b1" }

[[step]]
await = "b1 in ISR of t-0"
timeout_ms = 60000

[[step]]
await = "20 more writes acknowledged"
timeout_ms = 30000
"#;

#[test]
fn cluster_idempotent_run_resends_to_the_new_leader_and_writes_every_value_once() {
    let store = tempfile::tempdir().unwrap();
    let schedule = store.path().join("stopped_after_append.toml");
    std::fs::write(&schedule, STOPPED_AFTER_APPEND).unwrap();
    let output = run_quietly(&schedule, &store.path().join("store"), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let dir = latest(&store.path().join("store"));
    let ops = read_history(dir.join("history.jsonl")).expect("a valid history");

    // Every send that went out is stamped: the invoke names the stamp, the
    // completion adds the attempts. (A send with no leader to go to, while
    // the partition was between leaders, fails unstamped.)
    let sends: Vec<_> = ops.iter().filter(|op| op.send().is_some()).collect();
    assert!(sends.iter().any(|op| op.kind == OpType::Ok));
    for op in &sends {
        match (op.kind, op.send().unwrap().producer) {
            (OpType::Invoke, Some(p)) => assert_eq!(p.attempts, None, "{op:?}"),
            (OpType::Ok | OpType::Info, p) => {
                assert!(p.is_some_and(|p| p.attempts.is_some()), "{op:?}")
            }
            (OpType::Fail, Some(p)) => assert!(p.attempts.is_some(), "{op:?}"),
            (OpType::Invoke | OpType::Fail, None) => {}
        }
    }
    // The send b1 stopped on was resent and acknowledged.
    let retried = sends
        .iter()
        .filter(|op| op.kind == OpType::Ok)
        .filter(|op| op.send().unwrap().producer.unwrap().attempts > Some(1))
        .count();
    assert!(retried >= 1, "no acknowledged send took a second attempt");

    // Per producer id, the acknowledged sends' sequences count up from 0
    // without a gap, and no two processes share a producer id.
    let mut sequences: BTreeMap<i64, Vec<i32>> = BTreeMap::new();
    let mut owners: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    for op in sends.iter().filter(|op| op.kind == OpType::Ok) {
        let producer = op.send().unwrap().producer.unwrap();
        sequences
            .entry(producer.id)
            .or_default()
            .push(producer.base_sequence);
        owners
            .entry(producer.id)
            .or_default()
            .insert(op.process.to_string());
    }
    for (id, seqs) in &sequences {
        let expected: Vec<i32> = (0..seqs.len() as i32).collect();
        assert_eq!(seqs, &expected, "producer {id}");
        assert_eq!(owners[id].len(), 1, "producer {id}: {:?}", owners[id]);
    }

    // Valid, and the duplicates checker looked at idempotent sends.
    let results = read_results(&dir);
    assert_eq!(results["verdict"], "valid", "{results:#}");
    let duplicates = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "duplicates")
        .unwrap();
    assert_eq!(
        duplicates["counts"]["idempotent-duplicates"], 0,
        "{duplicates}"
    );
    assert_eq!(duplicates["counts"]["duplicates"], 0, "{duplicates}");
}
