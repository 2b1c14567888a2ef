//! A request frame as the broker's listener hands it to dispatch (length
//! prefix stripped): decoded to a request or refused with a DispatchError,
//! then — for every API whose handler needs neither etcd nor a peer — run
//! through `dispatch::handle` against a real broker, so a frame in gives a
//! response, silence (acks=0) or a closed connection out, never a panic, an
//! abort or a hang (a huge declared array length included: the broker's
//! allocator guard is installed here as in the broker binary).
//!
//! The broker is built once per process, as `broker::run` builds it but
//! without etcd, a listener or background tasks: node 1, its data directory
//! under fuzz/target/, leader of `t-0` (ISR {1}, min.insync.replicas 1), so a
//! produce to `t-0` goes through record-batch validation and onto disk, and
//! fetches, list-offsets and offsets-for-leader-epoch read it back. Time is
//! paused (tokio's test clock), so a request's wait (a fetch's max_wait_ms, an
//! acks=all timeout) passes at once instead of stalling the fuzzer.
//!
//! Not dispatched: CreateTopics (writes to etcd), InitProducerId (claims a block
//! of producer ids in etcd) and LeaderAndIsr (starts fetchers that connect to
//! the leader named in the request); all three are still decoded. The etcd client below is lazy and is never called.
//!
//! `EPOCHAL_FUZZ_EXPECT_DECODE=1` (ci/fuzz.sh sets it while checking the seeds)
//! panics on a frame that does not decode, so a seed encoded wrong is caught.
#![no_main]
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use clap::Parser;
use epochal_broker::config::ConfigArgs;
use epochal_broker::controller::metadata_store::MetadataStore;
use epochal_broker::replica::manager::ReplicaManager;
use epochal_broker::replica::partition::LeaderAndIsrState;
use epochal_broker::server::context::Broker;
use epochal_broker::server::dispatch::{self, Request};
use epochal_broker::state_change_log::StateChangeLog;
use epochal_broker::storage::{LogConfig, LogManager, TopicPartition};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOCATOR: epochal_broker::huge_alloc::LazyHugeAlloc =
    epochal_broker::huge_alloc::LazyHugeAlloc;

struct World {
    runtime: tokio::runtime::Runtime,
    broker: Broker,
    expect_decode: bool,
}

/// `fuzz/target/broker_request-data/<pid>`, emptied; directories of processes
/// that are gone are removed.
fn data_dir() -> PathBuf {
    let parent = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/broker_request-data");
    if let Ok(entries) = std::fs::read_dir(&parent) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let alive = Path::new("/proc").join(&name).exists();
            if !alive {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = parent.join(std::process::id().to_string());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the fuzz broker's data dir");
    dir
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a tokio runtime");
        let dir = data_dir();
        let config = ConfigArgs::parse_from([
            "epochal-broker",
            "--node-id",
            "1",
            "--data-dir",
            dir.to_str().expect("a UTF-8 path"),
            // Never dialled: no handler run here talks to etcd.
            "--etcd",
            "http://127.0.0.1:9",
            "--min-insync-replicas",
            "1",
        ])
        .resolve()
        .expect("the fuzz broker's settings");
        let logs = LogManager::open(
            &dir,
            LogConfig {
                segment_bytes: config.segment_bytes,
                flush_messages: u64::MAX,
                flush_interval_ms: 0,
                ..LogConfig::default()
            },
        )
        .expect("open the data dir");
        let replicas = Arc::new(ReplicaManager::new(
            config.node_id,
            config.min_insync_replicas,
            config.truncation,
            logs,
            None,
        ));
        let t0 = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        let state = LeaderAndIsrState {
            controller_epoch: 1,
            leader: 1,
            leader_epoch: 0,
            isr: vec![1],
            partition_epoch: 0,
            replicas: vec![1],
        };
        let decisions = replicas.apply_leader_and_isr(vec![(t0, state)]);
        assert!(decisions[0].result.is_ok(), "{:?}", decisions[0]);
        let store = runtime
            .block_on(MetadataStore::connect(&config.etcd))
            .expect("a lazy etcd client");
        let state_changes = StateChangeLog::open(&dir).expect("the state-change log");
        let broker = Broker::new(
            config,
            replicas,
            store,
            state_changes,
            ("127.0.0.1".into(), 9092),
        );
        World {
            runtime,
            broker,
            expect_decode: std::env::var_os("EPOCHAL_FUZZ_EXPECT_DECODE").is_some(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let world = world();
    let frame = Bytes::copy_from_slice(data);
    let decoded = dispatch::decode(frame.clone());
    if world.expect_decode
        && let Err(e) = &decoded
    {
        panic!("a seed frame does not decode: {e}");
    }
    let Ok(decoded) = decoded else {
        return;
    };
    if matches!(
        decoded.request,
        Request::CreateTopics(_) | Request::LeaderAndIsr(_) | Request::InitProducerId(_)
    ) {
        return;
    }
    let _ = world
        .runtime
        .block_on(dispatch::handle(&world.broker, frame));
});
