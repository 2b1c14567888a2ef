//! One step of a schedule, typed: a fault (or several fired together), a client
//! produce or consume, a group's commit or a read of what it committed, a
//! subscribed member's join, poll or leave, or an await on a condition. In
//! TOML a step is a flat table with exactly one of `fault`, `faults`,
//! `produce`, `consume`, `commit`, `committed`, `subscribe`, `poll`,
//! `unsubscribe`, `txn`, `await`
//! ([`StepTable`]): a flat table keeps toml's errors pointing at the very key
//! that is wrong, which an enum's buffered variants would not. The parser
//! checks the table's shape and names the step and line; only then does it
//! become a [`Step`], so nothing downstream meets a step of no shape.

use serde::{Deserialize, Serialize};

use super::condition::Condition;
use super::model::{
    CommitStep, CommittedStep, Consume, Fault, MemberPoll, Produce, SubscribeStep, TxnStep,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StepTable", into = "StepTable")]
pub enum Step {
    Fault(Fault),
    /// Several faults fired together, in order, e.g. stop one node and resume another.
    Faults(Vec<Fault>),
    Produce(Produce),
    Consume(Consume),
    /// A group's offset commit ([groups]).
    Commit(CommitStep),
    /// A read of a group's committed offset.
    Committed(CommittedStep),
    /// A consumer made a member of a group by the steps.
    Subscribe(SubscribeStep),
    /// One poll of a subscribed member's assignment, committing after it.
    Poll(MemberPoll),
    /// A subscribed member leaves its group.
    Unsubscribe(String),
    /// One transaction of a transactional producer ([transactions]).
    Txn(TxnStep),
    Await {
        condition: Condition,
        /// How long the condition may take before the run ends unknown;
        /// default `[workload] await_timeout_ms`.
        timeout_ms: Option<u64>,
    },
}

impl Step {
    /// Every fault the step fires, in order (none for a client op or await).
    pub fn faults(&self) -> &[Fault] {
        match self {
            Step::Fault(fault) => std::slice::from_ref(fault),
            Step::Faults(faults) => faults,
            Step::Produce(_)
            | Step::Consume(_)
            | Step::Commit(_)
            | Step::Committed(_)
            | Step::Subscribe(_)
            | Step::Poll(_)
            | Step::Unsubscribe(_)
            | Step::Txn(_)
            | Step::Await { .. } => &[],
        }
    }
}

/// A step as written in TOML.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StepTable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<Vec<Fault>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produce: Option<Produce>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume: Option<Consume>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed: Option<CommittedStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<SubscribeStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<MemberPoll>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsubscribe: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn: Option<TxnStep>,
    #[serde(default, rename = "await", skip_serializing_if = "Option::is_none")]
    pub await_: Option<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl StepTable {
    /// How many kinds of step the table names (a step names exactly one).
    pub(crate) fn kinds(&self) -> usize {
        [
            self.fault.is_some(),
            self.faults.is_some(),
            self.produce.is_some(),
            self.consume.is_some(),
            self.commit.is_some(),
            self.committed.is_some(),
            self.subscribe.is_some(),
            self.poll.is_some(),
            self.unsubscribe.is_some(),
            self.txn.is_some(),
            self.await_.is_some(),
        ]
        .iter()
        .filter(|&&k| k)
        .count()
    }
}

/// Why a table is no step.
pub(crate) const ONE_KIND: &str = "needs exactly one of fault, faults, produce, consume, commit, committed, subscribe, poll, \
     unsubscribe, txn, await";
pub(crate) const TIMEOUT_WITHOUT_AWAIT: &str = "timeout_ms belongs to an await";

impl TryFrom<StepTable> for Step {
    type Error = &'static str;
    fn try_from(t: StepTable) -> Result<Step, &'static str> {
        if t.timeout_ms.is_some() && t.await_.is_none() {
            return Err(TIMEOUT_WITHOUT_AWAIT);
        }
        if t.kinds() != 1 {
            return Err(ONE_KIND);
        }
        Ok(if let Some(fault) = t.fault {
            Step::Fault(fault)
        } else if let Some(faults) = t.faults {
            Step::Faults(faults)
        } else if let Some(produce) = t.produce {
            Step::Produce(produce)
        } else if let Some(consume) = t.consume {
            Step::Consume(consume)
        } else if let Some(commit) = t.commit {
            Step::Commit(commit)
        } else if let Some(committed) = t.committed {
            Step::Committed(committed)
        } else if let Some(subscribe) = t.subscribe {
            Step::Subscribe(subscribe)
        } else if let Some(poll) = t.poll {
            Step::Poll(poll)
        } else if let Some(member) = t.unsubscribe {
            Step::Unsubscribe(member)
        } else if let Some(txn) = t.txn {
            Step::Txn(txn)
        } else {
            Step::Await {
                condition: t.await_.ok_or(ONE_KIND)?,
                timeout_ms: t.timeout_ms,
            }
        })
    }
}

impl From<Step> for StepTable {
    fn from(step: Step) -> StepTable {
        let mut t = StepTable::default();
        match step {
            Step::Fault(fault) => t.fault = Some(fault),
            Step::Faults(faults) => t.faults = Some(faults),
            Step::Produce(produce) => t.produce = Some(produce),
            Step::Consume(consume) => t.consume = Some(consume),
            Step::Commit(commit) => t.commit = Some(commit),
            Step::Committed(committed) => t.committed = Some(committed),
            Step::Subscribe(subscribe) => t.subscribe = Some(subscribe),
            Step::Poll(poll) => t.poll = Some(poll),
            Step::Unsubscribe(member) => t.unsubscribe = Some(member),
            Step::Txn(txn) => t.txn = Some(txn),
            Step::Await {
                condition,
                timeout_ms,
            } => {
                t.await_ = Some(condition);
                t.timeout_ms = timeout_ms;
            }
        }
        t
    }
}
