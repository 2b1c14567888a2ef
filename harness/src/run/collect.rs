//! Phase 5: keep the evidence. Every broker is SIGKILLed, which freezes each
//! data directory exactly as the cluster left it (no shutdown hook rewrites a
//! checkpoint after the harness looked); then, etcd still running, its
//! revision history of the cluster's decisions goes to `timeline.json`; last,
//! `run.json` records how the run ended.
//!
//! The brokers die before the timeline is read, not after: the cluster goes on
//! deciding until its last broker is dead, and a decision a broker applied
//! while the others were being killed must be in the timeline the checkers
//! hold it against. (Read first, a Docker run whose kills took ten seconds
//! under load let the lease of the first broker killed lapse, a new controller
//! elect a leader, and a live follower apply it, which etcd's timeline then
//! "never recorded": a false `uncommitted-decision-applied`.) The runtime
//! kills them all at once (`Runtime::freeze`), so the window is one kill long
//! and no lease can lapse in it.
//!
//! A system whose final state is read over the protocol (its system file's
//! `final_state.read = "protocol"`) is read first, while it still serves:
//! Jepsen's final read, through a fresh client on the first running broker's
//! own port (observe/final_read.rs), into `final-read/`. A system without
//! etcd has no timeline to keep.
//!
//! A system whose durable state is in a database (`[final_state] database`)
//! has it read by the harness's own client once its brokers are dead, so no
//! broker writes while it is read: an SQLite file as the brokers left it, or
//! the run's PostgreSQL service, which runs until the runtime shuts down
//! after this phase (observe/database.rs), into `database/`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::observe::database::read_run_database;
use crate::observe::final_read::{FinalReadOptions, final_read_with};
use crate::run_dir::{RunDir, RunEnd};
use crate::runtime::Runtime;
use crate::store::RunLog;
use crate::system::{FinalRead, KafkaNodeIds};

use super::live::Live;
use super::{RunError, RunStatus};

/// The frozen nodes, then the timeline. A timeline that cannot be read is
/// logged, not fatal: the checkers that need it say unknown. A broker that
/// cannot be killed is the harness's error, reported after the timeline is
/// kept.
pub(super) async fn collect<R: Runtime>(live: &mut Live<R>, dir: &RunDir) -> Result<(), RunError> {
    live.scripted.clear();
    let system = live.runtime.plan().config.system.clone();
    if system.final_state.read == FinalRead::Protocol {
        final_read(live, dir).await;
    }
    let frozen = live.runtime.freeze().await;
    if let Err(e) = &frozen {
        live.log.line(format!("brokers not all killed: {e}"));
    }
    let postgres = live.runtime.database_address();
    let read = read_run_database(dir, &system, postgres, DATABASE_READ_TOTAL).await;
    match read {
        None => {}
        Some(Ok(read)) => live.log.line(format!(
            "database read ({} at {}): {} rows, {} partitions",
            read.engine,
            read.source,
            read.rows,
            read.partitions.len()
        )),
        Some(Err(e)) => live.log.line(format!("database not read: {e}")),
    }
    if system.observe.etcd.is_none() {
        return Ok(frozen?);
    }
    match crate::observe::timeline::read_timeline(live.runtime.etcd_endpoint()).await {
        Ok(timeline) => {
            if let Err(e) = crate::store::write_json(&dir.timeline(), &timeline) {
                live.log.line(e.to_string());
            }
        }
        Err(e) => live.log.line(format!("etcd timeline not read: {e}")),
    }
    Ok(frozen?)
}

/// Bound on the whole read of a system's database.
const DATABASE_READ_TOTAL: Duration = Duration::from_secs(120);

/// Bound on the whole final read.
const FINAL_READ_TOTAL: Duration = Duration::from_secs(120);

/// The final read over the protocol through the first running broker, its
/// leaders dialled on their own ports rather than through the client proxies
/// they advertise. A read that fails is logged, not fatal: what it read is
/// kept, and the checkers that need the rest say why they cannot judge.
async fn final_read<R: Runtime>(live: &mut Live<R>, dir: &RunDir) {
    let runtime = &live.runtime;
    let own_ids = runtime.plan().config.system.node.kafka_node_ids == KafkaNodeIds::Own;
    let mut rewrite = BTreeMap::new();
    let mut by_node = BTreeMap::new();
    let mut via = None;
    for node in runtime.nodes() {
        let (Ok(advertised), Some(direct)) =
            (runtime.client_address(node), runtime.observe_address(node))
        else {
            continue;
        };
        if via.is_none() && runtime.is_running(node) && !runtime.is_paused(node).unwrap_or(true) {
            via = Some((node, direct.clone()));
        }
        if own_ids {
            by_node.insert(node.broker_id(), direct.clone());
        }
        rewrite.insert(advertised, direct);
    }
    let Some((node, address)) = via else {
        live.log.line("final read not made: no broker is running");
        return;
    };
    let options = FinalReadOptions {
        via: Some(node),
        rewrite,
        by_node,
        fetch_version: live.clients.fetch_version,
        fetch_max_wait_ms: live.clients.fetch_max_wait_ms,
        ..FinalReadOptions::new(live.clients.request_timeout, FINAL_READ_TOTAL)
    };
    let read = final_read_with(&address, &dir.final_read(), &options).await;
    match read {
        Ok(read) => live.log.line(format!(
            "final read through {node}: {} partitions, {} records",
            read.partitions.len(),
            read.partitions.iter().map(|p| p.records).sum::<u64>()
        )),
        Err(e) => live.log.line(format!("final read through {node}: {e}")),
    }
}

/// Logs how the run ended and writes `run.json`.
pub(super) fn write_end(
    log: &mut RunLog,
    dir: &RunDir,
    status: &RunStatus,
    liveness: super::quiesce::Liveness,
) -> Result<(), RunError> {
    let super::quiesce::Liveness {
        stuck,
        stuck_groups,
        stuck_topics,
        unrecovered,
    } = liveness;
    let end = match status {
        RunStatus::Completed => {
            log.line("completed");
            RunEnd {
                completed: true,
                unknown: None,
                stuck,
                stuck_groups,
                stuck_topics,
                unrecovered,
            }
        }
        RunStatus::Unknown(why) => {
            log.line(format!("unknown: {why}"));
            RunEnd {
                completed: false,
                unknown: Some(why.clone()),
                stuck,
                stuck_groups,
                stuck_topics,
                unrecovered,
            }
        }
    };
    Ok(dir.write_end(&end)?)
}
