//! The cluster as etcd records it, read over a direct connection no fault
//! touches: the controller, the registered brokers, and every partition's
//! replicas, leader and ISR, all from one read at one revision. Readiness is
//! judged from this view, never from a broker's own answers.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Everything under `/epochal` the harness needs to call a cluster ready
/// (key layout: broker/README.md, "etcd key layout").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    pub revision: i64,
    pub controller: Option<u32>,
    pub brokers: BTreeSet<u32>,
    pub partitions: BTreeMap<(String, u32), PartitionView>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionView {
    pub replicas: Vec<u32>,
    /// `None` before the controller elected one, or when it recorded -1.
    pub leader: Option<u32>,
    pub isr: Vec<u32>,
    /// The leader epoch recorded with the leader (-1 before the first election).
    pub leader_epoch: i32,
    /// The controller epoch of the controller that wrote this state.
    pub controller_epoch: i32,
}

impl ClusterView {
    /// Reads the whole `/epochal` prefix in one range read.
    pub async fn read(client: &mut etcd_client::Client) -> Result<Self, etcd_client::Error> {
        let response = client
            .get(
                "/epochal/",
                Some(etcd_client::GetOptions::new().with_prefix()),
            )
            .await?;
        let mut view = ClusterView {
            revision: response.header().map_or(0, |h| h.revision()),
            ..ClusterView::default()
        };
        let mut states = Vec::new();
        for kv in response.kvs() {
            let (Ok(key), Ok(value)) = (kv.key_str(), kv.value_str()) else {
                continue;
            };
            let json: Option<Value> = serde_json::from_str(value).ok();
            let parts: Vec<&str> = key.trim_start_matches("/epochal/").split('/').collect();
            match parts.as_slice() {
                ["controller"] => {
                    view.controller = json
                        .as_ref()
                        .and_then(|j| j.get("broker_id"))
                        .and_then(Value::as_u64)
                        .map(|id| id as u32);
                }
                ["brokers", "ids", id] => {
                    if let Ok(id) = id.parse() {
                        view.brokers.insert(id);
                    }
                }
                ["brokers", "topics", topic] => {
                    let assignment = json.as_ref().and_then(|j| j.get("partitions"));
                    for (p, replicas) in assignment.and_then(Value::as_object).into_iter().flatten()
                    {
                        let Ok(p) = p.parse() else { continue };
                        view.partitions
                            .entry((topic.to_string(), p))
                            .or_default()
                            .replicas = ids(replicas);
                    }
                }
                ["brokers", "topics", topic, "partitions", p, "state"] => {
                    if let (Ok(p), Some(json)) = (p.parse::<u32>(), json) {
                        states.push((topic.to_string(), p, json));
                    }
                }
                _ => {}
            }
        }
        for (topic, p, state) in states {
            let partition = view.partitions.entry((topic, p)).or_default();
            partition.leader = state
                .get("leader")
                .and_then(Value::as_i64)
                .filter(|l| *l >= 0)
                .map(|l| l as u32);
            partition.isr = state.get("isr").map(ids).unwrap_or_default();
            let int = |key: &str| state.get(key).and_then(Value::as_i64).unwrap_or(-1) as i32;
            partition.leader_epoch = int("leader_epoch");
            partition.controller_epoch = int("controller_epoch");
        }
        Ok(view)
    }

    pub fn partition(&self, topic: &str, partition: u32) -> Option<&PartitionView> {
        self.partitions.get(&(topic.to_owned(), partition))
    }

    /// Ready: a controller, all `brokers` registered, and every partition with a
    /// leader and its full replica set in the ISR. `Err` names what is missing.
    pub fn ready(&self, brokers: &BTreeSet<u32>) -> Result<(), String> {
        if self.controller.is_none() {
            return Err("no controller".into());
        }
        if let Some(missing) = brokers.difference(&self.brokers).next() {
            return Err(format!("broker {missing} not registered"));
        }
        for ((topic, p), partition) in &self.partitions {
            if partition.leader.is_none() {
                return Err(format!("{topic}-{p} has no leader"));
            }
            let isr: BTreeSet<_> = partition.isr.iter().collect();
            let replicas: BTreeSet<_> = partition.replicas.iter().collect();
            if replicas.is_empty() || isr != replicas {
                return Err(format!(
                    "{topic}-{p} ISR {:?} is not its replicas {:?}",
                    partition.isr, partition.replicas
                ));
            }
        }
        Ok(())
    }
}

fn ids(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .map(|id| id as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(leader: Option<u32>, isr: &[u32]) -> PartitionView {
        PartitionView {
            replicas: vec![1, 2, 3],
            leader,
            isr: isr.to_vec(),
            ..PartitionView::default()
        }
    }

    #[test]
    fn ready_names_the_first_thing_missing() {
        let all: BTreeSet<u32> = [1, 2, 3].into();
        let mut view = ClusterView::default();
        assert_eq!(view.ready(&all).unwrap_err(), "no controller");
        view.controller = Some(1);
        view.brokers = [1, 2].into();
        assert_eq!(view.ready(&all).unwrap_err(), "broker 3 not registered");
        view.brokers = all.clone();
        view.partitions
            .insert(("t".into(), 0), partition(None, &[1, 2, 3]));
        assert_eq!(view.ready(&all).unwrap_err(), "t-0 has no leader");
        view.partitions
            .insert(("t".into(), 0), partition(Some(1), &[1, 3]));
        assert!(view.ready(&all).unwrap_err().contains("ISR [1, 3]"));
        view.partitions
            .insert(("t".into(), 0), partition(Some(1), &[3, 2, 1]));
        assert_eq!(view.ready(&all), Ok(()));
    }
}
