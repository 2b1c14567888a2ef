use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::protocol::StrBytes;

use super::*;

fn binding(name: &str, pattern_type: i8, principal: &str, operation: i8) -> AclBinding {
    AclBinding {
        resource_type: 2,
        resource_name: name.into(),
        pattern_type,
        principal: principal.into(),
        host: "*".into(),
        operation,
        permission_type: 3,
    }
}

fn filter(name: Option<&str>, pattern_type: i8) -> AclFilter {
    AclFilter {
        resource_type: 2,
        resource_name: name.map(str::to_owned),
        pattern_type,
        principal: None,
        host: None,
        operation: ANY,
        permission_type: ANY,
    }
}

#[test]
fn filters_match_as_kafkas_acl_binding_filter() {
    let literal = binding("orders", PATTERN_LITERAL, "User:a", 3);
    let wildcard = binding("*", PATTERN_LITERAL, "User:a", 3);
    let prefixed = binding("ord", PATTERN_PREFIXED, "User:b", 4);
    let other = binding("payments", PATTERN_LITERAL, "User:a", 3);
    let all = [&literal, &wildcard, &prefixed, &other];
    let hits = |f: &AclFilter| -> Vec<&str> {
        all.iter()
            .filter(|b| f.matches(b))
            .map(|b| b.resource_name.as_str())
            .collect()
    };
    // MATCH: the literal, the wildcard and every prefix of the name.
    assert_eq!(
        hits(&filter(Some("orders"), PATTERN_MATCH)),
        ["orders", "*", "ord"]
    );
    // ANY: that exact name, whatever its pattern type.
    assert_eq!(hits(&filter(Some("ord"), ANY)), ["ord"]);
    assert_eq!(hits(&filter(Some("orders"), PATTERN_LITERAL)), ["orders"]);
    assert_eq!(hits(&filter(None, PATTERN_PREFIXED)), ["ord"]);
    assert_eq!(hits(&filter(None, ANY)).len(), 4);
    let mut writes = filter(None, ANY);
    writes.operation = 4;
    assert_eq!(hits(&writes), ["ord"]);
    let mut by_principal = filter(None, ANY);
    by_principal.principal = Some("User:a".into());
    assert_eq!(hits(&by_principal), ["orders", "*", "payments"]);
    let mut groups = filter(None, ANY);
    groups.resource_type = 3;
    assert!(hits(&groups).is_empty());
    let mut unknown = filter(None, ANY);
    unknown.operation = 0;
    let refusal = unknown.check().unwrap_err();
    assert_eq!(refusal.code(), ResponseError::InvalidRequest);
    assert_eq!(
        refusal.to_string(),
        format!("invalid ACL filter: {unknown:?}")
    );
    assert!(filter(None, PATTERN_MATCH).check().is_ok());
}

fn creation(resource_type: i8, name: &str, pattern_type: i8, principal: &str) -> AclCreation {
    AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.into()))
        .with_resource_pattern_type(pattern_type)
        .with_principal(StrBytes::from_string(principal.into()))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(3)
        .with_permission_type(3)
}

#[test]
fn creations_must_name_a_concrete_binding() {
    let ok = binding_of(&creation(2, "t", PATTERN_PREFIXED, "User:x"), 1).unwrap();
    assert_eq!(ok.pattern_type, PATTERN_PREFIXED);
    // v0 knows literal patterns only.
    let v0 = binding_of(&creation(2, "t", PATTERN_PREFIXED, "User:x"), 0).unwrap();
    assert_eq!(v0.pattern_type, PATTERN_LITERAL);
    // Each refusal's message is what the client is answered.
    let not_concrete = "Invalid ACL creation: an unknown or ANY value";
    for (c, why, message) in [
        (
            creation(1, "t", PATTERN_LITERAL, "User:x"),
            "ANY resource",
            not_concrete,
        ),
        (
            creation(2, "t", PATTERN_MATCH, "User:x"),
            "MATCH pattern",
            not_concrete,
        ),
        (
            creation(2, "t", PATTERN_LITERAL, "x"),
            "no principal type",
            "Invalid principal \"x\": expected Type:name",
        ),
        (
            creation(2, "", PATTERN_LITERAL, "User:x"),
            "no name",
            "Invalid ACL resource name: empty",
        ),
        (
            creation(4, "c", PATTERN_LITERAL, "User:x"),
            "a cluster not kafka-cluster",
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
    ] {
        let refusal = binding_of(&c, 1).expect_err(why);
        assert_eq!(refusal.to_string(), message, "{why}");
        assert_eq!(refusal.code(), ResponseError::InvalidRequest, "{why}");
    }
    assert!(binding_of(&creation(4, "kafka-cluster", PATTERN_LITERAL, "User:x"), 1).is_ok());
}
