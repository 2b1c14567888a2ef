//! What a link's parts share: the toxic chain as links see it, how a link
//! ends a connection, and what its reader hands its sender. Below the link
//! and its parts (the direct copy, the chain watch), which all name them.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use crate::proxy::toxics::ToxicKind;
use crate::proxy::wire::{Stream, ToxicJson};

/// A toxic installed on a proxy, as every link of that proxy sees it. `id` names
/// this toxic for its whole life; `revision` changes on every update, so each
/// connection draws its toxicity again, as Toxiproxy does when a toxic changes.
#[derive(Clone, Debug)]
pub(crate) struct ChainToxic {
    pub id: u64,
    pub revision: u64,
    pub name: String,
    pub stream: Stream,
    pub toxicity: f32,
    pub kind: ToxicKind,
}

impl ChainToxic {
    pub fn json(&self) -> ToxicJson {
        ToxicJson {
            name: self.name.clone(),
            kind: self.kind.type_name().to_owned(),
            stream: self.stream,
            toxicity: self.toxicity,
            attributes: self.kind.attributes(),
        }
    }
}

/// The proxy's toxics in the order they were added, both streams together.
pub(crate) type Chain = Arc<Vec<ChainToxic>>;

/// Why a link ended its connection early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LinkEnd {
    /// Close both sockets normally (a FIN, or a RST if unread bytes remain).
    Close(String),
    /// Reset both sockets (zero linger), dropping whatever is in flight.
    Reset(String),
}

/// What the reader (or the direct copy, once) hands the sender.
pub(crate) enum Item {
    Data {
        bytes: Bytes,
        read_at: Instant,
    },
    /// The source closed its side.
    End,
    /// The source failed (typically reset by its peer); passed on in order, so a
    /// reset does not overtake held bytes or cross a partition.
    Failed(String),
}
