//! The `timeout` toxic; see [`Timeout`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `timeout`: no byte passes (they are read and dropped, as Toxiproxy does); after
/// `timeout` ms the connection is closed, or never if `timeout` is 0. Removing the
/// toxic closes the connections it held, again as Toxiproxy does: the dropped
/// bytes are gone, so the stream cannot be resumed. For a cut that keeps the
/// bytes, use `partition`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timeout {
    /// Milliseconds from when the toxic first applied to the connection; 0 is never.
    pub timeout: u64,
}

impl Timeout {
    pub fn closes_after(&self) -> Option<Duration> {
        (self.timeout > 0).then(|| Duration::from_millis(self.timeout))
    }
}
