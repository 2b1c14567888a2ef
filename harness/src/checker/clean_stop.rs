//! A broker stopped cleanly gives up its registration as it exits
//! (nemesis/deregister.rs records, on each `stop`, the nodes etcd still
//! named registered a second after their process exited): a registration
//! that outlives a clean stop keeps every partition the broker led without
//! a leader until its lease lapses, the unavailability Kafka's controlled
//! shutdown exists to avoid.

use super::evidence::StopKeptRegistration;
use super::index::RunIndex;
use super::{Anomaly, CheckOutcome, CheckResult, Checker, Evidence};
use crate::history::{Op, OpType, Verb};

pub const NAME: &str = "clean-stop";

pub fn checker() -> Checker {
    Checker {
        name: NAME,
        guarantee: "A broker stopped cleanly is deregistered when its process has exited, so the \
            controller moves its leaderships at once rather than after its lease or session \
            lapses.",
        source: "Kafka documentation, Basic Kafka Operations, \"Graceful shutdown\" (leadership \
            migrates before the broker stops, minimizing each partition's unavailability to a few \
            milliseconds); ZooKeeper-era Kafka's broker registration is an ephemeral node its \
            session's close removes.",
        not_checked: "Stops of a node whose etcd link was cut (it cannot deregister). Systems \
            seen through Metadata (no registrations are read). How long leadership then takes to \
            move: that depends on the controller, and the liveness window bounds the end state.",
        needs: &[],
        check,
    }
}

/// Whether `op` is one this checker judges: a completed `stop` whose
/// deregistration the nemesis looked for.
pub fn judges(op: &Op) -> bool {
    op.fault()
        .is_some_and(|f| f.verb == Verb::Stop && op.kind != OpType::Invoke)
}

fn check(index: &RunIndex) -> CheckOutcome {
    let mut evidence = Vec::new();
    let mut stops = 0;
    for op in &index.run.history {
        if !judges(op) {
            continue;
        }
        stops += 1;
        let Some(done) = op.fault().and_then(|f| f.done.as_ref()) else {
            continue;
        };
        for &node in done.registered_after_stop.iter().flatten() {
            evidence.push(Evidence::new(
                Anomaly::StopKeptRegistration,
                format!(
                    "{node} was still registered in etcd {} ms after its clean stop (history \
                     index {}) had ended its process",
                    crate::nemesis::DEREGISTER_BOUND.as_millis(),
                    op.index
                ),
                StopKeptRegistration {
                    bound_ms: crate::nemesis::DEREGISTER_BOUND.as_millis() as u64,
                    history_index: op.index,
                    node,
                },
            ));
        }
    }
    let result = CheckResult::fold(
        NAME,
        evidence,
        |e| format!("{} clean stop(s) left the broker registered", e.len()),
        None,
        || format!("{stops} clean stop(s), each broker deregistered as it exited"),
    );
    Ok(result.with_count("stops", stops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::{RunData, Verdict};
    use crate::history::{Aim, Body, Done, FaultOp, Process};
    use crate::node::NodeId;
    use crate::schedule::{Fault, Target};

    fn stop(index: u64, still: Option<Vec<NodeId>>) -> Op {
        let fault = Fault::Stop(Target::Node(NodeId::new(2)));
        Op {
            index,
            time_ns: index,
            process: Process::Nemesis,
            kind: OpType::Info,
            body: Body::Fault(Box::new(FaultOp {
                verb: Verb::Stop,
                aim: Aim::of(&fault),
                done: Some(Done {
                    nodes: vec![NodeId::new(2)],
                    registered_after_stop: still,
                    ..Done::default()
                }),
            })),
            error: None,
        }
    }

    fn check_ops(ops: Vec<Op>) -> CheckResult {
        let run = RunData {
            history: ops,
            ..RunData::default()
        };
        checker().check_run(&run).unwrap()
    }

    #[test]
    fn clean_stop_names_a_broker_still_registered_after_its_stop() {
        let result = check_ops(vec![stop(0, None), stop(1, Some(vec![NodeId::new(2)]))]);
        assert_eq!(result.verdict, Verdict::Invalid);
        assert_eq!(result.evidence.len(), 1);
        assert_eq!(result.evidence[0].details.json()["node"], "b2");
        assert_eq!(result.counts["stops"], 2);
        let result = check_ops(vec![stop(0, None)]);
        assert_eq!(result.verdict, Verdict::Valid, "{}", result.message);
    }
}
