//! The topic-lives checker's unit tests, on hand-built histories of one
//! client's lives.

use super::*;
use crate::checker::{RunData, Verdict};
use crate::history::{Body, PolledRecord};
use crate::node::NodeId;

/// Builds a history of invoke/completion pairs on process 0.
#[derive(Default)]
struct History {
    ops: Vec<Op>,
}

impl History {
    fn pair(&mut self, kind: OpType, op: LifeOp) -> &mut Self {
        for (k, body) in [(OpType::Invoke, op.clone()), (kind, op)] {
            let index = self.ops.len() as u64;
            self.ops.push(Op {
                index,
                time_ns: index,
                process: Process::Client(0),
                kind: k,
                body: Body::Life(Box::new(body)),
                error: None,
            });
        }
        self
    }

    fn step(&mut self, step: LifeStep, life: u32) -> LifeOp {
        LifeOp::new(step, "epochal-lives", life, Some(NodeId::new(1)))
    }

    fn create(&mut self, life: u32, kind: OpType) -> &mut Self {
        let op = self.step(LifeStep::Create, life);
        self.pair(kind, op)
    }

    fn delete(&mut self, life: u32) -> &mut Self {
        let op = self.step(LifeStep::Delete, life);
        self.pair(OpType::Ok, op)
    }

    fn send(&mut self, life: u32, value: i64, offset: i64, kind: OpType) -> &mut Self {
        let mut op = self.step(LifeStep::Send, life);
        op.value = Some(value);
        op.offset = (kind == OpType::Ok).then_some(offset);
        self.pair(kind, op)
    }

    fn read(&mut self, life: u32, records: &[(i64, i64)]) -> &mut Self {
        let mut op = self.step(LifeStep::Read, life);
        op.records = Some(
            records
                .iter()
                .map(|&(o, v)| PolledRecord(o, RecordValue::Number(v)))
                .collect(),
        );
        op.high_watermark = Some(records.len() as i64);
        self.pair(OpType::Ok, op)
    }

    fn check(&self) -> CheckResult {
        let run = RunData {
            history: self.ops.clone(),
            ..RunData::default()
        };
        checker().check_run(&run).unwrap()
    }
}

#[test]
fn topic_lives_names_a_record_of_a_deleted_life_read_in_the_next() {
    let mut h = History::default();
    h.create(1, OpType::Ok)
        .send(1, 10, 0, OpType::Ok)
        .send(1, 11, 1, OpType::Ok)
        .read(1, &[(0, 10), (1, 11)])
        .delete(1)
        .create(2, OpType::Ok)
        .send(2, 12, 2, OpType::Ok)
        // Life 2 begins empty: 10 and 11 were acknowledged before its
        // creation was sent.
        .read(2, &[(0, 10), (1, 11), (2, 12)]);
    let result = h.check();
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(result.evidence.len(), 2);
    let first = result.evidence[0].details.json();
    assert_eq!(first["value"], 10);
    assert_eq!(first["sent_life"], 1);
    assert_eq!(first["read_life"], 2);
    assert_eq!(result.counts["resurrected"], 2);
    assert_eq!(result.counts["lives"], 2);
}

#[test]
fn topic_lives_holds_each_life_to_its_own_records() {
    let mut h = History::default();
    h.create(1, OpType::Ok)
        .send(1, 10, 0, OpType::Ok)
        .read(1, &[(0, 10)])
        .delete(1)
        .create(2, OpType::Ok)
        .send(2, 11, 0, OpType::Ok)
        .read(2, &[(0, 11)]);
    let result = h.check();
    assert_eq!(result.verdict, Verdict::Valid, "{}", result.message);
    assert_eq!(result.counts["records-read"], 2);
}

#[test]
fn topic_lives_proves_nothing_from_an_unknown_write_or_creation() {
    // A send whose outcome is unknown may land in a later life (a request
    // held in the network); a creation whose outcome is unknown began no
    // life the checker can be sure of.
    let mut h = History::default();
    h.create(1, OpType::Ok)
        .send(1, 10, 0, OpType::Info)
        .send(1, 11, 0, OpType::Ok)
        .delete(1)
        .create(2, OpType::Info)
        .read(2, &[(0, 11)])
        .create(3, OpType::Ok)
        .read(3, &[(0, 10)]);
    let result = h.check();
    assert_eq!(result.verdict, Verdict::Valid, "{}", result.message);
}

#[test]
fn topic_lives_is_listed_only_for_runs_with_its_ops() {
    let mut h = History::default();
    h.create(1, OpType::Ok);
    assert!(h.ops.iter().all(judges));
    let run = RunData::default();
    assert!(!crate::checker::for_run(&run).iter().any(|c| c.name == NAME));
}
