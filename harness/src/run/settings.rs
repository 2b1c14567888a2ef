//! How a schedule's settings reach the cluster: `--set KEY=VALUE` applied over
//! the schedule (checked against the broker settings the harness knows), and
//! the runtime's configuration — broker count, settings and failpoints per
//! node, where node files go — made from the schedule as applied.

use std::time::Duration;

use crate::node::NodeId;
use crate::run_dir::RunDir;
use crate::runtime::ClusterConfig;
use crate::schedule::{BROKER_SETTINGS, HARNESS_OWNED_SETTINGS, Schedule};

use super::{RunError, RunOptions};

/// Applies `KEY=VALUE` broker settings to the whole cluster; a node's own value
/// for the key is replaced too (the command line wins).
pub fn apply_sets(schedule: &mut Schedule, sets: &[String]) -> Result<(), RunError> {
    for arg in sets {
        let bad = |why: String| RunError::BadSet {
            arg: arg.clone(),
            why,
        };
        let (key, raw) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected KEY=VALUE".into()))?;
        let key = key.trim();
        if HARNESS_OWNED_SETTINGS.contains(&key) {
            return Err(bad(format!("{key} is set by the harness")));
        }
        let kind = BROKER_SETTINGS
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, kind)| *kind)
            .ok_or_else(|| {
                let known: Vec<&str> = BROKER_SETTINGS.iter().map(|(n, _)| *n).collect();
                bad(format!(
                    "unknown broker setting {key} (known: {})",
                    known.join(", ")
                ))
            })?;
        // A TOML value if it reads as one (`3`, `false`), else a bare string.
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.trim().to_owned()));
        if !kind.accepts(&value) {
            return Err(bad(format!("{key} must be {kind}, not {value}")));
        }
        schedule.cluster.settings.insert(key.to_owned(), value);
        for node in schedule.cluster.node.values_mut() {
            node.settings.remove(key);
        }
    }
    Ok(())
}

/// The runtime's configuration for a schedule (both runtimes take it).
pub fn cluster_config(
    schedule: &Schedule,
    options: &RunOptions,
    run_dir: &RunDir,
) -> ClusterConfig {
    let mut config =
        ClusterConfig::new(schedule.cluster.brokers, &options.bin_dir, run_dir.nodes());
    config.etcd = options.etcd.clone();
    config.system = options.system.clone();
    config.start_timeout = Duration::from_secs(30);
    for id in NodeId::all(schedule.cluster.brokers) {
        let node = schedule.cluster.node.get(&id.to_string());
        let mut settings = schedule.cluster.settings.clone();
        if let Some(node) = node {
            settings.extend(node.settings.clone());
            if !node.failpoints.is_empty() {
                let armed: Vec<String> = node
                    .failpoints
                    .iter()
                    .map(|(point, actions)| format!("{point}={actions}"))
                    .collect();
                config
                    .node_env
                    .insert(id, vec![("EPOCHAL_FAILPOINTS".into(), armed.join(";"))]);
            }
        }
        config.node_settings.insert(id, settings);
    }
    config
}
