//! `read_timeline` against a real etcd: every write of the partition-state and
//! controller keys comes back with its exact revision and value, in order;
//! other keys are ignored; a deleted controller key is `broker_id: None`.

use std::time::{Duration, Instant};

use epochal::timeline::{
    ControllerChange, PartitionStateChange, Timeline, read_timeline, read_timeline_within,
};
use etcd_client::Client;

mod common;
use common::etcd::{free_port, start_etcd};

fn state_key(topic: &str, partition: u32) -> String {
    format!("/epochal/brokers/topics/{topic}/partitions/{partition}/state")
}

fn state(
    revision: i64,
    topic: &str,
    partition: u32,
    (leader, leader_epoch, controller_epoch): (i32, i32, i32),
    isr: &[i32],
) -> PartitionStateChange {
    PartitionStateChange {
        revision,
        topic: topic.into(),
        partition,
        leader,
        leader_epoch,
        isr: isr.to_vec(),
        controller_epoch,
    }
}

#[tokio::test]
async fn cluster_timeline_reads_every_revision_of_state_and_controller_keys() {
    let etcd = start_etcd().await;
    let mut client = Client::connect([etcd.endpoint.as_str()], None)
        .await
        .unwrap();
    // A fresh etcd: nothing written yet.
    assert_eq!(
        read_timeline(&etcd.endpoint).await.unwrap(),
        Timeline::default()
    );

    let mut put = async |key: &str, value: &str| -> i64 {
        client
            .put(key, value, None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision()
    };
    let c1 = put("/epochal/controller", r#"{"broker_id":1}"#).await;
    put("/epochal/controller_epoch", "1").await;
    put("/epochal/brokers/ids/1", r#"{"id":1}"#).await;
    let s1 = put(
        &state_key("t", 0),
        r#"{"leader":1,"leader_epoch":0,"isr":[1,2],"controller_epoch":1}"#,
    )
    .await;
    let s2 = put(
        &state_key("a-b", 3),
        r#"{"leader":2,"leader_epoch":0,"isr":[2],"controller_epoch":1,"extra":7}"#,
    )
    .await;
    put("/epochal/brokers/topics/t", r#"{"partitions":{"0":[1,2]}}"#).await;
    let s3 = put(
        &state_key("t", 0),
        r#"{"leader":2,"leader_epoch":1,"isr":[2],"controller_epoch":1}"#,
    )
    .await;
    let deleted = client
        .delete("/epochal/controller", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    let mut put = async |key: &str, value: &str| -> i64 {
        client
            .put(key, value, None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision()
    };
    let c2 = put("/epochal/controller", r#"{"broker_id":2,"epoch":2}"#).await;
    let s4 = put(
        &state_key("t", 0),
        r#"{"leader":-1,"leader_epoch":2,"isr":[2],"controller_epoch":2}"#,
    )
    .await;
    // The newest revision is outside /epochal/: the read must still end.
    let last = put("/elsewhere", "x").await;
    assert!(c1 < s1 && s1 < s2 && s2 < s3 && s3 < deleted && deleted < c2 && c2 < s4 && s4 < last);

    let started = Instant::now();
    let timeline = read_timeline(&etcd.endpoint).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        timeline,
        Timeline {
            partition_states: vec![
                state(s1, "t", 0, (1, 0, 1), &[1, 2]),
                state(s2, "a-b", 3, (2, 0, 1), &[2]),
                state(s3, "t", 0, (2, 1, 1), &[2]),
                state(s4, "t", 0, (-1, 2, 2), &[2]),
            ],
            controllers: vec![
                ControllerChange {
                    revision: c1,
                    broker_id: Some(1),
                    epoch: None
                },
                ControllerChange {
                    revision: deleted,
                    broker_id: None,
                    epoch: None
                },
                ControllerChange {
                    revision: c2,
                    broker_id: Some(2),
                    epoch: Some(2)
                },
            ],
        }
    );
    assert_eq!(
        timeline
            .states_of("t", 0)
            .iter()
            .map(|s| s.revision)
            .collect::<Vec<_>>(),
        vec![s1, s3, s4]
    );
    assert!(timeline.unclean_elections().is_empty());

    // A value that is not a partition state is an error naming key and
    // revision, never a timeline with a hole.
    let bad = put(&state_key("t", 1), "not json").await;
    let error = read_timeline(&etcd.endpoint).await.unwrap_err().to_string();
    assert!(
        error.contains(&state_key("t", 1)) && error.contains(&format!("revision {bad}")),
        "{error}"
    );
}

#[tokio::test]
async fn timeline_read_from_nothing_listening_errs_within_its_deadline() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let result = read_timeline_within(&endpoint, Duration::from_millis(500)).await;
    assert!(result.is_err(), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
