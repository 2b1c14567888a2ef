//! The `partition` toxic, epochal's extension to Toxiproxy; see [`Partition`].

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnHeal {
    /// Deliver the held bytes, in order, when the toxic is removed.
    #[default]
    Resume,
    /// Reset every connection the toxic held when it is removed.
    Reset,
}

/// `partition` (epochal's extension to Toxiproxy): while the toxic is present no
/// byte, and no close, passes on its stream, yet every connection stays open.
/// When it is removed the held stream either resumes in order
/// (`on_heal: "resume"`, a short partition that TCP rides out) or every
/// connection it held is reset (`on_heal: "reset"`, a long one whose peers have
/// given up). A one-way partition is the toxic on one stream; a full cut is one
/// on each.
///
/// What is held, and the bound: per connection and stream, the link holds the
/// chunk it was about to send plus at most [`crate::proxy::HELD_CHUNKS_MAX`] chunks
/// of at most [`crate::proxy::READ_CHUNK_BYTES`] each (4 MiB and a bit). At that
/// limit the proxy stops reading the sender, whose kernel buffers then fill and
/// whose writes block: TCP flow control, as on a real cut link. Nothing is ever
/// dropped while held. A cut proxy still accepts new connections (it cannot
/// refuse a SYN silently) and still dials the upstream for them; only their
/// bytes are held.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Partition {
    pub on_heal: OnHeal,
}
