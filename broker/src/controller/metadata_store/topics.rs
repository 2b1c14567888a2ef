//! The store's writes of topics' own keys: a topic created with its
//! configs, read back with them, its configs or assignment replaced by
//! compare-and-swap, and its deletion marked and finished.

use etcd_client::{Compare, CompareOp, DeleteOptions, Txn, TxnOp, TxnOpResponse};

use super::{
    MetadataStore, Overrides, StoreError, TopicAssignment, TopicConfigRecord, Versioned,
    controller_key, decode, encode, topic_config_key, topic_deletion_key, topic_key, versioned,
};

/// A topic as etcd holds it: its assignment and config overrides.
#[derive(Clone, Debug)]
pub struct StoredTopic {
    pub assignment: Versioned<TopicAssignment>,
    pub configs: Option<Versioned<TopicConfigRecord>>,
}

impl MetadataStore {
    /// Create a topic's assignment if the topic does not exist. false if it did.
    pub async fn create_topic(
        &self,
        topic: &str,
        assignment: &TopicAssignment,
    ) -> Result<bool, StoreError> {
        self.create_topic_with(topic, assignment, &Overrides::new())
            .await
    }

    /// [`create_topic`](Self::create_topic) with its config overrides,
    /// written in the same transaction (none written when empty).
    pub async fn create_topic_with(
        &self,
        topic: &str,
        assignment: &TopicAssignment,
        configs: &Overrides,
    ) -> Result<bool, StoreError> {
        let key = topic_key(topic);
        // Every creation gets a new id, so a topic deleted and made again
        // is told apart from the one before (KIP-516).
        let assignment = TopicAssignment {
            topic_id: Some(new_topic_id()?),
            ..assignment.clone()
        };
        let mut puts = vec![TxnOp::put(key.clone(), encode(&assignment), None)];
        if !configs.is_empty() {
            let record = TopicConfigRecord::new(configs.clone());
            puts.push(TxnOp::put(topic_config_key(topic), encode(&record), None));
        }
        let txn = Txn::new()
            .when(vec![Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then(puts);
        Ok(self.client.clone().txn(txn).await?.succeeded())
    }

    /// A topic's assignment and config overrides as etcd holds them now;
    /// `None` for a topic that does not exist.
    pub async fn topic(&self, topic: &str) -> Result<Option<StoredTopic>, StoreError> {
        let key = topic_key(topic);
        let config_key = topic_config_key(topic);
        let txn = Txn::new().and_then(vec![
            TxnOp::get(key.clone(), None),
            TxnOp::get(config_key.clone(), None),
        ]);
        let resp = self.client.clone().txn(txn).await?;
        let mut gets = resp.op_responses().into_iter().filter_map(|r| match r {
            TxnOpResponse::Get(g) => Some(g),
            _ => None,
        });
        let (Some(assignment), Some(configs)) = (gets.next(), gets.next()) else {
            return Ok(None);
        };
        let Some(kv) = assignment.kvs().first() else {
            return Ok(None);
        };
        let configs = match configs.kvs().first() {
            Some(c) => Some(versioned(decode(&config_key, c.value())?, c)),
            None => None,
        };
        Ok(Some(StoredTopic {
            assignment: versioned(decode(&key, kv.value())?, kv),
            configs,
        }))
    }

    /// Replace a topic's config overrides, if neither the topic nor its
    /// configs changed since `read` (what [`topic`](Self::topic) returned);
    /// an empty set removes the key. false when the compare was lost.
    pub async fn write_topic_configs(
        &self,
        topic: &str,
        read: &StoredTopic,
        configs: &Overrides,
    ) -> Result<bool, StoreError> {
        let key = topic_config_key(topic);
        let held = read.configs.as_ref().map_or(0, |c| c.mod_revision);
        let write = if configs.is_empty() {
            TxnOp::delete(key.clone(), None)
        } else {
            TxnOp::put(
                key.clone(),
                encode(&TopicConfigRecord::new(configs.clone())),
                None,
            )
        };
        let txn = Txn::new()
            .when(vec![
                Compare::mod_revision(
                    topic_key(topic),
                    CompareOp::Equal,
                    read.assignment.mod_revision,
                ),
                Compare::mod_revision(key, CompareOp::Equal, held),
            ])
            .and_then(vec![write]);
        Ok(self.client.clone().txn(txn).await?.succeeded())
    }

    /// Marks an existing topic for deletion (DeleteTopics); the controller
    /// deletes it. false when the topic does not exist; marking one already
    /// marked is no error.
    pub async fn mark_for_deletion(&self, topic: &str) -> Result<bool, StoreError> {
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                topic_key(topic),
                CompareOp::Greater,
                0,
            )])
            .and_then(vec![TxnOp::put(
                topic_deletion_key(topic),
                b"{}".to_vec(),
                None,
            )]);
        Ok(self.client.clone().txn(txn).await?.succeeded())
    }

    /// Removes a deleted topic's keys — its assignment, every partition's
    /// state, its configs and its deletion mark — in one transaction, while
    /// the controller key is still the one this controller won.
    pub async fn finish_deletion(
        &self,
        topic: &str,
        controller_create_revision: i64,
    ) -> Result<(), StoreError> {
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                controller_key(),
                CompareOp::Equal,
                controller_create_revision,
            )])
            .and_then(vec![
                TxnOp::delete(
                    format!("{}/", topic_key(topic)),
                    Some(DeleteOptions::new().with_prefix()),
                ),
                TxnOp::delete(topic_key(topic), None),
                TxnOp::delete(topic_config_key(topic), None),
                TxnOp::delete(topic_deletion_key(topic), None),
            ]);
        if self.client.clone().txn(txn).await?.succeeded() {
            Ok(())
        } else {
            Err(StoreError::ControllerMoved(format!(
                "controller key changed before {topic}'s deletion finished"
            )))
        }
    }

    /// Replace a topic's assignment (more partitions), if it did not change
    /// since `read`. false when the compare was lost.
    pub async fn write_topic_assignment(
        &self,
        topic: &str,
        read: &StoredTopic,
        assignment: &TopicAssignment,
    ) -> Result<bool, StoreError> {
        let key = topic_key(topic);
        let txn = Txn::new()
            .when(vec![Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                read.assignment.mod_revision,
            )])
            .and_then(vec![TxnOp::put(key, encode(assignment), None)]);
        Ok(self.client.clone().txn(txn).await?.succeeded())
    }
}

/// A random (version 4, RFC 4122) UUID from the kernel's random source, in
/// its hyphenated lowercase form (the form kafka-protocol's `Uuid` prints
/// and parses). Kafka's `Uuid.randomUuid` is the same kind of id.
pub fn new_topic_id() -> Result<String, StoreError> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| StoreError::Random(e.to_string()))?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

#[cfg(test)]
mod tests {
    use super::new_topic_id;

    #[test]
    fn topic_ids_are_fresh_version_4_uuids() {
        let (a, b) = (new_topic_id().unwrap(), new_topic_id().unwrap());
        assert_ne!(a, b);
        let groups: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert_eq!(&a[14..15], "4", "version 4: {a}");
        assert!("89ab".contains(&a[19..20]), "RFC 4122 variant: {a}");
        assert_eq!(a, a.to_lowercase());
    }
}
