//! CreateAcls, DescribeAcls and DeleteAcls (KIP-140, API keys 30, 29, 31):
//! ACL bindings kept in etcd (`controller/metadata_store/acls.rs`) and
//! matched by Kafka's filter rules (`AclBindingFilter`, with KIP-290's
//! prefixed patterns and MATCH filters from v1). This broker authorizes
//! nothing: it has plaintext listeners and no principals, so the bindings
//! are only stored and answered, never enforced.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::controller::metadata_store::MetadataStore;
use crate::controller::metadata_store::acls::AclBinding;

// Kafka's enum codes (`ResourceType`, `PatternType`, `AclOperation`,
// `AclPermissionType`): 0 is UNKNOWN and 1 ANY in each.
const ANY: i8 = 1;
const RESOURCE_CLUSTER: i8 = 4;
const RESOURCE_MAX: i8 = 7; // USER (KIP-373)
const PATTERN_MATCH: i8 = 2;
const PATTERN_LITERAL: i8 = 3;
const PATTERN_PREFIXED: i8 = 4;
const OPERATION_MAX: i8 = 14; // DESCRIBE_TOKENS
const PERMISSION_MAX: i8 = 3; // ALLOW
/// A literal pattern with this name matches every resource of its type.
const WILDCARD: &str = "*";
/// The one name a CLUSTER resource may have (Kafka's `CLUSTER_NAME`).
const CLUSTER_NAME: &str = "kafka-cluster";

/// Why Kafka refuses an ACL filter or creation: each is INVALID_REQUEST,
/// and its message (this Display) is the answer's error_message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclRefusal {
    /// A filter with an UNKNOWN or out-of-range value.
    #[error("invalid ACL filter: {0:?}")]
    Filter(AclFilter),
    /// A creation with an UNKNOWN, ANY or MATCH value.
    #[error("Invalid ACL creation: an unknown or ANY value")]
    NotConcrete,
    /// A principal not of the form `Type:name`.
    #[error("Invalid principal {0:?}: expected Type:name")]
    Principal(String),
    #[error("Invalid ACL resource name: empty")]
    EmptyName,
    /// A CLUSTER resource named other than `kafka-cluster`.
    #[error("The only valid name for the CLUSTER resource is {}", CLUSTER_NAME)]
    ClusterName,
}

impl AclRefusal {
    /// The error code every refusal is answered with.
    pub fn code(&self) -> ResponseError {
        ResponseError::InvalidRequest
    }
}

/// A DescribeAcls or DeleteAcls filter (Kafka's `AclBindingFilter`): `None`
/// and ANY match everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission_type: i8,
}

impl AclFilter {
    /// A filter with an UNKNOWN (or out of range) value matches nothing
    /// knowable: Kafka refuses it INVALID_REQUEST.
    fn check(&self) -> Result<(), AclRefusal> {
        let known = (1..=RESOURCE_MAX).contains(&self.resource_type)
            && (1..=PATTERN_PREFIXED).contains(&self.pattern_type)
            && (1..=OPERATION_MAX).contains(&self.operation)
            && (1..=PERMISSION_MAX).contains(&self.permission_type);
        if known {
            Ok(())
        } else {
            Err(AclRefusal::Filter(self.clone()))
        }
    }

    /// Kafka's `AclBindingFilter.matches`: the resource pattern filter
    /// (`ResourcePatternFilter.matches`), then the entry filter.
    pub fn matches(&self, b: &AclBinding) -> bool {
        let exact = |want: i8, have: i8| want == ANY || want == have;
        let text = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        exact(self.resource_type, b.resource_type)
            && (matches!(self.pattern_type, ANY | PATTERN_MATCH)
                || self.pattern_type == b.pattern_type)
            && self.name_matches(b)
            && text(&self.principal, &b.principal)
            && text(&self.host, &b.host)
            && exact(self.operation, b.operation)
            && exact(self.permission_type, b.permission_type)
    }

    /// By name: ANY or a concrete pattern type compares names; MATCH
    /// (KIP-290) also takes the literal wildcard and any prefix of the name.
    fn name_matches(&self, b: &AclBinding) -> bool {
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type != PATTERN_MATCH {
            return *name == b.resource_name;
        }
        match b.pattern_type {
            PATTERN_LITERAL => *name == b.resource_name || b.resource_name == WILDCARD,
            PATTERN_PREFIXED => name.starts_with(&b.resource_name),
            _ => false,
        }
    }
}

/// A creation as a binding, or why Kafka refuses it (INVALID_REQUEST):
/// every enum concrete (no UNKNOWN, ANY or MATCH), a principal of the form
/// `Type:name`, a resource name, and `kafka-cluster` as a cluster's name.
pub fn binding_of(c: &AclCreation, version: i16) -> Result<AclBinding, AclRefusal> {
    // v0 predates KIP-290: every binding is literal.
    let pattern_type = if version == 0 {
        PATTERN_LITERAL
    } else {
        c.resource_pattern_type
    };
    let binding = AclBinding {
        resource_type: c.resource_type,
        resource_name: c.resource_name.to_string(),
        pattern_type,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: c.operation,
        permission_type: c.permission_type,
    };
    let concrete = (2..=RESOURCE_MAX).contains(&binding.resource_type)
        && (PATTERN_LITERAL..=PATTERN_PREFIXED).contains(&binding.pattern_type)
        && (2..=OPERATION_MAX).contains(&binding.operation)
        && (2..=PERMISSION_MAX).contains(&binding.permission_type);
    if !concrete {
        return Err(AclRefusal::NotConcrete);
    }
    if !binding
        .principal
        .split_once(':')
        .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty())
    {
        return Err(AclRefusal::Principal(binding.principal));
    }
    if binding.resource_name.is_empty() {
        return Err(AclRefusal::EmptyName);
    }
    if binding.resource_type == RESOURCE_CLUSTER && binding.resource_name != CLUSTER_NAME {
        return Err(AclRefusal::ClusterName);
    }
    Ok(binding)
}

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

fn owned(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

pub async fn create(
    store: &MetadataStore,
    req: CreateAclsRequest,
    version: i16,
) -> CreateAclsResponse {
    let checked: Vec<Result<AclBinding, AclRefusal>> = req
        .creations
        .iter()
        .map(|c| binding_of(c, version))
        .collect();
    let valid: Vec<AclBinding> = checked.iter().filter_map(|c| c.clone().ok()).collect();
    let stored = store.create_acls(&valid).await;
    let results = checked
        .into_iter()
        .map(|c| match (c, &stored) {
            (Err(why), _) => AclCreationResult::default()
                .with_error_code(why.code().code())
                .with_error_message(Some(text(why.to_string()))),
            (Ok(_), Ok(())) => AclCreationResult::default(),
            (Ok(_), Err(e)) => AclCreationResult::default()
                .with_error_code(ResponseError::UnknownServerError.code())
                .with_error_message(Some(text(e.to_string()))),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub async fn describe(
    store: &MetadataStore,
    req: DescribeAclsRequest,
    version: i16,
) -> DescribeAclsResponse {
    let filter = AclFilter {
        resource_type: req.resource_type_filter,
        resource_name: owned(&req.resource_name_filter),
        // v0 predates KIP-290: literal bindings only.
        pattern_type: if version == 0 {
            PATTERN_LITERAL
        } else {
            req.pattern_type_filter
        },
        principal: owned(&req.principal_filter),
        host: owned(&req.host_filter),
        operation: req.operation,
        permission_type: req.permission_type,
    };
    let refuse = |code: ResponseError, why: String| {
        DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(text(why)))
    };
    if let Err(why) = filter.check() {
        return refuse(why.code(), why.to_string());
    }
    let all = match store.acls().await {
        Ok(all) => all,
        Err(e) => return refuse(ResponseError::UnknownServerError, e.to_string()),
    };
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for b in all.into_iter().filter(|b| filter.matches(b)) {
        by_resource
            .entry((b.resource_type, b.resource_name, b.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(text(b.principal))
                    .with_host(text(b.host))
                    .with_operation(b.operation)
                    .with_permission_type(b.permission_type),
            );
    }
    let resources = by_resource
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(text(name))
                .with_pattern_type(pattern_type)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

pub async fn delete(
    store: &MetadataStore,
    req: DeleteAclsRequest,
    version: i16,
) -> DeleteAclsResponse {
    let all = store.acls().await;
    let mut results = Vec::with_capacity(req.filters.len());
    for f in &req.filters {
        let filter = filter_of(f, version);
        let refused = |code: ResponseError, why: String| {
            DeleteAclsFilterResult::default()
                .with_error_code(code.code())
                .with_error_message(Some(text(why)))
        };
        let result = match (&all, filter.check()) {
            (_, Err(why)) => refused(why.code(), why.to_string()),
            (Err(e), _) => refused(ResponseError::UnknownServerError, e.to_string()),
            (Ok(all), Ok(())) => {
                let matching: Vec<AclBinding> =
                    all.iter().filter(|b| filter.matches(b)).cloned().collect();
                match store.delete_acls(&matching).await {
                    Ok(deleted) => DeleteAclsFilterResult::default()
                        .with_matching_acls(deleted.into_iter().map(matching_acl).collect()),
                    Err(e) => refused(ResponseError::UnknownServerError, e.to_string()),
                }
            }
        };
        results.push(result);
    }
    DeleteAclsResponse::default().with_filter_results(results)
}

fn filter_of(f: &DeleteAclsFilter, version: i16) -> AclFilter {
    AclFilter {
        resource_type: f.resource_type_filter,
        resource_name: owned(&f.resource_name_filter),
        pattern_type: if version == 0 {
            PATTERN_LITERAL
        } else {
            f.pattern_type_filter
        },
        principal: owned(&f.principal_filter),
        host: owned(&f.host_filter),
        operation: f.operation,
        permission_type: f.permission_type,
    }
}

fn matching_acl(b: AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type)
        .with_resource_name(text(b.resource_name))
        .with_pattern_type(b.pattern_type)
        .with_principal(text(b.principal))
        .with_host(text(b.host))
        .with_operation(b.operation)
        .with_permission_type(b.permission_type)
}

#[cfg(test)]
#[path = "acls_tests.rs"]
mod tests;
