//! The `limit_data` toxic; see [`LimitData`].

use serde::{Deserialize, Serialize};

/// `limit_data`: pass at most `bytes` bytes on this stream of a connection, then
/// close the connection. The count is per connection and survives updates of the
/// toxic, as in Toxiproxy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LimitData {
    pub bytes: u64,
}
