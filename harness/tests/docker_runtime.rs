//! The Docker runtime against real containers: each broker is a container of
//! its own, reached only through ports published on 127.0.0.1; SIGSTOP sent
//! through the Engine API reaches the broker process itself (PID 1 of its
//! container), which stops answering and later resumes with its state intact;
//! dropping the runtime leaves nothing. Needs Docker, `etcd` (Debian's
//! etcd-server) and the workspace's binaries; without Docker these tests fail
//! saying so.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::bin_dir;
use common::docker::{Cleanup, assert_nothing_left, containers, networks, require_docker};
use common::etcd::assign_topic_t;
use epochal::kafka_client::KafkaClient;
use epochal::kafka_client::{FetchOptions, ProduceOptions, ProduceRecord};
use epochal::node::NodeId;
use epochal::runtime::{ClusterConfig, DockerRuntime, Runtime};
use epochal::topic_partition::PartitionRef;

const READY: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_docker_each_broker_is_its_own_container_and_drop_removes_all() {
    require_docker();
    let run = tempfile::tempdir().unwrap();
    let mut runtime = DockerRuntime::start(ClusterConfig::new(3, bin_dir(), run.path()))
        .await
        .unwrap();
    let id = runtime.run_id().to_owned();
    let _cleanup = Cleanup(Some(id.clone()));
    let view = common::ready(&runtime, READY).await;
    assert_eq!(view.brokers, NodeId::all(3).collect());

    let names = containers(&id);
    let expected: Vec<String> = ["b1", "b2", "b3", "etcd", "proxy"]
        .iter()
        .map(|role| format!("epochal-{id}-{role}"))
        .collect();
    assert_eq!(names, expected);
    assert_eq!(networks(&id), [format!("epochal-{id}")]);
    // Every address the harness uses is on the host's loopback.
    for node in runtime.nodes() {
        assert!(
            runtime
                .observe_address(node)
                .unwrap()
                .starts_with("127.0.0.1:")
        );
        assert!(
            runtime
                .client_address(node)
                .unwrap()
                .starts_with("127.0.0.1:")
        );
        assert_ne!(
            runtime.observe_address(node).unwrap(),
            runtime.client_address(node).unwrap()
        );
        // The data dir is the run's own, bind-mounted: the broker wrote there.
        assert!(runtime.data_dir(node).unwrap().join("listening").is_file());
    }
    assert!(runtime.etcd_endpoint().starts_with("http://127.0.0.1:"));

    // Stop (SIGTERM, awaited) and start b1: the same container on the same
    // data. Pause b2 and kill it: a paused container is killed too; start it.
    runtime.stop_node(NodeId::new(1)).await.unwrap();
    assert!(
        !runtime.is_running(NodeId::new(1)) && runtime.observe_address(NodeId::new(1)).is_none()
    );
    runtime.start_node(NodeId::new(1)).await.unwrap();
    runtime.pause_node(NodeId::new(2)).await.unwrap();
    runtime.kill_node(NodeId::new(2)).await.unwrap();
    assert!(!runtime.is_paused(NodeId::new(2)).unwrap());
    runtime.start_node(NodeId::new(2)).await.unwrap();
    // Stopping a paused broker continues it, so it acts on SIGTERM at once.
    runtime.pause_node(NodeId::new(3)).await.unwrap();
    runtime.stop_node(NodeId::new(3)).await.unwrap();
    runtime.start_node(NodeId::new(3)).await.unwrap();
    common::ready(&runtime, READY).await;
    assert_eq!(containers(&id), expected, "the same containers");

    drop(runtime);
    assert_nothing_left(&id, "after drop");
    let log =
        |node: &str| std::fs::read_to_string(run.path().join(node).join("broker.log")).unwrap();
    assert_eq!(log("b1").matches("broker ready").count(), 2);
    assert!(log("b1").contains("stopped cleanly"), "{}", log("b1"));
    assert_eq!(log("b2").matches("broker ready").count(), 2);
    assert!(!log("b2").contains("stopped cleanly"), "{}", log("b2"));
    assert!(log("b3").contains("stopped cleanly"), "{}", log("b3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_docker_sigstop_reaches_the_broker_itself() {
    require_docker();
    let run = tempfile::tempdir().unwrap();
    let mut config = ClusterConfig::new(3, bin_dir(), run.path());
    // A long lease and lag time: the pause must cost the leader neither its
    // session nor a follower, so its state after resuming is the state before.
    config.lease_ttl_s = 60;
    for node in NodeId::all(3) {
        let settings = [(
            "replica_lag_time_max_ms".to_owned(),
            toml::Value::Integer(60_000),
        )];
        config.node_settings.insert(node, settings.into());
    }
    let mut runtime = DockerRuntime::start(config).await.unwrap();
    let id = runtime.run_id().to_owned();
    let _cleanup = Cleanup(Some(id.clone()));
    // Topic `t`, one partition on b1, b2, b3.
    assign_topic_t(runtime.etcd_endpoint(), r#"{"0":[1,2,3]}"#).await;
    let before = common::ready(&runtime, READY).await;
    let partition = before.partitions[&PartitionRef::new("t", 0)].clone();
    let leader = partition.leader.unwrap();

    let options = ProduceOptions::default();
    let deadline = Duration::from_secs(10);
    let mut producer =
        KafkaClient::connect(&runtime.client_address(leader).unwrap(), "t", deadline)
            .await
            .unwrap();
    // etcd names the leader before the leader has applied its LeaderAndIsr;
    // until it has, it answers UNKNOWN_TOPIC_OR_PARTITION (a definite refusal,
    // nothing appended). Wait, bounded, for it to serve.
    let serving_by = std::time::Instant::now() + READY;
    let first = loop {
        match producer
            .produce(
                "t",
                0,
                &[ProduceRecord::value(Bytes::from("1"))],
                &options,
                deadline,
            )
            .await
        {
            Err(epochal::kafka_client::ClientError::Broker { code: 3, .. })
                if std::time::Instant::now() < serving_by =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => break other.unwrap(),
        }
    };
    assert_eq!(first.base_offset, 0);

    runtime.pause_node(leader).await.unwrap();
    let pid = runtime.pid(leader).unwrap();
    assert_eq!(epochal_faults::signal::proc_state(pid).unwrap(), Some('T'));
    assert!(runtime.is_paused(leader).unwrap());
    // The stopped process is PID 1 of the broker's container.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    assert_eq!(nspid.split_whitespace().last(), Some("1"), "{nspid}");
    // Docker still accepts on the published port; the broker answers nothing.
    let observe = runtime.observe_address(leader).unwrap();
    let silent = KafkaClient::connect(&observe, "probe", Duration::from_secs(2)).await;
    assert!(silent.is_err(), "a SIGSTOPped broker answered");

    runtime.resume_node(leader).await.unwrap();
    assert!(!runtime.is_paused(leader).unwrap());
    KafkaClient::connect(&observe, "probe", deadline)
        .await
        .expect("the resumed broker answers again");
    // Same leader, same epoch, same ISR: nothing happened to it but a pause.
    let after = common::ready(&runtime, READY).await;
    assert_eq!(after.partitions[&PartitionRef::new("t", 0)], partition);
    let mut producer =
        KafkaClient::connect(&runtime.client_address(leader).unwrap(), "t", deadline)
            .await
            .unwrap();
    let second = producer
        .produce(
            "t",
            0,
            &[ProduceRecord::value(Bytes::from("2"))],
            &options,
            deadline,
        )
        .await
        .unwrap();
    assert_eq!(second.base_offset, 1);
    let fetched = producer
        .fetch("t", 0, 0, &FetchOptions::default(), deadline)
        .await
        .unwrap();
    let values: Vec<Option<Bytes>> = fetched.records.iter().map(|r| r.value.clone()).collect();
    assert_eq!(values, [Some(Bytes::from("1")), Some(Bytes::from("2"))]);

    let log = std::fs::read_to_string(run.path().join(format!("{leader}/broker.log")));
    assert!(
        log.is_err() || log.unwrap().is_empty(),
        "saved only at removal"
    );
    runtime.shutdown().await.unwrap();
    assert_nothing_left(&id, "after shutdown");
    let log = std::fs::read_to_string(run.path().join(format!("{leader}/broker.log"))).unwrap();
    assert_eq!(log.matches("broker ready").count(), 1, "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_docker_a_broker_that_exits_at_start_is_named_with_its_output_and_nothing_is_left()
{
    require_docker();
    let run = tempfile::tempdir().unwrap();
    let mut config = ClusterConfig::new(1, bin_dir(), run.path());
    config.broker_args = vec!["--no-such-flag".into()];
    let err = DockerRuntime::start(config).await.err().unwrap();
    let text = err.to_string();
    assert!(
        matches!(err, epochal::runtime::RuntimeError::ContainerExited { .. }),
        "{text}"
    );
    assert!(
        text.contains("-b1") && text.contains("exit code 2"),
        "{text}"
    );
    let log = std::fs::read_to_string(run.path().join("b1/broker.log")).unwrap();
    assert!(log.contains("--no-such-flag"), "{log}");
    let id = std::fs::read_to_string(run.path().join("docker-run-id")).unwrap();
    assert_nothing_left(id.trim(), "after a failed start");
}
