//! An operation's type: `invoke`, then one completion — `ok`, `fail` (it
//! definitely did not happen) or `info` (it may or may not have).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    Invoke,
    Ok,
    Fail,
    Info,
}
