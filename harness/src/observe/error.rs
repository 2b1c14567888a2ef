//! What a look at the cluster can fail with: etcd, the brokers' Metadata,
//! the runtime, or a wait's deadline.

use std::time::Duration;

use crate::runtime::RuntimeError;

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error("etcd (observation): {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("no broker answered Metadata: {0}")]
    NoMetadata(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("{condition:?} not within {timeout:?}; last seen: {seen}")]
    Timeout {
        condition: String,
        timeout: Duration,
        seen: String,
    },
}
