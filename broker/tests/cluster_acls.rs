//! ACLs (KIP-140) on a two-broker cluster: bindings created through one
//! broker are described and deleted through the other (they live in etcd),
//! survive both brokers' restarts, and filters match as Kafka's do. (A
//! filter's strings are null to match anything: kafka-protocol's defaults
//! are empty strings, which match only empty fields.)

use crate::common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka_client::KafkaClient;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: i8 = 2;
const ANY: i8 = 1;
const MATCH: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const READ: i8 = 3;
const WRITE: i8 = 4;
const ALLOW: i8 = 3;
const INVALID_REQUEST: i16 = 42;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn creation(name: &str, pattern: i8, principal: &str, operation: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(TOPIC)
        .with_resource_name(text(name))
        .with_resource_pattern_type(pattern)
        .with_principal(text(principal))
        .with_host(text("*"))
        .with_operation(operation)
        .with_permission_type(ALLOW)
}

fn describe(c: &mut KafkaClient, name: Option<&str>, pattern: i8) -> DescribeAclsResponse {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(TOPIC)
        .with_resource_name_filter(name.map(text))
        .with_pattern_type_filter(pattern)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY);
    c.send(&req, 2).unwrap()
}

/// (resource name, pattern type, principal) of every binding described.
fn bindings(resp: &DescribeAclsResponse) -> Vec<(String, i8, String)> {
    let mut all: Vec<(String, i8, String)> = resp
        .resources
        .iter()
        .flat_map(|r| {
            r.acls.iter().map(|a| {
                (
                    r.resource_name.to_string(),
                    r.pattern_type,
                    a.principal.to_string(),
                )
            })
        })
        .collect();
    all.sort();
    all
}

#[test]
fn cluster_acls_live_in_etcd_and_match_as_kafkas_filters() {
    let mut cluster = Cluster::start(2, &["--lease-ttl-s", "3"]);
    let mut one = cluster.client(1);
    let created = one
        .send(
            &CreateAclsRequest::default().with_creations(vec![
                creation("orders", LITERAL, "User:a", READ),
                creation("ord", PREFIXED, "User:b", WRITE),
                creation("orders", LITERAL, "nobody", READ),
            ]),
            2,
        )
        .unwrap();
    let codes: Vec<i16> = created.results.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        [0, 0, INVALID_REQUEST],
        "a principal must be Type:name"
    );

    let mut two = cluster.client(2);
    let matched = describe(&mut two, Some("orders"), MATCH);
    assert_eq!(matched.error_code, 0);
    assert_eq!(
        bindings(&matched),
        [
            ("ord".to_owned(), PREFIXED, "User:b".to_owned()),
            ("orders".to_owned(), LITERAL, "User:a".to_owned()),
        ]
    );
    assert_eq!(
        bindings(&describe(&mut two, Some("orders"), LITERAL)).len(),
        1
    );
    // v0 knows literal bindings only.
    let v0 = two
        .send(
            &DescribeAclsRequest::default()
                .with_resource_type_filter(ANY)
                .with_resource_name_filter(None)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(ANY)
                .with_permission_type(ANY),
            0,
        )
        .unwrap();
    assert_eq!(
        bindings(&v0),
        [("orders".to_owned(), LITERAL, "User:a".to_owned())]
    );
    assert_eq!(describe(&mut two, None, 0).error_code, INVALID_REQUEST);

    for id in [1, 2] {
        cluster.restart(id);
    }
    let mut two = common::await_some_or(
        "broker 2 to answer again",
        Duration::from_secs(30),
        || KafkaClient::connect(&cluster.broker(2).addr).ok(),
        || cluster.logs(),
    );
    let deleted = two
        .send(
            &DeleteAclsRequest::default().with_filters(vec![
                DeleteAclsFilter::default()
                    .with_resource_type_filter(TOPIC)
                    .with_resource_name_filter(None)
                    .with_pattern_type_filter(PREFIXED)
                    .with_principal_filter(None)
                    .with_host_filter(None)
                    .with_operation(ANY)
                    .with_permission_type(ANY),
            ]),
            2,
        )
        .unwrap();
    let gone: Vec<String> = deleted.filter_results[0]
        .matching_acls
        .iter()
        .map(|a| a.resource_name.to_string())
        .collect();
    assert_eq!(gone, ["ord"]);
    let mut one = cluster.client(1);
    assert_eq!(
        bindings(&describe(&mut one, None, ANY)),
        [("orders".to_owned(), LITERAL, "User:a".to_owned())]
    );
}
