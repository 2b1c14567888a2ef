//! `epochal fault` names a group's and a transactional id's coordinator by
//! role ([apps]): against a real `epochal up` cluster, `pause coordinator of
//! group G` and `pause coordinator of transactional id T` pause the broker
//! that the cluster's own FindCoordinator names (asked through a bootstrap
//! server with the harness's Kafka client), and `leader of
//! __transaction_state-N` the same one for T's partition N; each is resumed
//! by name. Before any client asked for a transactional coordinator, the
//! transaction-state topic does not exist and a fault at it is refused
//! saying so. At the end the faults are counted once: `epochal fault`'s
//! numbers, the closing summary, the history and `schedule.toml` agree, the
//! refusals in none of them. Needs `etcd` and the workspace's binaries
//! (`cargo build --workspace --bins`).

use crate::cluster_up_common;
use crate::common;

use std::time::{Duration, Instant};

use cluster_up_common::{
    CHECK_WITHIN, Up, assert_refused, fault, faults_on_disk, fired, verdict_code,
};
use common::scenario::{interrupt, read_results, show};
use epochal::kafka_client::KafkaClient;
use epochal::node::NodeId;
use epochal::topic_partition::offsets_partition_of;

/// Bound on one call of the test's Kafka client.
const CALL: Duration = Duration::from_secs(10);
/// Bound on a coordinator being named: the brokers create the internal topic
/// at the first FindCoordinator, then elect its leaders.
const SETTLE: Duration = Duration::from_secs(60);
/// The group and the transactional id the test names.
const GROUP: &str = "orders-g";
const TXN_ID: &str = "orders-tx";
/// The reference broker's partitions of each internal topic by default
/// (`offsets_topic_num_partitions`, `transaction_state_num_partitions`).
const INTERNAL_PARTITIONS: u32 = 3;

/// The coordinator of `key` (a transactional id when `txn`) as the broker
/// behind `bootstrap`'s first address names it, asked until it names one.
fn find_coordinator(bootstrap: &str, key: &str, txn: bool) -> String {
    let address = bootstrap.split(',').next().unwrap().to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let deadline = Instant::now() + SETTLE;
        loop {
            let found = async {
                let mut client = KafkaClient::connect(&address, "test", CALL)
                    .await
                    .map_err(|e| e.to_string())?;
                let found = if txn {
                    client.find_txn_coordinator(key, CALL).await
                } else {
                    client.find_coordinator(key, CALL).await
                };
                let id = found.map_err(|e| e.to_string())?.node_id;
                NodeId::from_broker_id(id).ok_or_else(|| format!("node {id}"))
            };
            let last = match found.await {
                Ok(node) => return node.to_string(),
                Err(e) => e,
            };
            assert!(
                Instant::now() < deadline,
                "no coordinator of {key} within {SETTLE:?}: {last}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[test]
fn cluster_up_names_each_coordinator_by_role_and_counts_each_fault_once() {
    let store = tempfile::tempdir().unwrap();
    let mut up = Up::start(store.path(), &[]);

    // No client asked for a transaction coordinator yet: the topic is not
    // there, and the refusal says so (the cluster's state: exit 2).
    let absent = "__transaction_state does not exist yet";
    let txn_role = format!("coordinator of transactional id {TXN_ID}");
    assert_refused(&up.run, ("pause", &txn_role), 2, absent);
    assert_refused(
        &up.run,
        ("pause", "leader of __transaction_state-0"),
        2,
        absent,
    );
    // A partition the topic will never have is no fault of this cluster.
    let e = "unknown partition __transaction_state-9";
    assert_refused(&up.run, ("pause", "leader of __transaction_state-9"), 3, e);

    // The group's coordinator, by role, is the one FindCoordinator names.
    let coordinator = find_coordinator(&up.bootstrap, GROUP, false);
    let group_role = format!("coordinator of group {GROUP}");
    let paused = fired(&up, 1, "pause", &group_role);
    assert_eq!(paused, coordinator, "{}", up.show());
    fired(&up, 2, "resume", &paused);

    // The transactional id's, by role and by its partition's leader.
    let coordinator = find_coordinator(&up.bootstrap, TXN_ID, true);
    let paused = fired(&up, 3, "pause", &txn_role);
    assert_eq!(paused, coordinator, "{}", up.show());
    fired(&up, 4, "resume", &paused);
    let partition = offsets_partition_of(TXN_ID, INTERNAL_PARTITIONS).partition;
    let leader = format!("leader of __transaction_state-{partition}");
    let paused = fired(&up, 5, "pause", &leader);
    assert_eq!(paused, coordinator, "{}", up.show());
    fired(&up, 6, "resume", &paused);
    // The transaction coordinator still answers, from where it was.
    assert_eq!(find_coordinator(&up.bootstrap, TXN_ID, true), coordinator);

    let status = interrupt(&mut up.child, CHECK_WITHIN);
    let results = read_results(&up.run);
    assert_eq!(status.code(), Some(verdict_code(&results["verdict"])));
    assert_eq!(results["verdict"], "valid", "{results}\n{}", up.show());
    let printed = up.stdout.all().join("\n");
    for line in [
        "faults: 6 fired: pause 3, resume 3",
        "  refused by the cluster's state, not counted: 2 (pause 2)",
        "  the final heal, not counted: nothing to heal",
    ] {
        assert!(printed.contains(line), "{line:?}: {}", up.show());
    }
    let (steps, fine, refused) = faults_on_disk(&up.run);
    assert_eq!(
        (steps, fine.len(), refused.len()),
        (6, 6, 2),
        "{fine:?} {refused:?}"
    );

    // No session is left to answer.
    let output = fault(&up.run, "pause", &group_role);
    assert_eq!(output.status.code(), Some(4), "{}", show(&output));
}
