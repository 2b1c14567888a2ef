//! The shared etcd view the workload's clients record beside each ack
//! (workload/view.rs), against a real etcd: every caller gets a view read
//! after its call began — so it shows every write etcd acknowledged before the
//! call — while concurrent callers share reads.

use crate::common;

use std::time::Duration;

use common::etcd::start_etcd;
use epochal::workload::view::SharedView;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_view_every_caller_sees_what_etcd_held_when_it_asked_and_callers_share_reads() {
    let etcd = start_etcd().await;
    let client = etcd_client::Client::connect([etcd.endpoint.as_str()], None)
        .await
        .unwrap();
    let view = SharedView::new(client.clone(), Duration::from_secs(10));

    let callers: Vec<_> = (0..64)
        .map(|i| {
            let (view, mut client) = (view.clone(), client.clone());
            tokio::spawn(async move {
                // A write etcd acknowledged before the call: the view must show
                // its revision or a later one.
                let put = client
                    .put(format!("/epochal/test/{i}"), "x", None)
                    .await
                    .unwrap();
                let written = put.header().unwrap().revision();
                let seen = view.fresh().await.expect("etcd answers").revision;
                assert!(
                    seen >= written,
                    "caller {i}: a view at revision {seen} misses its write at {written}"
                );
                // Routing may use a view a little older, never one without
                // the caller's own write once a fresh read has shown it.
                let recent = view.recent(Duration::from_secs(60)).await.unwrap();
                assert!(recent.revision >= written);
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    let reads = view.reads();
    assert!(
        (1..64).contains(&reads),
        "64 concurrent callers took {reads} reads: none shared"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_view_an_etcd_gone_gives_none_within_the_bound() {
    // Connected, then etcd is killed: every read fails, and callers get
    // `None` (etcd cannot say), never a hang.
    let etcd = start_etcd().await;
    let client = etcd_client::Client::connect([etcd.endpoint.as_str()], None)
        .await
        .unwrap();
    let view = SharedView::new(client, Duration::from_secs(2));
    assert!(view.fresh().await.is_some());
    drop(etcd);
    let answer = tokio::time::timeout(Duration::from_secs(30), view.fresh())
        .await
        .expect("a failed read answers within its bound");
    assert!(answer.is_none());
}
