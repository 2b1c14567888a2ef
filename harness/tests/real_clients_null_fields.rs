//! A null header value and a null key through a leader change ([clients]):
//! confluent-kafka (librdkafka) produces a record whose key is null and one
//! of whose header values is null (length -1, which Kafka's record format
//! allows and kafka-protocol 0.15.1's decoder refuses), its partition's
//! leader is killed, a second such record goes to the new leader, the old one
//! comes back, and both records read back exactly as sent — by the client,
//! and from every replica's log on disk.

use crate::common;

use std::time::Duration;

use common::etcd::assign_topic_t;
use common::groups;
use epochal::reader::read_data_dir;
use epochal::runtime::Runtime;
use epochal::topic_partition::PartitionRef;
use serde_json::{Value, json};

const READY: Duration = Duration::from_secs(30);
const FAILOVER: Duration = Duration::from_secs(40);
/// The client's own bound on one produce or read.
const CLIENT_DEADLINE: &str = "60";

fn null_fields(args: &[&str]) -> Value {
    let args: Vec<&str> = args.iter().copied().chain([CLIENT_DEADLINE]).collect();
    let (result, ok) = groups::client_script("null_fields.py", &args);
    assert!(ok, "null_fields.py {args:?}: {result}");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_round_trips_a_null_header_value_and_a_null_key_through_a_leader_change() {
    let run = tempfile::tempdir().unwrap();
    let mut runtime = groups::start_cluster(run.path(), READY, &[]).await;
    assign_topic_t(runtime.etcd_endpoint(), r#"{"0":[1,2,3]}"#).await;
    common::ready(&runtime, READY).await;
    let bootstrap = groups::bootstrap(&runtime);
    let t0 = PartitionRef::new("t", 0);

    let first = null_fields(&["produce", &bootstrap, "t", "before"]);
    let leader = groups::view(&runtime).await.leader_of(&t0).unwrap();
    runtime.kill_node(leader).await.unwrap();
    groups::await_new_leader(&runtime, &t0, leader, FAILOVER).await;
    let second = null_fields(&["produce", &bootstrap, "t", "after"]);
    runtime.start_node(leader).await.unwrap();
    common::ready(&runtime, READY).await;

    let headers = json!([["h", null], ["k", "x"]]);
    let expected = json!([
        { "offset": first["offset"], "key": null, "value": "before", "headers": headers },
        { "offset": second["offset"], "key": null, "value": "after", "headers": headers },
    ]);
    let read = null_fields(&["read", &bootstrap, "t", "2"]);
    assert_eq!(read["records"], expected);

    let dirs: Vec<_> = runtime
        .nodes()
        .into_iter()
        .map(|node| (node, runtime.data_dir(node).unwrap()))
        .collect();
    runtime.shutdown().await.unwrap();
    for (node, dir) in dirs {
        let state = read_data_dir(&dir).unwrap();
        let replica = state.replica("t", 0).expect("every broker holds t-0");
        let on_disk: Vec<Value> = replica
            .records()
            .map(|(_, r)| {
                let text = |p: &epochal::reader::Payload| p.as_str().unwrap().to_owned();
                json!({
                    "offset": r.offset,
                    "key": r.key.as_ref().map(text),
                    "value": r.value.as_ref().map(text),
                    "headers": r.headers.iter()
                        .map(|h| json!([text(&h.key), h.value.as_ref().map(text)]))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        assert_eq!(Value::from(on_disk), expected, "{node}'s log of t-0");
    }
}
