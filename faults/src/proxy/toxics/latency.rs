//! The `latency` toxic; see [`Latency`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `latency`: every chunk is held until `latency` ± `jitter` milliseconds after the
/// proxy read it. Delays count from the read, not from the previous chunk, so a
/// busy stream is delayed, not slowed down.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Latency {
    /// Milliseconds.
    pub latency: u64,
    /// Milliseconds either side of `latency`, drawn per chunk.
    pub jitter: u64,
}

impl Latency {
    /// The delay for one chunk. Chunks never overtake each other: the link sends
    /// them in order, so a short draw behind a long one waits for it.
    ///
    /// Any u64 is a latency or jitter the API accepts: the sum is taken
    /// without overflow and clamped to 0..=u64::MAX ms.
    pub fn sample_delay(&self) -> Duration {
        let jitter = i64::try_from(self.jitter).unwrap_or(i64::MAX);
        let offset = if jitter > 0 {
            fastrand::i64(-jitter..=jitter)
        } else {
            0
        };
        let millis = (i128::from(self.latency) + i128::from(offset)).max(0);
        Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
    }
}
