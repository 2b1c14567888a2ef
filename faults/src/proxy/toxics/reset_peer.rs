//! The `reset_peer` toxic; see [`ResetPeer`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `reset_peer`: when bytes (or the end of the stream) next arrive on the toxic's
/// stream, wait `timeout` ms, then reset the connection on both sides (a TCP RST,
/// by closing with a zero linger), dropping whatever was in flight.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResetPeer {
    /// Milliseconds between the triggering bytes and the reset.
    pub timeout: u64,
}

impl ResetPeer {
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.timeout)
    }
}
