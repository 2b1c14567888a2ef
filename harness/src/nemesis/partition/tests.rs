use super::*;

use Endpoint::Etcd;
use Stream::{Downstream as Down, Upstream as Up};

fn n(id: u32) -> NodeId {
    NodeId::new(id)
}

fn nodes(ids: &[u32]) -> Vec<NodeId> {
    ids.iter().copied().map(n).collect()
}

fn bb(from: u32, to: u32) -> Link {
    Link::BrokerToBroker {
        from: n(from),
        to: n(to),
    }
}

#[allow(non_snake_case)]
fn B(id: u32) -> Endpoint {
    Endpoint::Broker(n(id))
}

fn pairs(list: &[(Endpoint, Endpoint)]) -> BTreeSet<(Endpoint, Endpoint)> {
    list.iter().copied().collect()
}

fn streams(list: &[(Link, Stream)]) -> BTreeSet<(Link, Stream)> {
    list.iter().copied().collect()
}

const THREE: &[NodeId] = &[NodeId::new(1), NodeId::new(2), NodeId::new(3)];
const FIVE: &[NodeId] = &[
    NodeId::new(1),
    NodeId::new(2),
    NodeId::new(3),
    NodeId::new(4),
    NodeId::new(5),
];

#[test]
fn isolate_three() {
    let spec = PartitionSpec::Isolate(n(2));
    let b = blocked(&spec, THREE);
    assert_eq!(
        b,
        pairs(&[
            (B(1), B(2)),
            (B(2), B(1)),
            (B(2), B(3)),
            (B(2), Etcd),
            (B(3), B(2)),
            (Etcd, B(2)),
        ])
    );
    assert_eq!(
        cuts(&b),
        streams(&[
            (bb(1, 2), Up),
            (bb(1, 2), Down),
            (bb(2, 1), Up),
            (bb(2, 1), Down),
            (bb(2, 3), Up),
            (bb(2, 3), Down),
            (bb(3, 2), Up),
            (bb(3, 2), Down),
            (Link::BrokerToService(n(2), ServiceKind::Etcd), Up),
            (Link::BrokerToService(n(2), ServiceKind::Etcd), Down),
        ])
    );
}

#[test]
fn isolate_five_cuts_both_streams_of_every_link_of_the_node() {
    let b = blocked(&PartitionSpec::Isolate(n(5)), FIVE);
    let mut want = BTreeSet::new();
    for other in 1..=4 {
        want.insert((B(5), B(other)));
        want.insert((B(other), B(5)));
    }
    want.insert((B(5), Etcd));
    want.insert((Etcd, B(5)));
    assert_eq!(b, want);
    let mut want = BTreeSet::new();
    for other in 1..=4 {
        for stream in [Up, Down] {
            want.insert((bb(5, other), stream));
            want.insert((bb(other, 5), stream));
        }
    }
    want.insert((Link::BrokerToService(n(5), ServiceKind::Etcd), Up));
    want.insert((Link::BrokerToService(n(5), ServiceKind::Etcd), Down));
    assert_eq!(cuts(&b), want);
}

#[test]
fn one_way_three_cuts_one_stream_of_each_proxy_between_them() {
    let b = blocked(
        &PartitionSpec::OneWay {
            from: n(1),
            to: n(2),
        },
        THREE,
    );
    assert_eq!(b, pairs(&[(B(1), B(2))]));
    // b1's requests to b2, and b1's answers to b2's requests.
    assert_eq!(cuts(&b), streams(&[(bb(1, 2), Up), (bb(2, 1), Down)]));
    let b = blocked(
        &PartitionSpec::OneWay {
            from: n(2),
            to: n(1),
        },
        THREE,
    );
    assert_eq!(cuts(&b), streams(&[(bb(1, 2), Down), (bb(2, 1), Up)]));
}

#[test]
fn one_way_five() {
    let b = blocked(
        &PartitionSpec::OneWay {
            from: n(5),
            to: n(3),
        },
        FIVE,
    );
    assert_eq!(b, pairs(&[(B(5), B(3))]));
    assert_eq!(cuts(&b), streams(&[(bb(5, 3), Up), (bb(3, 5), Down)]));
}

#[test]
fn majority_minority_three_keeps_etcd_with_the_majority() {
    let spec = PartitionSpec::MajorityMinority {
        minority: nodes(&[3]),
    };
    let b = blocked(&spec, THREE);
    assert_eq!(
        b,
        pairs(&[
            (B(1), B(3)),
            (B(2), B(3)),
            (B(3), B(1)),
            (B(3), B(2)),
            (B(3), Etcd),
            (Etcd, B(3)),
        ])
    );
    assert_eq!(
        cuts(&b),
        streams(&[
            (bb(1, 3), Up),
            (bb(1, 3), Down),
            (bb(2, 3), Up),
            (bb(2, 3), Down),
            (bb(3, 1), Up),
            (bb(3, 1), Down),
            (bb(3, 2), Up),
            (bb(3, 2), Down),
            (Link::BrokerToService(n(3), ServiceKind::Etcd), Up),
            (Link::BrokerToService(n(3), ServiceKind::Etcd), Down),
        ])
    );
}

#[test]
fn majority_minority_five_leaves_the_minority_connected_inside() {
    let spec = PartitionSpec::MajorityMinority {
        minority: nodes(&[4, 2]),
    };
    let b = blocked(&spec, FIVE);
    let mut want = BTreeSet::new();
    for m in [2, 4] {
        for x in [B(1), B(3), B(5), Etcd] {
            want.insert((B(m), x));
            want.insert((x, B(m)));
        }
    }
    assert_eq!(b, want);
    let mut want = BTreeSet::new();
    for m in [2, 4] {
        for x in [1, 3, 5] {
            for stream in [Up, Down] {
                want.insert((bb(m, x), stream));
                want.insert((bb(x, m), stream));
            }
        }
        want.insert((Link::BrokerToService(n(m), ServiceKind::Etcd), Up));
        want.insert((Link::BrokerToService(n(m), ServiceKind::Etcd), Down));
    }
    assert_eq!(cuts(&b), want);
    assert!(!b.contains(&(B(2), B(4))) && !b.contains(&(B(4), B(2))));
}

#[test]
fn bridge_three_splits_the_other_two() {
    let b = blocked(&PartitionSpec::Bridge(n(2)), THREE);
    assert_eq!(b, pairs(&[(B(1), B(3)), (B(3), B(1))]));
    assert_eq!(
        cuts(&b),
        streams(&[
            (bb(1, 3), Up),
            (bb(1, 3), Down),
            (bb(3, 1), Up),
            (bb(3, 1), Down),
        ])
    );
}

#[test]
fn bridge_five_first_half_is_the_first_ceil_of_the_sorted_others() {
    // Others 1, 2, 4, 5 (unsorted input): halves {1, 2} and {4, 5}.
    let b = blocked(&PartitionSpec::Bridge(n(3)), &nodes(&[5, 3, 1, 4, 2]));
    let mut want = BTreeSet::new();
    for x in [1, 2] {
        for y in [4, 5] {
            want.insert((B(x), B(y)));
            want.insert((B(y), B(x)));
        }
    }
    assert_eq!(b, want);
    let mut want = BTreeSet::new();
    for x in [1, 2] {
        for y in [4, 5] {
            for stream in [Up, Down] {
                want.insert((bb(x, y), stream));
                want.insert((bb(y, x), stream));
            }
        }
    }
    assert_eq!(cuts(&b), want);
    // Four nodes: the bridge 4, others 1, 2, 3: halves {1, 2} and {3}.
    let b = blocked(&PartitionSpec::Bridge(n(4)), &nodes(&[1, 2, 3, 4]));
    assert_eq!(
        b,
        pairs(&[(B(1), B(3)), (B(2), B(3)), (B(3), B(1)), (B(3), B(2))])
    );
}

#[test]
fn node_from_etcd_three_and_five() {
    for nodes in [THREE, FIVE] {
        let b = blocked(&PartitionSpec::NodeFromEtcd(n(1)), nodes);
        assert_eq!(b, pairs(&[(B(1), Etcd), (Etcd, B(1))]));
        assert_eq!(
            cuts(&b),
            streams(&[
                (Link::BrokerToService(n(1), ServiceKind::Etcd), Up),
                (Link::BrokerToService(n(1), ServiceKind::Etcd), Down)
            ])
        );
    }
}

#[test]
fn node_from_clients_cuts_its_client_link_both_ways_and_nothing_else() {
    for nodes in [THREE, FIVE] {
        let b = blocked(&PartitionSpec::NodeFromClients(n(2)), nodes);
        assert_eq!(
            b,
            pairs(&[(B(2), Endpoint::Clients), (Endpoint::Clients, B(2))])
        );
        assert_eq!(
            cuts(&b),
            streams(&[
                (Link::ClientToBroker(n(2)), Up),
                (Link::ClientToBroker(n(2)), Down)
            ])
        );
    }
}

#[test]
fn only_node_from_clients_touches_client_links() {
    for nodes in [THREE, FIVE] {
        for &n in nodes {
            for spec in [
                PartitionSpec::Isolate(n),
                PartitionSpec::Bridge(n),
                PartitionSpec::NodeFromEtcd(n),
                PartitionSpec::MajorityMinority { minority: vec![n] },
            ] {
                let c = cuts(&blocked(&spec, nodes));
                assert!(
                    c.iter().all(|(l, _)| !matches!(l, Link::ClientToBroker(_))),
                    "{spec:?}: {c:?}"
                );
            }
        }
    }
}

#[test]
fn validate_names_what_is_wrong() {
    let err = |spec: PartitionSpec, nodes: &[NodeId]| spec.validate(nodes).unwrap_err();
    assert!(matches!(
        err(PartitionSpec::Isolate(n(4)), THREE),
        PartitionError::UnknownNode { node, .. } if node == n(4)
    ));
    assert_eq!(
        err(PartitionSpec::Isolate(n(4)), THREE).to_string(),
        "partition names b4, which is not in the cluster (b1, b2, b3)"
    );
    assert!(matches!(
        err(PartitionSpec::OneWay { from: n(1), to: n(7) }, THREE),
        PartitionError::UnknownNode { node, .. } if node == n(7)
    ));
    assert!(matches!(
        err(PartitionSpec::OneWay { from: n(2), to: n(2) }, THREE),
        PartitionError::OneWayToSelf(node) if node == n(2)
    ));
    assert!(matches!(
        err(
            PartitionSpec::MajorityMinority {
                minority: nodes(&[])
            },
            THREE
        ),
        PartitionError::EmptyMinority
    ));
    assert!(matches!(
        err(
            PartitionSpec::MajorityMinority {
                minority: nodes(&[1, 2])
            },
            THREE
        ),
        PartitionError::MinorityNotSmaller { nodes: 3, .. }
    ));
    // Two of four is half, not a minority.
    assert!(matches!(
        err(
            PartitionSpec::MajorityMinority {
                minority: nodes(&[1, 2])
            },
            &nodes(&[1, 2, 3, 4])
        ),
        PartitionError::MinorityNotSmaller { nodes: 4, .. }
    ));
    assert!(matches!(
        err(
            PartitionSpec::MajorityMinority {
                minority: nodes(&[1, 6])
            },
            FIVE
        ),
        PartitionError::UnknownNode { node, .. } if node == n(6)
    ));
    // A repeated id counts once.
    PartitionSpec::MajorityMinority {
        minority: nodes(&[1, 1]),
    }
    .validate(THREE)
    .unwrap();
    PartitionSpec::MajorityMinority {
        minority: nodes(&[1, 2]),
    }
    .validate(FIVE)
    .unwrap();
    PartitionSpec::Bridge(n(1)).validate(THREE).unwrap();
}

#[test]
fn endpoints_serialize_as_schedules_name_them() {
    let b = blocked(&PartitionSpec::NodeFromEtcd(n(2)), THREE);
    assert_eq!(
        serde_json::to_string(&b).unwrap(),
        r#"[["b2","etcd"],["etcd","b2"]]"#
    );
}

/// A broker cut from the database loses its `b<i>-postgres` link both ways
/// (the database never dials, so that proxy's two streams) and nothing else.
#[test]
fn node_from_database_cuts_its_database_link_both_ways_and_nothing_else() {
    let b = blocked(&PartitionSpec::NodeFromDatabase(n(2)), THREE);
    assert_eq!(
        serde_json::to_string(&b).unwrap(),
        r#"[["b2","postgres"],["postgres","b2"]]"#
    );
    let database = Link::BrokerToService(n(2), ServiceKind::Postgres);
    assert_eq!(cuts(&b), streams(&[(database, Up), (database, Down)]));
    for other in [
        PartitionSpec::Isolate(n(2)),
        PartitionSpec::NodeFromEtcd(n(2)),
        PartitionSpec::NodeFromClients(n(2)),
    ] {
        let touched = cuts(&blocked(&other, THREE));
        assert!(!touched.iter().any(|(l, _)| *l == database), "{other:?}");
    }
}
