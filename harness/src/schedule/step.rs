//! One step of a schedule, typed: a fault (or several fired together), a client
//! produce or consume, or an await on a condition. In TOML a step is a flat
//! table with exactly one of `fault`, `faults`, `produce`, `consume`, `await`
//! ([`StepTable`]): a flat table keeps toml's errors pointing at the very key
//! that is wrong, which an enum's buffered variants would not. The parser
//! checks the table's shape and names the step and line; only then does it
//! become a [`Step`], so nothing downstream meets a step of no shape.

use serde::{Deserialize, Serialize};

use super::condition::Condition;
use super::model::{Consume, Fault, Produce};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StepTable", into = "StepTable")]
pub enum Step {
    Fault(Fault),
    /// Several faults fired together, in order, e.g. stop one node and resume another.
    Faults(Vec<Fault>),
    Produce(Produce),
    Consume(Consume),
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
            Step::Produce(_) | Step::Consume(_) | Step::Await { .. } => &[],
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
    #[serde(default, rename = "await", skip_serializing_if = "Option::is_none")]
    pub await_: Option<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// Why a table is no step.
pub(crate) const ONE_KIND: &str = "needs exactly one of fault, faults, produce, consume, await";
pub(crate) const TIMEOUT_WITHOUT_AWAIT: &str = "timeout_ms belongs to an await";

impl TryFrom<StepTable> for Step {
    type Error = &'static str;
    fn try_from(t: StepTable) -> Result<Step, &'static str> {
        if t.timeout_ms.is_some() && t.await_.is_none() {
            return Err(TIMEOUT_WITHOUT_AWAIT);
        }
        match t {
            StepTable {
                fault: Some(fault),
                faults: None,
                produce: None,
                consume: None,
                await_: None,
                ..
            } => Ok(Step::Fault(fault)),
            StepTable {
                fault: None,
                faults: Some(faults),
                produce: None,
                consume: None,
                await_: None,
                ..
            } => Ok(Step::Faults(faults)),
            StepTable {
                fault: None,
                faults: None,
                produce: Some(produce),
                consume: None,
                await_: None,
                ..
            } => Ok(Step::Produce(produce)),
            StepTable {
                fault: None,
                faults: None,
                produce: None,
                consume: Some(consume),
                await_: None,
                ..
            } => Ok(Step::Consume(consume)),
            StepTable {
                fault: None,
                faults: None,
                produce: None,
                consume: None,
                await_: Some(condition),
                timeout_ms,
            } => Ok(Step::Await {
                condition,
                timeout_ms,
            }),
            _ => Err(ONE_KIND),
        }
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
