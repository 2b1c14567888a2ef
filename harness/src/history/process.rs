//! Who performed an operation: a numbered workload client, or the nemesis,
//! written as Jepsen writes it (a number, or `"nemesis"`).

use serde::{Deserialize, Serialize};

/// Who performed an operation: a numbered workload client, or the nemesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawProcess", into = "RawProcess")]
pub enum Process {
    Client(u64),
    Nemesis,
}

/// On disk a process is a number or the string `"nemesis"`, as in Jepsen.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum RawProcess {
    Number(u64),
    Name(String),
}

/// A history line's `process` that is a name other than `"nemesis"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("process must be a number or \"nemesis\", not {name:?}")]
pub struct ProcessNameError {
    pub name: String,
}

impl TryFrom<RawProcess> for Process {
    type Error = ProcessNameError;
    fn try_from(raw: RawProcess) -> Result<Self, ProcessNameError> {
        match raw {
            RawProcess::Number(n) => Ok(Process::Client(n)),
            RawProcess::Name(name) if name == "nemesis" => Ok(Process::Nemesis),
            RawProcess::Name(name) => Err(ProcessNameError { name }),
        }
    }
}

impl From<Process> for RawProcess {
    fn from(process: Process) -> Self {
        match process {
            Process::Client(n) => RawProcess::Number(n),
            Process::Nemesis => RawProcess::Name("nemesis".to_owned()),
        }
    }
}

impl std::fmt::Display for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Process::Client(n) => write!(f, "{n}"),
            Process::Nemesis => f.write_str("nemesis"),
        }
    }
}
