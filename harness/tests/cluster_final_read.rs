//! The final read over the Kafka protocol (observe/final_read.rs) against a
//! real three-broker cluster of the reference broker: what it fetched and
//! wrote as segments must read back with no findings and hold exactly the
//! records, offsets and batches of each partition's final leader's replica,
//! read from its data directory after the cluster is killed. Read once as
//! advertised (through the client proxies), once rewritten to the brokers'
//! own ports, as the harness reads around its fault proxies, and once with
//! one leader rewritten to an address nothing listens at: that partition
//! fails, named with the address, and the other is still written. Needs
//! etcd on PATH and the workspace's binaries built
//! (`cargo build --workspace --bins`).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use common::bin_dir;
use epochal::kafka_client::{ClientError, KafkaClient, ProduceOptions, ProduceRecord};
use epochal::node::NodeId;
use epochal::observe::ClusterView;
use epochal::observe::final_read::{
    FINAL_READ_JSON, FinalRead, FinalReadError, FinalReadOptions, PartitionRead,
    PartitionReadCause, final_read, final_read_with,
};
use epochal::reader::{CompactRecord, DataDirState, read_data_dir};
use epochal::runtime::{ClusterConfig, ProcessRuntime, Runtime};
use epochal::topic_partition::PartitionRef;

const CALL: Duration = Duration::from_secs(10);
const READY: Duration = Duration::from_secs(30);
const FINAL_READ_TOTAL: Duration = Duration::from_secs(60);
const PARTITIONS: u32 = 2;
const PRODUCES_PER_PARTITION: usize = 6;
const RECORDS_PER_PRODUCE: usize = 50;
/// Values of about 10 KiB: a partition's 300 records (3 MB) take several
/// 1 MiB Fetches, so the read goes on from where each answer ended.
const VALUE_BYTES: usize = 10 << 10;

fn records(partition: u32, produce: usize) -> Vec<ProduceRecord> {
    (0..RECORDS_PER_PRODUCE)
        .map(|i| {
            let name = format!("p{partition}-{produce}-{i}-");
            let value = name.repeat(VALUE_BYTES / name.len());
            ProduceRecord::value(Bytes::from(value))
        })
        .collect()
}

/// The records of `partition` in `state` below `end`, and its batches as
/// (base offset, CRC).
fn log_of(state: &DataDirState, partition: u32, end: i64) -> (Vec<CompactRecord>, Vec<(i64, u32)>) {
    let replica = state
        .replica("t", partition as i32)
        .unwrap_or_else(|| panic!("no t-{partition} in {}", state.path.display()));
    let records = replica
        .compact()
        .records
        .into_iter()
        .filter(|r| r.offset < end)
        .collect();
    let batches = replica
        .batches()
        .filter(|b| b.base_offset < end)
        .map(|b| (b.base_offset, b.crc))
        .collect();
    (records, batches)
}

fn read_back(dir: &Path, read: &FinalRead) -> DataDirState {
    let state = read_data_dir(dir).unwrap();
    let findings: Vec<_> = state.all_findings().collect();
    assert!(findings.is_empty(), "{findings:#?}");
    let json = std::fs::read_to_string(dir.join(FINAL_READ_JSON)).unwrap();
    assert_eq!(&serde_json::from_str::<FinalRead>(&json).unwrap(), read);
    state
}

/// Every record acked by all three replicas, 7 to a batch, through each
/// partition's leader; returns the leaders.
async fn produce_to_every_partition(
    runtime: &ProcessRuntime,
    view: &ClusterView,
) -> BTreeMap<u32, NodeId> {
    let options = ProduceOptions {
        acks: -1,
        records_per_batch: 7,
        ..ProduceOptions::default()
    };
    let mut leaders = BTreeMap::new();
    for partition in 0..PARTITIONS {
        let leader = view
            .leader_of(&PartitionRef::new("t", partition))
            .expect("a ready cluster has a leader for every partition");
        leaders.insert(partition, leader);
        let address = runtime.client_address(leader).unwrap();
        let mut producer = KafkaClient::connect(&address, "epochal-test", CALL)
            .await
            .unwrap();
        for produce in 0..PRODUCES_PER_PARTITION {
            let records = records(partition, produce);
            let produced = producer
                .produce("t", partition as i32, &records, &options, CALL)
                .await
                .unwrap();
            assert_eq!(produced.base_offset, (produce * RECORDS_PER_PRODUCE) as i64);
        }
    }
    leaders
}

/// Each broker's advertised (client proxy) address to its own port.
fn to_own_ports(runtime: &ProcessRuntime) -> BTreeMap<String, String> {
    runtime
        .nodes()
        .into_iter()
        .map(|node| {
            (
                runtime.client_address(node).unwrap(),
                runtime.direct_address(node).unwrap().to_owned(),
            )
        })
        .collect()
}

fn options(rewrite: &BTreeMap<String, String>) -> FinalReadOptions {
    FinalReadOptions {
        rewrite: rewrite.clone(),
        ..FinalReadOptions::new(CALL, FINAL_READ_TOTAL)
    }
}

/// An address nothing listens at: a port the kernel handed out and took back.
fn dead_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// t-0's leader dialled where nothing listens (`dead`): t-0 fails, naming
/// itself and the address, and t-1 is still read whole and written, as the
/// direct read wrote it.
fn assert_only_the_cut_off_partition_fails(
    failed: Result<FinalRead, FinalReadError>,
    dead: &str,
    failing_dir: &Path,
    direct_dir: &Path,
) {
    let Err(FinalReadError::Incomplete {
        read: partly,
        failures,
    }) = failed
    else {
        panic!("expected t-0 to fail: {failed:?}");
    };
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert_eq!(failures[0].partition, PartitionRef::new("t", 0));
    assert_eq!(failures[0].broker, dead);
    assert!(
        matches!(
            failures[0].cause,
            PartitionReadCause::Connect(ClientError::Refused { .. })
        ),
        "{}",
        failures[0]
    );
    let message = failures[0].to_string();
    assert!(
        message.contains("t-0") && message.contains(dead),
        "{message}"
    );
    assert!(partly.partitions[0].error.is_some(), "{partly:#?}");
    assert_eq!(partly.partitions[1].error, None);
    let state = read_back(failing_dir, &partly);
    assert!(state.replica("t", 0).is_none(), "{state:#?}");
    assert_eq!(
        log_of(&state, 1, i64::MAX),
        log_of(&read_data_dir(direct_dir).unwrap(), 1, i64::MAX)
    );
}

/// What a complete final read is checked against: the cluster it read, each
/// partition's leader, where it bootstrapped, and the records produced to
/// each partition.
struct Expected<'a> {
    runtime: &'a ProcessRuntime,
    leaders: &'a BTreeMap<u32, NodeId>,
    bootstrap: &'a str,
    produced: i64,
}

/// A complete final read, written to `dir`, dialling each leader's
/// advertised address through `dialled`: every partition, each exactly its
/// leader's replica.
fn assert_read_matches_the_leaders(
    expected: &Expected,
    read: &FinalRead,
    dir: &Path,
    dialled: &BTreeMap<String, String>,
) {
    assert_eq!(read.bootstrap, expected.bootstrap);
    let state = read_back(dir, read);
    assert_eq!(read.partitions.len(), PARTITIONS as usize, "{read:#?}");
    for (partition, summary) in (0..PARTITIONS).zip(&read.partitions) {
        assert_partition_matches_its_leader(expected, &state, partition, summary, dialled);
    }
}

/// One partition of a complete final read, `state` read back from what it
/// wrote: its summary, then its records and batches against the leader's
/// replica.
fn assert_partition_matches_its_leader(
    expected: &Expected,
    state: &DataDirState,
    partition: u32,
    summary: &PartitionRead,
    dialled: &BTreeMap<String, String>,
) {
    let produced = expected.produced;
    let leader = expected.leaders[&partition];
    let advertised_address = expected.runtime.client_address(leader).unwrap();
    let expected_broker = dialled
        .get(&advertised_address)
        .unwrap_or(&advertised_address);
    assert_eq!(
        (summary.topic.as_str(), summary.partition, summary.leader),
        ("t", partition as i32, leader.broker_id()),
    );
    assert_eq!(&summary.broker, expected_broker, "{summary:#?}");
    assert_eq!(
        (summary.earliest, summary.latest, summary.records),
        (Some(0), Some(produced), produced as u64),
        "{summary:#?}"
    );
    assert_eq!(summary.error, None);
    assert_eq!(
        summary.segment.as_deref(),
        Some(Path::new(&format!(
            "t-{partition}/00000000000000000000.log"
        )))
    );
    // More than two Fetches' worth: the read went on where one ended.
    assert!(summary.bytes > 2 * (1 << 20), "{summary:#?}");

    let replicas = read_data_dir(&expected.runtime.data_dir(leader).unwrap()).unwrap();
    let (leader_records, leader_batches) = log_of(&replicas, partition, produced);
    let (read_records, read_batches) = log_of(state, partition, i64::MAX);
    assert_eq!(read_records.len() as i64, produced);
    assert_eq!(
        read_records, leader_records,
        "t-{partition}: the final read differs from {leader}'s replica"
    );
    assert_eq!(read_batches, leader_batches);
    assert_eq!(summary.batches, read_batches.len() as u64);
    assert_eq!(
        state.replica("t", partition as i32).unwrap().high_watermark,
        Some(produced)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_final_read_matches_the_replicas() {
    let run = tempfile::tempdir().unwrap();
    let mut runtime = ProcessRuntime::start(ClusterConfig::new(3, bin_dir(), run.path()))
        .await
        .unwrap();
    common::ready(&runtime, READY).await;
    let b1 = runtime.client_address(NodeId::new(1)).unwrap();
    let mut admin = KafkaClient::connect(&b1, "epochal-test", CALL)
        .await
        .unwrap();
    admin
        .create_topic("t", PARTITIONS as i32, 3, 10_000, CALL)
        .await
        .unwrap();
    let view = common::ready(&runtime, READY).await;
    let leaders = produce_to_every_partition(&runtime, &view).await;
    let produced = (PRODUCES_PER_PARTITION * RECORDS_PER_PRODUCE) as i64;

    // As advertised (the client proxies), then each broker at its own port.
    let advertised_dir = run.path().join("final-read-advertised");
    let advertised = final_read(&b1, &advertised_dir, CALL, FINAL_READ_TOTAL)
        .await
        .unwrap();
    let rewrite = to_own_ports(&runtime);
    let direct_dir = run.path().join("final-read-direct");
    let direct = final_read_with(&b1, &direct_dir, &options(&rewrite))
        .await
        .unwrap();

    // Each leader by its node id alone, as a broker that advertises the
    // address it listens on is (noida in a container: `0.0.0.0:9092`).
    let by_node = runtime
        .nodes()
        .into_iter()
        .map(|n| (n.broker_id(), runtime.direct_address(n).unwrap().to_owned()))
        .collect();
    let by_node_dir = run.path().join("final-read-by-node");
    let by_node_options = FinalReadOptions {
        by_node,
        ..FinalReadOptions::new(CALL, FINAL_READ_TOTAL)
    };
    let by_id = final_read_with(&b1, &by_node_dir, &by_node_options)
        .await
        .unwrap();

    // t-0's leader dialled where nothing listens.
    let dead = dead_address();
    let cut_off = BTreeMap::from([(runtime.client_address(leaders[&0]).unwrap(), dead.clone())]);
    let failing_dir = run.path().join("final-read-failing");
    let failed = final_read_with(&b1, &failing_dir, &options(&cut_off)).await;
    runtime.freeze().await.unwrap();
    assert_only_the_cut_off_partition_fails(failed, &dead, &failing_dir, &direct_dir);

    let expected = Expected {
        runtime: &runtime,
        leaders: &leaders,
        bootstrap: &b1,
        produced,
    };
    let as_advertised = BTreeMap::new();
    for (read, dir, dialled) in [
        (&advertised, &advertised_dir, &as_advertised),
        (&direct, &direct_dir, &rewrite),
        (&by_id, &by_node_dir, &rewrite),
    ] {
        assert_read_matches_the_leaders(&expected, read, dir, dialled);
    }
}
