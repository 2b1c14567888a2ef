//! `--controller-epoch-fencing true` in etcd is Jun Rao's per-path rule of
//! KAFKA-532: a controller may replace a partition's state only if the controller
//! epoch stored in that state does not exceed its own. The global
//! `/epochal/controller_epoch` key is not compared (KAFKA-6082's later fence).

use crate::common;

use common::etcd::Etcd;
use epochal_broker::controller::metadata_store::{
    ControllerFence, MetadataStore, PartitionStateRecord, StoreError, controller_epoch_key,
};

fn state(controller_epoch: i32, isr: &[i32]) -> PartitionStateRecord {
    PartitionStateRecord {
        leader: 2,
        leader_epoch: 0,
        isr: isr.to_vec(),
        controller_epoch,
    }
}

fn fence(controller_epoch: i32) -> ControllerFence {
    ControllerFence { controller_epoch }
}

#[test]
fn cluster_partition_state_fence_compares_the_epoch_in_the_path_not_the_global_key() {
    let etcd = Etcd::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = MetadataStore::connect(std::slice::from_ref(&etcd.endpoint))
            .await
            .unwrap();
        // A newer controller exists globally; it has not touched t-0 yet.
        store
            .client()
            .put(controller_epoch_key(), "5", None)
            .await
            .unwrap();
        let first = store
            .write_partition_state("t", 0, &state(1, &[2, 3]), 0, Some(&fence(1)))
            .await
            .unwrap();
        // Epoch 1 may still write t-0: the epoch in its path is 1 ≤ 1.
        let second = store
            .write_partition_state("t", 0, &state(1, &[2]), first.mod_revision, Some(&fence(1)))
            .await
            .unwrap();
        // Epoch 5 rewrites it; from now on epoch 1 is refused there.
        let third = store
            .write_partition_state(
                "t",
                0,
                &state(5, &[2, 3]),
                second.mod_revision,
                Some(&fence(5)),
            )
            .await
            .unwrap();
        match store
            .write_partition_state(
                "t",
                0,
                &state(1, &[2]),
                second.mod_revision,
                Some(&fence(1)),
            )
            .await
        {
            Err(StoreError::ControllerMoved(why)) => {
                assert!(
                    why.contains("stored controller epoch 5, writer's 1"),
                    "{why}"
                )
            }
            other => panic!("expected ControllerMoved, got {other:?}"),
        }
        // A lost compare under a state not above the writer's is only a lost
        // compare (re-read and retry), as it is without fencing.
        assert!(matches!(
            store
                .write_partition_state(
                    "t",
                    0,
                    &state(6, &[2]),
                    second.mod_revision,
                    Some(&fence(6)),
                )
                .await,
            Err(StoreError::VersionMismatch { .. })
        ));
        assert!(matches!(
            store
                .write_partition_state("t", 0, &state(1, &[2]), second.mod_revision, None)
                .await,
            Err(StoreError::VersionMismatch { .. })
        ));
        let stored = store.partition_state("t", 0).await.unwrap().unwrap();
        assert_eq!(stored.mod_revision, third.mod_revision);
        assert_eq!(stored.value, state(5, &[2, 3]));
    });
}
