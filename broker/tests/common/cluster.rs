//! A cluster for replication tests: one etcd, brokers 1..=n started in order
//! (broker 1 first, so it is the controller), every one in its own directory of
//! one temp dir, and the observations the tests make — partition state from
//! etcd, a partition's files on each replica, clients to the leader.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use epochal_broker::controller::metadata_store::{
    PartitionStateRecord, controller_epoch_key, partition_state_key,
};
use tempfile::TempDir;

use super::broker_process::BrokerProcess;
use super::etcd::Etcd;
use super::forwarder::Forwarder;
use super::kafka_client::KafkaClient;

pub const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Cluster {
    pub brokers: BTreeMap<i32, BrokerProcess>,
    /// With [`Cluster::start_meshed`]: broker id → the forwarder every other
    /// broker reaches it through (`--peer`), so a test can cut it off.
    pub peers: BTreeMap<i32, Forwarder>,
    pub etcd: Etcd,
    pub dir: TempDir,
}

impl Cluster {
    /// Start `n` brokers with `extra` flags each; `etcd_for(id)` gives the etcd
    /// endpoint broker `id` uses (a forwarder, or the real one).
    pub fn start_with(
        n: i32,
        extra: &[&str],
        etcd: Etcd,
        etcd_for: impl Fn(i32) -> String,
    ) -> Cluster {
        Cluster::start_full(
            n,
            extra,
            etcd,
            etcd_for,
            false,
            |_| Vec::new(),
            |_| Vec::new(),
        )
    }

    /// Like [`Cluster::start`], broker `id` also getting the flags
    /// `extra_for(id)` and the environment `env_for(id)` (e.g. `EPOCHAL_FAILPOINTS`).
    pub fn start_with_env(
        n: i32,
        extra: &[&str],
        extra_for: impl Fn(i32) -> Vec<String>,
        env_for: impl Fn(i32) -> Vec<(&'static str, String)>,
    ) -> Cluster {
        let etcd = Etcd::start();
        let endpoint = etcd.endpoint.clone();
        Cluster::start_full(
            n,
            extra,
            etcd,
            |_| endpoint.clone(),
            false,
            extra_for,
            env_for,
        )
    }

    /// Like [`Cluster::start`], with every broker-to-broker connection (fetches,
    /// controller requests) going through a forwarder per target broker.
    pub fn start_meshed(n: i32, extra: &[&str]) -> Cluster {
        Cluster::start_meshed_with(n, extra, |_| Vec::new())
    }

    /// Like [`Cluster::start_meshed`], broker `id` also getting the flags
    /// `extra_for(id)` (a lease of its own, say).
    pub fn start_meshed_with(
        n: i32,
        extra: &[&str],
        extra_for: impl Fn(i32) -> Vec<String>,
    ) -> Cluster {
        let etcd = Etcd::start();
        let endpoint = etcd.endpoint.clone();
        Cluster::start_full(
            n,
            extra,
            etcd,
            |_| endpoint.clone(),
            true,
            extra_for,
            |_| Vec::new(),
        )
    }

    fn start_full(
        n: i32,
        extra: &[&str],
        etcd: Etcd,
        etcd_for: impl Fn(i32) -> String,
        meshed: bool,
        extra_for: impl Fn(i32) -> Vec<String>,
        env_for: impl Fn(i32) -> Vec<(&'static str, String)>,
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let peers: BTreeMap<i32, Forwarder> = if meshed {
            (1..=n).map(|id| (id, Forwarder::start(""))).collect()
        } else {
            BTreeMap::new()
        };
        let mut brokers = BTreeMap::new();
        for id in 1..=n {
            let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            args.extend(extra_for(id));
            for (other, f) in &peers {
                if *other != id {
                    args.push("--peer".into());
                    args.push(format!("{other}={}", f.addr));
                }
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let env = env_for(id);
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let b = BrokerProcess::start_with_env(
                id,
                &etcd_for(id),
                &dir.path().join(format!("b{id}")),
                &args,
                &env,
            );
            if let Some(f) = peers.get(&id) {
                f.set_upstream(&b.addr);
            }
            if id == 1 {
                super::await_some_or(
                    "broker 1 to become controller",
                    START_TIMEOUT,
                    || etcd.get(&controller_epoch_key()),
                    || b.log(),
                );
            }
            brokers.insert(id, b);
        }
        let cluster = Cluster {
            brokers,
            peers,
            etcd,
            dir,
        };
        let mut c = cluster.client(1);
        super::await_some_or(
            "every broker in broker 1's metadata",
            START_TIMEOUT,
            || (c.metadata(None).brokers.len() == n as usize).then_some(()),
            || cluster.logs(),
        );
        cluster
    }

    pub fn start(n: i32, extra: &[&str]) -> Cluster {
        let etcd = Etcd::start();
        let endpoint = etcd.endpoint.clone();
        Cluster::start_with(n, extra, etcd, |_| endpoint.clone())
    }

    /// kill -9 (if running) and start again on the same data directory; the
    /// broker's forwarder, if any, follows it to its new port.
    pub fn restart(&mut self, id: i32) {
        let b = self.brokers.get_mut(&id).unwrap();
        b.restart();
        if let Some(f) = self.peers.get(&id) {
            f.set_upstream(&b.addr);
        }
    }

    pub fn broker(&self, id: i32) -> &BrokerProcess {
        &self.brokers[&id]
    }

    pub fn broker_mut(&mut self, id: i32) -> &mut BrokerProcess {
        self.brokers.get_mut(&id).unwrap()
    }

    pub fn client(&self, id: i32) -> KafkaClient {
        KafkaClient::connect(&self.brokers[&id].addr).unwrap()
    }

    /// Every broker's log, for a failure message.
    pub fn logs(&self) -> String {
        self.brokers
            .values()
            .map(|b| format!("===== broker {} =====\n{}", b.node_id, b.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The partition's state as stored in etcd.
    pub fn state(&self, topic: &str, partition: i32) -> Option<PartitionStateRecord> {
        let raw = self.etcd.get(&partition_state_key(topic, partition))?;
        serde_json::from_str(&raw).ok()
    }

    /// Every state etcd has held for the partition, oldest first.
    pub fn state_history(&self, topic: &str, partition: i32) -> Vec<PartitionStateRecord> {
        self.etcd
            .history(&partition_state_key(topic, partition))
            .iter()
            .filter_map(|raw| serde_json::from_str(raw).ok())
            .collect()
    }

    /// Poll the stored state until `pred` holds.
    pub fn await_state(
        &self,
        what: &str,
        timeout: Duration,
        topic: &str,
        partition: i32,
        pred: impl Fn(&PartitionStateRecord) -> bool,
    ) -> PartitionStateRecord {
        super::await_some_or(
            what,
            timeout,
            || self.state(topic, partition).filter(|s| pred(s)),
            || format!("state: {:?}\n{}", self.state(topic, partition), self.logs()),
        )
    }

    pub fn partition_dir(&self, id: i32, topic: &str, partition: i32) -> PathBuf {
        self.brokers[&id]
            .data_dir
            .join(format!("{topic}-{partition}"))
    }

    /// (file name, bytes) of every segment of a replica, in order.
    pub fn segments(&self, id: i32, topic: &str, partition: i32) -> Vec<(String, Vec<u8>)> {
        let dir = self.partition_dir(id, topic, partition);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".log"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
            .into_iter()
            .map(|n| {
                let bytes = std::fs::read(dir.join(&n)).unwrap_or_default();
                (n, bytes)
            })
            .collect()
    }

    pub fn epoch_file(&self, id: i32, topic: &str, partition: i32) -> String {
        std::fs::read_to_string(
            self.partition_dir(id, topic, partition)
                .join("leader-epoch-checkpoint"),
        )
        .unwrap_or_default()
    }

    /// Wait until the replicas `ids` hold byte-identical segments of at least
    /// `min_bytes` in total and equal epoch files.
    pub fn await_converged(
        &self,
        ids: &[i32],
        topic: &str,
        partition: i32,
        min_bytes: usize,
        timeout: Duration,
    ) {
        super::await_some_or(
            "the replicas' segments and epoch files to agree",
            timeout,
            || {
                let first = self.segments(ids[0], topic, partition);
                let size: usize = first.iter().map(|(_, b)| b.len()).sum();
                let epochs = self.epoch_file(ids[0], topic, partition);
                let same = ids[1..].iter().all(|id| {
                    self.segments(*id, topic, partition) == first
                        && self.epoch_file(*id, topic, partition) == epochs
                });
                (same && size >= min_bytes).then_some(())
            },
            || {
                let summary: Vec<String> = ids
                    .iter()
                    .map(|id| {
                        let segs = self.segments(*id, topic, partition);
                        format!(
                            "broker {id}: segments {:?}, epochs {:?}",
                            segs.iter()
                                .map(|(n, b)| (n.clone(), b.len()))
                                .collect::<Vec<_>>(),
                            self.epoch_file(*id, topic, partition)
                        )
                    })
                    .collect();
                format!("{}\n{}", summary.join("\n"), self.logs())
            },
        );
    }
}
