//! Transactions through real clients ([transactions], KIP-98): confluent-kafka
//! (librdkafka) and kafka-python (>= 2.2) each run a transactional producer
//! that commits a transaction, aborts the next and commits a third, against
//! a 3-broker cluster; then a read_committed consumer of each library reads
//! partition 0 from its start and gets exactly the committed records, in
//! order, never an aborted one — though the log holds the aborted records
//! (the scripts flush them before aborting; the test reads them on disk).
//! And each library's producer carries on at the next coordinator when the
//! coordinator of its transactional id is killed between two of its runs.
//! And each library's `send_offsets_to_transaction` (TxnOffsetCommit)
//! moves the group's committed offset only when its transaction commits.

use crate::common;

use std::time::Duration;

use common::etcd::assign_topic_t;
use common::groups;
use epochal::reader::read_data_dir;
use epochal::runtime::Runtime;
use epochal::topic_partition::{PartitionRef, offsets_partition_of};
use serde_json::Value;

const READY: Duration = Duration::from_secs(30);
const FAILOVER: Duration = Duration::from_secs(40);
const TXN_STATE_TOPIC: &str = "__transaction_state";
/// The broker's `transaction_state_num_partitions` default.
const TXN_STATE_PARTITIONS: u32 = 3;
/// The client's own bound on one script's work.
const CLIENT_DEADLINE: &str = "60";

fn transactions(args: &[&str]) -> Value {
    let args: Vec<&str> = args.iter().copied().chain([CLIENT_DEADLINE]).collect();
    let (result, ok) = groups::client_script("transactions.py", &args);
    assert!(ok, "transactions.py {args:?}: {result}");
    result
}

/// (library, transactional id, value prefix) of each producer.
const PRODUCERS: [(&str, &str, &str); 2] = [
    ("confluent", "tx-confluent", "c"),
    ("kafka-python", "tx-kafka-python", "k"),
];

/// One run of `lib`'s transactional producer (commit, abort, commit): the
/// values it committed.
fn produce(bootstrap: &str, lib: &str, id: &str, prefix: &str) -> Vec<Value> {
    let produced = transactions(&[lib, "produce", bootstrap, "t", id, prefix]);
    assert_eq!(
        produced["aborted"],
        serde_json::json!([format!("{prefix}-aborted")])
    );
    produced["committed"].as_array().unwrap().clone()
}

/// Each library's read_committed consumer reads exactly `committed`.
fn read_exactly(bootstrap: &str, committed: &[Value]) {
    let count = committed.len().to_string();
    for lib in ["confluent", "kafka-python"] {
        let read = transactions(&[lib, "read", bootstrap, "t", &count]);
        assert_eq!(
            read["values"],
            Value::from(committed.to_vec()),
            "{lib}'s read_committed consumer"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_and_kafka_python_commit_and_abort_and_read_committed_reads_only_the_commits()
 {
    let run = tempfile::tempdir().unwrap();
    let runtime = groups::start_cluster(run.path(), READY, &[]).await;
    assign_topic_t(runtime.etcd_endpoint(), r#"{"0":[1,2,3]}"#).await;
    common::ready(&runtime, READY).await;
    let bootstrap = groups::bootstrap(&runtime);

    let mut committed = Vec::new();
    for (lib, id, prefix) in PRODUCERS {
        committed.extend(produce(&bootstrap, lib, id, prefix));
    }
    assert_eq!(committed.len(), 6);
    read_exactly(&bootstrap, &committed);
    let dir = runtime.data_dir(runtime.nodes()[0]).unwrap();
    runtime.shutdown().await.unwrap();
    let state = read_data_dir(&dir).unwrap();
    let on_disk: Vec<String> = state
        .replica("t", 0)
        .expect("every broker holds t-0")
        .records()
        .filter_map(|(_, r)| Some(r.value.as_ref()?.as_str()?.to_owned()))
        .collect();
    for aborted in ["c-aborted", "k-aborted"] {
        assert!(
            on_disk.iter().any(|v| v == aborted),
            "{aborted} reached the log: {on_disk:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_and_kafka_python_transactions_go_on_at_the_next_coordinator_after_a_kill()
{
    let run = tempfile::tempdir().unwrap();
    let mut runtime = groups::start_cluster(run.path(), READY, &[]).await;
    assign_topic_t(runtime.etcd_endpoint(), r#"{"0":[1,2,3]}"#).await;
    common::ready(&runtime, READY).await;
    let bootstrap = groups::bootstrap(&runtime);

    let mut committed = Vec::new();
    for (lib, id, prefix) in PRODUCERS {
        committed.extend(produce(&bootstrap, lib, id, &format!("{prefix}1")));
        // The id's transaction-state partition: Kafka's partitionFor, the
        // same rule as a group's offsets partition.
        let state = PartitionRef::new(
            TXN_STATE_TOPIC,
            offsets_partition_of(id, TXN_STATE_PARTITIONS).partition,
        );
        let coordinator = groups::view(&runtime).await.leader_of(&state).unwrap();
        runtime.kill_node(coordinator).await.unwrap();
        groups::await_new_leader(&runtime, &state, coordinator, FAILOVER).await;
        committed.extend(produce(&bootstrap, lib, id, &format!("{prefix}2")));
        runtime.start_node(coordinator).await.unwrap();
        common::ready(&runtime, READY).await;
    }
    assert_eq!(committed.len(), 12);
    read_exactly(&bootstrap, &committed);
    runtime.shutdown().await.unwrap();
}

/// `send_offsets_to_transaction`: the group's offset sent in a committed
/// transaction is the group's afterwards; the one sent in an aborted
/// transaction never is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_and_kafka_python_send_offsets_to_a_transaction_and_only_its_commit_moves_them()
 {
    let run = tempfile::tempdir().unwrap();
    let runtime = groups::start_cluster(run.path(), READY, &[]).await;
    assign_topic_t(runtime.etcd_endpoint(), r#"{"0":[1,2,3]}"#).await;
    common::ready(&runtime, READY).await;
    let bootstrap = groups::bootstrap(&runtime);
    for (lib, id, _) in PRODUCERS {
        let group = format!("{id}-group");
        let got = transactions(&[lib, "offsets", &bootstrap, "t", id, &group]);
        assert_eq!(
            (got["after_commit"].as_i64(), got["after_abort"].as_i64()),
            (Some(5), Some(5)),
            "{lib}: {got}"
        );
    }
    runtime.shutdown().await.unwrap();
}
