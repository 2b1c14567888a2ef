//! What the real-client consumer-group tests share: a 3-broker cluster made
//! for groups, its bootstrap list, the group's coordinator as etcd names it,
//! and a deadline-bound wait for a partition's leadership to move.

use std::time::{Duration, Instant};

use epochal::kafka_client::KafkaClient;
use epochal::node::NodeId;
use epochal::observe::ClusterView;
use epochal::runtime::{ClusterConfig, Link, ProcessRuntime, Runtime};
use epochal::topic_partition::{PartitionRef, offsets_partition_of};

/// The broker's `offsets_topic_num_partitions` default.
pub const OFFSETS_PARTITIONS: u32 = 3;

/// The Python that has the clients (`ci/dev.sh` makes its virtualenv).
pub fn python() -> String {
    std::env::var("EPOCHAL_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Starts a 3-broker cluster on which a group's first rebalance waits
/// 200 ms, not Kafka's 3 s (`group.initial.rebalance.delay.ms`, KIP-134):
/// the tests' members all join within it or rebalance anyway. `settings`
/// go to every broker besides.
pub async fn start_cluster(
    run: &std::path::Path,
    ready: Duration,
    settings: &[(&str, toml::Value)],
) -> ProcessRuntime {
    let mut config = ClusterConfig::new(3, super::bin_dir(), run);
    for node in NodeId::all(3) {
        let mut node_settings: toml::Table = settings
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        node_settings.insert(
            "group_initial_rebalance_delay_ms".to_owned(),
            toml::Value::Integer(200),
        );
        config
            .node_settings
            .insert(node, node_settings.into_iter().collect());
    }
    let runtime = ProcessRuntime::start(config).await.unwrap();
    super::ready(&runtime, ready).await;
    await_brokers_told(&runtime, ready).await;
    runtime
}

/// Waits until every broker answers Metadata with the controller and all
/// three brokers: what the controller's first UpdateMetadata tells it. Until
/// then a broker answers controller -1 (as Kafka's does), and librdkafka's
/// admin client, having taken that answer, waits for a metadata refresh
/// minutes away; kafka-python's fails UnknownBrokerIdError.
async fn await_brokers_told(runtime: &ProcessRuntime, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    for node in runtime.nodes() {
        let addr = runtime
            .link_address(Link::ClientToBroker(node))
            .unwrap()
            .to_owned();
        loop {
            let told = async {
                let step = Duration::from_secs(2);
                let mut client = KafkaClient::connect(&addr, "test-ready", step).await.ok()?;
                let meta = client.metadata(Some(&[]), step).await.ok()?;
                (meta.controller_id >= 0 && meta.brokers.len() == 3).then_some(())
            };
            if told.await.is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{node} not told of the cluster within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Every client link's address, comma-separated: what clients bootstrap from.
pub fn bootstrap(runtime: &ProcessRuntime) -> String {
    runtime
        .nodes()
        .into_iter()
        .map(|node| {
            runtime
                .link_address(Link::ClientToBroker(node))
                .unwrap()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub async fn view(runtime: &impl Runtime) -> ClusterView {
    let mut etcd = etcd_client::Client::connect([runtime.etcd_endpoint()], None)
        .await
        .unwrap();
    ClusterView::read(&mut etcd).await.unwrap()
}

/// The group's partition of the offsets topic.
pub fn offsets_partition(group: &str) -> PartitionRef {
    offsets_partition_of(group, OFFSETS_PARTITIONS)
}

/// The leader of the group's offsets partition: its coordinator.
pub fn coordinator_of(view: &ClusterView, group: &str) -> NodeId {
    let partition = offsets_partition(group);
    view.leader_of(&partition)
        .unwrap_or_else(|| panic!("{partition} has no leader: {view:?}"))
}

/// Waits until etcd names a leader of `partition` other than `old`.
pub async fn await_new_leader(
    runtime: &impl Runtime,
    partition: &PartitionRef,
    old: NodeId,
    timeout: Duration,
) -> NodeId {
    let mut etcd = etcd_client::Client::connect([runtime.etcd_endpoint()], None)
        .await
        .unwrap();
    let deadline = Instant::now() + timeout;
    loop {
        let view = ClusterView::read(&mut etcd).await.unwrap();
        if let Some(leader) = view.leader_of(partition).filter(|l| *l != old) {
            return leader;
        }
        assert!(
            Instant::now() < deadline,
            "no leader of {partition} other than {old} within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `tests/clients/<script>` with the clients' Python and `args`; the
/// last JSON object it printed, and whether it exited 0. The scripts bound
/// themselves by a deadline they are given, so this reads to their end.
pub fn client_script(script: &str, args: &[&str]) -> (serde_json::Value, bool) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(script);
    let python = python();
    let output = std::process::Command::new(&python)
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e} (set EPOCHAL_PYTHON)"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap_or_else(|| {
            panic!(
                "{script} {args:?}: no result; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let result = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{script} {args:?} printed {line:?}: {e}"));
    (result, output.status.success())
}
