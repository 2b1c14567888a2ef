//! The `slow_close` toxic; see [`SlowClose`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `slow_close`: when the sender closes its side, wait `delay` ms before passing
/// the close (a FIN) on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SlowClose {
    /// Milliseconds.
    pub delay: u64,
}

impl SlowClose {
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay)
    }
}
