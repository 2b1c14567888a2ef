//! The process runtime against real binaries: etcd, the epochal-proxy and three
//! brokers come up ready, each broker's etcd session really runs through its own
//! proxy, nothing is left running after drop, and the preflight names what is
//! missing. Needs `etcd` on PATH and the workspace's binaries built
//! (`cargo build --workspace --bins`).

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::bin_dir;
use common::etcd::assign_topic_t;
use epochal::node::NodeId;
use epochal::runtime::{ClusterConfig, Link, ProcessRuntime, Runtime, RuntimeError};
use epochal::system::ServiceKind;
use epochal::topic_partition::PartitionRef;
use epochal_faults::proxy::{OnHeal, Stream};

async fn registered(etcd: &str, node: u32) -> bool {
    let mut client = etcd_client::Client::connect([etcd], None).await.unwrap();
    let key = format!("/epochal/brokers/ids/{node}");
    !client.get(key, None).await.unwrap().kvs().is_empty()
}

/// Polls etcd until broker `node`'s registration is present (or absent) as wanted.
async fn await_registration(etcd: &str, node: u32, want: bool, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while registered(etcd, node).await != want {
        assert!(
            Instant::now() < deadline,
            "broker {node} registered != {want} after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_three_brokers_come_up_ready_through_their_proxies_and_leave_nothing() {
    let run = tempfile::tempdir().unwrap();
    let config = ClusterConfig::new(3, bin_dir(), run.path());
    let runtime = ProcessRuntime::start(config).await.unwrap();
    let view = common::ready(&runtime, Duration::from_secs(30)).await;
    assert_eq!(view.brokers, NodeId::all(3).collect());
    assert!(view.controller.is_some());

    // Each broker→broker proxy points at its target's own port, learned after
    // the target started.
    for to in [NodeId::new(1), NodeId::new(3)] {
        let proxy = runtime
            .proxies()
            .proxy(
                &Link::BrokerToBroker {
                    from: NodeId::new(2),
                    to,
                }
                .proxy_name(),
            )
            .await
            .unwrap();
        assert_eq!(Some(proxy.upstream.as_str()), runtime.direct_address(to));
    }

    // Cut broker 2 from etcd, both ways, at its proxy: its lease (TTL 2 s) lapses
    // and etcd, read directly, drops its registration; healing brings it back.
    let etcd = runtime.etcd_endpoint().to_owned();
    let link = Link::BrokerToService(NodeId::new(2), ServiceKind::Etcd).proxy_name();
    for stream in [Stream::Upstream, Stream::Downstream] {
        runtime
            .proxies()
            .partition(&link, stream, OnHeal::Reset)
            .await
            .unwrap();
    }
    await_registration(&etcd, 2, false, Duration::from_secs(20)).await;
    assert!(registered(&etcd, 1).await && registered(&etcd, 3).await);
    for stream in [Stream::Upstream, Stream::Downstream] {
        runtime.proxies().heal(&link, stream).await.unwrap();
    }
    await_registration(&etcd, 2, true, Duration::from_secs(20)).await;

    let pids = runtime.pids();
    assert_eq!(pids.len(), 5, "etcd, proxy and three brokers");
    assert!(pids.iter().all(|&pid| alive(pid)));
    drop(runtime);
    let left: Vec<_> = pids.into_iter().filter(|&pid| alive(pid)).collect();
    assert!(left.is_empty(), "still in /proc after drop: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_kill_restart_and_pause_a_broker() {
    let run = tempfile::tempdir().unwrap();
    let config = ClusterConfig::new(3, bin_dir(), run.path());
    let mut runtime = ProcessRuntime::start(config).await.unwrap();
    common::ready(&runtime, Duration::from_secs(30)).await;
    let etcd = runtime.etcd_endpoint().to_owned();

    // A topic assigned the way CreateTopics does (broker/README.md's key layout):
    // ready now also means a leader and a full ISR for both partitions.
    assign_topic_t(&etcd, r#"{"0":[1,2,3],"1":[2,3,1]}"#).await;
    let view = common::ready(&runtime, Duration::from_secs(30)).await;
    assert_eq!(view.partitions.len(), 2, "{view:?}");
    for partition in view.partitions.values() {
        assert!(partition.leader.is_some(), "{view:?}");
        assert_eq!(partition.isr.len(), 3, "{view:?}");
    }

    runtime.pause_node(NodeId::new(3)).await.unwrap();
    let paused = runtime.pid(NodeId::new(3)).unwrap();
    assert_eq!(
        epochal_faults::signal::proc_state(paused).unwrap(),
        Some('T')
    );
    await_registration(&etcd, 3, false, Duration::from_secs(20)).await;
    runtime.resume_node(NodeId::new(3)).await.unwrap();
    common::ready(&runtime, Duration::from_secs(30)).await;

    let old = runtime.pid(NodeId::new(1)).unwrap();
    let old_port = runtime.direct_address(NodeId::new(1)).unwrap().to_owned();
    runtime.kill_node(NodeId::new(1)).await.unwrap();
    assert!(!alive(old));
    assert!(matches!(
        runtime.kill_node(NodeId::new(1)).await,
        Err(RuntimeError::NotRunning(n)) if n == NodeId::new(1)
    ));
    // The dead broker's port goes back to the OS, which may give it to
    // another run's process (here: this test). Its links no longer dial it: a
    // client connecting through the link is closed, with nothing reaching the
    // port's new owner.
    let new_owner = std::net::TcpListener::bind(&old_port).unwrap();
    new_owner.set_nonblocking(true).unwrap();
    let link = runtime
        .link_address(Link::ClientToBroker(NodeId::new(1)))
        .unwrap()
        .to_owned();
    let mut client = tokio::net::TcpStream::connect(&link).await.unwrap();
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::io::AsyncReadExt::read(&mut client, &mut byte),
    )
    .await
    .expect("the link closes a connection towards a dead broker");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    let reached = new_owner.accept();
    assert!(
        matches!(&reached, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the link dialled the dead broker's port: {reached:?}"
    );
    drop(new_owner);
    runtime.start_node(NodeId::new(1)).await.unwrap();
    // The client proxy follows the restarted broker to its new port.
    let proxy = runtime
        .proxies()
        .proxy(&Link::ClientToBroker(NodeId::new(1)).proxy_name())
        .await
        .unwrap();
    assert_eq!(
        Some(proxy.upstream.as_str()),
        runtime.direct_address(NodeId::new(1))
    );
    runtime.stop_node(NodeId::new(2)).await.unwrap();
    runtime.start_node(NodeId::new(2)).await.unwrap();
    common::ready(&runtime, Duration::from_secs(30)).await;
    let pids = runtime.pids();
    runtime.shutdown().await.unwrap();
    assert!(pids.iter().all(|&pid| !alive(pid)));
}

#[tokio::test]
async fn preflight_names_each_missing_binary_and_starts_nothing() {
    let empty = tempfile::tempdir().unwrap();
    let mut config = ClusterConfig::new(3, empty.path(), empty.path().join("run"));
    config.etcd = "no-such-etcd-binary".into();
    let err = ProcessRuntime::start(config).await.err().unwrap();
    let RuntimeError::Missing(missing) = &err else {
        panic!("expected Missing, got {err}");
    };
    let text = err.to_string();
    assert_eq!(missing.len(), 3, "{text}");
    for name in ["no-such-etcd-binary", "epochal-broker", "epochal-proxy"] {
        assert!(text.contains(name), "{text}");
    }
    assert!(text.contains("cargo build --workspace --bins"), "{text}");
    assert!(!empty.path().join("run").exists(), "nothing may start");
}

/// Run only as a child of `cluster_sigint_kills_every_child_of_the_runtime`:
/// starts a cluster, writes its pids to `EPOCHAL_SIGINT_PIDS`, then waits for
/// the signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper: runs in a child process of cluster_sigint_kills_every_child_of_the_runtime"]
async fn sigint_helper_starts_a_cluster_and_waits() {
    let out = PathBuf::from(std::env::var("EPOCHAL_SIGINT_PIDS").expect("run by its parent test"));
    let run = tempfile::tempdir().unwrap();
    let runtime = ProcessRuntime::start(ClusterConfig::new(2, bin_dir(), run.path()))
        .await
        .unwrap();
    let pids: Vec<String> = runtime.pids().iter().map(i32::to_string).collect();
    let partial = out.with_extension("partial");
    std::fs::write(&partial, pids.join("\n")).unwrap();
    std::fs::rename(&partial, &out).unwrap();
    std::future::pending::<()>().await;
}

#[test]
fn cluster_sigint_kills_every_child_of_the_runtime() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pids");
    // The helper's name as libtest knows it: its module's path inside the
    // test binary (the crate's name left off), then the function's.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let helper = format!("{module}::sigint_helper_starts_a_cluster_and_waits");
    let mut harness = Command::new(std::env::current_exe().unwrap())
        .args([helper.as_str(), "--exact", "--ignored", "--nocapture"])
        .env("EPOCHAL_SIGINT_PIDS", &out)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let pids: Vec<i32> = loop {
        if let Ok(text) = std::fs::read_to_string(&out) {
            break text.lines().map(|l| l.parse().unwrap()).collect();
        }
        assert!(
            harness.try_wait().unwrap().is_none(),
            "the helper exited before starting its cluster"
        );
        assert!(Instant::now() < deadline, "no cluster within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pids.len(), 4, "etcd, proxy and two brokers: {pids:?}");

    epochal_faults::signal::interrupt(harness.id() as i32).unwrap();
    let status = harness.wait().unwrap();
    assert_eq!(status.code(), Some(130), "exits as a shell would on SIGINT");
    // Killed children are orphans now; whoever reaps orphans here may leave a
    // zombie ('Z') for a moment, which is dead all the same.
    let deadline = Instant::now() + Duration::from_secs(10);
    for pid in pids {
        loop {
            let state = epochal_faults::signal::proc_state(pid).unwrap();
            if matches!(state, None | Some('Z')) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "pid {pid} still {state:?} after SIGINT"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_cutting_a_follower_from_its_leader_shrinks_the_isr() {
    use epochal::observe::ClusterView;
    let run = tempfile::tempdir().unwrap();
    let mut config = ClusterConfig::new(3, bin_dir(), run.path());
    config.broker_args = vec!["--replica-lag-time-max-ms".into(), "1000".into()];
    let runtime = ProcessRuntime::start(config).await.unwrap();
    common::ready(&runtime, Duration::from_secs(30)).await;
    assign_topic_t(runtime.etcd_endpoint(), r#"{"0":[1,2,3]}"#).await;
    let mut client = etcd_client::Client::connect([runtime.etcd_endpoint()], None)
        .await
        .unwrap();
    let view = common::ready(&runtime, Duration::from_secs(30)).await;
    let leader = view.partitions[&PartitionRef::new("t", 0)].leader.unwrap();
    let follower = NodeId::all(3).find(|&n| n != leader).unwrap();

    // The follower's fetches to the leader run only through this one proxy.
    // Checked by hand: cutting the leader's client proxy instead leaves the ISR
    // full for 20 s. Cutting leader→follower shrinks it too, but for another
    // reason when the leader is also the controller (as it was in that run): its
    // LeaderAndIsr for the new topic never reaches the follower, which so never
    // starts fetching.
    let link = Link::BrokerToBroker {
        from: follower,
        to: leader,
    }
    .proxy_name();
    for stream in [Stream::Upstream, Stream::Downstream] {
        runtime
            .proxies()
            .partition(&link, stream, OnHeal::Reset)
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let view = ClusterView::read(&mut client).await.unwrap();
        let partition = &view.partitions[&PartitionRef::new("t", 0)];
        if !partition.isr.contains(&follower) {
            assert_eq!(partition.leader, Some(leader), "{view:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{follower} still in the ISR with its link to {leader} cut: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for stream in [Stream::Upstream, Stream::Downstream] {
        runtime.proxies().heal(&link, stream).await.unwrap();
    }
    common::ready(&runtime, Duration::from_secs(30)).await;
}

/// A broker whose process ends by itself during a start is the system's
/// failure, not the harness's: here another process holds its data dir's
/// lock (the broker refuses, as Kafka's LogManager does). The nemesis records
/// it on the start's op (`exited`, which the run folds into a
/// `restart-failed` anomaly), the node stays down and can be started again,
/// and the harness carries on.
#[tokio::test]
async fn cluster_a_start_that_ends_by_itself_is_recorded_and_the_node_stays_down() {
    use epochal::nemesis::Nemesis;
    use epochal::observe::Observer;
    use epochal::schedule::{Fault, Target};

    let run = tempfile::tempdir().unwrap();
    let config = ClusterConfig::new(3, bin_dir(), run.path());
    let mut runtime = ProcessRuntime::start(config).await.unwrap();
    common::ready(&runtime, Duration::from_secs(30)).await;
    let mut observer = Observer::connect(runtime.etcd_endpoint()).await.unwrap();
    let mut nemesis = Nemesis::new(1);
    let b3 = NodeId::new(3);
    let start = Fault::Start(Target::Node(b3));
    runtime.stop_node(b3).await.unwrap();
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(runtime.data_dir(b3).unwrap().join(".lock"))
        .unwrap();
    lock.try_lock().unwrap();

    let view = observer.view().await.unwrap();
    let done = nemesis
        .fire(&mut runtime, &mut observer, &view, &start)
        .await
        .expect("a broker that ends during its start is no harness error");
    let exited = done
        .exited
        .expect("the start's op names the node that ended");
    assert_eq!(exited.len(), 1, "{exited:?}");
    assert_eq!(exited[0].node, b3);
    assert!(
        exited[0].error.contains("broker b3 exited early"),
        "{}",
        exited[0].error
    );
    assert!(!runtime.is_running(b3));

    drop(lock);
    let view = observer.view().await.unwrap();
    let done = nemesis
        .fire(&mut runtime, &mut observer, &view, &start)
        .await
        .unwrap();
    assert_eq!(done.exited, None);
    assert!(runtime.is_running(b3));
    common::ready(&runtime, Duration::from_secs(30)).await;
    runtime.shutdown().await.unwrap();
}
