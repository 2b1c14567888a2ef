//! Why a run could not be made or finished: the schedule or the command line
//! is wrong (a usage error: nothing was started), or the harness could not do
//! its part (the run directory says how far it got).

use std::path::PathBuf;

use crate::checker::LoadError;
use crate::history::{Verb, WriteError};
use crate::kafka_client::ClientError;
use crate::nemesis::NemesisError;
use crate::node::NodeId;
use crate::observe::ObserveError;
use crate::runtime::RuntimeError;
use crate::schedule::ScheduleError;
use crate::store::StoreError;
use crate::workload::background::BackgroundError;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The schedule or the command line is wrong; nothing was started.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("--set {arg}: {why}")]
    BadSet { arg: String, why: String },
    // The rest: the harness could not do its part (a broker that will not
    // start, a store that cannot be written); the run directory says how far
    // it got.
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("history: {0}")]
    History(#[from] WriteError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Nemesis(#[from] NemesisError),
    /// etcd could not be read.
    #[error(transparent)]
    Observe(#[from] ObserveError),
    #[error(transparent)]
    Background(#[from] BackgroundError),
    #[error("creating topic {topic}: {node}: {source}")]
    Connect {
        topic: String,
        node: NodeId,
        #[source]
        source: ClientError,
    },
    #[error("creating topic {topic}: {source}")]
    CreateTopic {
        topic: String,
        #[source]
        source: ClientError,
    },
    #[error("cluster not ready: {0}")]
    NotReady(#[source] ObserveError),
    /// A step's await failed other than by timing out.
    #[error("step {step}: {source}")]
    Await {
        step: usize,
        #[source]
        source: ObserveError,
    },
    #[error("step {step}: {verb}: {source}")]
    Fault {
        step: usize,
        verb: Verb,
        #[source]
        source: NemesisError,
    },
    #[error("step {step}: `{condition}` needs background producers, and none run")]
    NoBackground { step: usize, condition: String },
    #[error("a campaign needs [workload.background] producers")]
    CampaignWithoutBackground,
    /// `epochal up`'s control socket could not be made or served, or its
    /// signal could not be awaited.
    #[error("{what} {}: {source}", path.display())]
    Control {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A gate's campaign case whose keys make no campaign for this seed.
    #[error("campaign {name}: {source}")]
    Campaign {
        name: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("checking {}: {source}", dir.display())]
    Check {
        dir: PathBuf,
        #[source]
        source: Box<LoadError>,
    },
}

impl RunError {
    pub fn is_usage(&self) -> bool {
        matches!(self, RunError::Schedule(_) | RunError::BadSet { .. })
    }
}
