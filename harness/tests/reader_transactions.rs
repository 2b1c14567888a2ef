//! The reader's transactions (`reader/txn.rs`) on what real clients and the
//! reference broker wrote ([transactions], KIP-98): confluent-kafka's and
//! kafka-python's transactional producers each commit, abort and commit a
//! transaction on t-0 of a 3-broker cluster; after shutdown every replica,
//! read from disk, gives each record the outcome its transaction had (the
//! aborted values in aborted transactions, every other one committed, none
//! open), and its `.txnindex` files agree with the abort markers (no
//! finding on any replica).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::etcd::assign_topic_t;
use common::groups;
use epochal::reader::read_data_dir;
use epochal::reader::txn::TxnOutcome;
use epochal::runtime::Runtime;
use serde_json::Value;

const READY: Duration = Duration::from_secs(30);
/// The client's own bound on one script's work.
const CLIENT_DEADLINE: &str = "60";

/// One run of `lib`'s transactional producer (commit, abort, commit).
fn produce(bootstrap: &str, lib: &str, id: &str, prefix: &str) -> Value {
    let args = [lib, "produce", bootstrap, "t", id, prefix, CLIENT_DEADLINE];
    let (result, ok) = groups::client_script("transactions.py", &args);
    assert!(ok, "transactions.py {args:?}: {result}");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_reads_each_transactions_outcome_and_its_index_agrees() {
    let run = tempfile::tempdir().unwrap();
    let runtime = groups::start_cluster(run.path(), READY, &[]).await;
    assign_topic_t(runtime.etcd_endpoint(), r#"{"0":[1,2,3]}"#).await;
    common::ready(&runtime, READY).await;
    let bootstrap = groups::bootstrap(&runtime);
    let mut expected: BTreeMap<String, TxnOutcome> = BTreeMap::new();
    for (lib, id, prefix) in [
        ("confluent", "tx-reader-confluent", "c"),
        ("kafka-python", "tx-reader-kafka-python", "k"),
    ] {
        let produced = produce(&bootstrap, lib, id, prefix);
        for (key, outcome) in [
            ("committed", TxnOutcome::Committed),
            ("aborted", TxnOutcome::Aborted),
        ] {
            for value in produced[key].as_array().unwrap() {
                expected.insert(value.as_str().unwrap().to_owned(), outcome);
            }
        }
    }
    assert_eq!(expected.len(), 8, "{expected:?}");
    let dirs: Vec<_> = runtime
        .nodes()
        .iter()
        .map(|&node| runtime.data_dir(node).unwrap())
        .collect();
    runtime.shutdown().await.unwrap();
    for dir in dirs {
        let state = read_data_dir(&dir).unwrap();
        let findings: Vec<String> = state.all_findings().map(|f| f.to_string()).collect();
        assert_eq!(findings, Vec::<String>::new(), "{}", dir.display());
        let replica = state.replica("t", 0).expect("every broker holds t-0");
        let txns = replica.transactions();
        assert_eq!(txns.open().count(), 0, "{}: {:?}", dir.display(), txns.txns);
        let read: BTreeMap<String, TxnOutcome> = replica
            .records()
            .filter(|(batch, _)| !batch.is_control())
            .map(|(_, record)| {
                let value = record.value.as_ref().unwrap().as_str().unwrap().to_owned();
                let outcome = txns
                    .outcome_at(record.offset)
                    .expect("a transactional producer's record");
                (value, outcome)
            })
            .collect();
        assert_eq!(read, expected, "{}", dir.display());
        // Each abort is in a segment's index.
        let indexed = std::fs::read_dir(dir.join("t-0"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".txnindex"))
            .map(|e| e.metadata().unwrap().len())
            .sum::<u64>();
        assert_eq!(indexed, 2 * 34, "{}", dir.display());
    }
}
