//! How a schedule's settings reach the cluster: `--set KEY=VALUE` applied over
//! the schedule (checked against the broker settings the harness knows), and
//! the runtime's configuration — broker count, settings and failpoints per
//! node, where node files go — made from the schedule as applied.

use std::time::Duration;

use crate::node::NodeId;
use crate::run_dir::RunDir;
use crate::runtime::ClusterConfig;
use crate::schedule::{BROKER_SETTINGS, FAILPOINTS, HARNESS_OWNED_SETTINGS, Schedule};

/// `--set failpoint.NAME=ACTIONS`: a failpoint armed on every node.
pub const FAILPOINT_PREFIX: &str = "failpoint.";

use super::{RunError, RunOptions};

/// Applies `KEY=VALUE` broker settings to the whole cluster; a node's own value
/// for the key is replaced too (the command line wins). `failpoint.NAME=ACTIONS`
/// arms the broker failpoint NAME on every node instead (replacing a node's
/// own actions for it), so a gate setting can put a slip into the broker
/// that a test shows the harness catches.
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
        if let Some(failpoint) = key.strip_prefix(FAILPOINT_PREFIX) {
            if !FAILPOINTS.contains(&failpoint) {
                return Err(bad(format!(
                    "unknown broker failpoint {failpoint} (known: {})",
                    FAILPOINTS.join(", ")
                )));
            }
            for id in NodeId::all(schedule.cluster.brokers) {
                let node = schedule.cluster.node.entry(id.to_string()).or_default();
                node.failpoints
                    .insert(failpoint.to_owned(), raw.trim().to_owned());
            }
            continue;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[cluster]\nbrokers = 2\n\n[[cluster.topic]]\nname = \"t\"\npartitions = 1\nreplication_factor = 2\n\n[cluster.node.b1]\nfailpoints = { controller-election-ignores-isr = \"off\" }\n";

    #[test]
    fn a_failpoint_set_arms_it_on_every_node_and_an_unknown_one_is_refused() {
        let mut schedule = Schedule::parse("s.toml", BASE).unwrap();
        apply_sets(
            &mut schedule,
            &["failpoint.controller-election-ignores-isr=return".into()],
        )
        .unwrap();
        for node in ["b1", "b2"] {
            assert_eq!(
                schedule.cluster.node[node].failpoints["controller-election-ignores-isr"], "return",
                "{node}"
            );
        }
        let err = apply_sets(&mut schedule, &["failpoint.no-such-point=return".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown broker failpoint no-such-point"),
            "{err}"
        );
    }
}
