//! Record keys, values and header values as the reader hands them out.
//!
//! A payload is the exact bytes from disk. It serialises as a JSON string when
//! the bytes are UTF-8 (the workload writes text, and snapshots stay readable)
//! and as `{"base16": "…"}` otherwise, so no byte is ever lost in a report.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The bytes of one key, value or header value, exactly as stored.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
/// Boxed rather than a `Vec`: a long run's replicas hold millions of
/// records, two payload slots each, and no payload grows (issue 22).
pub struct Payload(pub Box<[u8]>);

impl Payload {
    /// The bytes as text, when they are UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn base16(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl From<&[u8]> for Payload {
    fn from(bytes: &[u8]) -> Self {
        Payload(bytes.into())
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Payload(bytes.into_boxed_slice())
    }
}

impl From<&str> for Payload {
    fn from(text: &str) -> Self {
        Payload(text.as_bytes().into())
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
            Wire::Text(text) => Ok(Payload(text.into_bytes().into_boxed_slice())),
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
