//! Record keys, values and header values as the reader hands them out.
//!
//! A payload is the exact bytes from disk. It serialises as a JSON string when
//! the bytes are UTF-8 (the workload writes text, and snapshots stay readable)
//! and as `{"base16": "…"}` otherwise, so no byte is ever lost in a report.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The bytes of one key, value or header value, exactly as stored.
///
/// Short payloads (the workload's values are a few digits) are held inline:
/// a long run's replicas hold millions of records, and a heap allocation
/// each cost more than the bytes it held (issue 22). Equality, order and
/// hash are the bytes', whichever way they are held.
#[derive(Clone)]
pub struct Payload(Repr);

/// Inline up to this many bytes.
const INLINE_MAX: usize = 22;

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE_MAX] },
    Heap(Box<[u8]>),
}

impl Default for Payload {
    fn default() -> Self {
        Payload::from(&[][..])
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Payload {}

impl std::hash::Hash for Payload {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialOrd for Payload {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Payload {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Payload {
    /// The bytes as text, when they are UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(self.as_bytes()).ok()
    }

    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(bytes) => bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    fn base16(&self) -> String {
        self.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl From<&[u8]> for Payload {
    fn from(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_MAX {
            let mut inline = [0u8; INLINE_MAX];
            inline[..bytes.len()].copy_from_slice(bytes);
            Payload(Repr::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            })
        } else {
            Payload(Repr::Heap(bytes.into()))
        }
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        if bytes.len() <= INLINE_MAX {
            Payload::from(bytes.as_slice())
        } else {
            Payload(Repr::Heap(bytes.into_boxed_slice()))
        }
    }
}

impl From<&str> for Payload {
    fn from(text: &str) -> Self {
        Payload::from(text.as_bytes())
    }
}

/// Text as itself, anything else as `0x…`, the way DumpLogSegments users
/// expect to read a payload on one line.
impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_str() {
            Some(text) => f.write_str(text),
            None => write!(f, "0x{}", self.base16()),
        }
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_str() {
            Some(text) => write!(f, "{text:?}"),
            None => write!(f, "0x{}", self.base16()),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Wire {
    Text(String),
    Binary { base16: String },
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.as_str() {
            Some(text) => Wire::Text(text.to_owned()),
            None => Wire::Binary {
                base16: self.base16(),
            },
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Wire::deserialize(deserializer)? {
            Wire::Text(text) => Ok(Payload::from(text.into_bytes())),
            Wire::Binary { base16 } => decode_base16(&base16)
                .map(Payload::from)
                .ok_or_else(|| serde::de::Error::custom("base16 payload is not hex")),
        }
    }
}

fn decode_base16(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap_payloads_compare_hash_and_order_by_their_bytes() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |p: &Payload| {
            let mut h = DefaultHasher::new();
            p.hash(&mut h);
            h.finish()
        };
        let short = "a".repeat(INLINE_MAX);
        let long = "a".repeat(INLINE_MAX + 1);
        let (inline, heap) = (Payload::from(short.as_str()), Payload::from(long.as_str()));
        assert!(matches!(inline.0, Repr::Inline { .. }));
        assert!(matches!(heap.0, Repr::Heap(_)));
        assert_eq!(inline.as_bytes(), short.as_bytes());
        assert_eq!(heap.as_bytes(), long.as_bytes());
        // A prefix orders first, whichever way each is held.
        assert!(inline < heap);
        assert!(Payload::from("b") > heap);
        // The same bytes held either way are one payload.
        let same = Payload(Repr::Heap(short.as_bytes().into()));
        assert_eq!(same, inline);
        assert_eq!(hash(&same), hash(&inline));
        assert_eq!(Payload::from(long.clone().into_bytes()), heap);
        assert!(Payload::default().is_empty());
        assert_eq!(std::mem::size_of::<Option<Payload>>(), 24);
    }

    #[test]
    fn text_and_binary_round_trip_through_json() {
        for payload in [Payload::from("v-1"), Payload::from(vec![0xff, 0x00, 0x10])] {
            let json = serde_json::to_string(&payload).unwrap();
            assert_eq!(serde_json::from_str::<Payload>(&json).unwrap(), payload);
        }
        assert_eq!(serde_json::to_string(&Payload::from("v")).unwrap(), "\"v\"");
        assert_eq!(
            serde_json::to_string(&Payload::from(vec![0xff, 1])).unwrap(),
            "{\"base16\":\"ff01\"}"
        );
    }
}
