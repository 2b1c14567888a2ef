//! The `bandwidth` toxic; see [`Bandwidth`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `bandwidth`: a stream limited to `rate` KB/s (1 KB = 1000 bytes, as Toxiproxy
/// counts), paced in pieces of at most 100 ms worth of bytes so a large chunk does
/// not arrive as one late burst.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Bandwidth {
    /// KB/s; 0 means unlimited, as in Toxiproxy.
    pub rate: u64,
}

impl Bandwidth {
    /// How long `bytes` occupy the stream at this rate.
    pub fn transmit_time(&self, bytes: usize) -> Duration {
        if self.rate == 0 {
            return Duration::ZERO;
        }
        // rate KB/s is rate bytes per millisecond.
        Duration::from_micros((bytes as u64).saturating_mul(1000) / self.rate)
    }

    /// The largest piece sent at once: 100 ms at this rate (saturating: any
    /// u64 is a rate the API accepts).
    pub fn piece_bytes_max(&self) -> usize {
        if self.rate == 0 {
            usize::MAX
        } else {
            usize::try_from(self.rate.saturating_mul(100)).unwrap_or(usize::MAX)
        }
    }
}
