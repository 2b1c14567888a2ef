//! Partitions against a real cluster (etcd, the epochal-proxy, three brokers),
//! each shown to take effect where it matters: registrations read from etcd
//! directly, records read from a broker's own port, never through a proxy.
//! Needs `etcd` on PATH and the workspace's binaries built
//! (`cargo build --workspace --bins`). Every wait polls under a deadline.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::bin_dir;
use epochal::kafka_client::{
    ClientError, FetchOptions, KafkaClient, ProduceOptions, ProduceRecord,
};
use epochal::nemesis::partition::{Endpoint, PartitionSpec, Partitions, blocked, cuts};
use epochal::node::NodeId;
use epochal::runtime::{ClusterConfig, Link, ProcessRuntime, Runtime};
use epochal::topic_partition::PartitionRef;
use epochal_faults::proxy::{OnHeal, Stream, ToxicKind};

const POLL: Duration = Duration::from_millis(50);
/// Long enough for a lease (TTL 2 s) to lapse and be noticed, with room.
const LAPSE: Duration = Duration::from_secs(20);
const READY: Duration = Duration::from_secs(30);
/// A call that should answer at once on loopback.
const CALL: Duration = Duration::from_secs(5);
/// How long a call through a cut stream waits before we call it unanswered.
const UNANSWERED: Duration = Duration::from_millis(1500);

async fn start(run: &tempfile::TempDir) -> ProcessRuntime {
    let runtime = ProcessRuntime::start(ClusterConfig::new(3, bin_dir(), run.path()))
        .await
        .unwrap();
    common::ready(&runtime, READY).await;
    runtime
}

async fn etcd(runtime: &ProcessRuntime) -> etcd_client::Client {
    etcd_client::Client::connect([runtime.etcd_endpoint()], None)
        .await
        .unwrap()
}

async fn registered(etcd: &mut etcd_client::Client) -> BTreeSet<NodeId> {
    let response = etcd
        .get(
            "/epochal/brokers/ids/",
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    response
        .kvs()
        .iter()
        // Keys end in the broker's number (`/epochal/brokers/ids/1`), not its name.
        .filter_map(|kv| {
            let id = kv.key_str().ok()?.rsplit('/').next()?.parse().ok()?;
            NodeId::from_broker_id(id)
        })
        .collect()
}

/// Polls etcd until `node`'s registration is present (or absent) as wanted;
/// returns the registered set seen then.
async fn await_registration(
    etcd: &mut etcd_client::Client,
    node: NodeId,
    want: bool,
) -> BTreeSet<NodeId> {
    let deadline = Instant::now() + LAPSE;
    loop {
        let seen = registered(etcd).await;
        if seen.contains(&node) == want {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "broker {node} registered != {want} after {LAPSE:?} (registered: {seen:?})"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Every toxic on every proxy, as (proxy name, stream), checking each is a
/// `partition` that resumes on heal.
async fn toxics_in_force(runtime: &ProcessRuntime) -> BTreeSet<(String, Stream)> {
    let mut out = BTreeSet::new();
    for (name, proxy) in runtime.proxies().proxies().await.unwrap() {
        for toxic in proxy.toxics {
            match toxic.toxic_kind().unwrap() {
                ToxicKind::Partition(p) => assert_eq!(p.on_heal, OnHeal::Resume, "{name}"),
                other => panic!("{name}: unexpected toxic {other:?}"),
            }
            out.insert((name.clone(), toxic.stream));
        }
    }
    out
}

fn named(cuts: &BTreeSet<(Link, Stream)>) -> BTreeSet<(String, Stream)> {
    cuts.iter()
        .map(|(link, stream)| (link.proxy_name(), *stream))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_partition_isolate_lapses_only_the_isolated_registration_and_heals() {
    let run = tempfile::tempdir().unwrap();
    let runtime = start(&run).await;
    let nodes = runtime.nodes();
    let mut etcd = etcd(&runtime).await;
    let mut partitions = Partitions::new();
    assert!(partitions.is_healed());

    let spec = PartitionSpec::Isolate(NodeId::new(2));
    let got = partitions
        .apply(runtime.proxies(), &spec, &nodes, None, OnHeal::Resume)
        .await
        .unwrap();
    assert_eq!(got, blocked(&spec, &nodes));
    assert!(got.contains(&(Endpoint::Broker(NodeId::new(2)), Endpoint::Etcd)));
    assert_eq!(toxics_in_force(&runtime).await, named(&cuts(&got)));
    assert!(!partitions.is_healed());

    // Faults accumulate: cutting node 2 from etcd again adds nothing.
    partitions
        .apply(
            runtime.proxies(),
            &PartitionSpec::NodeFromEtcd(NodeId::new(2)),
            &nodes,
            None,
            OnHeal::Resume,
        )
        .await
        .unwrap();
    assert_eq!(toxics_in_force(&runtime).await, named(&cuts(&got)));

    let seen = await_registration(&mut etcd, NodeId::new(2), false).await;
    assert!(
        seen.contains(&NodeId::new(1)) && seen.contains(&NodeId::new(3)),
        "the others stay registered: {seen:?}"
    );

    partitions.heal(runtime.proxies()).await.unwrap();
    assert!(partitions.is_healed());
    assert!(toxics_in_force(&runtime).await.is_empty());
    await_registration(&mut etcd, NodeId::new(2), true).await;
    common::ready(&runtime, READY).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_partition_node_from_etcd_lapses_its_registration_while_its_broker_links_flow() {
    let run = tempfile::tempdir().unwrap();
    let runtime = start(&run).await;
    let nodes = runtime.nodes();
    let mut etcd = etcd(&runtime).await;
    let mut partitions = Partitions::new();

    let spec = PartitionSpec::NodeFromEtcd(NodeId::new(3));
    let got = partitions
        .apply(runtime.proxies(), &spec, &nodes, None, OnHeal::Resume)
        .await
        .unwrap();
    assert_eq!(
        toxics_in_force(&runtime).await,
        named(&cuts(&got)),
        "only b3-etcd"
    );
    let seen = await_registration(&mut etcd, NodeId::new(3), false).await;
    assert!(
        seen.contains(&NodeId::new(1)) && seen.contains(&NodeId::new(2)),
        "{seen:?}"
    );

    // With the lease gone, every broker link of node 3 still carries a request
    // and its answer both ways (ApiVersions, which `connect` sends).
    for other in [NodeId::new(1), NodeId::new(2)] {
        for link in [
            Link::BrokerToBroker {
                from: NodeId::new(3),
                to: other,
            },
            Link::BrokerToBroker {
                from: other,
                to: NodeId::new(3),
            },
        ] {
            let address = runtime.link_address(link).unwrap();
            KafkaClient::connect(address, "partition-test", CALL)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", link.proxy_name()));
        }
    }
    assert!(
        !registered(&mut etcd).await.contains(&NodeId::new(3)),
        "still cut from etcd"
    );

    partitions.heal(runtime.proxies()).await.unwrap();
    await_registration(&mut etcd, NodeId::new(3), true).await;
    common::ready(&runtime, READY).await;
}

/// The values in `partition` of topic `t`, read from `node`'s own port.
async fn values(direct: &mut KafkaClient, partition: i32) -> Vec<Vec<u8>> {
    let fetched = direct
        .fetch("t", partition, 0, &FetchOptions::default(), CALL)
        .await
        .unwrap();
    fetched
        .records
        .into_iter()
        .filter_map(|r| r.value.map(|v| v.to_vec()))
        .collect()
}

/// Polls until `value` is in `partition` as `direct` reads it.
async fn await_value(direct: &mut KafkaClient, partition: i32, value: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = values(direct, partition).await;
        if seen.iter().any(|v| v == value) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{:?} not in t-{partition}: {seen:?}",
            String::from_utf8_lossy(value)
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Checks for `window` that `value` never shows up in `partition`.
async fn assert_absent_for(
    direct: &mut KafkaClient,
    partition: i32,
    value: &[u8],
    window: Duration,
) {
    let until = Instant::now() + window;
    while Instant::now() < until {
        let seen = values(direct, partition).await;
        assert!(
            !seen.iter().any(|v| v == value),
            "{:?} reached t-{partition} through a cut stream",
            String::from_utf8_lossy(value)
        );
        tokio::time::sleep(POLL).await;
    }
}

/// An acks=1 produce of one value; through a cut it must go unanswered.
async fn produce_unanswered(client: &mut KafkaClient, partition: i32, value: &[u8]) {
    let options = ProduceOptions {
        acks: 1,
        ..ProduceOptions::default()
    };
    let result = client
        .produce(
            "t",
            partition,
            &[ProduceRecord::value(value.to_vec())],
            &options,
            UNANSWERED,
        )
        .await;
    assert!(
        matches!(result, Err(ClientError::Timeout { .. })),
        "produce of {:?} through {} answered: {result:?}",
        String::from_utf8_lossy(value),
        client.addr()
    );
}

/// Two single-replica partitions, t-0 led by b1 and t-1 by b2, so a record's
/// arrival at a broker shows in that broker's own log at once (acks=1, the high
/// watermark is the log end; read from the broker's own port). Produces go
/// through the broker-to-broker proxies, as if one broker sent them to the
/// other. Under one-way 1→2 a request sent to b1 through `b2-b1` arrives though
/// its answer never comes back, while one sent to b2 through `b1-b2` never
/// arrives; under 2→1 the roles of the very same two proxies swap, so the
/// direction, not the proxy, decides. Healing delivers what was held
/// (`OnHeal::Resume`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_partition_one_way_passes_bytes_in_one_direction_only() {
    let run = tempfile::tempdir().unwrap();
    let runtime = start(&run).await;
    let nodes = runtime.nodes();
    let mut etcd = etcd(&runtime).await;
    etcd.put(
        "/epochal/brokers/topics/t",
        r#"{"partitions":{"0":[1],"1":[2]}}"#,
        None,
    )
    .await
    .unwrap();
    let view = common::ready(&runtime, READY).await;
    // The partition node n leads.
    let led_by = |n: NodeId| n.broker_id() - 1;
    let (b1, b2) = (NodeId::new(1), NodeId::new(2));
    for n in [b1, b2] {
        let partition = &view.partitions[&PartitionRef::new("t", led_by(n) as u32)];
        assert_eq!(partition.leader, Some(n), "{view:?}");
    }

    let connect = |address: String| async move {
        KafkaClient::connect(&address, "partition-test", CALL)
            .await
            .unwrap_or_else(|e| panic!("connect {address}: {e}"))
    };
    let link_address = |from: NodeId, to: NodeId| {
        runtime
            .link_address(Link::BrokerToBroker { from, to })
            .unwrap()
            .to_owned()
    };
    let mut direct = std::collections::BTreeMap::new();
    for n in [b1, b2] {
        direct.insert(
            n,
            connect(runtime.direct_address(n).unwrap().to_owned()).await,
        );
    }
    // etcd names the leaders before they learn it: wait until each serves.
    for (n, client) in direct.iter_mut() {
        let deadline = Instant::now() + READY;
        while let Err(e) = client
            .fetch("t", led_by(*n), 0, &FetchOptions::default(), CALL)
            .await
        {
            assert!(
                Instant::now() < deadline,
                "{n} does not serve t-{}: {e}",
                led_by(*n)
            );
            tokio::time::sleep(POLL).await;
        }
    }
    let mut partitions = Partitions::new();

    for (from, to) in [(b1, b2), (b2, b1)] {
        let arrives = format!("one-way {from}->{to}: to {from}, arrives").into_bytes();
        let lost = format!("one-way {from}->{to}: to {to}, held").into_bytes();
        // Connected before the cut (ApiVersions went both ways through each).
        // Bytes `to` → `from` flow: a request dialled from `to`'s side reaches
        // `from`. Bytes `from` → `to` do not: its answer, and any request
        // dialled from `from`'s side to `to`, are held.
        let mut towards_from = connect(link_address(to, from)).await;
        let mut towards_to = connect(link_address(from, to)).await;

        let spec = PartitionSpec::OneWay { from, to };
        let got = partitions
            .apply(runtime.proxies(), &spec, &nodes, None, OnHeal::Resume)
            .await
            .unwrap();
        assert_eq!(got, [(Endpoint::Broker(from), Endpoint::Broker(to))].into());
        assert_eq!(toxics_in_force(&runtime).await, named(&cuts(&got)));

        produce_unanswered(&mut towards_from, led_by(from), &arrives).await;
        await_value(direct.get_mut(&from).unwrap(), led_by(from), &arrives).await;

        produce_unanswered(&mut towards_to, led_by(to), &lost).await;
        assert_absent_for(
            direct.get_mut(&to).unwrap(),
            led_by(to),
            &lost,
            Duration::from_secs(2),
        )
        .await;

        // Healing delivers the held request (the connection it came on was
        // dropped by the client's timeout; its close was held behind it).
        partitions.heal(runtime.proxies()).await.unwrap();
        assert!(toxics_in_force(&runtime).await.is_empty());
        await_value(direct.get_mut(&to).unwrap(), led_by(to), &lost).await;
    }
    common::ready(&runtime, READY).await;
}

/// Whether a fresh connection through `link`'s proxy gets ApiVersions answered.
async fn answers(runtime: &ProcessRuntime, link: Link) -> bool {
    let address = runtime.link_address(link).unwrap();
    match KafkaClient::connect(address, "partition-test", UNANSWERED).await {
        Ok(_) => true,
        Err(ClientError::Timeout { .. }) => false,
        Err(e) => panic!("{}: {e}", link.proxy_name()),
    }
}

/// Bridge 2 on three nodes splits 1 from 3 and keeps both with 2 and etcd;
/// majority-minority with minority 3 keeps etcd with 1 and 2, so only 3's
/// lease lapses. Each shown on the real proxies, then healed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_partition_bridge_and_majority_minority() {
    let run = tempfile::tempdir().unwrap();
    let runtime = start(&run).await;
    let nodes = runtime.nodes();
    let mut etcd = etcd(&runtime).await;
    let mut partitions = Partitions::new();
    let bb = |from, to| Link::BrokerToBroker {
        from: NodeId::new(from),
        to: NodeId::new(to),
    };

    partitions
        .apply(
            runtime.proxies(),
            &PartitionSpec::Bridge(NodeId::new(2)),
            &nodes,
            None,
            OnHeal::Resume,
        )
        .await
        .unwrap();
    for (link, want) in [
        (bb(1, 3), false),
        (bb(3, 1), false),
        (bb(1, 2), true),
        (bb(2, 1), true),
        (bb(2, 3), true),
        (bb(3, 2), true),
    ] {
        assert_eq!(answers(&runtime, link).await, want, "{}", link.proxy_name());
    }
    assert_eq!(registered(&mut etcd).await, NodeId::all(3).collect());
    partitions.heal(runtime.proxies()).await.unwrap();
    assert!(answers(&runtime, bb(1, 3)).await);

    let spec = PartitionSpec::MajorityMinority {
        minority: vec![NodeId::new(3)],
    };
    partitions
        .apply(runtime.proxies(), &spec, &nodes, None, OnHeal::Resume)
        .await
        .unwrap();
    let seen = await_registration(&mut etcd, NodeId::new(3), false).await;
    assert!(
        seen.contains(&NodeId::new(1)) && seen.contains(&NodeId::new(2)),
        "{seen:?}"
    );
    assert!(answers(&runtime, bb(1, 2)).await && answers(&runtime, bb(2, 1)).await);
    assert!(!answers(&runtime, bb(3, 1)).await && !answers(&runtime, bb(2, 3)).await);
    partitions.heal(runtime.proxies()).await.unwrap();
    await_registration(&mut etcd, NodeId::new(3), true).await;
    common::ready(&runtime, READY).await;
}

/// Every toxic on every proxy with its `on_heal`.
async fn toxics_with_on_heal(runtime: &ProcessRuntime) -> Vec<(String, Stream, OnHeal)> {
    let mut out = Vec::new();
    for (name, proxy) in runtime.proxies().proxies().await.unwrap() {
        for toxic in proxy.toxics {
            let ToxicKind::Partition(p) = toxic.toxic_kind().unwrap() else {
                panic!("{name}: not a partition toxic");
            };
            out.push((name.clone(), toxic.stream, p.on_heal));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_partition_named_cuts_heal_one_at_a_time_and_a_shared_stream_waits_for_both() {
    let run = tempfile::tempdir().unwrap();
    let runtime = start(&run).await;
    let nodes = runtime.nodes();
    let mut partitions = Partitions::new();
    let b = NodeId::new;

    // "a": b1 cut from etcd, reset at heal. "b": b1 isolated (which includes
    // b1-etcd again), resumed at heal.
    let a = PartitionSpec::NodeFromEtcd(b(1));
    let got_a = partitions
        .apply(runtime.proxies(), &a, &nodes, Some("a"), OnHeal::Reset)
        .await
        .unwrap();
    let isolate = PartitionSpec::Isolate(b(1));
    let got_b = partitions
        .apply(
            runtime.proxies(),
            &isolate,
            &nodes,
            Some("b"),
            OnHeal::Resume,
        )
        .await
        .unwrap();
    let in_force = toxics_with_on_heal(&runtime).await;
    let etcd_stream = cuts(&got_a);
    // Both directions of b1's one etcd link.
    assert_eq!(etcd_stream.len(), 2);
    for (link, stream) in &cuts(&got_b) {
        // The shared stream keeps the on_heal of the cut that made it.
        let want = if etcd_stream.contains(&(*link, *stream)) {
            OnHeal::Reset
        } else {
            OnHeal::Resume
        };
        assert!(
            in_force.contains(&(link.proxy_name(), *stream, want)),
            "{link:?} {stream:?}: {in_force:?}"
        );
    }

    // A name in force cannot be reused; a name never made cannot be healed.
    let again = partitions
        .apply(runtime.proxies(), &a, &nodes, Some("a"), OnHeal::Resume)
        .await
        .unwrap_err();
    assert!(again.to_string().contains("already in force"), "{again}");
    let none = partitions
        .heal_cut(runtime.proxies(), "c")
        .await
        .unwrap_err();
    assert!(none.to_string().contains("no cut named \"c\""), "{none}");

    // Healing "b" frees every stream but b1-etcd, which "a" still holds.
    let freed = partitions.heal_cut(runtime.proxies(), "b").await.unwrap();
    assert_eq!(freed.len(), cuts(&got_b).len() - etcd_stream.len());
    assert_eq!(
        toxics_with_on_heal(&runtime).await.len(),
        etcd_stream.len(),
        "only b1-etcd is left"
    );
    let left: BTreeSet<(Link, Stream)> = partitions.cut().copied().collect();
    assert_eq!(left, etcd_stream);

    let freed = partitions.heal_cut(runtime.proxies(), "a").await.unwrap();
    assert_eq!(freed.into_iter().collect::<BTreeSet<_>>(), etcd_stream);
    assert!(partitions.is_healed());
    assert!(toxics_with_on_heal(&runtime).await.is_empty());
}
