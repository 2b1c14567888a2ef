//! ACL bindings (KIP-140's CreateAcls, DescribeAcls, DeleteAcls), kept in
//! etcd so every broker answers the same and they survive restarts, as
//! ZooKeeper-era Kafka kept them under `/kafka-acl` and
//! `/kafka-acl-extended`. One key a binding, under [`acls_prefix`]: its name
//! is the binding's JSON in hex, so creating a binding twice writes one key
//! (Kafka answers a repeated creation with success too) and deleting one is
//! one key's deletion. Nothing here reads them to authorize anything.

use etcd_client::{DeleteOptions, GetOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};

use super::{MetadataStore, ROOT, StoreError, decode, encode};

/// One ACL binding as Kafka's protocol carries it: the resource pattern
/// (type, name, pattern type) and the entry (principal, host, operation,
/// permission type), each enum by its protocol code.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// Every ACL binding's key starts so.
pub fn acls_prefix() -> String {
    format!("{ROOT}/acls/")
}

/// The binding's key: the prefix and its JSON, hex-encoded.
pub fn acl_key(binding: &AclBinding) -> String {
    let json = encode(binding);
    let mut key = acls_prefix();
    key.reserve(json.len() * 2);
    for byte in json {
        key.push_str(&format!("{byte:02x}"));
    }
    key
}

impl MetadataStore {
    /// Writes these bindings (a binding already there stays as it is), in
    /// one transaction.
    pub async fn create_acls(&self, bindings: &[AclBinding]) -> Result<(), StoreError> {
        if bindings.is_empty() {
            return Ok(());
        }
        let puts = bindings
            .iter()
            .map(|b| TxnOp::put(acl_key(b), encode(b), None))
            .collect::<Vec<_>>();
        self.client.clone().txn(Txn::new().and_then(puts)).await?;
        Ok(())
    }

    /// Every stored binding, in key order.
    pub async fn acls(&self) -> Result<Vec<AclBinding>, StoreError> {
        let resp = self
            .client
            .clone()
            .get(acls_prefix(), Some(GetOptions::new().with_prefix()))
            .await?;
        resp.kvs()
            .iter()
            .map(|kv| decode(&String::from_utf8_lossy(kv.key()), kv.value()))
            .collect()
    }

    /// Deletes these bindings; returns those that were there (another
    /// deletion may have taken the rest first).
    pub async fn delete_acls(
        &self,
        bindings: &[AclBinding],
    ) -> Result<Vec<AclBinding>, StoreError> {
        let mut deleted = Vec::new();
        for binding in bindings {
            let resp = self
                .client
                .clone()
                .delete(acl_key(binding), None::<DeleteOptions>)
                .await?;
            if resp.deleted() > 0 {
                deleted.push(binding.clone());
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bindings_key_is_its_json_in_hex_under_the_prefix() {
        let binding = AclBinding {
            resource_type: 2,
            resource_name: "a/b".into(),
            pattern_type: 3,
            principal: "User:x".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        };
        let key = acl_key(&binding);
        let hex = key.strip_prefix("/epochal/acls/").unwrap();
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
        let json: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(
            serde_json::from_slice::<AclBinding>(&json).unwrap(),
            binding
        );
        assert_eq!(
            acl_key(&binding.clone()),
            key,
            "the same binding, the same key"
        );
    }
}
