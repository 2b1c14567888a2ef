//! KIP-903 (Kafka 3.5; KAFKA-14139): a leader takes a replica into an ISR only
//! on fetches from the run etcd registers now. Before it, a fetch sent by a
//! broker's earlier run — one that then lost its unflushed log (a power loss,
//! a replaced disk) and came back — could take the new run into the ISR with
//! a log it no longer has, and electing it lost committed data.
//!
//! End to end through a real etcd and a real replica manager on real files:
//! follower 2 is registered as run 7; its fetch as run 6 (an earlier run's)
//! qualifies it, by the log end it names, to join; the leader's write of the
//! expansion is what is judged, with `isr_join_fencing` on and off.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::etcd::Etcd;
use epochal_broker::config::Truncation;
use epochal_broker::controller::metadata_store::{
    BrokerRegistration, MetadataStore, PartitionStateRecord,
};
use epochal_broker::replica::isr;
use epochal_broker::replica::manager::ReplicaManager;
use epochal_broker::replica::partition::LeaderAndIsrState;
use epochal_broker::replica::store::{LogManager, TopicPartition};
use epochal_broker::storage::{LogConfig, record_batch};

const LAG: Duration = Duration::from_secs(10);

fn batch(n: usize) -> Bytes {
    let values = (0..n)
        .map(|i| (None, Some(Bytes::from(format!("v{i}")))))
        .collect();
    record_batch::plain_batch(values, 0)
}

/// Leader 1 of `tp` with ISR [1] and three records, its partition state in
/// etcd; the follower 2 registered as run 7.
async fn leader(
    store: &MetadataStore,
    dir: &std::path::Path,
    tp: &TopicPartition,
    fencing: bool,
) -> ReplicaManager {
    let lease = store.grant_lease(30).await.unwrap();
    let follower = BrokerRegistration {
        id: 2,
        host: "127.0.0.1".into(),
        port: 1,
        incarnation: 7,
    };
    store.register_broker(&follower, lease).await.unwrap();
    let record = PartitionStateRecord {
        leader: 1,
        leader_epoch: 0,
        isr: vec![1],
        controller_epoch: 1,
    };
    store
        .write_partition_state(&tp.topic, tp.partition, &record, 0, None)
        .await
        .unwrap();
    let logs = LogManager::open(dir, LogConfig::default()).unwrap();
    let rm =
        ReplicaManager::new(1, 1, Truncation::Current, logs, None).with_incarnation(1, fencing);
    rm.apply_leader_and_isr(vec![(
        tp.clone(),
        LeaderAndIsrState {
            controller_epoch: 1,
            leader: 1,
            leader_epoch: 0,
            isr: vec![1],
            partition_epoch: 0,
            replicas: vec![1, 2],
        },
    )]);
    rm.append_as_leader(tp, batch(3), 1).unwrap();
    rm
}

/// Follower 2 fetches at the leader's log end as `run`; the leader then
/// proposes and writes what its ISR check finds. Returns etcd's ISR after.
async fn fetch_and_write(
    rm: &ReplicaManager,
    store: &MetadataStore,
    tp: &TopicPartition,
    run: u64,
) -> Vec<i32> {
    rm.note_follower_run(std::iter::once(tp.clone()), 2, run);
    rm.read(tp, 3, 1 << 20, 2, 0).unwrap();
    let changes = rm.pending_isr_changes(LAG);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].joining, vec![(2, Some(run))]);
    isr::write(rm, store, &changes[0]).await.unwrap();
    let stored = store
        .partition_state(&tp.topic, tp.partition)
        .await
        .unwrap()
        .unwrap();
    stored.value.isr
}

#[test]
fn cluster_isr_join_fencing_takes_in_only_fetches_from_the_registered_run() {
    let etcd = Etcd::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = MetadataStore::connect(std::slice::from_ref(&etcd.endpoint))
            .await
            .unwrap();

        // KIP-903: the earlier run's fetch does not take run 7 in; its own does.
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("fenced".to_string(), 0);
        let rm = leader(&store, dir.path(), &tp, true).await;
        assert_eq!(fetch_and_write(&rm, &store, &tp, 6).await, vec![1]);
        assert_eq!(fetch_and_write(&rm, &store, &tp, 7).await, vec![1, 2]);

        // Before it: the earlier run's fetch is enough.
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("unfenced".to_string(), 0);
        let rm = leader(&store, dir.path(), &tp, false).await;
        assert_eq!(fetch_and_write(&rm, &store, &tp, 6).await, vec![1, 2]);
    });
}
