//! The `slicer` toxic; see [`Slicer`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `slicer`: cut each chunk into pieces of about `average_size` ± `size_variation`
/// bytes, with `delay` microseconds between pieces, so the receiver sees many small
/// reads. Bytes and their order are unchanged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Slicer {
    pub average_size: u64,
    pub size_variation: u64,
    /// Microseconds between pieces.
    pub delay: u64,
}

impl Slicer {
    /// Piece lengths that add up to `len`, each at least one byte (so none
    /// for an empty chunk).
    pub fn cut(&self, len: usize) -> Vec<usize> {
        if len == 0 {
            return Vec::new();
        }
        if self.average_size == 0 {
            return vec![len];
        }
        let low = self.average_size.saturating_sub(self.size_variation).max(1);
        let high = self
            .average_size
            .saturating_add(self.size_variation)
            .max(low);
        let mut pieces = Vec::with_capacity(len / low as usize + 1);
        let mut left = len;
        while left > 0 {
            let size = (fastrand::u64(low..=high) as usize).min(left);
            pieces.push(size);
            left -= size;
        }
        pieces
    }

    pub fn gap(&self) -> Duration {
        Duration::from_micros(self.delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::ToxicKind;

    /// The attributes of a toxic posted as `body` (`POST /proxies/p/toxics`).
    fn posted(body: &[u8]) -> ToxicKind {
        let body: serde_json::Value = serde_json::from_slice(body).unwrap();
        ToxicKind::from_attributes(body["type"].as_str().unwrap(), &body["attributes"]).unwrap()
    }

    /// Found by `ci/fuzz.sh` (proxy_toxic): with `average_size` 0 (absent, as
    /// here, where the fuzzer misspelt it) an empty chunk was cut into one
    /// piece of 0 bytes, against "each at least one byte".
    #[test]
    fn fuzz_an_empty_chunk_is_no_pieces() {
        let body = br#"{"type":"slicer","attributes":{"average_size_size":64,"size_variation":8,"delay":10}}"#;
        let ToxicKind::Slicer(slicer) = posted(body) else {
            panic!("a slicer");
        };
        assert_eq!(slicer.cut(0), Vec::<usize>::new());
        assert_eq!(slicer.cut(5), vec![5]);
    }

    /// Found by `ci/fuzz.sh` (proxy_toxic): `average_size + size_variation`
    /// overflowed for sizes the API accepts.
    #[test]
    fn fuzz_the_largest_sizes_cut_without_overflow() {
        let body = br#"{"type":"slicer","attributes":{"average_size":18446744073709551615,"size_variation":18446744073709551615,"delay":18446744073709551615}}"#;
        let ToxicKind::Slicer(slicer) = posted(body) else {
            panic!("a slicer");
        };
        assert_eq!(slicer.cut(64 * 1024), vec![64 * 1024]);
        assert_eq!(slicer.gap(), Duration::from_micros(u64::MAX));
    }

    #[test]
    fn pieces_cover_the_chunk_within_the_size_band() {
        let slicer = Slicer {
            average_size: 100,
            size_variation: 30,
            delay: 0,
        };
        let pieces = slicer.cut(10_000);
        assert_eq!(pieces.iter().sum::<usize>(), 10_000);
        let (last, rest) = pieces.split_last().unwrap();
        assert!(rest.iter().all(|&p| (70..=130).contains(&p)), "{pieces:?}");
        assert!(*last >= 1 && *last <= 130);
    }
}
