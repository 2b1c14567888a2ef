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
