//! `epochal-proxy`: a TCP proxy that serves Toxiproxy's HTTP API, plus a true
//! partition.
//!
//! A proxy listens on one address and forwards each accepted connection to its
//! upstream as two independent links: `upstream` carries the client's bytes to
//! the server, `downstream` the server's bytes back. Each link passes its bytes
//! through the proxy's toxics for that stream; this module owns the listeners,
//! the connections and the toxics, and must never reorder bytes nor drop one
//! that no toxic told it to drop.
//!
//! The Toxiproxy toxics (`latency`, `bandwidth`, `timeout`, `reset_peer`,
//! `slow_close`, `limit_data`, `slicer`) behave as Toxiproxy documents them,
//! with `toxicity` drawn once per connection. `partition` is our extension: it
//! holds a stream's bytes while present, keeps connections open, and on removal
//! resumes or resets them (see [`toxics::Partition`] for what is held and the
//! bound). A cut proxy still completes new TCP handshakes: it cannot refuse a
//! SYN silently, so a cut link looks like a silent peer, not a refusing one.
//! `kafka_requests` is our other extension: it holds, delays, drops or
//! duplicates whole Kafka requests of one API (see [`toxics::KafkaRequests`]),
//! for which every link follows its stream's Kafka framing as bytes pass.
//!
//! Why not wrap `noxious` (a Rust port of Toxiproxy's server): it is dormant,
//! and it keeps Toxiproxy's design, where a link's read and write halves are
//! joined through one stage per toxic, so holding a stream and later resuming
//! or resetting it would have to be threaded through every stage. Here a link
//! is one ordered sender that re-reads the toxic set before each wait and each
//! write, which makes "hold, then resume in order" one small, testable rule,
//! and the engine is small enough to own.

mod api;
mod collection;
mod connection;
mod link;
mod server;
pub mod toxics;
pub mod wire;

pub use api::VERSION;
pub use collection::ApiError;
/// Turns recording on for every proxy of this process (`epochal-proxy --record`).
pub use link::record::enable as record_requests;
pub use server::ProxyServer;
#[doc(hidden)]
pub use server::api_service;
pub use toxics::{OnHeal, ToxicKind, ToxicParseError};
pub use wire::{ApiErrorJson, NewProxy, ProxyJson, Stream, ToxicJson, VersionJson};

/// The most a link reads from its source at once.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Chunks a link buffers between its reader and its sender. With
/// [`READ_CHUNK_BYTES`] this bounds what a partition holds in the proxy per
/// connection and stream: 64 × 64 KiB = 4 MiB (plus the chunk in hand).
pub const HELD_CHUNKS_MAX: usize = 64;
