//! What evidence points with: a history op, by its index in `history.jsonl`.

/// A history op, by its index in `history.jsonl`.
pub type OpRef = u64;
