//! An application that deletes a topic and creates it again ([apps], and the
//! false alarm librdkafka's test 0107 showed, docs/librdkafka.md): `epochal
//! up` with three brokers, and a confluent-kafka application
//! (tests/clients/cluster_up_app_writes.py) that creates topic `x`, writes
//! three words, deletes `x`, creates it again and writes two more. The final
//! log of `x` is its second life's: before, the three words of the first
//! life were held to it and reported lost. The application's CreateTopics
//! and DeleteTopics are now history ops, the first life's write is set aside
//! (counted by topic-lives), and the verdict is valid with the second life's
//! two records judged at their offsets. Needs `etcd`, the workspace's
//! binaries and EPOCHAL_PYTHON with confluent-kafka.

use crate::cluster_up_common;

use std::time::Duration;

use crate::common::scenario::result_of as result;
use cluster_up_common::{CommandApp, Up, interrupt_and_judge};
use serde_json::{Value, json};

const COMMAND_WITHIN: Duration = Duration::from_secs(60);

#[test]
fn cluster_an_application_that_deletes_and_recreates_a_topic_is_judged_by_its_last_life() {
    let store = tempfile::tempdir().unwrap();
    let mut up = Up::start(store.path(), &[]);
    let mut app = CommandApp::start(
        "cluster_up_app_writes.py",
        &[&up.bootstrap, "x"],
        COMMAND_WITHIN,
    );
    assert_eq!(app.command("create")["error"], Value::Null, "{}", up.show());
    let first = app.command("produce a1 a2 a3");
    assert_eq!(first["offsets"], json!([0, 1, 2]), "{first}\n{}", up.show());
    assert_eq!(app.command("delete")["error"], Value::Null, "{}", up.show());
    assert_eq!(app.command("create")["error"], Value::Null, "{}", up.show());
    let second = app.command("produce b1 b2");
    assert_eq!(second["offsets"], json!([0, 1]), "{second}\n{}", up.show());
    drop(app);
    let results = interrupt_and_judge(&mut up);
    assert_eq!(results["verdict"], "valid", "{results}\n{}", up.show());
    let lives = result(&results, "topic-lives");
    assert_eq!(lives["counts"]["lives"], 2, "{lives}");
    assert_eq!(lives["counts"]["deletions"], 1, "{lives}");
    assert_eq!(lives["counts"]["earlier-life-ops-set-aside"], 1, "{lives}");
    assert_eq!(
        result(&results, "app-writes")["counts"]["checked"],
        2,
        "{results}"
    );
}
