//! The `kafka_requests` toxic, epochal's extension to Toxiproxy; see
//! [`KafkaRequests`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a [`KafkaRequests`] toxic does to each request of its API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestAction {
    /// Held, with everything behind it on its connection, until the toxic
    /// is removed; then delivered in order.
    #[default]
    Hold,
    /// Held until `delay_ms` after the proxy read its first byte.
    Delay,
    /// Its bytes are removed from the stream: the broker never sees it.
    Drop,
    /// Sent twice: the copy under a correlation id the proxy picks, whose
    /// response the proxy swallows.
    Duplicate,
}

/// `kafka_requests` (epochal's extension): acts on whole Kafka requests of
/// one API on the upstream stream (the requests a connection's dialler
/// sends), decided at each request's first byte, never inside one.
///
/// A TCP stream is ordered and a Kafka broker answers a connection's
/// requests in order, so a request cannot be taken out of its stream without
/// reordering it: a held or delayed request holds every byte behind it on its
/// connection, whatever their API; other connections are untouched. Held
/// bytes are bounded as a partition's are (the proxy then stops reading, and
/// TCP flow control blocks the client). A dropped request is answered by
/// nothing, so its client times out waiting. A duplicate's copy goes out
/// right behind the original with a negative correlation id of the proxy's
/// (clients count theirs up from 0), and the response carrying it is
/// removed from the downstream stream, so the client sees one answer to one
/// request, as when a retry reaches the broker twice.
///
/// A stream that is not framed as Kafka's (`proxy::link::frames`) is left
/// alone. With several of these toxics on one API, the first added acts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KafkaRequests {
    /// The request header's `request_api_key` (Produce is 0, EndTxn 26).
    pub api_key: u16,
    pub action: RequestAction,
    /// Milliseconds, for `delay`.
    pub delay_ms: u64,
}

impl KafkaRequests {
    /// Whether a request with this header's `api_key` is one of this toxic's.
    pub fn matches(&self, api_key: i16) -> bool {
        i32::from(api_key) == i32::from(self.api_key)
    }

    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms)
    }
}
