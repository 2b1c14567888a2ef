//! A schedule file's whole document: its `[cluster]`, its `[workload]`
//! defaults and its `[[step]]`s. The parts are model.rs's and step.rs's; this
//! is what holds them together, above both (a step names faults and client
//! operations from model.rs, so the whole cannot live beside them).

use serde::{Deserialize, Serialize};

use super::model::{Cluster, Workload};
use super::step::Step;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    pub cluster: Cluster,
    #[serde(default)]
    pub workload: Workload,
    #[serde(default, rename = "step", skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
}
