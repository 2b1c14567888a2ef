//! Issue [stop-race]: a broker that exits the moment it gets SIGTERM must stop
//! cleanly on both runtimes, every time. The Docker runtime used to read
//! `/proc/<pid>/stat` after the signal to learn whether the broker was paused;
//! a broker already gone (reaped by the container's shim) made that read fail
//! with ESRCH, and the stop — and the whole run — became a harness error.
//!
//! The broker's `shutdown-exits-at-once` failpoint makes every stop that race:
//! the broker exits on the signal with nothing closed. Each test stops and
//! restarts one broker 50 times, every other time from a pause (SIGSTOP first:
//! the stop must continue it), and wants no error; then a broker killed from
//! outside the runtime must make a pause say it exited, at once, instead of
//! waiting out the start timeout for a stop that never comes. Needs `etcd`, the
//! workspace's binaries and, for the second test, Docker.

use crate::common;

use std::time::{Duration, Instant};

use common::bin_dir;
use common::docker::{Cleanup, require_docker};
use epochal::node::NodeId;
use epochal::runtime::{ClusterConfig, DockerRuntime, ProcessRuntime, Runtime, RuntimeError};

const STOPS: usize = 50;

fn config(run: &std::path::Path) -> ClusterConfig {
    let mut config = ClusterConfig::new(1, bin_dir(), run);
    config.node_env.insert(
        NodeId::new(1),
        vec![(
            "EPOCHAL_FAILPOINTS".into(),
            "shutdown-exits-at-once=return".into(),
        )],
    );
    config
}

/// Stops the broker [`STOPS`] times, each from a fresh start, every other one
/// paused first; every stop must succeed and leave the node not running.
async fn stop_and_start<R: Runtime>(runtime: &mut R) {
    let node = NodeId::new(1);
    for round in 1..=STOPS {
        let paused = round % 2 == 0;
        if paused {
            runtime
                .pause_node(node)
                .await
                .unwrap_or_else(|e| panic!("round {round}: pause: {e}"));
        }
        runtime
            .stop_node(node)
            .await
            .unwrap_or_else(|e| panic!("round {round} (paused: {paused}): stop: {e}"));
        assert!(!runtime.is_running(node), "round {round}: still running");
        assert!(!runtime.is_paused(node).unwrap(), "round {round}");
        if round < STOPS {
            runtime
                .start_node(node)
                .await
                .unwrap_or_else(|e| panic!("round {round}: start: {e}"));
        }
    }
}

/// A broker that died on its own (SIGKILL from outside the runtime) is not
/// paused by a pause: the runtime says it exited, at once rather than after
/// its start timeout, and forgets it, so it can be started again.
async fn pause_finds_a_dead_broker<R: Runtime>(runtime: &mut R) {
    let node = NodeId::new(1);
    runtime.start_node(node).await.unwrap();
    let pid = runtime.pid(node).unwrap();
    epochal_faults::signal::kill_now(pid).unwrap();
    let asked = Instant::now();
    let error = runtime.pause_node(node).await.unwrap_err();
    assert!(
        matches!(
            error,
            RuntimeError::Exited { .. } | RuntimeError::ContainerExited { .. }
        ),
        "{error}"
    );
    assert!(asked.elapsed() < Duration::from_secs(10), "{error}");
    assert!(!runtime.is_running(node));
    runtime.start_node(node).await.unwrap();
    runtime.stop_node(node).await.unwrap();
}

/// The broker's log shows each stop went through the failpoint (the 50 and
/// the last one's), never through a clean shutdown: the race was run every
/// time, not avoided.
fn assert_every_stop_exited_at_once(run: &std::path::Path) {
    let log = std::fs::read_to_string(run.join("b1").join("broker.log")).unwrap();
    assert_eq!(
        log.matches("failpoint shutdown-exits-at-once: exiting now")
            .count(),
        STOPS + 1,
        "{log}"
    );
    assert!(!log.contains("stopped cleanly"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_process_stops_a_broker_that_exits_at_once_50_times() {
    let run = tempfile::tempdir().unwrap();
    let mut runtime = ProcessRuntime::start(config(run.path())).await.unwrap();
    stop_and_start(&mut runtime).await;
    pause_finds_a_dead_broker(&mut runtime).await;
    drop(runtime);
    assert_every_stop_exited_at_once(run.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_docker_stops_a_broker_that_exits_at_once_50_times() {
    require_docker();
    let run = tempfile::tempdir().unwrap();
    let mut runtime = DockerRuntime::start(config(run.path())).await.unwrap();
    let _cleanup = Cleanup(Some(runtime.run_id().to_owned()));
    stop_and_start(&mut runtime).await;
    pause_finds_a_dead_broker(&mut runtime).await;
    drop(runtime);
    assert_every_stop_exited_at_once(run.path());
}
