//! `read_timeline` against a real etcd: every write of the partition-state and
//! controller keys comes back with its exact revision and value, in order;
//! other keys are ignored; a deleted controller key is `broker_id: None`. And
//! a real failover's timeline, checked by the leader and fencing checkers.

use std::time::{Duration, Instant};

use epochal::node::NodeId;
use epochal::observe::timeline::{
    ControllerChange, PartitionStateChange, RegistrationChange, Timeline, read_changes,
    read_timeline, read_timeline_within,
};
use etcd_client::Client;

use crate::common;
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

/// Writes `key`; returns the revision of the write.
async fn put(client: &mut Client, key: &str, value: &str) -> i64 {
    client
        .put(key, value, None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision()
}

/// Deletes `key`; returns the revision of the delete.
async fn delete(client: &mut Client, key: &str) -> i64 {
    client
        .delete(key, None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision()
}

/// The revisions of what [`write_history`] wrote: controllers (`c`),
/// registrations (`r`), partition states (`s`).
struct Written {
    c1: i64,
    r1: i64,
    s1: i64,
    s2: i64,
    s3: i64,
    deleted: i64,
    r1_gone: i64,
    c2: i64,
    s4: i64,
}

/// Two controllers with the key deleted between them, a registration come
/// and gone, four partition states of two partitions, and keys the timeline
/// ignores among them, the newest outside /epochal/.
async fn write_history(client: &mut Client) -> Written {
    let c1 = put(client, "/epochal/controller", r#"{"broker_id":1}"#).await;
    put(client, "/epochal/controller_epoch", "1").await;
    let r1 = put(client, "/epochal/brokers/ids/1", r#"{"id":1}"#).await;
    let s1 = put(
        client,
        &state_key("t", 0),
        r#"{"leader":1,"leader_epoch":0,"isr":[1,2],"controller_epoch":1}"#,
    )
    .await;
    let s2 = put(
        client,
        &state_key("a-b", 3),
        r#"{"leader":2,"leader_epoch":0,"isr":[2],"controller_epoch":1,"extra":7}"#,
    )
    .await;
    put(
        client,
        "/epochal/brokers/topics/t",
        r#"{"partitions":{"0":[1,2]}}"#,
    )
    .await;
    let s3 = put(
        client,
        &state_key("t", 0),
        r#"{"leader":2,"leader_epoch":1,"isr":[2],"controller_epoch":1}"#,
    )
    .await;
    let deleted = delete(client, "/epochal/controller").await;
    // A registration gone (a clean stop, or a lapsed lease).
    let r1_gone = delete(client, "/epochal/brokers/ids/1").await;
    let c2 = put(
        client,
        "/epochal/controller",
        r#"{"broker_id":2,"epoch":2}"#,
    )
    .await;
    let s4 = put(
        client,
        &state_key("t", 0),
        r#"{"leader":-1,"leader_epoch":2,"isr":[2],"controller_epoch":2}"#,
    )
    .await;
    // The newest revision is outside /epochal/: the read must still end.
    let last = put(client, "/elsewhere", "x").await;
    assert!(c1 < s1 && s1 < s2 && s2 < s3 && s3 < deleted && deleted < c2 && c2 < s4 && s4 < last);
    Written {
        c1,
        r1,
        s1,
        s2,
        s3,
        deleted,
        r1_gone,
        c2,
        s4,
    }
}

/// Every write of a partition-state, controller or registration key, with
/// its exact revision and value, in order; and what the timeline derives.
fn assert_timeline_holds_every_write(timeline: &Timeline, w: &Written) {
    let Written {
        c1,
        r1,
        s1,
        s2,
        s3,
        deleted,
        r1_gone,
        c2,
        s4,
    } = *w;
    assert_eq!(
        *timeline,
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
            registrations: vec![
                RegistrationChange {
                    revision: r1,
                    broker_id: 1,
                    registered: true
                },
                RegistrationChange {
                    revision: r1_gone,
                    broker_id: 1,
                    registered: false
                },
            ],
        }
    );
    assert!(timeline.registered_throughout(1, r1, r1_gone - 1));
    assert!(!timeline.registered_throughout(1, r1, r1_gone));
    assert_eq!(
        timeline
            .states_of("t", 0)
            .iter()
            .map(|s| s.revision)
            .collect::<Vec<_>>(),
        vec![s1, s3, s4]
    );
    assert!(timeline.unclean_elections().is_empty());
}

/// The changes between two revisions, as an await reads what came and went
/// between its looks: exactly those after the first and up to the second,
/// and nothing when the second is not later.
async fn assert_changes_between_two_revisions(reader: &mut Client, w: &Written) {
    let between = read_changes(reader, w.s2, w.s4).await.unwrap();
    assert_eq!(
        between.partition_states,
        vec![
            state(w.s3, "t", 0, (2, 1, 1), &[2]),
            state(w.s4, "t", 0, (-1, 2, 2), &[2])
        ]
    );
    assert_eq!(
        between
            .controllers
            .iter()
            .map(|c| c.revision)
            .collect::<Vec<_>>(),
        vec![w.deleted, w.c2]
    );
    assert_eq!(
        read_changes(reader, w.s4, w.s4).await.unwrap(),
        Timeline::default()
    );
}

/// A value that is not a partition state is an error naming key and
/// revision, never a timeline with a hole.
async fn assert_a_bad_state_is_an_error(client: &mut Client, endpoint: &str) {
    let bad = put(client, &state_key("t", 1), "not json").await;
    let error = read_timeline(endpoint).await.unwrap_err().to_string();
    assert!(
        error.contains(&state_key("t", 1)) && error.contains(&format!("revision {bad}")),
        "{error}"
    );
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
    let written = write_history(&mut client).await;

    let started = Instant::now();
    let timeline = read_timeline(&etcd.endpoint).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_timeline_holds_every_write(&timeline, &written);

    let mut reader = Client::connect([etcd.endpoint.as_str()], None)
        .await
        .unwrap();
    assert_changes_between_two_revisions(&mut reader, &written).await;
    assert_a_bad_state_is_an_error(&mut client, &etcd.endpoint).await;
}

#[tokio::test]
async fn timeline_read_from_nothing_listening_errs_within_its_deadline() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let result = read_timeline_within(&endpoint, Duration::from_millis(500)).await;
    assert!(result.is_err(), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// The current state of `t-0` in etcd, read directly.
async fn t0_state(etcd: &str) -> Option<serde_json::Value> {
    let mut client = Client::connect([etcd], None).await.ok()?;
    let answer = client.get(state_key("t", 0), None).await.ok()?;
    serde_json::from_slice(answer.kvs().first()?.value()).ok()
}

/// Polls etcd's `t-0` state until `want` holds of it, under a deadline.
async fn await_t0(etcd: &str, what: &str, want: impl Fn(&serde_json::Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let state = t0_state(etcd).await;
        if state.as_ref().is_some_and(&want) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: t-0 is {state:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A real failover: three brokers, the leader of `t-0` killed and restarted.
/// etcd's timeline shows each leadership with a higher leader epoch, and the
/// two checkers that read it find the run valid — every applied decision is
/// one etcd recorded, one leader per epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_timeline_of_a_failover_passes_the_leader_and_fencing_checkers() {
    use epochal::checker::{self, RunData, Verdict, fencing, leaders};
    use epochal::kafka_client::KafkaClient;
    use epochal::reader::read_data_dir;
    use epochal::reader::state_change::read_state_changes;
    use epochal::runtime::{ClusterConfig, ProcessRuntime, Runtime};

    let exe = std::env::current_exe().unwrap();
    let bin_dir = exe.parent().unwrap().parent().unwrap().to_owned();
    let run_dir = tempfile::tempdir().unwrap();
    let config = ClusterConfig::new(3, bin_dir, run_dir.path());
    let mut runtime = ProcessRuntime::start(config).await.unwrap();
    common::ready(&runtime, Duration::from_secs(30)).await;
    let etcd = runtime.etcd_endpoint().to_owned();
    let call = Duration::from_secs(10);
    let mut client =
        KafkaClient::connect(&runtime.client_address(NodeId::new(1)).unwrap(), "tl", call)
            .await
            .unwrap();
    client.create_topic("t", 1, 3, 10_000, call).await.unwrap();
    await_t0(&etcd, "a leader and a full ISR", |s| {
        s["leader"].as_i64() != Some(-1) && s["isr"].as_array().is_some_and(|isr| isr.len() == 3)
    })
    .await;
    let first = t0_state(&etcd).await.unwrap();
    let old = NodeId::new(first["leader"].as_i64().unwrap() as u32);
    runtime.kill_node(old).await.unwrap();
    await_t0(&etcd, "a new leader", |s| {
        s["leader"]
            .as_i64()
            .is_some_and(|l| l != -1 && l != i64::from(old.id()))
    })
    .await;
    runtime.start_node(old).await.unwrap();
    await_t0(&etcd, "the old leader back in the ISR", |s| {
        s["isr"]
            .as_array()
            .is_some_and(|isr| isr.contains(&serde_json::json!(old.id())))
    })
    .await;

    let timeline = read_timeline(&etcd).await.unwrap();
    let states = timeline.states_of("t", 0);
    assert!(states.len() >= 2, "{states:?}");
    assert!(
        states
            .windows(2)
            .all(|w| w[0].revision < w[1].revision && w[0].leader_epoch <= w[1].leader_epoch),
        "{states:?}"
    );
    let leaders_seen: std::collections::BTreeSet<i32> = states
        .iter()
        .map(|s| s.leader)
        .filter(|&l| l != -1)
        .collect();
    assert!(leaders_seen.len() >= 2, "{states:?}");
    assert!(timeline.unclean_elections().is_empty(), "{states:?}");
    assert!(
        timeline.controllers.iter().any(|c| c.broker_id.is_some()),
        "{:?}",
        timeline.controllers
    );

    let mut run = RunData {
        timeline: Some(timeline),
        ..RunData::default()
    };
    for node in NodeId::all(3) {
        let data = runtime.data_dir(node).unwrap();
        run.state_changes
            .insert(node, read_state_changes(&data).unwrap());
        run.replicas.insert(node, read_data_dir(&data).unwrap());
    }
    assert!(
        run.state_changes[&old]
            .iter()
            .any(|e| e.applied() && e.request == "LeaderAndIsr"),
        "{:?}",
        run.state_changes
    );
    let report = checker::check(&run, &[leaders::checker(), fencing::checker()]);
    for result in &report.results {
        assert_eq!(result.verdict, Verdict::Valid, "{result:?}");
    }
    runtime.shutdown().await.unwrap();
}
